"""The fault campaign's command line: N trials per target, a Markdown table and JSON.

    python scripts/faults.py --trials 20 --seed 1                 # every target
    python scripts/faults.py --trials 3 --targets load,gen-hf     # some

Runs in the namespace ``<mysql_database>_faults`` of the configured stack (``debl stack up``
first); results go to ``<state_dir>/faults/<campaign id>/`` (results.json, table.md, one log
per command). docs/RELIABILITY.md describes the targets and what a trial checks.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from debl.config import load_config
from debl.errors import DeblError
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the harness
from harness.early_kills import EARLY_KILLS  # noqa: E402
from harness.follow_kills import FOLLOW_KILLS  # noqa: E402
from harness.fresh_kills import FRESH_KILLS  # noqa: E402
from harness.kills import KILLS  # noqa: E402
from harness.outages import OUTAGES  # noqa: E402
from harness.runner import run_campaign  # noqa: E402
from harness.shrinking import SHRINKING  # noqa: E402
from harness.table import markdown  # noqa: E402

TARGETS = {**KILLS, **EARLY_KILLS, **FOLLOW_KILLS, **FRESH_KILLS, **OUTAGES, **SHRINKING}


@click.command()
@click.option("--trials", type=click.IntRange(min=1), default=3, show_default=True,
              help="Trials per target.")
@click.option("--targets", default="kills", show_default=True,
              help="Comma-separated targets; 'kills' (every kill target), 'outages' (every "
                   "service outage), 'source' (a source that misbehaves mid-load) and 'all' "
                   f"stand for groups. Targets: {', '.join(TARGETS)}.")
@click.option("--seed", type=int, default=1, show_default=True,
              help="Seed of the kill moments (one seed gives the same schedule).")
@click.option("--answers", type=click.IntRange(min=1), default=200, show_default=True,
              help="Keys asked through the coordinator per trial (all when fewer).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Result directory (default <state_dir>/faults/<campaign id>).")
def main(trials: int, targets: str, seed: int, answers: int, out: Path | None) -> None:
    """Kill DeBL's commands at random moments, recover them as the docs say, and check that
    nothing was lost, doubled, left running or left unexplained."""
    config = load_config()
    groups = {"kills": [*KILLS, *EARLY_KILLS, *FOLLOW_KILLS, *FRESH_KILLS],
              "outages": list(OUTAGES),
              "source": list(SHRINKING), "all": list(TARGETS)}
    names = [n for t in targets.split(",") if t.strip() for n in groups.get(t.strip(), [t.strip()])]
    unknown = [n for n in names if n not in TARGETS]
    if unknown:
        raise click.BadParameter(f"unknown target(s) {', '.join(unknown)}; choose from "
                                 f"{', '.join(TARGETS)}", param_hint="--targets")
    out = out or config.state_dir / "faults" / time.strftime("F%Y%m%d-%H%M%S")
    try:
        result, rows = run_campaign(config, out, [TARGETS[n] for n in names], trials, seed,
                                    report=lambda text: click.echo(text, err=True),
                                    answers=answers)
    except (DeblError, ValueError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(markdown(rows, seed, trials))
    click.echo(f"{sum(t.clean for t in result.trials)} of {len(result.trials)} trials clean in "
               f"{result.seconds:.0f} s; results: {out}/results.json")
    sys.exit(0 if all(t.clean for t in result.trials) else 1)


if __name__ == "__main__":
    main()
