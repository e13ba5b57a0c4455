"""The ``debl`` subcommands, one module per command group."""

from __future__ import annotations

import importlib

# module name -> attribute holding the click command
_MODULES = {
    "stack": "stack",
}

COMMANDS = [getattr(importlib.import_module(f"debl.commands.{m}"), attr)
            for m, attr in _MODULES.items()]
