"""``debl follow``: the follower service, the source's changes captured into the change log."""

from __future__ import annotations

import signal

import click

from debl.commands.common import config_of, friendly_errors
from loaders.follower import Follower


@click.command("follow")
@click.option("--until-caught-up", is_flag=True,
              help="Exit once the source's head at the start is captured.")
@click.pass_context
@friendly_errors
def follow(ctx, until_caught_up):
    """Capture the source database's changes of its link table into the change log, from the
    oldest kept load's dump position (or where the follower got to), until stopped (Ctrl-C or
    SIGTERM). Progress goes to stderr; `debl status` shows the follower."""
    config = config_of(ctx)
    signal.signal(signal.SIGTERM, _interrupt)  # a supervisor's stop: as Ctrl-C
    with Follower(config, report=lambda text: click.echo(text, err=True)) as follower:
        click.echo(f"following source {follower.source} from GTID {follower.gtid} (the oldest "
                   f"kept load's dump: {follower.floor.gtid})", err=True)
        try:
            r = follower.serve(until_caught_up=until_caught_up)
        except KeyboardInterrupt:
            r = follower.result
            click.echo(f"stopped at GTID {r.gtid}: a restarted `debl follow` resumes there")
            return
    click.echo(f"captured up to GTID {r.gtid}: {r.changes:,} changes of {r.transactions:,} "
               f"transactions in {r.batches:,} catalog transactions")


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt
