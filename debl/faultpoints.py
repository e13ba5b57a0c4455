"""Named points where a fault campaign kills the process that reaches them (docs/RELIABILITY.md,
"Kill campaign"): the windows of a few milliseconds between two steps that a kill at a random
moment almost never hits, such as between dist_ch's JVM job and the bucket index rows it yields.

``reached(config, name)`` does nothing unless ``config.fault_point`` names that point; then it
SIGKILLs its own process at once, as ``kill -9`` from outside would. Production runs never set
``fault_point`` (it is empty by default, and ``scripts/faults.py`` sets it through the
environment of the one command it aims at).
"""

from __future__ import annotations

import os
import signal

from debl.config import Config

POINTS = {
    "dist_ch-done": "a chunk's dist_ch job has written its bucket files; its index rows are not "
                    "recorded yet (a chunk's rows, jobs, counts and state are one transaction)",
    "hot-loaded": "the hot path's rows are in MySQL, ready to serve; its phase is not ended yet",
    "bulk-loaded": "a gen_HF run's HFiles are bulk-loaded into HBase; its buckets are not marked "
                   "loaded yet",
    "demand-copied": "a fetch on demand's chunk is in HDFS, its bytes taken from the bulk copy; "
                     "it is not recorded yet (docs/LOADING.md, \"The copy follows demand\")",
    "answerable": "a chunk is recorded as bucketed; the keys it makes answerable are not "
                  "published yet",
    "false-claim": "a chunk whose check found a manifest's claim false is recorded as "
                   "bucketed (its claim with it, in one transaction: recorded in a second one, "
                   "a kill here lost it)",
    "cleanup-marked": "cleanup marked a load dropping under the days lock; none of its stores "
                      "is dropped yet (docs/LOADING.md, \"Days\")",
    "cleanup-dropped": "cleanup dropped a load's stores; its dataset rows are not forgotten "
                       "and it is not marked dropped yet",
}


def reached(config: Config, name: str) -> None:
    """Kill this process now if *name* is the configured fault point."""
    if config.fault_point == name:
        os.kill(os.getpid(), signal.SIGKILL)
