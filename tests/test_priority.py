"""A service's CPU priority (``debl.priority``; docs/ONLINE.md, "Priority"): gen-hf niced,
the follower before the bulk work, and the processes each starts after (gen-hf's Spark JVM)
inherit it."""

import os
import subprocess
import sys

_CODE = ("import os, subprocess, sys\n"
         "from debl.priority import renice\n"
         "before = os.nice(0)\n"
         "said = renice(int(sys.argv[1]))\n"
         "child = subprocess.run([sys.executable, '-c', 'import os; print(os.nice(0))'],\n"
         "                       capture_output=True, text=True, check=True).stdout\n"
         "print(os.nice(0) - before, int(child) - before, said or '-')\n")


def _renice(nice: int) -> list[str]:
    done = subprocess.run([sys.executable, "-c", _CODE, str(nice)], capture_output=True,
                          text=True, check=True)
    return done.stdout.strip().split(maxsplit=2)


def test_a_service_raises_its_niceness_and_its_children_inherit_it():
    assert _renice(7) == ["7", "7", "-"]
    assert _renice(0) == ["0", "0", "-"]


def test_a_service_goes_before_the_others_where_it_may_and_says_so_where_it_may_not():
    done = _renice(-3)
    if os.geteuid() == 0:
        assert done == ["-3", "-3", "-"]
    else:  # no CAP_SYS_NICE for an ordinary user: as it was, with the reason
        assert done[:2] == ["0", "0"] and "CAP_SYS_NICE" in done[2]
