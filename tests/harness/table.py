"""The campaign's table (docs/RELIABILITY.md): one row per target and fault, as data
(``CampaignResult.rows``) and as Markdown (``markdown``, through ``markdown_table``, which the
day operations' table uses too).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from harness.trial import Trial


@dataclass
class CampaignResult:
    seed: int
    trials: list[Trial]
    windows: dict[str, dict]
    seconds: float

    def rows(self, camp_commands: dict[str, str]) -> list[dict]:
        """One row per target and fault: the table of docs/RELIABILITY.md."""
        out = []
        for name in dict.fromkeys(t.target for t in self.trials):
            ts = [t for t in self.trials if t.target == name]
            judged = [t.clear for t in ts if t.clear is not None]
            out.append({
                "target": name, "fault": ts[0].fault, "trials": len(ts),
                "kill_points": sorted({p for t in ts for p in t.landed}),
                "lost": sum(t.lost for t in ts), "doubled": sum(t.doubled for t in ts),
                "orphans": sum(len(t.orphans) for t in ts),
                "clear": "n/a" if not judged else "yes" if all(judged) else "no",
                "clean": sum(t.clean for t in ts),
                "seconds_per_trial": round(statistics.mean(t.seconds for t in ts), 1),
                "command": camp_commands.get(name, ""),
            })
        return out


def markdown_table(head: list[str], rows: list[list[object]], right: set[int]) -> str:
    """A Markdown table: *head*, then *rows* (cells as text), the columns numbered in *right*
    aligned right (figures)."""
    rule = "|" + "|".join("---:" if i in right else "---" for i in range(len(head))) + "|"
    lines = ["| " + " | ".join(head) + " |", rule]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def markdown(rows: list[dict], seed: int, trials: int) -> str:
    """The campaign's table as Markdown."""
    head = ["target", "fault", "trials", "kill points covered", "rows lost", "rows doubled",
            "orphans", "clear message", "clean", "s / trial", "command"]
    cells = [[f"`{r['target']}`", r["fault"], r["trials"], "; ".join(r["kill_points"]),
              r["lost"], r["doubled"], r["orphans"], r["clear"],
              f"{r['clean']} of {r['trials']}", r["seconds_per_trial"], f"`{r['command']}`"]
             for r in rows]
    repro = (f"\nReproduce: `python scripts/faults.py --trials {trials} --seed {seed} "
             "--targets TARGET` (the target's command runs inside).\n")
    return markdown_table(head, cells, {2, 4, 5, 6, 8, 9}) + repro
