"""``debl check-fresh``: every answer of a client run against the contract of fresh answers,
from the dump, the run's writes and its answer logs (docs/FRESHNESS.md, "The checker")."""

from __future__ import annotations

import json
from pathlib import Path

import click

from debl.commands.common import config_of, friendly_errors, printable
from debl.workload.fresh_check import check_run
from debl.workload.write_log import read_writes


@click.command("check-fresh")
@click.option("--dump", "dump_dir", required=True,
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="The dump's files with their index.json (`debl source dump`'s output, the "
                   "load's source directory): the source at the dump's position.")
@click.option("--writes", "write_logs", required=True, multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A write log of `debl query --write-log` (repeat for several clients): "
                   "every write to the source since the dump.")
@click.option("--answers", "answers_dirs", required=True, multiple=True,
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="The directory of `debl query --answer-log` (repeat for several clients: "
                   "each its own, going back is checked per client process).")
@click.option("--position", default=None, metavar="GTID",
              help="The dump's position, where its index.json carries none.")
@click.option("--tolerance", type=click.FloatRange(min=0), default=None,
              help="Seconds an answer may be older than its arrival (default: fresh.tolerance).")
@click.option("--no-change-log", is_flag=True,
              help="Do not check that the catalog's change log is exactly the writes.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
@friendly_errors
def check_fresh(ctx, dump_dir, write_logs, answers_dirs, position, tolerance, no_change_log,
                as_json):
    """Check every logged answer: it equals the source at one position between the last write
    acknowledged before it was sent and the last write sent before it came back, and no client
    process was shown a key going back. Exit 1 on any violation or history problem."""
    writes = [w for path in write_logs for w in read_writes(path)]
    say = (lambda text: None) if as_json else (lambda text: click.echo(f"note: {text}",
                                                                       err=True))
    report = check_run(config_of(ctx), dump_dir, writes, answers_dirs, position=position,
                       tolerance_s=tolerance, change_log=not no_change_log, say=say)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        for note in report.notes:
            click.echo(printable(f"note: {note}"))
        for title, problems in (("history problem", report.history),
                                ("VIOLATION", report.violations)):
            for kind, n in sorted(problems.counts.items()):
                click.echo(printable(f"{title}: {kind}: {n:,}"))
                for example in problems.examples.get(kind, []):
                    click.echo(printable(f"  e.g. {example}"))
        click.echo(
            f"{report.checked:,} answers checked ({report.failed:,} failed, not checked) on "
            f"{report.keys:,} keys against the dump at {report.dump} and {report.writes:,} "
            f"writes up to position {report.last_seq}"
            + (f", tolerance {report.tolerance_s:g} s" if report.tolerance_s else "")
            + f": {report.violations.total:,} violations, {report.history.total:,} history "
            f"problems ({report.seconds['total']:.1f} s)")
    if not report.ok:
        ctx.exit(1)
