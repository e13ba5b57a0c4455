"""``open_target``: what ``debl query`` and the bench send their requests to, by name.

| name | object |
|---|---|
| ``mysql`` | ``debl.store.mysql.MySQLStore`` on the current load's link table |
| ``hbase`` | ``debl.store.hbase.HBaseStore`` on the current load's HBase table |
| ``debl`` | ``coordinator.Coordinator(config)``: MySQL + HBase + buffering, DeBL proper |
| ``memory`` | an empty ``MemoryStore``; for tests, which fill it themselves |

Every target answers LinkBench's three link reads, ``get_link_list``, ``count_link`` and
``multiget_link`` (what a mix's readers send: ``debl.workload.mix``); writes never go to a
target, only to the source database (``debl.workload.writers``).

This module is where the application names its query targets (docs/ARCHITECTURE.md): the stores
and the coordinator know nothing of it. The HBase store and the coordinator are imported when
opened, so ``debl`` starts without the HBase client; a target whose driver is missing fails with
a ``ServiceError`` naming it instead of an ImportError traceback. Close what you open: every
target has ``close()`` (stores are context managers).

A target may offer ``id_range() -> (start_id, max_id)`` (max exclusive): the id range of the data
set it holds, which the client's request ids default to. ``target_id_range`` returns None when a
target does not offer it.

``target_source(config, name)`` is the same target for the client's worker processes: each opens
its own. A target that offers ``reset_stats()`` and ``wait_counters()`` (the coordinator) has
its counters zeroed at the run's start and reported at its end, one ``WaitCounters`` per process;
``merged_reports`` adds them up.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from debl.catalog import Catalog
from debl.config import Config
from debl.errors import ConfigError, DeblError, LoadStateError, ServiceError
from debl.store.memory import MemoryStore
from debl.store.mysql import MySQLStore
from debl.workload.client import TargetSource


WARM_WAIT_S = 60.0  # the longest a client waits for the coordinator's buckets to be opened


def _current(config: Config):
    """The stores' names of the current load (each load has its own: debl.namespace)."""
    with Catalog(config) as catalog:
        load = catalog.loads.current()
    if load is None:
        raise LoadStateError("no load is up yet, so there is no table to query: run `debl load "
                             "SOURCE` first (`debl status` shows where it stands)")
    return load.namespace


def _mysql_store(config: Config, **options: Any) -> MySQLStore:
    return MySQLStore(config, _current(config).link_table, **options)


def _hbase_store(config: Config, **options: Any) -> Any:
    # lazy import: the HBase client (happybase, thriftpy2) would cost every `debl` command's
    # start-up (docs/ARCHITECTURE.md, "Lazy imports")
    from debl.store.hbase import HBaseStore

    return HBaseStore(config, _current(config).hbase_table, **options)


def _coordinator(config: Config, **options: Any) -> Any:
    # lazy import: the coordinator brings the HBase client, which would cost every `debl`
    # command's start-up (docs/ARCHITECTURE.md, "Lazy imports")
    from coordinator import Coordinator

    coordinator = Coordinator(config, **options)
    # Ready once the raw route's buckets are opened, as HBase's regions are open before they
    # serve: a client measures the service, not the opening (docs/COORDINATOR.md).
    coordinator.wait_warm(WARM_WAIT_S)
    return coordinator


def _memory_store(config: Config, **options: Any) -> MemoryStore:
    return MemoryStore()


# name -> (opener(config, **options), what it is, for messages)
_TARGETS: dict[str, tuple[Callable[..., Any], str]] = {
    "mysql": (_mysql_store, "the MySQL link store"),
    "hbase": (_hbase_store, "the HBase link store"),
    "debl": (_coordinator, "the DeBL coordinator"),
    "memory": (_memory_store, "the in-memory reference store"),
}
TARGETS = tuple(_TARGETS)
CLI_TARGETS = ("debl", "mysql", "hbase")  # memory starts empty: useful to tests only


def open_target(config: Config, name: str, **options: Any) -> Any:
    """A connected target for the client's reads; ``options`` go to its constructor
    (e.g. ``default_timeout`` of the coordinator). Raises ConfigError for an unknown name,
    ServiceError when the target's code or driver is missing or it cannot connect."""
    try:
        opener, what = _TARGETS[name]
    except KeyError:
        raise ConfigError(f"unknown target {name!r}: choose one of {', '.join(TARGETS)}") from None
    try:
        return opener(config, **options)
    except DeblError:
        raise
    except ImportError as exc:
        raise ServiceError(f"target {name!r} ({what}) is not available: {exc}") from exc
    except Exception as exc:  # a driver's own error: name the target, keep the cause
        raise ServiceError(f"target {name!r} ({what}) could not be opened: "
                           f"{type(exc).__name__}: {exc}") from exc


def target_id_range(target: Any) -> tuple[int, int] | None:
    """``target.id_range()`` if the target offers it, else None."""
    method = getattr(target, "id_range", None)
    if method is None:
        return None
    result = method()
    if result is None:
        return None
    start_id, max_id = result
    return int(start_id), int(max_id)


def _reset_stats(target: Any) -> None:
    reset = getattr(target, "reset_stats", None)
    if reset is not None:
        reset()


def _wait_counters(target: Any) -> Any:
    counters = getattr(target, "wait_counters", None)
    return counters() if counters is not None else None


def target_source(config: Config, name: str, **options: Any) -> TargetSource:
    """The target ``name`` as the client's worker processes open it: ``open_target(config,
    name, **options)`` in each. Raises ConfigError for an unknown name at once."""
    if name not in _TARGETS:
        raise ConfigError(f"unknown target {name!r}: choose one of {', '.join(TARGETS)}")
    return TargetSource(open=functools.partial(open_target, config, name, **options),
                        on_start=_reset_stats, report=_wait_counters, name=name)


def merged_reports(reports: Sequence[Any]) -> dict | None:
    """The reports of a client run's processes (``ClientResult.target_reports``) added up and
    summarised: None when the target reports nothing. The coordinator reports its
    ``WaitCounters``, whose class merges them exactly (``merge``) and summarises them
    (``stats()``); asking the report's own class keeps the coordinator out of this import."""
    parts = [r for r in reports if r is not None]
    if not parts:
        return None
    return type(parts[0]).merge(parts).stats().to_dict()
