"""``debl bench`` and ``debl report``: one experiment over every approach, and its report."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

from debl.bench import (DEFAULT_LAYOUT, DEFAULT_RECENCY_SHARE, QUERIES_FROM, ApproachRun,
                        BenchProgress, BenchSpec, bench_root, find_bench, max_id_for_size,
                        run_bench)
from debl.bench.days import DaysSpec, render as render_days, run_days
from debl.bench.fresh import MODES, FreshSpec, run_fresh
from debl.bench.fresh_report import render as render_fresh
from debl.bench.tail import read_tails, tail_line
from debl.commands.common import config_of, friendly_errors, parse_size
from debl.config import Config
from debl.report import service_from_uptime, tail_report, write_report
from debl.workload.spec import LAYOUTS, GenerateSpec

_ALL = "fileCopy,bulkLoad-mysql,bulkLoad-hbase,batchPut-hbase,debl-cold,debl"


class Display(BenchProgress):
    """One status line on stderr (approach, phase, bytes or requests, time in phase),
    rewritten in place on a terminal; elsewhere a line per phase and message."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.head = ""
        self.phase_name = ""
        self.since = time.monotonic()
        self.detail = ""
        self.last_draw = 0.0
        self.width = 0

    def _draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if not self.tty or (not force and now - self.last_draw < 0.2):
            return
        self.last_draw = now
        text = f"{self.head} {self.phase_name} {now - self.since:6.1f} s  {self.detail}"
        pad = max(0, self.width - len(text))
        click.echo("\r" + text + " " * pad, nl=False, err=True)
        self.width = len(text)

    def _line(self, text: str) -> None:
        if self.tty and self.width:
            click.echo("\r" + " " * self.width + "\r", nl=False, err=True)
            self.width = 0
        click.echo(text, err=True)
        self._draw(force=True)

    def clear(self) -> None:
        """Erase the status line (at the end, before the summary)."""
        if self.tty and self.width:
            click.echo("\r" + " " * self.width + "\r", nl=False, err=True)
        self.width, self.head, self.phase_name, self.detail = 0, "", "", ""
        self.tty = False  # nothing is drawn any more

    def message(self, text: str) -> None:
        self._line(f"  {text}")

    def approach(self, name: str, index: int, total: int) -> None:
        self.head = f"[{index + 1}/{total}] {name}:"
        self._line(f"== approach {index + 1} of {total}: {name}")

    def phase(self, name: str, phase: str) -> None:
        self.phase_name, self.detail, self.since = phase, "", time.monotonic()
        if not self.tty:
            click.echo(f"{self.head} {phase}", err=True)
        self._draw(force=True)

    def moved(self, nbytes: int, total: int) -> None:
        self.detail = f"{nbytes / 1e6:,.1f} / {total / 1e6:,.1f} MB read from the source"
        self._draw()

    def queried(self, done: int, total: int | None, elapsed: float) -> None:
        self.detail = (f"{done:,} / {total:,} requests" if total is not None
                       else f"{done:,} requests")
        self._draw()

    def finished(self, run: ApproachRun, config: Config) -> None:
        text = f"{run.approach}: up after {run.uptime_s:.1f} s"
        if run.first_answer_s is not None:
            text += f"; first answer at {run.first_answer_s:.2f} s (from {run.queries_from})"
        if run.all_served_s is not None and run.query is not None:
            q = run.query
            text += (f"; {q['completed']:,} requests served by {run.all_served_s:.1f} s "
                     f"({q['errors']:,} errors)")
        if run.full_availability_s is not None and run.gen_hf:
            text += f"; every bucket in HBase by {run.full_availability_s:.1f} s"
        self._line(text)


@click.command("bench")
@click.option("--approaches", default=_ALL, show_default=True,
              help="Comma-separated, run in this order; also debl-fifo (debl with gen_HF in "
                   "plain bucket order) and debl-raw (debl with the raw route on).")
