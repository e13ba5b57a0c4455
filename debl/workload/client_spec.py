"""What the request client is asked to do (``debl.workload.client``): the target it queries, how
a worker process opens its own (``TargetSource``), and the run's shape (``ClientSpec``: threads,
requests or duration, open-loop rate, worker processes).

Invalid settings raise ``ConfigError`` naming the ``debl query`` option.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from debl.errors import ConfigError
from debl.workload.mix import mix_named
from debl.workload.requests import RequestSpec

Progress = Callable[[int, float], None]  # (requests done, seconds elapsed)


class LinkListTarget(Protocol):
    """What the readers call: ``get_link_list``; with a mix of reads also ``count_link`` and
    ``multiget_link`` (every store and the coordinator have the three)."""

    def get_link_list(self, id1: int, link_type: int) -> Any: ...

    def count_link(self, id1: int, link_type: int) -> int: ...

    def multiget_link(self, id1: int, link_type: int, id2s: Iterable[int]) -> Any: ...


@dataclass(frozen=True)
class TargetSource:
    """How a worker process gets its own target. Every callable runs in the worker and must be
    picklable (see the module's pitfalls).

    ``open()`` returns a connected target (closed with ``close()`` after the run);
    ``on_start(target)``, if given, runs when the run starts (e.g. to zero the target's own
    counters); ``report(target)``, if given, runs after the last request, and its picklable
    result is returned in ``ClientResult.target_reports`` (one per process, in process order).
    ``name``: the route of a request whose target names none (a plain store: its name), in the
    breakdown of the slowest requests (``debl.workload.tail``)."""

    open: Callable[[], Any]
    on_start: Callable[[Any], None] | None = None
    report: Callable[[Any], Any] | None = None
    name: str = "target"


@dataclass(frozen=True)
class ClientSpec:
    """How to drive the target. At least one of ``total`` (requests over all threads) and
    ``duration`` (seconds); with both, the run stops at whichever comes first. ``processes``
    worker processes share the ``threads`` (1: the threads run in the calling process).

    ``mix`` (``debl.workload.mix``): the reads the threads send (``reads``: get_link_list alone)
    and the writes ``writers`` more threads send to the source database at ``write_rate`` per
    second (default with ``rate``: the rate at which the mix's share of writes comes beside the
    reads' rate; closed-loop reads need it given). ``total`` and ``duration`` count the reads;
    the writers stop with the readers."""

    requests: RequestSpec
    threads: int = 1
    total: int | None = 1000
    duration: float | None = None
    rate: float | None = None  # requests per second over all threads; None: closed loop
    processes: int = 1
    mix: str = "reads"
    write_rate: float | None = None  # writes per second over the writer pool
    writers: int = 4
    # a directory: each process writes there what every read it sent was answered
    # (``debl.workload.answer_log``), for the check of fresh answers; None: nothing kept
    answer_log: str | None = None

    def __post_init__(self) -> None:
        if self.threads < 1:
            raise ConfigError(f"--threads must be at least 1, not {self.threads}")
        if self.total is None and self.duration is None:
            raise ConfigError("give --requests, --duration or both")
        if self.total is not None and self.total < 0:
            raise ConfigError(f"--requests must be >= 0, not {self.total}")
        if self.duration is not None and self.duration <= 0:
            raise ConfigError(f"--duration must be positive, not {self.duration}")
        if self.rate is not None and self.rate <= 0:
            raise ConfigError(f"--rate must be positive, not {self.rate}")
        if not 1 <= self.processes <= self.threads:
            raise ConfigError(f"--processes must be between 1 and --threads ({self.threads}), "
                              f"not {self.processes}: each process runs at least one thread")
        mix = mix_named(self.mix)
        if not mix.write_share and self.write_rate is not None:
            raise ConfigError(f"--write-rate sends writes, which --mix {self.mix} has none of: "
                              "choose --mix linkbench or update-heavy")
        if self.write_rate is not None and self.write_rate <= 0:
            raise ConfigError(f"--write-rate must be positive, not {self.write_rate}")
        if self.writers < 1:
            raise ConfigError(f"--writers must be at least 1, not {self.writers}")
        if mix.write_share and self.writes_per_s is None:
            raise ConfigError(f"--mix {self.mix} sends writes: give their rate, --write-rate "
                              "(writes per second), or open-loop reads (--rate), beside which "
                              "the mix's share of writes sets it")

    @property
    def writes_per_s(self) -> float | None:
        """The writer pool's rate: ``write_rate``, or beside reads at ``rate`` the rate that
        makes writes the mix's share of all operations; None without writes."""
        share = mix_named(self.mix).write_share
        if not share:
            return None
        if self.write_rate is not None:
            return self.write_rate
        return None if self.rate is None else self.rate * share / (1.0 - share)

    def quota(self, thread: int) -> int | None:
        """Requests of thread ``thread`` (None: until the duration ends)."""
        if self.total is None:
            return None
        return self.total // self.threads + (thread < self.total % self.threads)


def default_processes(threads: int, configured: int = 0) -> int:
    """Worker processes for ``threads`` threads: ``configured`` if positive, else one per core
    this process may run on; never more than the threads."""
    if configured < 0:
        raise ConfigError(f"--processes must be 0 (one per core) or positive, not {configured}")
    if configured > 0:
        return min(configured, threads)
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, threads))
