"""The kill targets of the campaign (docs/RELIABILITY.md, "Kill campaign"): ``debl load``,
``debl gen-hf``, the query client's coordinators and ``debl bench``, each killed with ``kill -9``,
then recovered as the docs tell a user and checked (``Campaign.verify_and_compare``).

Per target, one run without a kill measures the command's duration first (a ``Window``); each
trial then kills at a moment uniform over it (for the ``-jvm`` targets: over the Spark driver
JVM's life, and the JVM is what is killed), or, for the ``-aimed`` targets, at a named point.
Every process of the killed command still alive after ``ORPHAN_GRACE_S`` is an orphan (and is
killed, so that the next trial starts clean). The recovery: ``debl load SOURCE --resume
LOAD_ID`` for a killed load (the same command again if it died before recording the load),
``debl gen-hf --until-complete`` again, the query client again with gen_HF running, the bench
again.

``Target`` and ``Window`` are also the base of the service outages (``harness.outages``).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from debl.catalog import Catalog, HotState, LoadState
from debl.faultpoints import POINTS
from harness import procs
from harness.campaign import Campaign
from harness.kill_points import GEN_HF_START, gen_hf_point, load_point
from harness.trial import MISSED, Step, Trial

# A killed command's processes end soon after it (docs/RELIABILITY.md, "Kill campaign": the
# Spark JVM within a second of its driver); this leaves room for a busy machine.
ORPHAN_GRACE_S = 15.0
MIN_TIMEOUT_S = 300.0  # every command's time limit is at least this, else 4x its measured run


@dataclass
class Window:
    """The measured run of a target's command: its duration, and when its Spark JVM lived
    (seconds after the start; None if it never had one)."""

    seconds: float
    jvm: tuple[float, float] | None = None

    def scaled(self, seconds: float) -> "Window":
        """The same run, measured again at *seconds*: the JVM's life scaled alike."""
        f = seconds / self.seconds
        return Window(seconds, None if self.jvm is None else (self.jvm[0] * f, self.jvm[1] * f))


class Target:
    """One kill target: ``measure`` once, then ``trial`` N times."""

    name = ""
    fault = ""

    def measure(self, camp: Campaign) -> Window:
        raise NotImplementedError

    def trial(self, camp: Campaign, trial: Trial, rng: random.Random, window: Window) -> None:
        raise NotImplementedError

    def command(self, camp: Campaign) -> str:
        raise NotImplementedError


def _watch(running: procs.Running, timeout: float) -> tuple[procs.Outcome, Window]:
    """Wait for a command while noting when its Spark JVM lives."""
    first = last = None
    deadline = time.monotonic() + timeout
    while not running.done() and time.monotonic() < deadline:
        if procs.spark_driver(running.tree()) is not None:
            t = running.elapsed()
            first = t if first is None else first
            last = t
        time.sleep(0.2)
    outcome = running.wait(max(0.0, deadline - time.monotonic()))
    return outcome, Window(outcome.seconds,
                           None if first is None or last is None else (first, last))


def _kill_at(camp: Campaign, running: procs.Running, trial: Trial, at: float, victim: str,
             probe: Callable[[], list[str]]) -> list[procs.Proc] | None:
    """Wait until *at* seconds after the start, note the kill point, and SIGKILL the victim
    (``main``: the command's process; ``jvm``: its Spark driver JVM, waiting for one to exist).
    Returns the process tree as it was at the kill, or None if the command ended first."""
    while running.elapsed() < at and not running.done():
        time.sleep(0.02)
    while victim == "jvm" and not running.done() and procs.spark_driver(running.tree()) is None:
        time.sleep(0.05)
    tree = [] if running.done() else running.tree()
    target = (tree[0] if tree else None) if victim == "main" else procs.spark_driver(tree)
    if target is None:  # the command (or its JVM) ended first, perhaps between the two looks
        trial.landed = [MISSED]
        trial.ran_s = running.elapsed()
        return None
    trial.landed = probe()
    trial.kill_at_s = round(running.elapsed(), 2)
    procs.kill([target])
    trial.victim = target.describe()
    return tree


