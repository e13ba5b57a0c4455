"""``debl query``: the LinkBench-style client against DeBL, MySQL or HBase; with ``--mix``
LinkBench's other link reads, and its link writes to the source database."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from debl.commands.common import config_of, friendly_errors
from debl.config import Config
from debl.errors import ConfigError
from debl.store.linkbench_writes import SourceLinks
from debl.workload.client import (ClientResult, ClientSpec, default_processes, run_client,
                                  write_result)
from debl.workload.mix import MIXES, REPORTED, mix_named
from debl.workload.requests import RequestSpec
from debl.workload.targets import (CLI_TARGETS, merged_reports, open_target, target_id_range,
                                   target_source)
from debl.workload.write_log import save_writes

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
    if not mix_named(spec.mix).only_get_link_list:  # one line per operation, LinkBench's
        lines[1:2] = [summary.line(REPORTED[op]) + (f"  errors = {result.operation_errors[op]}"
                                                    if result.operation_errors[op] else "")
                      for op, summary in result.operations.items()]
    writes = result.writes
    if writes is not None:
        logged = (f"{writes.gtids:,} with their GTID" if writes.gtids or not writes.completed
                  else "none with a GTID: does the source keep a binary log?")
        lines.append(f"writes ({spec.mix}): {writes.completed:,} acknowledged, {writes.errors:,} "
                     f"failed, {writes.behind:,} due and not sent ({writes.held:.1%} held); "
                     f"{writes.per_s:,.1f}/s of {writes.rate:g}/s asked, by {writes.writers} "
                     f"writer{'s' * (writes.writers != 1)}; {logged}")
        lines += [f"write error: {e}" for e in writes.error_samples]
    lines += [f"error: {e}" for e in result.error_samples]
    return "\n".join(lines)


def _source(config: Config, mix: str) -> SourceLinks | None:
    """The source database a mix's writes go to, from the ``source_db`` settings (never the
    command line: its URL holds a password; docs/WORKLOAD.md, "Writes"); None for a mix
    without writes."""
    if not mix_named(mix).write_share:
        return None
    return SourceLinks(config.source_db_url(with_password=True), config.source_db.table)


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
@click.option("--mix", type=click.Choice(tuple(MIXES)), default="reads", show_default=True,
              help="reads: get_link_list alone; linkbench: LinkBench's link operations (about "
                   "a quarter writes); update-heavy: half writes. Writes go to the source "
                   "database (the source_db settings), never to DeBL's stores.")
@click.option("--write-rate", type=float, default=None,
              help="Writes per second over the writers, open loop (Poisson arrivals). "
                   "Default with --rate: the mix's share of writes beside the reads.")
@click.option("--writers", type=int, default=4, show_default=True,
              help="Threads sending the writes, each with its own connection.")
@click.option("--write-log", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Save every write (key, row, GTID, the client's monotonic instants) as CSV.")
@click.option("--answer-log", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Keep, per read, its arguments, the client's monotonic instants and a digest "
                   "of its answer in this directory (a file per process), for `debl "
                   "check-fresh`.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
@friendly_errors
def query(ctx: click.Context, threads: int, total: int | None, duration: float | None,
          processes: int | None, rate: float | None, target: str, out: Path | None, seed: int,
          max_id: int | None, start_id: int | None, link_types: int, recency_share: float,
          mix: str, write_rate: float | None, writers: int,
          write_log: Path | None, answer_log: Path | None, as_json: bool) -> None:
    """Send LinkBench get_link_list requests (Zipf(0.8) shuffled id1; with --recency-share, a
    share by Zipf(0.8) over recency) and report latency percentiles and per-second
    throughput; with --mix, LinkBench's other link reads too, and its link writes to the
    source database at --write-rate."""
    if total is None and duration is None:
        total = _DEFAULT_REQUESTS
    config = config_of(ctx)
    writes_to = _source(config, mix)
    if write_log is not None and writes_to is None:
        raise ConfigError("--write-log saves the writes: give a --mix with writes")
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
                          else config.client.processes),
                      mix=mix, write_rate=write_rate, writers=writers,
                      answer_log=None if answer_log is None else str(answer_log))
    err = sys.stderr
    by_count = total is not None
    length = total if total is not None else max(1, int(duration or 1))
    with click.progressbar(length=length, label=f"querying {target}", file=err,
                           show_pos=by_count) as bar:
        def progress(done: int, elapsed: float) -> None:
            now = done if by_count else min(length, int(elapsed))
            bar.update(now - bar.pos)

        result = run_client(target_source(config, target), spec, progress=progress,
                            writes_to=writes_to)
    # the coordinator's: how long buffered queries waited, over every process
    stats = merged_reports(result.target_reports)
    if out is not None:
        write_result(result, out)
    if write_log is not None and result.writes is not None:
        save_writes(result.writes.records, write_log)
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
        if write_log is not None:
            click.echo(f"writes saved to {write_log}")
        if answer_log is not None:
            click.echo(f"answers logged in {answer_log}")
