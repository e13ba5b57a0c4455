"""The ``debl`` command: a click group over the library.

Each command lives in a module of ``debl.commands`` and does three things: parse its options, call
one library function, report. Every ``DeblError`` becomes a ``click.ClickException`` (a one-line
message, exit code 1, no traceback).
"""

from __future__ import annotations

import click

from debl.commands import COMMANDS


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="debl")
def main() -> None:
    """DeBL: demand-driven bulk loading of LinkBench link data into MySQL and HBase."""


for command in COMMANDS:
    main.add_command(command)