def _orphans(trial: Trial, tree: list[procs.Proc], killed_pid: int | None = None) -> None:
    left = procs.survivors([p for p in tree if p.pid != killed_pid], ORPHAN_GRACE_S)
    trial.orphans = [p.describe() for p in left]
    procs.kill(left)


def _timeout(window: Window) -> float:
    return max(MIN_TIMEOUT_S, 4 * window.seconds)


class LoadTarget(Target):
    """``debl load`` (with hot files, or ``--no-hot``) killed, then resumed."""

    # A load buckets chunks of up to 8 MiB in its own process (docs/LOADING.md, "Answers
    # before the copy ends"): the campaign's small load may never need its JVM after the kill,
    # and then succeeds, rightly; the load is verified as any other.
    jvm_required = False

    def __init__(self, name: str, hot: bool, victim: str):
        self.name, self.hot, self.victim = name, hot, victim
        what = "debl load" + ("" if hot else " --no-hot")
        self.fault = f"kill -9 {what}" + (" (its Spark JVM)" if victim == "jvm" else "")

    def command(self, camp: Campaign) -> str:
        return "debl " + " ".join(camp.load_argv(self.hot))

    def measure(self, camp: Campaign) -> Window:
        running = camp.start(camp.load_argv(self.hot), f"{self.name}-measure")
        outcome, window = _watch(running, 1800.0)
        if not outcome.ok:
            raise RuntimeError(f"{self.command(camp)} failed without a kill:\n"
                               f"{outcome.output[-2000:]}")
        return window

    def strike(self, camp: Campaign, trial: Trial, rng: random.Random, window: Window,
               argv: list[str], probe: Callable[[], list[str]]) -> None:
        """Start the command and kill it (or its JVM) at a moment uniform over its run."""
        if self.victim == "main":
            lo, hi = 0.0, window.seconds
        else:
            assert window.jvm is not None, "the command ran no Spark JVM to kill"
            lo, hi = window.jvm
        at = rng.uniform(lo, hi)
        running = camp.start(argv, f"{self.name}-{trial.number}")
        tree = _kill_at(camp, running, trial, at, self.victim, probe)
        outcome = running.wait(_timeout(window))
        if tree is not None:
            if self.victim == "jvm":  # the command itself must fail, clearly and promptly
                trial.steps.append(Step.of(outcome))
                if outcome.ok and self.jvm_required:
                    trial.problems.append("the command succeeded although its Spark JVM was "
                                          "killed")
                elif outcome.ok:
                    trial.landed.append("the JVM was not needed after it")
            _orphans(trial, tree, running.pid if self.victim == "main" else None)

    def trial(self, camp: Campaign, trial: Trial, rng: random.Random, window: Window) -> None:
        before = getattr(camp.latest_load(), "load_id", None)
        argv = camp.load_argv(self.hot)
        self.strike(camp, trial, rng, window, argv, lambda: load_point(camp.config, before))
        # The recovery docs/LOADING.md gives: resume the load `debl status` names.
        load = camp.latest_load()
        if load is None or load.load_id == before:
            step = camp.run(argv, f"{self.name}-{trial.number}-again", _timeout(window))
            trial.steps.append(Step.of(step))
        elif load.state != LoadState.UP or load.hot_state in (HotState.LOADING, HotState.FAILED):
            # killed before uptime, or after it before MySQL took the hot keys over
            step = camp.run(argv + ["--resume", load.load_id],
                            f"{self.name}-{trial.number}-resume", _timeout(window))
            trial.steps.append(Step.of(step))
            if not step.ok:
                trial.problems.append("the resumed load failed")
        camp.verify_and_compare(trial, hbase=False, hot_bytes=camp.hot_bytes if self.hot else None)


