"""The ``debl`` subcommands, one module per command group."""

from __future__ import annotations

import importlib

# (module in debl.commands, attribute holding the click command)
_COMMANDS = [
    ("stack", "stack"),
    ("generate", "generate"),
    ("query", "query"),
    ("load", "load"),
    ("load", "source"),
    ("verify", "verify"),
    ("gen_hf", "gen_hf"),
    ("links", "links"),
    ("status", "status"),
    ("bench", "bench"),
    ("bench", "report"),
]

COMMANDS = [getattr(importlib.import_module(f"debl.commands.{module}"), attr)
            for module, attr in _COMMANDS]