@click.option("--size", help="Input size, e.g. 300MB or 1GiB (sets --max-id; approximate).")
@click.option("--max-id", type=int, help="Generate ids [1, MAX_ID) (instead of --size).")
@click.option("--files", type=int, default=10, show_default=True)
@click.option("--days", type=int, default=10, show_default=True)
@click.option("--layout", type=click.Choice(LAYOUTS), default=DEFAULT_LAYOUT, show_default=True,
              help="Input layout: ranges, a dump by id1 range with the newest ids in the newest "
                   "files (the paper's setting); days, a change log per day over all ids.")
@click.option("--input-seed", type=int, default=1, show_default=True,
              help="Seed of the generated input.")
@click.option("--max-degree", type=int, help="Cap every out-degree (small inputs only).")
@click.option("--data", "data_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Input directory, reused when it holds the same input "
                   "(default: <state_dir>/bench/inputs/<max-id>-<files>-<days>-<seed>-<layout>"
                   "[-d<max-degree>]).")
@click.option("--source-rate", type=float,
              help="Source bandwidth in MB/s for all transfers (12.5 = 100 Mbit/s); "
                   "default uncapped.")
@click.option("--recency-share", type=float, default=DEFAULT_RECENCY_SHARE, show_default=True,
              help="Share of requests whose id1 follows recency (Zipf over recency rank, the "
                   "newest ids hottest); the rest as LinkBench. 0: LinkBench alone.")
@click.option("--threads", type=int, default=16, show_default=True)
@click.option("--requests", type=int, default=10000, show_default=True,
              help="Requests of each query phase.")
@click.option("--duration", type=float, help="Also end each query phase after S seconds.")
@click.option("--rate", "request_rate", type=float,
              help="Open loop: requests per second over all threads (Poisson arrivals; latency "
                   "from each request's intended send time); default closed loop.")
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of the requests.")
@click.option("--chunk-size", help="Cold chunk size (default: the input / 16, at least 4MiB, "
              "at most loading.chunk_size).")
@click.option("--bucket-width", type=int, help="id1 range per bucket (default: see --buckets).")
@click.option("--buckets", type=int, default=16, show_default=True,
              help="Without --bucket-width: buckets of each approach's cold bytes / BUCKETS "
                   "bytes (loading.bucket_target_bytes).")
@click.option("--hot-share", type=float, default=0.2, show_default=True,
              help="Share of the bytes that debl loads hot into MySQL: the newest whole files "
                   "closest to it.")
@click.option("--query-timeout", type=float, default=600.0, show_default=True,
              help="Seconds a DeBL query may wait for its bucket (then: an error).")
@click.option("--gen-hf-start", type=click.Choice(["load", "uptime"]), default="load",
              show_default=True,
              help="When DeBL's gen_HF service (its own Spark JVM) starts: with the load, as an "
                   "always-running service is, or at uptime (its JVM start then falls on the "
                   "first queries).")
@click.option("--queries-from", type=click.Choice(QUERIES_FROM), default="uptime",
              show_default=True,
              help="When each approach's query phase starts: at its uptime, or with its load "
                   "(the DeBL approaches only: their requests wait in the coordinator until "
                   "answerable, so answers before uptime are measured; the baselines still "
                   "start at their uptime). With load, --query-timeout counts the load too.")
@click.option("--days-in-a-row", "days_in_a_row", type=click.IntRange(min=2),
              help="Instead of the approaches: load N days of the same graph (day k: input "
                   "seed + k - 1) one after another, DeBL as it ships, while --threads clients "
                   "ask without pause; report the longest stretch with no answer, which day "
                   "answered when, wrong-day answers and the disk (docs/BENCHMARKS.md).")
@click.option("--settle", type=float, default=30.0, show_default=True,
              help="With --days-in-a-row: seconds the clients ask before each next day's load.")
@click.option("--after", type=float, default=60.0, show_default=True,
              help="With --days-in-a-row: seconds they ask after the last day's load ended.")
@click.option("--no-carry-demand", is_flag=True,
              help="With --days-in-a-row: the new day's gen_HF ignores the previous day's demand.")
