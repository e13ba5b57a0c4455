"""``debl gen-hf``: the online conversion service."""

from __future__ import annotations

import click

from debl.commands.common import config_of, friendly_errors
from loaders.gen_hf import ORDERS, GenHF


@click.command("gen-hf")
@click.option("--until-complete", is_flag=True,
              help="Exit once every bucket of the current load is in HBase.")
@click.option("--order", type=click.Choice(ORDERS), default="demand", show_default=True,
              help="demand: the buckets most queries wait for first; fifo: bucket order.")
@click.pass_context
@friendly_errors
def gen_hf(ctx, until_complete, order):
    """Turn buckets into HBase HFiles and bulk-load them, run after run (Ctrl-C stops)."""
    config = config_of(ctx)
    with GenHF(config, order=order, report=click.echo) as service:
        try:
            runs = service.serve(until_complete=until_complete)
        except KeyboardInterrupt:
            click.echo("stopped; a restarted gen-hf redoes any bucket left running")
            return
    click.echo(f"done: {runs} runs; every bucket is loaded")
