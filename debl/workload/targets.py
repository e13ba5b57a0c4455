"""``open_target``: what ``debl query`` sends its requests to, by name.

| name | object |
|---|---|
| ``mysql`` | ``debl.store.mysql.MySQLStore(config)`` |
| ``hbase`` | ``debl.store.hbase.HBaseStore(config)`` |
| ``debl`` | ``coordinator.Coordinator(config)``: MySQL + HBase + buffering, DeBL proper |
| ``memory`` | an empty ``MemoryStore``; for tests, which fill it themselves |

Imports are lazy, so ``debl query`` starts without the drivers of targets it does not use, and a
target whose module or driver is missing fails with a ``ServiceError`` naming it instead of an
ImportError traceback. Close what you open: every target has ``close()`` (stores are context
managers).

A target may offer ``id_range() -> (start_id, max_id)`` (max exclusive): the id range of the data
set it holds, which the client's request ids default to. ``target_id_range`` returns None when a
target does not offer it.
"""

from __future__ import annotations

import importlib
from typing import Any

from debl.config import Config
from debl.errors import ConfigError, DeblError, ServiceError

# name -> (module, class, what it is, for messages)
_TARGETS = {
    "mysql": ("debl.store.mysql", "MySQLStore", "the MySQL link store"),
    "hbase": ("debl.store.hbase", "HBaseStore", "the HBase link store"),
    "debl": ("coordinator", "Coordinator", "the DeBL coordinator"),
    "memory": ("debl.store.memory", "MemoryStore", "the in-memory reference store"),
}
TARGETS = tuple(_TARGETS)
CLI_TARGETS = ("debl", "mysql", "hbase")  # memory starts empty: useful to tests only


def open_target(config: Config, name: str) -> Any:
    """A connected target for ``get_link_list`` requests. Raises ConfigError for an unknown
    name, ServiceError when the target's code or driver is missing or it cannot connect."""
    try:
        module_name, class_name, what = _TARGETS[name]
    except KeyError:
        raise ConfigError(f"unknown target {name!r}: choose one of {', '.join(TARGETS)}") from None
    try:
        module = importlib.import_module(module_name)
        cls = getattr(module, class_name)
    except (ImportError, AttributeError) as exc:
        raise ServiceError(f"target {name!r} ({what}) is not available: "
                           f"cannot load {module_name}.{class_name}: {exc}") from exc
    if name == "memory":
        return cls()
    try:
        return cls(config)
    except DeblError:
        raise
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
