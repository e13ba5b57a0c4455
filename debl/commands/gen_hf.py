"""``debl gen-hf``: the online conversion service."""

from __future__ import annotations

import os

import click

from debl.commands.common import config_of, friendly_errors
from loaders.gen_hf import ORDERS, GenHF


@click.command("gen-hf")
@click.option("--until-complete", is_flag=True,
              help="Exit once every bucket of the current load is in HBase.")
@click.option("--order", type=click.Choice(ORDERS), default="demand", show_default=True,
              help="demand: the buckets most queries wait for first; fifo: bucket order.")
@click.option("--exit-with-parent", is_flag=True,
              help="Stop (between runs) once the process that started this one has ended: "
                   "for a gen-hf run by a bench or a supervisor that may be killed.")
@click.pass_context
@friendly_errors
def gen_hf(ctx, until_complete, order, exit_with_parent):
    """Turn buckets into HBase HFiles and bulk-load them, run after run (Ctrl-C stops)."""
    config = config_of(ctx)
    parent = os.getppid()  # an orphan is re-parented: its parent pid changes
    with GenHF(config, order=order, report=click.echo) as service:
        try:
            runs = service.serve(until_complete=until_complete,
                                 should_stop=lambda: exit_with_parent and os.getppid() != parent)
            if exit_with_parent and os.getppid() != parent:
                click.echo("the process that started this gen-hf has ended: stopping; a "
                           "restarted gen-hf redoes any bucket left running")
                return
        except KeyboardInterrupt:
            click.echo("stopped; a restarted gen-hf redoes any bucket left running")
            return
    click.echo(f"done: {runs} runs; every bucket is loaded")
