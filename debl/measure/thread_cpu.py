"""CPU seconds by phase inside one process: each thread's own CPU time (``time.thread_time``)
around a phase's work, summed per phase over the process's threads, so that a bench can split
the CPU of the process that loads between the copy, the bucketing in Python and the source
server it also runs (docs/BENCHMARKS.md, "Where the CPU goes").

Pitfalls: a phase counted inside another is counted twice (the places that count never nest);
work a phase hands to threads it does not own (hdfs-native's own threads, Spark's JVM) is not
in it: a bench counts those processes by role (``debl.bench.cpu``) and the rest of its own
process as what it is, the rest.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

COPY = "copy"
BUCKETING = "bucketing in Python"
SOURCE_SERVER = "source server"

_lock = threading.Lock()
_totals: dict[str, float] = {}


@contextmanager
def counted(phase: str) -> Iterator[None]:
    """Add the calling thread's CPU seconds inside the block to *phase*."""
    started = time.thread_time()
    try:
        yield
    finally:
        used = time.thread_time() - started
        with _lock:
            _totals[phase] = _totals.get(phase, 0.0) + used


def totals() -> dict[str, float]:
    """The CPU seconds counted so far in this process, by phase."""
    with _lock:
        return dict(_totals)