class GenHFTarget(LoadTarget):
    """``debl gen-hf --until-complete`` killed in a run, then started again."""

    jvm_required = True  # every run writes its HFiles in it

    argv = ["gen-hf", "--until-complete"]

    def __init__(self, name: str, victim: str):
        self.name, self.victim = name, victim
        self.fault = "kill -9 debl gen-hf" + (" (its Spark JVM)" if victim == "jvm" else "")

    def command(self, camp: Campaign) -> str:
        return "debl gen-hf --until-complete"

    def measure(self, camp: Campaign) -> Window:
        camp.ensure_dataset()
        running = camp.start(self.argv, f"{self.name}-measure")
        outcome, window = _watch(running, 1800.0)
        if not outcome.ok:
            raise RuntimeError(f"debl gen-hf failed without a kill:\n{outcome.output[-2000:]}")
        return window

    def trial(self, camp: Campaign, trial: Trial, rng: random.Random, window: Window) -> None:
        camp.ensure_dataset()
        since = time.time()
        self.strike(camp, trial, rng, window, self.argv, lambda: gen_hf_point(camp.config, since))
        step = camp.run(self.argv, f"{self.name}-{trial.number}-again", _timeout(window))
        trial.steps.append(Step.of(step))
        if not step.ok:
            trial.problems.append("the restarted gen-hf failed")
        elif trial.landed == [GEN_HF_START]:
            trial.rerun_s = step.seconds
        camp.verify_and_compare(trial, hbase=True)


# Aimed kills: the points a kill at a random moment rarely or never hits. ("watch", label):
# killed as soon as the probe shows that label; ("hook", name): the command kills itself at
# debl.faultpoints' point *name*. Trial i aims at point i modulo their number.
LOAD_AIMS = [("watch", "hot: LOAD DATA"), ("watch", "hot: parsing and streaming"),
             ("hook", "hot-loaded"), ("watch", "copy"), ("watch", "dist_ch"),
             ("hook", "dist_ch-done"), ("watch", "after uptime, before MySQL took over")]
GEN_HF_AIMS = [("watch", "HFile writing"), ("watch", "bulk load"), ("hook", "bulk-loaded")]


class _Aimed:
    """A LoadTarget or GenHFTarget whose kill is aimed at a point instead of a moment."""

    aims: list[tuple[str, str]] = []
    name: str  # the target's

    def strike(self, camp: Campaign, trial: Trial, rng: random.Random, window: Window,
               argv: list[str], probe: Callable[[], list[str]]) -> None:
        how, point = self.aims[trial.number % len(self.aims)]
        extra = {"DEBL_FAULT_POINT": point} if how == "hook" else {}
        running = camp.start(argv, f"{self.name}-{trial.number}", **extra)
        seen: dict[tuple[int, float], procs.Proc] = {}  # every process of its tree, while it ran
        deadline = time.monotonic() + _timeout(window)
        while not running.done() and time.monotonic() < deadline:
            for p in running.tree():
                seen[(p.pid, p.start)] = p
            if how == "watch" and point in probe():
                tree = running.tree()
                trial.landed = probe()
                trial.kill_at_s = round(running.elapsed(), 2)
                procs.kill(tree[:1])
                trial.victim = tree[0].describe()
                running.wait(60.0)
                _orphans(trial, tree, running.pid)
                return
            time.sleep(0.01 if how == "watch" else 0.2)
        outcome = running.wait(max(0.0, deadline - time.monotonic()))
        if how == "hook" and outcome.returncode == -9:  # it killed itself at the point
            trial.landed = [POINTS[point]]
            trial.kill_at_s = round(outcome.seconds, 2)
            trial.victim = f"itself at {point}"
            _orphans(trial, list(seen.values()), running.pid)
            return
        trial.landed = [MISSED]
        trial.problems.append(f"the aimed point {point!r} was never reached (the command "
                              f"ended with {outcome.returncode})")


class AimedLoadTarget(_Aimed, LoadTarget):
    aims = LOAD_AIMS

    def __init__(self, name: str):
        super().__init__(name, hot=True, victim="main")
        self.fault = "kill -9 debl load, aimed at a point"


