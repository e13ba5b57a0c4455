"""The driver JVM ends with its Python process, even when that process dies while the JVM is
still starting (docs/RELIABILITY.md, "Kill campaign"): before the gateway runs, pyspark's JVM
does not watch its stdin, and a hung start-up never would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness.procs import Proc, kill, processes, survivors, tree

REPO = Path(__file__).resolve().parent.parent
# A JVM that waits for a debugger before running anything: a start-up that never ends.
SUSPENDED_JVM = "-agentlib:jdwp=transport=dt_socket,server=y,suspend=y,address=127.0.0.1:0"


def _wait_for(what: str, found, timeout: float = 90.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what}: not seen within {timeout:.0f} s")


def _names(procs: list[Proc]) -> list[str]:
    return [p.describe() for p in procs]


def test_a_driver_killed_while_its_jvm_starts_leaves_no_spark_process():
    script = ("from debl.config import load_config\n"
              "from debl.spark.session import spark_session\n"
              "spark_session(load_config())\n")
    env = {**os.environ, "JAVA_TOOL_OPTIONS": SUSPENDED_JVM}
    driver = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, env=env,
                              start_new_session=True, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    started: list[Proc] = []
    try:
        _wait_for("a JVM started by spark-submit",
                  lambda: any(p.cmdline.startswith("java") or "/java " in p.cmdline
                               for p in tree(driver.pid)[1:]))
        started = tree(driver.pid)[1:]
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
        left = survivors(started, grace=10.0)
        assert left == [], f"outlived their driver: {_names(left)}"
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        kill(started)


def test_only_what_is_started_inside_the_block_ends_with_the_driver():
    script = ("import os, subprocess\n"
              "from debl.spark.jvm_reaper import OWNER_VAR, reaped_on_parent_death\n"
              "quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
              "outside = subprocess.Popen(['sleep', '120'], **quiet)\n"
              "with reaped_on_parent_death():\n"
              "    inside = subprocess.Popen(['sh', '-c', 'sleep 120 & wait'], **quiet)\n"
              "after = subprocess.Popen(['sleep', '120'], **quiet)\n"
              "assert OWNER_VAR not in os.environ\n"
              "print(outside.pid, inside.pid, after.pid, flush=True)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    outside, inside, after = (int(pid) for pid in done.stdout.split())
    running = processes()
    kept = [running[pid] for pid in (outside, after)]
    marked = [running[inside]] if inside in running else []  # already ended: as it must
    try:
        _wait_for("the marked child's end", lambda: not any(p.alive() for p in marked),
                  timeout=10.0)
        assert all(p.alive() for p in kept), "a process started outside the block was killed"
    finally:
        kill(kept + marked)
