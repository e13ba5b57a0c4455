"""``debl load``: the offline phase."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from typing import TYPE_CHECKING

import click

from debl.bench.baselines import run_approach
from debl.catalog import EarlyAnswering
from debl.format.bucket_map import BucketMap
from debl.commands.common import config_of, friendly_errors, parse_size
from loaders.load import DEBL_APPROACHES, LoadOptions, LoadProgress, load_debl
from loaders.source_url import check_no_password

if TYPE_CHECKING:
    from click._termui_impl import ProgressBar


class _Bars(LoadProgress):
    """Two progress bars (hot bytes, cold bytes copied) and a line per bucketed chunk."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.bars: dict[str, ProgressBar[int]] = {}

    def start(self, hot_bytes: int, cold_bytes: int) -> None:
        if self.quiet:
            return
        click.echo(f"hot: {hot_bytes / 1e6:.1f} MB into MySQL; cold: {cold_bytes / 1e6:.1f} MB "
                   "into HDFS chunks, bucketed by dist_ch", err=True)
        if cold_bytes:
            self.bars["cold"] = click.progressbar(length=cold_bytes, label="cold copy",
                                                  file=sys.stderr)

    def copied(self, nbytes: int) -> None:
        if "cold" in self.bars:
            self.bars["cold"].update(nbytes)

    def bucketed(self, chunk_no: int, rows: int, seconds: float) -> None:
        if not self.quiet:
            click.echo(f"\n  dist_ch chunk {chunk_no}: {rows} rows in {seconds:.1f} s", err=True)

    def up(self, summary) -> None:
        if not self.quiet:
            click.echo(f"\nload {summary.load_id} is up after {summary.uptime_s:.1f} s: every "
                       "coordinator now serves it", err=True)

    def message(self, text: str) -> None:
        if not self.quiet:
            click.echo(f"\n  {text}", err=True)


def _time(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        try:
            return datetime.fromisoformat(value).timestamp()
        except ValueError:
            raise click.BadParameter(f"{value!r}: give unix seconds or an ISO date/time") from None


@click.command()
@click.argument("source")
@click.option("--hot-bytes", help="The newest files up to this many bytes are hot (e.g. 200MB).")
@click.option("--hot-since", help="Files modified at or after this time are hot (ISO or unix).")
@click.option("--no-hot", is_flag=True, help="Every file is cold (DeBL without MySQL).")
@click.option("--chunk-size", help="Cold chunk size (default from config, 256MiB).")
@click.option("--bucket-width", type=click.IntRange(min=1),
              help="Fixed-width buckets of this id1 range (default: split points sampled from "
                   "the cold files, for buckets of about loading.bucket_target_bytes).")
@click.option("--max-bad", type=int, help="Fail once more than N lines are rejected.")
@click.option("--approach", default="debl", show_default=True,
              help="debl, debl-cold, or a baseline: fileCopy, bulkLoad-mysql, bulkLoad-hbase, "
                   "batchPut-hbase (docs/DESIGN.md section 7).")
@click.option("--wait-for-hot", is_flag=True,
              help="The paper's uptime: up only once MySQL holds the hot files (by default the "
                   "load is up once every file is bucketed in HDFS, and MySQL takes the hot "
                   "keys over when it has them).")
@click.option("--resume", "resume", metavar="LOAD_ID", help="Continue a killed load.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.pass_context
@friendly_errors
def load(ctx, source, hot_bytes, hot_since, no_hot, chunk_size, bucket_width, max_bad, approach,
         wait_for_hot, resume, as_json):
    """Load SOURCE (a directory or an http:// URL) as the next day's dataset.

    Every file is copied into HDFS and bucketed (the hot ones too); the load is up when the last
    one is, and every coordinator then serves it (the current day serves until that instant).
    Hot files also go into MySQL, which takes their keys over when it has them; the command
    returns then and prints the load's summary. `debl gen-hf` converts the buckets into HBase.
    An HTTP source's password is never in SOURCE: it comes from DEBL_SOURCE_PASSWORD or
    source.password_file (README, "Configuration").
    """
    if sum(x is not None and x is not False for x in (hot_bytes, hot_since, no_hot or None)) > 1:
        raise click.UsageError("give at most one of --hot-bytes, --hot-since, --no-hot")
    # before anything starts (docs/LOADING.md, "Decisions where DESIGN is silent", row "HTTP
    # sources")
    check_no_password(source)
    options = LoadOptions(
        hot_bytes=parse_size(hot_bytes) if hot_bytes else None,
        hot_since=_time(hot_since) if hot_since else None,
        chunk_size=parse_size(chunk_size) if chunk_size else None,
        bucket_width=bucket_width, max_bad=max_bad, wait_for_hot=wait_for_hot,
        approach="debl-cold" if no_hot and approach == "debl" else approach)
    # DeBL's own load straight from the pipeline; a baseline's through the bench's approaches
    run = load_debl if options.approach in DEBL_APPROACHES else run_approach
    summary = run(config_of(ctx), source, options, resume=resume, progress=_Bars(as_json))
    if as_json:
        click.echo(json.dumps(summary.as_dict(), indent=2))
        return
    s = summary
    click.echo(f"\nload {s.load_id} is up after {s.uptime_s:.1f} s")
    if s.taken_over_s is not None:
        click.echo(f"  MySQL took the hot keys over after {s.taken_over_s:.1f} s")
    click.echo(f"  hot : {s.hot_files} files, {s.hot_bytes / 1e6:.1f} MB, {s.hot_rows} rows in "
               "MySQL")
    click.echo(f"  cold: {s.cold_files} files, {s.cold_bytes / 1e6:.1f} MB, {s.cold_rows} rows in "
               f"{s.buckets} buckets from {s.chunks} chunks")
    if s.bucket_map:
        click.echo(f"  bucket map: {BucketMap.from_dict(s.bucket_map).describe()}")
    click.echo(f"  bad lines: {s.rejects}" + (f" (see {s.reject_file})" if s.rejects else ""))
    if s.early:
        click.echo(f"  answered before uptime: {s.early['demand_bytes'] / 1e6:.1f} MB fetched on "
                   "demand" + ("" if s.early["state"] == EarlyAnswering.ON else
                               "; early answers stopped at a false claim"))
        for claim in s.early["false_claims"]:
            lo, hi = claim["affected"]
            click.echo(f"  false claim: {claim['detail']}; {claim['early_answers']} early "
                       f"answers were given for id1s {lo}..{hi}")
    for phase, seconds in s.phases.items():
        click.echo(f"  {phase:12} {seconds:8.1f} s")