class AimedGenHFTarget(_Aimed, GenHFTarget):
    aims = GEN_HF_AIMS

    def __init__(self, name: str):
        super().__init__(name, victim="main")
        self.fault = "kill -9 debl gen-hf, aimed at a point"


class CoordinatorTarget(Target):
    """The query client's coordinators killed while they hold buffered queries: even trials
    kill one worker process (its client must fail clearly, not hang), odd trials the client
    itself (its workers must not outlive it). Then the client again with gen_HF running: every
    buffered query is answered."""

    name = "coordinator"
    fault = "kill -9 a coordinator holding buffered queries (debl query --target debl)"

    def argv(self, seed: int) -> list[str]:
        return ["query", "--target", "debl", "--threads", "4", "--processes", "2",
                "--requests", "32", "--seed", str(seed), "--json"]

    def command(self, camp: Campaign) -> str:
        return "DEBL_COORDINATOR_RAW_AFTER=off debl " + " ".join(self.argv(1))

    def measure(self, camp: Campaign) -> Window:
        return Window(3.0)  # the kill comes within this after the first buffered query

    def trial(self, camp: Campaign, trial: Trial, rng: random.Random, window: Window) -> None:
        camp.ensure_dataset()
        argv = self.argv(trial.seed)
        running = camp.start(argv, f"{self.name}-{trial.number}", DEBL_COORDINATOR_RAW_AFTER="off")
        deadline = time.monotonic() + 120.0
        load_id = camp.current_load().load_id
        # Wait for this client's own buffered queries: the rows of a coordinator killed in an
        # earlier trial stay in the demand table for a minute, and a kill timed by them came
        # while the client was starting, before it had any worker to kill.
        with Catalog(camp.config) as catalog:
            while _buffered(catalog, running, load_id) == 0 and not running.done() and \
                    time.monotonic() < deadline:
                time.sleep(0.1)
        at = running.elapsed() + rng.uniform(0.0, window.seconds)
        victim = "worker" if trial.number % 2 == 0 else "client"
        while running.elapsed() < at and not running.done():
            time.sleep(0.02)
        if running.done():
            trial.landed = [MISSED]
            trial.steps.append(Step.of(running.wait(0)))
        else:
            tree = running.tree()
            workers = _workers(running, tree)
            with Catalog(camp.config) as catalog:
                waiting = _buffered(catalog, running, load_id, tree)
            trial.landed = [f"{victim} killed, {waiting} queries buffered"]
            target = rng.choice(workers) if victim == "worker" and workers else tree[0]
            trial.kill_at_s = round(running.elapsed(), 2)
            procs.kill([target])
            trial.victim = target.describe()
            outcome = running.wait(60.0)
            if target is not tree[0]:  # the client saw its worker die
                trial.steps.append(Step.of(outcome))
                if outcome.ok:
                    trial.problems.append("the client succeeded although a worker was killed")
            _orphans(trial, tree, target.pid)
        # Restart: gen_HF converts, the client asks again; every query must be answered.
        gen_hf = camp.start(["gen-hf", "--until-complete"], f"{self.name}-{trial.number}-gen-hf")
        again = camp.run(argv, f"{self.name}-{trial.number}-again", 600.0,
                         DEBL_COORDINATOR_RAW_AFTER="off")
        trial.steps.append(Step.of(again))
        if again.ok:
            result = _json_tail(again.output)
            if result["errors"] or result["completed"] != 32:
                trial.problems.append(f"restarted client: {result['completed']} answered, "
                                      f"{result['errors']} errors")
        else:
            trial.problems.append("the restarted client failed")
        trial.steps.append(Step.of(gen_hf.wait(600.0)))
        camp.verify_and_compare(trial, hbase=True)


def _workers(running: procs.Running, tree: list[procs.Proc]) -> list[procs.Proc]:
    """The query client's worker processes in *tree*: the children of its forkserver."""
    return [p for p in tree if p.ppid != running.pid and p.pid != running.pid
            and "forkserver" in p.cmdline
            and any(q.pid == p.ppid and "forkserver" in q.cmdline for q in tree)]


