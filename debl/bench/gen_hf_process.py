"""gen_HF during a bench: ``debl gen-hf --until-complete`` as a subprocess with its own Spark JVM,
in the bench's namespace (``Config.child_env`` hands the config over as ``DEBL_*`` variables).

When it starts: ``gen_hf_start="load"`` (the default) spawns it as soon as the load is recorded,
as an always-running gen_HF service is, and as the bench starts the loads' own Spark before the
first load (its JVM start then competes with the load for the CPUs); ``gen_hf_start="uptime"``
spawns it at uptime, so its JVM start falls on the first queries and slows the raw route's
answers then (docs/BENCHMARKS.md, "When gen_HF starts", measures by how much).

Pitfall: a subprocess that exits with an error (a crash, or the lock of the namespace still held
by an earlier gen_HF) is restarted a few times, 5 s apart; its log is kept
(``debl.bench.service_process``).
"""

from __future__ import annotations

from pathlib import Path

from debl.bench.service_process import ServiceProcess
from debl.config import Config


class GenHFProcess(ServiceProcess):
    """``debl gen-hf --until-complete`` (with *until_complete* False: a service that follows
    day after day) as a subprocess with its own Spark JVM, in *config*'s namespace; gen_HF's
    *order*. ``wait`` returns its record with the order."""

    name = "gen-hf"

    def __init__(self, config: Config, order: str, log: Path, report=lambda text: None,
                 until_complete: bool = True):
        super().__init__(config, ["gen-hf", *(["--until-complete"] if until_complete else []),
                                  "--order", order, "--exit-with-parent"], log, report)
        self.order = order

    def wait(self, timeout: float) -> dict:
        return {"order": self.order, **super().wait(timeout)}