@click.option("--writes", "with_writes", is_flag=True,
              help="Instead of the approaches: fresh answers while the source takes writes. "
                   "Per run the source database's table (source_db.table, replaced) is filled "
                   "from the input and dumped, the dump loaded as DeBL ships with the follower "
                   "and gen_HF running, and once the follower follows, --threads readers (open "
                   "loop at --rate, default 300/s) and the mix's writes for --duration seconds "
                   "(default 120); then every answer is checked and the load compared with the "
                   "source (docs/FRESHNESS.md).")
@click.option("--modes", default=",".join(MODES), show_default=True,
              help="With --writes: the freshness settings (fresh.mode) to run, alternated.")
@click.option("--mixes", default="linkbench,update-heavy", show_default=True,
              help="With --writes: the request mixes to run.")
@click.option("--write-rate", type=float, default=1000.0, show_default=True,
              help="With --writes: writes per second to the source.")
@click.option("--writers", type=int, default=4, show_default=True,
              help="With --writes: connections sending the writes.")
@click.option("--rounds", type=int, default=1, show_default=True,
              help="With --writes: times every mode and mix runs.")
@click.option("--next-day", is_flag=True,
              help="With --writes: a third into each run the source is dumped again and "
                   "loaded as the next day; two thirds into it, rolled back.")
