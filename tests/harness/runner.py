"""Running a fault campaign (docs/RELIABILITY.md, "Kill campaign" and "Services dying
mid-phase"): N trials per target, each one fault in a real ``debl`` command, then the recovery
the docs tell a user, ``debl verify``, and the stores and answers against the in-memory
reference; the results go to ``results.json`` and ``table.md``.

Per target, one run without a fault measures the command's duration first; a trial whose kill
came after the command's end is run again (at most ``MISS_RETRIES`` times) with the window
measured again, and a recovery that redid the whole command re-measures it too, so that the
kill moments follow the machine's speed.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from debl.config import Config
from harness.campaign import ANSWER_SAMPLE, Campaign
from harness.kills import Target, Window
from harness.table import CampaignResult, markdown
from harness.trial import Trial

MISS_RETRIES = 2  # a trial whose kill missed is run again (with the window re-measured)


def _one_trial(camp: Campaign, target: Target, number: int, seed: int, window: Window) -> Trial:
    trial = Trial(target.name, target.fault, number, seed, window_s=round(window.seconds, 1))
    started = time.monotonic()
    try:
        target.trial(camp, trial, random.Random(seed), window)
    except Exception as exc:  # noqa: BLE001 -- a trial that breaks is a finding
        trial.problems.append(f"the trial broke: {type(exc).__name__}: {exc}"[:500])
    trial.seconds = round(time.monotonic() - started, 1)
    trial.finish()
    return trial


def run_campaign(config: Config, work_dir: Path, targets: list[Target], trials: int, seed: int,
                 report: Callable[[str], None] = print,
                 answers: int = ANSWER_SAMPLE) -> tuple[CampaignResult, list[dict]]:
    """Run *trials* trials of each of *targets* (``harness.kills.KILLS``,
    ``harness.outages.OUTAGES``); returns the trials and the table's rows, and writes
    ``results.json`` and ``table.md`` into *work_dir*."""
    t0 = time.time()
    camp = Campaign(config, work_dir, report, answers)
    camp.prepare()
    rng = random.Random(seed)
    windows: dict[str, Window] = {}
    done: list[Trial] = []
    missed: list[Trial] = []  # kills that came after the command's end, run again
    for target in targets:
        name = target.name
        report(f"{name}: measuring {target.command(camp)} without a kill")
        windows[name] = target.measure(camp)
        report(f"{name}: {windows[name]}")
        for number in range(trials):
            for attempt in range(MISS_RETRIES + 1):
                trial = _one_trial(camp, target, number, rng.randrange(1 << 30), windows[name])
                report(f"{name} #{number}: kill at {trial.kill_at_s} s of {trial.window_s} "
                       f"({', '.join(trial.landed)}): "
                       + ("clean" if trial.clean else "; ".join(trial.problems))
                       + f" [{trial.seconds:.0f} s]")
                if trial.rerun_s is not None:
                    # The machine is slower (or faster) than when the window was measured:
                    # follow it, else every kill lands in the start-up of a slowed command.
                    windows[name] = windows[name].scaled(trial.rerun_s)
                if trial.ran_s is None or attempt == MISS_RETRIES:
                    break
                # The machine runs faster than when the window was measured: shrink it.
                windows[name] = windows[name].scaled(trial.ran_s)
                missed.append(trial)
            done.append(trial)
    result = CampaignResult(seed, done, {k: asdict(v) for k, v in windows.items()},
                            round(time.time() - t0, 1))
    shared = str(camp.input_dir.parent)
    rows = result.rows({t.name: t.command(camp).replace(shared, "<state_dir>/faults")
                        for t in targets})
    work_dir.mkdir(parents=True, exist_ok=True)
    (work_dir / "results.json").write_text(json.dumps(
        {"seed": seed, "trials_per_target": trials, "seconds": result.seconds,
         "windows": result.windows, "rows": rows, "trials": [t.as_dict() for t in done],
         "missed": [t.as_dict() for t in missed]},
        indent=2) + "\n")
    (work_dir / "table.md").write_text(markdown(rows, seed, trials))
    return result, rows
