"""``debl gen-hf``: the online conversion service."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import click

from debl.commands.common import config_of, friendly_errors
from loaders.gen_hf import ORDERS, GenHF


@click.command("gen-hf")
@click.option("--until-complete", is_flag=True,
              help="Exit once every bucket of the current load is in HBase.")
@click.option("--order", type=click.Choice(ORDERS), default="demand", show_default=True,
              help="demand: the buckets most queries wait for first; fifo: bucket order.")
@click.option("--exit-with-parent", is_flag=True,
              help="Stop at once when the process that started this one ends, even inside a "
                   "run: for a gen-hf run by a bench or a supervisor that may be killed.")
@click.pass_context
@friendly_errors
def gen_hf(ctx, until_complete, order, exit_with_parent):
    """Turn buckets into HBase HFiles and bulk-load them, run after run (Ctrl-C stops)."""
    config = config_of(ctx)
    if exit_with_parent:
        _exit_with(os.getppid())
    lower_priority(config.gen_hf.nice)  # before GenHF starts the Spark JVM, which inherits it
    with GenHF(config, order=order, report=click.echo) as service:
        try:
            runs = service.serve(until_complete=until_complete)
        except KeyboardInterrupt:
            click.echo("stopped; a restarted gen-hf redoes any bucket left running")
            return
    click.echo(f"done: {runs} runs; every bucket is loaded")


def _exit_with(parent: int) -> None:
    """End this process as soon as *parent* has ended (an orphan is re-parented: its parent
    pid changes). At once, not between runs: a run takes minutes on a loaded machine, and an
    interrupted one is safe (its buckets stay `running` and the next gen-hf redoes them, as
    after a kill -9, docs/RELIABILITY.md). The Spark JVM ends with this process (its stdin
    closes)."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        click.echo("the process that started this gen-hf has ended: stopping; a restarted "
                   "gen-hf redoes any bucket left running")
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def lower_priority(nice: int) -> None:
    """Give this process, and the processes it starts after (its Spark JVM), *nice* more
    niceness, so that the raw route's answers, the DataNode serving them and the query clients
    come first on the cores while gen_HF converts beside them (docs/ONLINE.md, "Priority").

    Pitfall: with the kernel's autogroup scheduling, niceness only weighs within a session; a
    gen-hf that leads its own session (started by the bench or a supervisor with setsid) sets
    its session's group niceness too. One started from a terminal leaves the terminal's group
    alone (it would slow down everything else started from there)."""
    if nice <= 0:
        return
    os.nice(nice)
    autogroup = Path("/proc/self/autogroup")
    if os.getsid(0) == os.getpid() and autogroup.exists():
        try:
            autogroup.write_text(f"{nice}\n")
        except OSError:  # a kernel without the knob's write: the niceness above still holds
            pass
