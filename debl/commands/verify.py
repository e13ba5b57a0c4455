"""``debl verify``: prove that nothing was lost."""

from __future__ import annotations

import json

import click

from debl.catalog import LoadState
from debl.commands.common import config_of, friendly_errors, printable
from loaders.verify import verify_load


@click.command()
@click.argument("load_id", required=False)
@click.option("--no-source", is_flag=True, help="Do not re-read the source files.")
@click.option("--source", "source_spec", metavar="SOURCE",
              help="Re-read the files from SOURCE, not the recorded one (an HTTP source's "
                   "password comes from DEBL_SOURCE_PASSWORD or source.password_file).")
@click.option("--json", "as_json", is_flag=True, help="Print every check as JSON.")
@click.pass_context
@friendly_errors
def verify(ctx, load_id, no_source, source_spec, as_json):
    """Check, per source file and per bucket, that every input line is in MySQL, in HBase (or
    in a bucket still waiting) or in the reject file. Exit 1 if any check fails."""
    report = verify_load(config_of(ctx), load_id, source=not no_source, source_spec=source_spec)
    if as_json:
        click.echo(json.dumps({"load_id": report.load_id, "ok": report.ok,
                               "checks": [{"what": c.what, "expected": str(c.expected),
                                           "found": str(c.found), "ok": c.ok}
                                          for c in report.checks]}, indent=2))
    else:
        if report.state != LoadState.UP:
            click.echo(f"note: load {report.load_id} is {report.state}, not up: lines it has not "
                       "taken yet show as mismatches")
        for c in report.failures:
            click.echo(printable(f"MISMATCH {c.what}: expected {c.expected}, found {c.found}"))
        click.echo(f"load {report.load_id}: {len(report.checks) - len(report.failures)} of "
                   f"{len(report.checks)} checks agree" + ("" if report.ok else " — see above"))
    if not report.ok:
        ctx.exit(1)
