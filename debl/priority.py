"""A service's CPU priority (docs/ONLINE.md, "Priority"): ``debl gen-hf`` yields the cores to
the answers (niceness up), ``debl follow`` goes before the bulk work (niceness down), since
every fresh answer waits for what it has captured (docs/FRESHNESS.md, "Capture: `debl
follow`").

Pitfalls: with the kernel's autogroup scheduling, niceness only weighs within a session, and
every session gets an equal share of the cores; a service that leads its own session (started
by the bench or a supervisor with setsid) sets its session's group niceness too. One started
from a terminal leaves the terminal's group alone (it would move everything else started from
there). Going below 0 needs root or CAP_SYS_NICE: without it the priority stays as it is and
``renice`` says so.
"""

from __future__ import annotations

import os
from pathlib import Path

_AUTOGROUP = Path("/proc/self/autogroup")


def renice(nice: int) -> str | None:
    """Add *nice* to this process's niceness (and its session group's, see the module); the
    processes it starts after inherit it. 0 leaves it as it is. The reason it could not, if
    it could not (a negative *nice* without the right to it), else None."""
    if nice == 0:
        return None
    try:
        os.nice(nice)
    except PermissionError:
        return (f"niceness {nice} refused (it needs root or CAP_SYS_NICE): running at the "
                "usual priority")
    if os.getsid(0) == os.getpid() and _AUTOGROUP.exists():
        try:
            _AUTOGROUP.write_text(f"{nice}\n")
        except OSError:  # a kernel without the knob's write: the niceness above still holds
            pass
    return None
