"""``debl ARGS...`` held at one point until a file exists, for tests that must act while a
command is there (kill its lock's session, run another command beside it):

    python -m tests.held_load POINT GATE_FILE load SOURCE ...

POINT is a fault point of ``debl.faultpoints`` (``dist_ch-done``, ``hot-loaded``,
``bulk-loaded``): the command waits there instead of being killed. Everything else is the real
command. (MySQL's hot path alone: tests/held_hot_load.py.)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from debl.faultpoints import POINTS
from loaders import gen_hf, hot_phase, pipeline


def main() -> None:
    point, gate = sys.argv[1], Path(sys.argv[2])
    if point not in POINTS:
        raise SystemExit(f"unknown point {point!r}: one of {', '.join(POINTS)}")

    def held(config, name: str) -> None:
        if name == point:
            while not gate.exists():
                time.sleep(0.05)

    for module in (pipeline, hot_phase, gen_hf):
        module.reached = held  # type: ignore[attr-defined]  # the fault point each one imported
    from debl.cli import main as debl

    sys.argv = ["debl", *sys.argv[3:]]
    debl()


if __name__ == "__main__":
    main()
