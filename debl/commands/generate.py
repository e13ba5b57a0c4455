"""``debl generate``: LinkBench-faithful link files, modification times spread over D days, laid
out as a daily change log or as a table dump by key range."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from debl.commands.common import friendly_errors
from debl.workload.generator import GenerateSummary, generate as run_generate
from debl.workload.idspace import ID_SPACES
from debl.workload.spec import LAYOUTS, GenerateSpec


def _human(summary: GenerateSummary) -> str:
    mb = summary.bytes / 1e6
    rate = summary.lines / summary.seconds if summary.seconds else 0.0
    lines = [
        f"wrote {len(summary.files)} files, {summary.lines:,} lines, {mb:,.1f} MB "
        f"to {summary.out_dir} in {summary.seconds:.1f} s ({rate:,.0f} lines/s)",
        f"  links (distinct keys): {summary.links:,}",
        f"  updates:               {summary.updates:,} ({summary.hidden:,} hidden)",
        f"  bad lines:             {len(summary.bad_lines):,}",
        f"  ids:                   [{summary.spec.start_id}, {summary.spec.max_id})"
        + ("" if summary.spec.ids == "dense" else f", placed as {summary.spec.ids}"),
        f"  layout:                {summary.spec.layout}"
        + (" (file k: one contiguous id1 range, newest ids in the newest files)"
           if summary.spec.layout == "ranges" else " (file k: period k's changes, all ids)"),
        f"  mtimes:                {summary.files[0].end_ms} .. {summary.files[-1].end_ms} (ms)",
    ]
    for bad in summary.bad_lines:
        lines.append(f"  bad: {bad.file}:{bad.line_no}: {bad.reason}")
    return "\n".join(lines)


@click.command("generate")
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--max-id", type=int, required=True,
              help="Ids are [start-id, max-id), like LinkBench's maxid1 (exclusive).")
@click.option("--files", type=int, default=10, show_default=True,
              help="Number of files; each covers an equal share of the days (and, with "
                   "--layout ranges, of the ids).")
@click.option("--days", type=int, default=10, show_default=True,
              help="Days of link times, ending 2026-01-01T00:00:00Z.")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--start-id", type=int, default=1, show_default=True)
@click.option("--update-share", type=float, default=0.1, show_default=True,
              help="Share of each later file's lines that update links of earlier files.")
@click.option("--hidden-share", type=float, default=0.1, show_default=True,
              help="Share of updates with visibility 0.")
@click.option("--link-types", type=int, default=2, show_default=True)
@click.option("--bad-lines", type=int, default=0, show_default=True,
              help="Malformed lines to inject, for testing rejects; listed in the summary.")
@click.option("--layout", type=click.Choice(LAYOUTS), default="days", show_default=True,
              help="days: each file one period's change log over all ids; ranges: a table "
                   "dump by key range, each file a contiguous id1 range with every version of "
                   "its links, ids in creation order, mtime = newest line's time.")
@click.option("--max-degree", type=int, default=None,
              help="Cap every out-degree (not LinkBench; for small test sets).")
@click.option("--ids", type=click.Choice(ID_SPACES), default="dense", show_default=True,
              help="dense: ids as numbered; clusters: moved into three clusters (from start-id, "
                   "10^6 and 2^40), like real sparse ids.")
@click.option("--overwrite", is_flag=True, help="Replace link files already in OUT.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@friendly_errors
def generate(out: Path, max_id: int, files: int, days: int, seed: int, start_id: int,
             update_share: float, hidden_share: float, link_types: int, bad_lines: int,
             layout: str, max_degree: int | None, ids: str, overwrite: bool,
             as_json: bool) -> None:
    """Write LinkBench link files into OUT, one per period: a change log (mtime = end of the
    period) or, with --layout ranges, a dump by id1 range (mtime = newest line's time).

    Deterministic: one set of options gives the same bytes and mtimes on every machine.
    """
    spec = GenerateSpec(max_id=max_id, files=files, days=days, seed=seed, start_id=start_id,
                        update_share=update_share, hidden_share=hidden_share,
                        link_types=link_types, bad_lines=bad_lines, max_degree=max_degree,
                        layout=layout, ids=ids)
    err = sys.stderr
    with click.progressbar(length=spec.n_ids, label="generating", file=err,
                           show_pos=True) as bar:
        summary = run_generate(out, spec, progress=lambda done, total: bar.update(done - bar.pos),
                               overwrite=overwrite)
    if as_json:
        click.echo(json.dumps(summary.to_dict(), indent=2))
    else:
        click.echo(_human(summary))
