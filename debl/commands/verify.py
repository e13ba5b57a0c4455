"""``debl verify``: prove that nothing was lost; with ``--against-source``, that the load with
the change log applied is the source's table."""

from __future__ import annotations

import json

import click

from debl.catalog import LoadState
from debl.commands.common import config_of, friendly_errors, printable
from loaders.verify import verify_load
from loaders.verify_source import compare_with_source


@click.command()
@click.argument("load_id", required=False)
@click.option("--no-source", is_flag=True, help="Do not re-read the source files.")
@click.option("--source", "source_spec", metavar="SOURCE",
              help="Re-read the files from SOURCE, not the recorded one (an HTTP source's "
                   "password comes from DEBL_SOURCE_PASSWORD or source.password_file).")
@click.option("--against-source", is_flag=True,
              help="Also compare the load's rows, with the change log applied, with the "
                   "source database's table, row by row (once the writes have stopped).")
@click.option("--no-changes", is_flag=True,
              help="With --against-source: compare the load's rows alone, without the changes "
                   "captured since the dump (every row written since then differs).")
@click.option("--wait", "wait_s", type=click.FloatRange(min=0), default=60.0, show_default=True,
              help="With --against-source: seconds to wait for the follower to reach the "
                   "source's head.")
@click.option("--json", "as_json", is_flag=True, help="Print every check as JSON.")
@click.pass_context
@friendly_errors
def verify(ctx, load_id, no_source, source_spec, against_source, no_changes, wait_s, as_json):
    """Check, per source file and per bucket, that every input line is in MySQL, in HBase (or
    in a bucket still waiting) or in the reject file; with --against-source, that the load's
    rows with the source's changes captured since its dump applied are the source's table,
    row by row: 0 rows missing, extra or different. Exit 1 if any check fails."""
    if no_changes and not against_source:
        raise click.UsageError("--no-changes goes with --against-source")
    config = config_of(ctx)
    report = verify_load(config, load_id, source=not no_source, source_spec=source_spec)
    against = (compare_with_source(config, report.load_id, changes=not no_changes,
                                   wait_s=wait_s)
               if against_source else None)
    if as_json:
        doc = {"load_id": report.load_id, "ok": report.ok,
               "checks": [{"what": c.what, "expected": str(c.expected), "found": str(c.found),
                           "ok": c.ok} for c in report.checks]}
        if against is not None:
            doc["against_source"] = against.to_dict()
        click.echo(json.dumps(doc, indent=2))
    else:
        if report.state != LoadState.UP:
            click.echo(f"note: load {report.load_id} is {report.state}, not up: lines it has not "
                       "taken yet show as mismatches")
        for c in report.failures:
            click.echo(printable(f"MISMATCH {c.what}: expected {c.expected}, found {c.found}"))
        click.echo(f"load {report.load_id}: {len(report.checks) - len(report.failures)} of "
                   f"{len(report.checks)} checks agree" + ("" if report.ok else " — see above"))
        if against is not None:
            for kind, examples in against.examples.items():
                for text in examples:
                    click.echo(printable(f"{kind.upper()} {text}"))
            for note in against.notes:
                click.echo(f"note: {note}")
            applied = ("no change applied" if against.follower is None else
                       f"{against.changes:,} changes applied up to position {against.follower}")
            click.echo(f"against the source at {against.head} (the dump at {against.dump}, "
                       f"{applied}): {against.source_rows:,} rows in the source, "
                       f"{against.debl_rows:,} in "
                       f"DeBL; {against.missing:,} missing, {against.extra:,} extra, "
                       f"{against.different:,} different ({against.seconds:.1f} s)")
    if not report.ok or (against is not None and not against.ok):
        ctx.exit(1)
