"""``debl query``: the LinkBench-style client against DeBL, MySQL or HBase."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from debl.commands.common import config_of, friendly_errors
from debl.errors import ConfigError
from debl.workload.client import (ClientResult, ClientSpec, default_processes, run_client,
                                  write_result)
from debl.workload.requests import RequestSpec
from debl.workload.targets import (CLI_TARGETS, merged_reports, open_target, target_id_range,
                                   target_source)

_DEFAULT_REQUESTS = 1000


def _human(result: ClientResult, target: str) -> str:
    spec = result.spec
    lines = [
        f"target {target}: {result.completed:,} requests ok, {result.errors:,} errors in "
        f"{result.elapsed_s:.1f} s with {spec.threads} threads in {spec.processes} "
        f"process{'es' if spec.processes > 1 else ''} "
        f"({result.throughput:,.1f} requests/s"
        + (f", open loop at {spec.rate:g}/s" if spec.rate else ", closed loop") + ")",
        result.latency.line(),
        f"client CPU {result.cpu_s:.1f} s over {spec.processes} "
        f"process{'es' if spec.processes > 1 else ''}"
        + (f" ({result.cpu_s / (result.completed + result.errors) * 1e6:,.0f} µs per request)"
           if result.completed + result.errors else ""),
        f"links returned: {result.rows:,} ({result.empty:,} requests returned none); "
        f"ids [{spec.requests.start_id}, {spec.requests.max_id}), seed {spec.requests.seed}"
        + (f", {spec.requests.recency_share:.0%} by recency" if spec.requests.recency_share
           else ""),
    ]
    lines += [f"error: {e}" for e in result.error_samples]
    return "\n".join(lines)


@click.command("query")
@click.option("--threads", type=int, default=1, show_default=True)
@click.option("--requests", "total", type=int, default=None,
              help=f"Requests over all threads (default {_DEFAULT_REQUESTS} without --duration).")
@click.option("--duration", type=float, default=None, help="Stop after this many seconds.")
@click.option("--processes", type=int, default=None,
              help="Worker processes sharing the threads, each with its own connections "
                   "(default: client.processes, else one per core, at most --threads).")
@click.option("--rate", type=float, default=None,
              help="Open loop: requests per second over all threads (Poisson arrivals); "
                   "latency counts from each request's intended send time.")
@click.option("--target", type=click.Choice(CLI_TARGETS), default="debl", show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Save the run: *.csv the per-second timeline, else the whole result as JSON.")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--max-id", type=int, default=None,
              help="Request ids are [start-id, max-id): the generator's --max-id. "
                   "Default: the id range the target reports.")
@click.option("--start-id", type=int, default=None, help="Default: the target's, else 1.")
@click.option("--link-types", type=int, default=2, show_default=True)
@click.option("--recency-share", type=float, default=0.0, show_default=True,
              help="Share of requests whose id1 is drawn by Zipf over recency (the newest ids, "
                   "max-id - 1 first, the most requested); the rest as LinkBench. "
                   "0: LinkBench alone.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
@friendly_errors
def query(ctx: click.Context, threads: int, total: int | None, duration: float | None,
          processes: int | None, rate: float | None, target: str, out: Path | None, seed: int,
          max_id: int | None, start_id: int | None, link_types: int, recency_share: float,
          as_json: bool) -> None:
    """Send LinkBench get_link_list requests (Zipf(0.8) shuffled id1; with --recency-share, a
    share by Zipf(0.8) over recency) and report latency percentiles and per-second
    throughput."""
    if total is None and duration is None:
        total = _DEFAULT_REQUESTS
    config = config_of(ctx)
    if max_id is None:
        store = open_target(config, target)
        try:
            if hasattr(store, "wait_until_up") and not store.is_up:
                click.echo("waiting for uptime (the load is not up yet) ...", err=True)
                store.wait_until_up(None)
            reported = target_id_range(store)
        finally:
            store.close()
        if reported is None:
            raise ConfigError(f"target {target!r} does not report its id range: pass "
                              "--max-id (the --max-id the data was generated with)")
        start_id = reported[0] if start_id is None else start_id
        max_id = reported[1]
    requests = RequestSpec(max_id=max_id, start_id=1 if start_id is None else start_id,
                           link_types=link_types, seed=seed, recency_share=recency_share)
    spec = ClientSpec(requests=requests, threads=threads, total=total, duration=duration,
                      rate=rate, processes=default_processes(
                          threads, processes if processes is not None
                          else config.client.processes))
    err = sys.stderr
    by_count = total is not None
    length = total if total is not None else max(1, int(duration or 1))
    with click.progressbar(length=length, label=f"querying {target}", file=err,
                           show_pos=by_count) as bar:
        def progress(done: int, elapsed: float) -> None:
            now = done if by_count else min(length, int(elapsed))
            bar.update(now - bar.pos)

        result = run_client(target_source(config, target), spec, progress=progress)
    # the coordinator's: how long buffered queries waited, over every process
    stats = merged_reports(result.target_reports)
    if out is not None:
        write_result(result, out)
    if as_json:
        click.echo(json.dumps({"target": target, **result.to_dict(),
                               **({"coordinator": stats} if stats else {})}, indent=2))
    else:
        click.echo(_human(result, target))
        if stats:
            click.echo("coordinator: " + ", ".join(f"{k} {v:.4g}" if isinstance(v, float)
                                                   else f"{k} {v}" for k, v in stats.items()))
        if out is not None:
            click.echo(f"saved to {out}")
