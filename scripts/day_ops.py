"""The day operations' campaign's command line (docs/RELIABILITY.md, "Day operations"): sequences
of the operations people run at any moment (the next day's load, --resume, rollback, cleanup,
the gen_HF service, a service restart, kill -9s) drawn at random while clients ask through
coordinators, each checked against the days' references; a Markdown table and JSON.

    python scripts/day_ops.py --sequences 10 --operations 10 --seed 1      # the docs' table
    python scripts/day_ops.py --sequences 1 --operations 3 --only next-day,rollback,cleanup

Runs in the namespace ``<mysql_database>_dayops`` of the configured stack (``debl stack up``
first); results go to ``<state_dir>/dayops/<run id>/`` (results.json, table.md, one directory
per sequence with every command's log and the clients' records).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from debl.config import load_config
from debl.errors import DeblError
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the harness
from harness.days_ops import OPERATIONS  # noqa: E402
from harness.days_runner import markdown, run_day_ops  # noqa: E402
from harness.days_world import DayOpsSpec  # noqa: E402


@click.command()
@click.option("--sequences", type=click.IntRange(min=1), default=DayOpsSpec.sequences,
              show_default=True, help="Sequences to run, each from a fresh first day.")
@click.option("--operations", type=click.IntRange(min=1), default=DayOpsSpec.operations,
              show_default=True, help="Operations drawn per sequence.")
@click.option("--seed", type=int, default=DayOpsSpec.seed, show_default=True,
              help="Seed of the draws (one seed gives the same operations).")
@click.option("--only", default="", help="Comma-separated operations to draw from (default "
              f"all): {', '.join(OPERATIONS)}.")
@click.option("--clients", type=click.IntRange(min=1), default=DayOpsSpec.clients,
              show_default=True, help="Client processes, each with one coordinator.")
@click.option("--threads", type=click.IntRange(min=1), default=DayOpsSpec.threads,
              show_default=True, help="Threads asking without pause in each client.")
@click.option("--max-id", type=click.IntRange(min=100), default=DayOpsSpec.max_id,
              show_default=True, help="Ids of each day's input (its size).")
@click.option("--keep-previous", type=click.FloatRange(min=0), default=DayOpsSpec.keep_previous_s,
              show_default=True, help="keep_previous_load, in seconds, while the campaign runs.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Result directory (default <state_dir>/dayops/<run id>).")
def main(sequences: int, operations: int, seed: int, only: str, clients: int, threads: int,
         max_id: int, keep_previous: float, out: Path | None) -> None:
    """Draw sequences of day operations with kill -9s among them while clients ask, and check
    every answer, the current day and the disk after each operation."""
    allowed = tuple(name.strip() for name in only.split(",") if name.strip())
    unknown = [name for name in allowed if name not in OPERATIONS]
    if unknown:
        raise click.BadParameter(f"unknown operation(s) {', '.join(unknown)}; choose from "
                                 f"{', '.join(OPERATIONS)}", param_hint="--only")
    spec = DayOpsSpec(sequences=sequences, operations=operations, seed=seed, allowed=allowed,
                      clients=clients, threads=threads, max_id=max_id,
                      keep_previous_s=keep_previous)
    config = load_config()
    out = out or config.state_dir / "dayops" / time.strftime("D%Y%m%d-%H%M%S")
    try:
        results = run_day_ops(config, out, spec, report=lambda text: click.echo(text, err=True))
    except (DeblError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(markdown(spec, results))
    click.echo(f"{sum(r.clean for r in results)} of {len(results)} sequences clean; results: "
               f"{out}/results.json")
    sys.exit(0 if all(r.clean for r in results) else 1)


if __name__ == "__main__":
    main()
