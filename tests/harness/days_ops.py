"""The day operations (docs/RELIABILITY.md, "Day operations"): what people run at any moment
while clients ask, drawn at random (``draw``) and run in turn (``Operations.run``).

- ``next-day``: the next day's ``debl load``, in the background (beside a running load too,
  which must then be refused with a clear message);
- ``kill-load``: kill -9 a running load (the command, or its Spark JVM; with no load running,
  the next day's is started and killed at a moment uniform over a load's measured run);
- ``resume``: ``debl load SOURCE --resume ID`` of the newest load (in the background; refused
  clearly when there is nothing to resume or it still runs);
- ``rollback``: ``debl rollback`` (refused clearly when the previous day was dropped), half of
  the time with a ``debl cleanup`` started at the same moment; while a new day loads, once it
  is up;
- ``cleanup``: ``debl cleanup``, with ``--wait`` or without;
- ``kill-cleanup``: ``debl cleanup`` killed at one of its fault points while it drops the
  previous day (marked dropping, or its stores dropped and it not marked dropped yet), then
  ``debl rollback``, which must not serve that day, and ``debl cleanup --wait``, which must
  finish its drop;
- ``gen-hf``: the gen_HF service started (``debl gen-hf``), or a second one beside it, which must
  be refused;
- ``kill-gen-hf``: kill -9 the gen_HF service or its Spark JVM (a supervisor starts it again
  after the step);
- ``restart``: ``debl stack stop SERVICE [--crash]``, a pause, ``debl stack start SERVICE``, for
  MariaDB, HDFS (and HBase on it, whose write-ahead log pointed at the dead DataNode), HBase or
  Thrift; the time from the stop to the start's end is an outage window;
- ``kill-client``: kill -9 a client process and start it again.

Each operation records in its ``OpRecord`` what it ran and found; commands it leaves running
are judged when they end (``harness.days_checks.judge``).
"""

from __future__ import annotations

import random
import statistics
import time

from debl.catalog import Catalog, HotState, LoadState
from debl.errors import DeblError
from harness import procs
from harness.days_checks import judge_step, stores_left
from harness.days_clients import ClientPool
from harness.days_world import Background, OpRecord, World
from harness.kill_points import gen_hf_point, load_point
from harness.kills import ORPHAN_GRACE_S
from harness.trial import Step

# Relative weights of the draw: loads and the operations around them most often.
OPERATIONS = {"next-day": 3.0, "kill-load": 2.0, "resume": 2.0, "rollback": 2.0, "cleanup": 2.0,
              "kill-cleanup": 1.5, "gen-hf": 1.0, "kill-gen-hf": 1.5, "restart": 1.5,
              "kill-client": 1.0}
SERVICES = ("mariadb", "hdfs", "hbase", "thrift")
JVM_SHARE = 0.3  # of kills that take the Spark JVM rather than the command
RACE_SHARE = 0.5  # of rollbacks with a cleanup started at the same moment
COMMAND_S = 300.0  # time limit of a foreground command
# Where kill-cleanup's cleanup kills itself (debl.faultpoints): before any store of the day
# goes, and after they all went but before the day is marked dropped.
CLEANUP_POINTS = ("cleanup-marked", "cleanup-dropped")


def draw(rng: random.Random, n: int, allowed: tuple[str, ...] = ()) -> list[str]:
    """*n* operations drawn with OPERATIONS' weights among *allowed* (all when empty)."""
    names = [op for op in OPERATIONS if not allowed or op in allowed]
    return rng.choices(names, weights=[OPERATIONS[op] for op in names], k=n)