def _buffered(catalog: Catalog, running: procs.Running, load_id: str,
              tree: list[procs.Proc] | None = None) -> int:
    """The queries the client's workers hold buffered now, from the demand they published (a
    coordinator's id holds its process's pid: ``coordinator.demand.new_coordinator_id``)."""
    pids = {str(p.pid) for p in _workers(running, running.tree() if tree is None else tree)}
    if not pids:
        return 0
    rows = catalog.serving.published_demand(load_id, max_age=60.0)
    return sum(r.waiting for r in rows if r.coordinator.rsplit("-", 2)[-2] in pids)


class BenchTarget(Target):
    """A small ``debl bench`` (debl only) killed anywhere, then run again."""

    name = "bench"
    fault = "kill -9 debl bench"

    def argv(self, camp: Campaign) -> list[str]:
        return ["bench", "--approaches", "debl", "--max-id", "12001", "--max-degree", "40",
                "--files", "4", "--days", "4", "--threads", "4", "--requests", "200",
                "--buckets", "4", "--data", str(camp.input_dir.parent / "bench-input"),
                "--no-report", "--json"]

    def command(self, camp: Campaign) -> str:
        return "debl " + " ".join(self.argv(camp))

    def measure(self, camp: Campaign) -> Window:
        running = camp.start(self.argv(camp), f"{self.name}-measure")
        outcome, window = _watch(running, 1800.0)
        if not outcome.ok:
            raise RuntimeError(f"debl bench failed without a kill:\n{outcome.output[-2000:]}")
        return window

    def trial(self, camp: Campaign, trial: Trial, rng: random.Random, window: Window) -> None:
        at = rng.uniform(0.0, window.seconds)
        before = getattr(camp.latest_load(), "load_id", None)
        running = camp.start(self.argv(camp), f"{self.name}-{trial.number}")
        tree = _kill_at(camp, running, trial, at, "main", lambda: _bench_point(camp, before))
        running.wait(_timeout(window))
        if tree is not None:
            _orphans(trial, tree, running.pid)
        again = camp.run(self.argv(camp), f"{self.name}-{trial.number}-again", _timeout(window))
        trial.steps.append(Step.of(again))
        if not again.ok:
            trial.problems.append("the bench run again failed")
            return
        data = camp.input_dir.parent / "bench-input"
        bench_json = Path(_json_tail(again.output)["directory"]) / "bench.json"
        hot = json.loads(bench_json.read_text())["effective"]["hot_bytes"]["debl"]
        # The bench served its input over HTTP while it ran: the source is gone now, the
        # reference reads the directory itself.
        camp.verify_and_compare(trial, hbase=True, directory=data, hot_bytes=hot, source=False)


def _bench_point(camp: Campaign, before: str | None) -> list[str]:
    load = camp.latest_load()
    if load is None or load.load_id == before:
        return ["before the load (input, Spark start, reset)"]
    if load.state != LoadState.UP or load.hot_state == HotState.LOADING:
        return ["load: " + p for p in load_point(camp.config, before)]
    return ["query phase / gen_HF (after uptime)"]


def _json_tail(output: str) -> dict:
    """The JSON document a ``--json`` command printed last (its progress lines come before)."""
    lines = output.splitlines()
    start = max(i for i, line in enumerate(lines) if line == "{")
    return json.loads("\n".join(lines[start:]))


KILLS: dict[str, Target] = {t.name: t for t in [
    LoadTarget("load", hot=True, victim="main"),
    LoadTarget("load-jvm", hot=True, victim="jvm"),
    LoadTarget("load-cold", hot=False, victim="main"),
    AimedLoadTarget("load-aimed"),
    GenHFTarget("gen-hf", victim="main"),
    GenHFTarget("gen-hf-jvm", victim="jvm"),
    AimedGenHFTarget("gen-hf-aimed"),
    CoordinatorTarget(),
    BenchTarget(),
]}
