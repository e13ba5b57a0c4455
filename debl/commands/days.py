"""``debl rollback`` and ``debl cleanup``: the days a dataset keeps (docs/LOADING.md, "Days")."""

from __future__ import annotations

import click

from debl.commands.common import config_of, friendly_errors
from loaders.cleanup import cleanup as drop_unserved
from loaders.cleanup import rollback as roll_back


@click.command("rollback")
@click.pass_context
@friendly_errors
def rollback(ctx: click.Context) -> None:
    """Serve the previous day again, while its stores exist: every coordinator moves to it at
    its next poll (`debl status` shows both days)."""
    was, now = roll_back(config_of(ctx))
    click.echo(f"load {now} is current again (it replaces {was}, whose stores are kept as the "
               "previous day's)")


@click.command("cleanup")
@click.option("--wait", is_flag=True,
              help="Wait (at most loading.coordinator_ack_timeout s) for running coordinators "
                   "to leave a load instead of leaving it to a later cleanup.")
@click.pass_context
@friendly_errors
def cleanup(ctx: click.Context, wait: bool) -> None:
    """Drop the stores of loads nobody serves any more: not the current day, not a new one
    being loaded, the previous one only after loading.keep_previous_load seconds."""
    dropped = drop_unserved(config_of(ctx), wait=wait, report=click.echo)
    click.echo(f"dropped the stores of {len(dropped)} load(s)" + (
        f": {', '.join(dropped)}" if dropped else ""))