class Operations:
    """The operations of one sequence, on *world*'s processes and *clients*."""

    def __init__(self, world: World, clients: ClientPool, rng: random.Random):
        self.world, self.clients, self.rng = world, clients, rng

    @property
    def camp(self):
        return self.world.camp

    def run(self, op: OpRecord) -> None:
        op.started = time.time()
        try:
            getattr(self, op.name.replace("-", "_"))(op)
        except DeblError as exc:  # the campaign's own reads of the catalog, in an outage
            op.notes.append(f"the operation could not read the catalog: {exc}"[:300])
        finally:
            op.ended = time.time()

    def _command(self, op: OpRecord, argv: list[str], name: str,
                 expect: str = "ok") -> procs.Outcome:
        """Run a command in the foreground and judge it (``expect`` as for ``Background``)."""
        started = time.time()
        outcome = self.camp.run(argv, f"{op.index:02d}-{name}", COMMAND_S)
        op.steps.append(Step.of(outcome))
        judge_step(self.world, op, op.steps[-1], expect, started)
        return outcome

    # -- loads

    def next_day(self, op: OpRecord) -> None:
        busy = self.world.running_loads()
        day = self.world.take_input()
        self.world.start("load", day.load_argv(self.world.spec.chunk), op,
                         "either" if busy else "ok", day)
        op.detail = f"input {day.number}" + (" beside a running load" if busy else "")
        op.label = "beside a running load" if busy else "alone"

    def kill_load(self, op: OpRecord) -> None:
        busy = self.world.running_loads()
        if busy:
            bg = self.rng.choice(busy)
        else:
            day = self.world.take_input()
            bg = self.world.start("load", day.load_argv(self.world.spec.chunk), op, "ok", day)
            at = self.rng.uniform(1.0, statistics.median(self.world.load_seconds))
            while bg.running.elapsed() < at and not bg.running.done():
                time.sleep(0.05)
        self._kill(op, bg, lambda: load_point(self.world.config, bg.before), "load")

    def resume(self, op: OpRecord) -> None:
        newest = self.camp.latest_load()
        if newest is None:
            op.notes.append("no load to resume")
            return
        day = self.world.day_of_source(newest.source)
        busy = self.world.running_loads()
        resumable = newest.dropping is None and newest.dropped is None and (
            newest.state != LoadState.UP
            or newest.hot_state in (HotState.LOADING, HotState.FAILED))
        self.world.start("resume", day.load_argv(self.world.spec.chunk)
                         + ["--resume", newest.load_id], op,
                         "ok" if resumable and not busy else "either", day)
        op.label = ("of a load killed or failed" if resumable else "of a load up")
        op.label += " beside a running load" if busy else ""
        op.detail = (f"{newest.load_id} ({newest.state}, hot {newest.hot_state})"
                     + (" beside a running load" if busy else ""))

    # -- the days

    def rollback(self, op: OpRecord) -> None:
        """``debl rollback``; RACE_SHARE of the time with a ``debl cleanup`` started at the
        same moment (two people at once: cleanup must never drop the day rollback makes
        current). While a new day loads and nothing could be rolled back to, it waits for
        that day to be up, then up to ``look_s`` more (someone who found the new day bad): about
        ``keep_previous_load`` later, the previous day may be kept or dropped, or be dropped
        by a cleanup racing this one."""
        race = self.rng.random() < RACE_SHARE
        busy = self.world.running_loads()
        if busy and self._previous() is None:
            deadline = time.monotonic() + COMMAND_S
            while self._previous() is None and any(not b.running.done() for b in busy) \
                    and time.monotonic() < deadline:
                time.sleep(0.5)
            time.sleep(self.rng.uniform(0.0, self.world.spec.look_s))
        started = time.time()
        racing = self.camp.start(["cleanup"], f"{op.index:02d}-cleanup-racing") if race else None
        outcome = self._command(op, ["rollback"], "rollback", expect="either")
        op.detail = ("racing a cleanup: " if race else "") + _last_line(outcome.output)
        op.label = ("rolled back" if outcome.ok else "refused") + (", racing a cleanup"
                                                                   if race else "")
        if racing is not None:
            op.steps.append(Step.of(racing.wait(COMMAND_S)))
            judge_step(self.world, op, op.steps[-1], "ok", started)
            op.detail += f"; cleanup: {_last_line(racing.output())}"

    def _previous(self) -> str | None:
        with Catalog(self.world.config) as catalog:
            return catalog.loads.previous()

    def cleanup(self, op: OpRecord) -> None:
        wait = self.rng.random() < 0.5
        outcome = self._command(op, ["cleanup"] + (["--wait"] if wait else []), "cleanup")
        op.detail = ("--wait: " if wait else "") + _last_line(outcome.output)
        op.label = ("--wait, " if wait else "") + _dropped(outcome.output)

    def kill_cleanup(self, op: OpRecord) -> None:
        """``debl cleanup`` with ``keep_previous_load`` 0 (someone frees the previous day now)
        killed at one of CLEANUP_POINTS while it drops the previous day, then
        ``debl rollback`` and ``debl cleanup --wait``. Set up so that the previous day is the
        killed cleanup's first drop: the running loads waited for, a cleanup of what may go
        already, the next day loaded if there is no previous one. Right: killed, the day is
        marked dropping; the rollback refuses it (never a current day with a drop begun); the
        second cleanup finishes the drop (marked dropped, no store left)."""
        self._loads_ended()
        self._command(op, ["cleanup"], "cleanup-before")
        if self._previous() is None:
            day = self.world.take_input()
            self._command(op, day.load_argv(self.world.spec.chunk), "next-day")
        point = self.rng.choice(CLEANUP_POINTS)
        started = time.time()
        now_config = self.world.config.replace(loading_keep_previous_load=0.0, fault_point=point)
        outcome = procs.run(["cleanup"], now_config.child_env(),
                            self.camp.log(f"{op.index:02d}-cleanup-killed"), COMMAND_S,
                            cwd=self.camp.work_dir)
        op.steps.append(Step.of(outcome))
        with Catalog(self.world.config) as catalog:
            dropping = [d.load_id for d in catalog.loads.being_dropped()]
        if outcome.returncode == -9:  # it killed itself at the point
            op.label = f"killed at {point}"
            if not dropping:
                op.problems.append(f"cleanup killed at {point} left no load marked dropping")
        else:  # nothing dropped: the gen_HF service's cleanup was first, or a coordinator
            # still served the day
            judge_step(self.world, op, op.steps[-1], "ok", started)
            op.label = f"not killed ({_dropped(outcome.output)})"
        rolled = self._command(op, ["rollback"], "rollback-after-kill", expect="either")
        now = self.camp.current_load()
        if now.dropping is not None or now.dropped is not None:
            op.problems.append(f"rollback made current {now.load_id}, whose stores cleanup "
                               "began dropping")
        op.label += "; rollback " + ("done" if rolled.ok else "refused")
        finish = self._command(op, ["cleanup", "--wait"], "cleanup-after-kill")
        with Catalog(self.world.config) as catalog:
            after = [catalog.loads.get(load_id) for load_id in dropping]
        for load in after if finish.ok else []:
            left = stores_left(self.world.config, load)
            if load.dropped is None or left:
                op.problems.append(f"the cleanup after the kill did not finish the drop of "
                                   f"{load.load_id}: " + (", ".join(left) or "not marked "
                                                          "dropped"))
        op.detail = (f"{op.label}, dropping {', '.join(dropping) or 'none'}; rollback: "
                     f"{_last_line(rolled.output)}; then: {_last_line(finish.output)}")

    def _loads_ended(self) -> None:
        """Wait (at most COMMAND_S) for the running loads to end."""
        deadline = time.monotonic() + COMMAND_S
        while self.world.running_loads() and time.monotonic() < deadline:
            time.sleep(0.5)

    # -- gen_HF

    def gen_hf(self, op: OpRecord) -> None:
        if not self.world.gen_hf_running():
            self.world.start("gen-hf", ["gen-hf"], op, "ok")
            op.detail = op.label = "the service started"
            return
        outcome = self._command(op, ["gen-hf", "--until-complete"], "gen-hf-second",
                                expect="either")
        op.detail = "a second one beside the service: " + _last_line(outcome.output)
        op.label = "a second one: " + ("refused" if not outcome.ok else "ran")

    def kill_gen_hf(self, op: OpRecord) -> None:
        if not self.world.gen_hf_running():
            self.world.start("gen-hf", ["gen-hf"], op, "ok")
            time.sleep(self.rng.uniform(3.0, 30.0))
        bg = self.world.gen_hf
        since = bg.started
        self._kill(op, bg, lambda: gen_hf_point(self.world.config, since), "gen-hf")

    # -- kills

    def _kill(self, op: OpRecord, bg: Background, probe, what: str) -> None:
        """kill -9 *bg*'s command or (JVM_SHARE of the time, if it has one) its Spark JVM;
        the command must then fail clearly. Orphans are processes of its tree still alive
        ORPHAN_GRACE_S after."""
        if bg.running.done():
            op.detail = op.label = f"the {what} ended before the kill"
            return
        tree = bg.running.tree()
        jvm = procs.spark_driver(tree)
        victim = jvm if jvm is not None and self.rng.random() < JVM_SHARE else tree[0]
        try:
            landed = "; ".join(probe())
        except DeblError as exc:
            landed = f"unknown ({str(exc)[:80]})"
        procs.kill([victim])
        op.detail = f"{victim.describe()} at {bg.running.elapsed():.1f} s: {landed}"
        op.label = ("its Spark JVM" if victim is not tree[0] else "the command") + f": {landed}"
        if victim is tree[0]:
            bg.killed = True
        else:
            bg.expect = "fail"  # its JVM gone, the command must say so
        outcome = bg.running.wait(COMMAND_S)
        if outcome.hung:
            op.problems.append(f"the {what} still ran {COMMAND_S:.0f} s after the kill")
        left = procs.survivors([p for p in tree if p.pid not in (victim.pid, tree[0].pid)],
                               ORPHAN_GRACE_S)
        op.orphans += [p.describe() for p in left]
        procs.kill(left)

    def kill_client(self, op: OpRecord) -> None:
        described, tree = self.clients.kill(self.rng)
        op.detail, op.label = described, "a client process"
        left = procs.survivors(tree[1:], ORPHAN_GRACE_S)
        op.orphans += [p.describe() for p in left]
        procs.kill(left)

    # -- services

    def restart(self, op: OpRecord) -> None:
        service = self.rng.choice(SERVICES)
        crash = self.rng.random() < 0.5
        down = time.time()
        stop = ["stack", "stop", service] + (["--crash"] if crash else [])
        self._command(op, stop, f"stop-{service}")
        time.sleep(self.rng.uniform(0.0, 5.0))
        self._command(op, ["stack", "start", service], f"start-{service}")
        if service == "hdfs":  # HBase lives on HDFS: started again on the new DataNode
            self._command(op, ["stack", "stop", "hbase"], "stop-hbase")
            self._command(op, ["stack", "start", "hbase"], "start-hbase")
        self.world.windows.append((service, down, time.time()))
        op.detail = f"{service}{' --crash' if crash else ''}, down {time.time() - down:.1f} s"
        op.label = f"{service}{' --crash' if crash else ''}"


def _dropped(output: str) -> str:
    """``debl cleanup``'s count, as a label: "dropped N"."""
    line = _last_line(output)
    return " ".join(line.split()[:5:4]) if line.startswith("dropped the stores of") else "failed"


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""
