"""``debl stack up | down | status``: the local stack."""

from __future__ import annotations

import json

import click

from debl.commands.common import config_of, friendly_errors
from debl.stack.stack import stack_down, stack_start, stack_status, stack_stop, stack_up


@click.group()
def stack() -> None:
    """Start, stop and inspect the local stack (MariaDB, the source database, HDFS, HBase +
    Thrift; with spark.workers > 0 also a Spark standalone master and workers) on 127.0.0.1."""


@stack.command()
@click.pass_context
@friendly_errors
def up(ctx: click.Context) -> None:
    """Start every service and wait until each answers. A no-op when all are up."""
    results = stack_up(config_of(ctx), report=click.echo)
    total = sum(r.seconds for r in results)
    click.echo(f"stack up ({total:.1f} s)")


@stack.command()
@click.pass_context
@friendly_errors
def down(ctx: click.Context) -> None:
    """Stop every service cleanly; data is kept under the state directory."""
    stack_down(config_of(ctx), report=click.echo)


@stack.command()
@click.argument("service")
@click.option("--crash", is_flag=True, help="SIGKILL at once, as a crash would (default: a "
              "clean stop).")
@click.pass_context
@friendly_errors
def stop(ctx: click.Context, service: str, crash: bool) -> None:
    """Stop one SERVICE (mariadb, source-db, hdfs, hbase) or daemon (namenode, datanode,
    hbase-master, thrift); the others keep running. `debl stack start SERVICE` or `debl stack
    up` brings it back."""
    stack_stop(config_of(ctx), service, crash=crash, report=click.echo)


@stack.command()
@click.argument("service")
@click.pass_context
@friendly_errors
def start(ctx: click.Context, service: str) -> None:
    """Start one SERVICE (or the service of a daemon) and wait until it answers."""
    stack_start(config_of(ctx), service, report=click.echo)


@stack.command()
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
@click.pass_context
@friendly_errors
def status(ctx: click.Context, as_json: bool) -> None:
    """Show each service: address, pids, health, resident memory. Exit 1 if any is unhealthy."""
    health = stack_status(config_of(ctx))
    if as_json:
        click.echo(json.dumps([h.as_dict() for h in health], indent=2))
    else:
        for h in health:
            pids = ",".join(str(p) if p else "-" for p in h.pids)
            rss = "+".join(f"{r / 1024:.0f}" for r in h.rss_kib if r) + " MiB" if h.rss_kib else "-"
            mark = "up  " if h.healthy else "DOWN"
            click.echo(f"{mark} {h.service:9} {h.address:45} pid {pids:14} rss {rss:>8}  "
                       f"{h.detail}")
    if not all(h.healthy for h in health):
        ctx.exit(1)
