"""``debl ARGS...`` with MySQL's hot path held until a file exists, for tests that must act while
a load is up and MySQL has not taken the hot keys over (a kill -9 there, say):

    python -m tests.held_hot_load GATE_FILE load SOURCE ...

Everything else is the real command; only ``loaders.hot_phase.load_hot`` waits for the gate.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from loaders import hot_phase
from loaders.mysql_bulk import load_hot


def main() -> None:
    gate = Path(sys.argv[1])

    def held(*args, **kwargs):
        while not gate.exists():
            time.sleep(0.05)
        return load_hot(*args, **kwargs)

    hot_phase.load_hot = held
    from debl.cli import main as debl

    sys.argv = ["debl", *sys.argv[2:]]
    debl()


if __name__ == "__main__":
    main()