@click.option("--no-report", is_flag=True, help="Do not write the report at the end.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.pass_context
@friendly_errors
def bench(ctx, approaches, size, max_id, files, days, layout, input_seed, max_degree, data_dir,
          source_rate, recency_share, threads, requests, duration, request_rate, seed,
          chunk_size, bucket_width, buckets, hot_share, query_timeout, gen_hf_start,
          queries_from, days_in_a_row, settle, after, no_carry_demand, with_writes, modes, mixes,
          write_rate, writers, rounds, next_day, no_report, as_json):
    """Run one experiment: every approach loads the same input from the same (rate-capped)
    source; from its uptime (with --queries-from load: a DeBL approach from its load's start)
    the same LinkBench queries run against it.

    Results and the report go to <state_dir>/bench/<bench_id>/. Use a namespace of your own
    (DEBL_MYSQL_DATABASE, DEBL_HBASE_TABLE, DEBL_MYSQL_LINK_TABLE, DEBL_HDFS_ROOT): every approach
    empties the stores of its namespace first.
    """
    if (size is None) == (max_id is None):
        raise click.UsageError("give exactly one of --size and --max-id")
    config = config_of(ctx)
    if max_id is None:
        max_id = max_id_for_size(parse_size(size), max_degree)
    gen = GenerateSpec(max_id=max_id, files=files, days=days, seed=input_seed,
                       max_degree=max_degree, layout=layout)
    if data_dir is None:
        data_dir = bench_root(config) / "inputs" / f"{max_id}-{files}-{days}-{input_seed}" \
            f"-{layout}{'' if max_degree is None else f'-d{max_degree}'}"
    if with_writes:
        _fresh(config, FreshSpec(
            gen, data_dir.absolute(), _names(modes), _names(mixes), rounds,
            read_rate=request_rate or 300.0, write_rate=write_rate, threads=threads,
            writers=writers, duration=duration or 120.0, source_rate=source_rate,
            hot_share=hot_share, chunk_size=parse_size(chunk_size) if chunk_size else None,
            seed=seed, query_timeout=query_timeout, next_day=next_day), as_json)
        return
    if days_in_a_row:
        _days(config, DaysSpec(gen, data_dir.absolute(), days_in_a_row, threads, source_rate,
                               seed, recency_share, hot_share,
                               parse_size(chunk_size) if chunk_size else None, settle, after,
                               carry_demand=not no_carry_demand, query_timeout=query_timeout),
              as_json)
        return
    spec = BenchSpec(gen, data_dir.absolute(),
                     tuple(a.strip() for a in approaches.split(",") if a.strip()),
                     source_rate=source_rate, threads=threads, requests=requests,
                     duration=duration, request_rate=request_rate, seed=seed,
                     chunk_size=parse_size(chunk_size) if chunk_size else None,
                     bucket_width=bucket_width, hot_share=hot_share, buckets=buckets,
                     recency_share=recency_share,
                     query_timeout=query_timeout, gen_hf_start=gen_hf_start,
                     queries_from=queries_from)
    click.echo(f"bench in namespace {config.mysql.database} / {config.hbase.table} / "
               f"{config.hdfs.root}: {', '.join(spec.approaches)}", err=True)
    display = Display()
    try:
        result = run_bench(config, spec, progress=display)
    finally:
        display.clear()
    report = None if no_report else write_report(result.directory)
    if as_json:
        click.echo(json.dumps({"bench_id": result.bench_id, "directory": str(result.directory),
                               "report": str(report.markdown) if report else None,
                               "runs": [r.to_dict() for r in result.runs]}, indent=2,
                              default=str))
        return
    click.echo(f"\nbench {result.bench_id} done in {result.seconds:.0f} s "
               f"({result.input_bytes / 1e6:,.1f} MB input)")
    tails = read_tails(result.directory, result.runs)
    for r in result.runs:
        served = "" if r.all_served_s is None else f", all queries served {r.all_served_s:8.1f} s"
        service = service_from_uptime(r)
        if service is not None:
            served += (f", {service.first_window:,} in the first {service.window_s:g} s "
                       "after uptime")
        if r.first_answer_s is not None:
            served += f", first answer {r.first_answer_s:.2f} s"
        click.echo(f"  {r.approach:15} uptime {r.uptime_s:8.1f} s{served}")
        if r.approach in tails:
            click.echo(f"  {'':15} {tail_line(tails[r.approach])}")
    if report:
        click.echo(_written(report))
    else:
        click.echo(f"results: {result.directory}")


def _days(config, spec: DaysSpec, as_json: bool) -> None:
    _experiment(f"days in a row in namespace {config.mysql.database} / {config.hbase.table} / "
                f"{config.hdfs.root}: {spec.days} days, {spec.threads} client threads",
                lambda display: run_days(config, spec, progress=display), render_days, as_json)


def _names(text: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in text.split(",") if name.strip())


def _fresh(config, spec: FreshSpec, as_json: bool) -> None:
    _experiment(f"fresh answers under writes in namespace {config.mysql.database} / "
                f"{config.hbase.table} / {config.hdfs.root}, source table "
                f"{config.source_db.table}: {', '.join(spec.mixes)} x {', '.join(spec.modes)}, "
                f"{spec.rounds} round{'s' * (spec.rounds != 1)}",
                lambda display: run_fresh(config, spec, progress=display), render_fresh, as_json)


def _experiment(headline: str, run, render, as_json: bool) -> None:
    """An experiment instead of the approaches: its headline, its run under the status line,
    then its result (Markdown, or JSON) and where it is kept."""
    click.echo(headline, err=True)
    display = Display()
    try:
        result = run(display)
    finally:
        display.clear()
    if as_json:
        click.echo(json.dumps(result, indent=2, default=str))
        return
    click.echo(render(result))
    click.echo(f"results: {result['directory']}")


@click.command("report")
@click.argument("bench_id", metavar="[BENCH]", required=False)
@click.option("--tail", "show_tail", is_flag=True,
              help="Also print the tail: each approach's slowest 1% by route and by cause.")
@click.pass_context
@friendly_errors
def report(ctx, bench_id, show_tail):
    """Write the report of BENCH (an id or a directory; default: the latest bench):
    report.md, report.html, throughput.png and answered.png in the bench's directory."""
    directory = find_bench(config_of(ctx), bench_id)
    click.echo(_written(write_report(directory)))
    if show_tail:
        click.echo("\n" + tail_report(directory))


def _written(report) -> str:
    return "\n        ".join(["report: " + str(report.markdown), str(report.html),
                               str(report.plot), str(report.answered)])
