"""The kill campaign (docs/RELIABILITY.md, "Kill campaign"): N trials per target, each one
``kill -9`` at a random moment of a real ``debl`` command, then the recovery the docs tell a
user, ``debl verify``, and the stores and answers against the in-memory reference.

A campaign works in a namespace of its own (``<mysql_database>_faults``, HBase table and MySQL
link table ``faults_links``, HDFS root ``<hdfs_root>-faults``), on an input it generates once
(``debl generate``: a change log with updates, hidden rows and a few bad lines, a few MB, the
newest files hot), with small chunks and buckets so that a few MB still make several of each.

Per target, one run without a kill measures the command's duration first; each trial then
kills at a moment uniform over it (for the ``-jvm`` targets: over the Spark driver JVM's life,
and the JVM is what is killed). What the catalog (open phases, chunk and job states) and
MySQL's process list showed at that moment names the kill point. Then:

- every process of the killed command still alive after ``ORPHAN_GRACE_S`` is an orphan (and
  is killed, so that the next trial starts clean);
- the recovery: ``debl load SOURCE --resume LOAD_ID`` for a killed load (the same command
  again if it died before recording the load), ``debl gen-hf --until-complete`` again, the
  query client again with gen_HF running, the bench again;
- ``debl verify``, then ``debl.faults.checks``: rows lost and doubled in MySQL, HDFS and HBase,
  answers through the coordinator.

A command that fails must say why (``procs.clear_failure``); one that runs past its time limit
hung. A trial is clean when nothing was lost, doubled, left running or unclear.

Pitfall: the campaign replaces its namespace's dataset on every load; never point it at a
namespace in use.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from debl.bench.inputs import ensure_input
from debl.bench.results import ReportProgress
from debl.catalog import Catalog
from debl.config import Config
from debl.errors import CatalogVersionError
from debl.faultpoints import POINTS
from debl.faults import procs
from debl.faults.checks import (Reference, all_loaded, check_answers, check_hbase, check_hdfs,
                                check_mysql)
from debl.store.hbase import HBaseStore
from debl.webhdfs import WebHDFS
from debl.workload.spec import GenerateSpec
from loaders.source import LocalSource

MISSED = "after the command ended"  # the kill moment fell after the run: no kill
MISS_RETRIES = 2  # a trial whose kill missed is run again (with the window re-measured)
ORPHAN_GRACE_S = 15.0  # a JVM notices its dead parent within a second or two
MIN_TIMEOUT_S = 300.0  # every command's time limit is at least this, else 4x its measured run

# The campaign's input: ~3.7 MB in 6 daily files, updates across files, hidden rows, bad lines.
INPUT = GenerateSpec(max_id=40001, files=6, days=6, seed=7, update_share=0.2, hidden_share=0.3,
                     bad_lines=5, max_degree=60)
HOT_FILES = 2  # the newest files are hot
CHUNK = "512KiB"  # ~5 cold chunks
BUCKETS = 6  # cold bytes / bucket_target_bytes
ANSWER_SAMPLE = 200  # keys asked through the coordinator per trial


# ---------------------------------------------------------------------------- results


@dataclass
class Step:
    """One command of a trial: what ran, how it ended."""

    command: str
    returncode: int | None
    seconds: float
    hung: bool = False
    clear: bool | None = None  # a failure with a clear message (None: it did not fail)
    message: str = ""  # its last lines when it failed

    @staticmethod
    def of(outcome: procs.Outcome, expect_failure: bool = False) -> "Step":
        failed = not outcome.ok
        tail = "\n".join(outcome.output.strip().splitlines()[-3:]) if failed else ""
        return Step(outcome.command(), outcome.returncode, round(outcome.seconds, 1),
                    outcome.hung, procs.clear_failure(outcome) if failed else None, tail)


@dataclass
class Trial:
    """One trial of one target; ``problems`` says in words why it is not clean."""

    target: str
    fault: str
    number: int
    seed: int
    window_s: float = 0.0
    kill_at_s: float | None = None  # seconds after the command started
    victim: str = ""
    landed: list[str] = field(default_factory=list)  # the kill point(s)
    steps: list[Step] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    verify_ok: bool | None = None
    verify_failures: list[str] = field(default_factory=list)
    lost: int = 0
    doubled: int = 0
    answers: int = 0
    wrong_answers: int = 0
    left_unread: list[str] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)
    hung: bool = False
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)
    ran_s: float | None = None  # the command's whole run, when it ended before the kill
    # A recovery that redid the whole command (the kill came before any of its work): a fresh
    # measure of the command's duration on the machine as loaded now.
    rerun_s: float | None = None
    failed_after_s: float | None = None  # a service outage: from the kill to the failure

    @property
    def clear(self) -> bool | None:
        """Every failure a user met said what happened (None: nothing failed but the kill)."""
        judged = [s.clear for s in self.steps if s.clear is not None]
        return all(judged) if judged else None

    @property
    def clean(self) -> bool:
        return not self.problems

    def finish(self) -> None:
        """Fill ``problems`` from the results."""
        p = self.problems
        if self.hung or any(s.hung for s in self.steps):
            p.append("a command hung")
        if self.clear is False:
            p.append("a failure without a clear message")
        if self.orphans:
            p.append(f"orphans: {', '.join(self.orphans)}")
        if self.verify_ok is False:
            p.append(f"verify: {'; '.join(self.verify_failures[:3])}")
        if self.lost:
            p.append(f"{self.lost} rows lost")
        if self.doubled:
            p.append(f"{self.doubled} rows doubled")
        if self.wrong_answers:
            p.append(f"{self.wrong_answers} of {self.answers} answers wrong")

    def as_dict(self) -> dict:
        d = asdict(self)
        d["clear"], d["clean"] = self.clear, self.clean
        return d


# ---------------------------------------------------------------------------- the campaign


class Campaign:
    """Shared by the targets: the namespace's config, the input, the reference, the logs."""

    def __init__(self, config: Config, work_dir: Path, report: Callable[[str], None] = print,
                 answers: int = ANSWER_SAMPLE):
        root = config.hdfs_root.rstrip("/") or "/debl"
        self.config = config.replace(
            mysql_database=f"{config.mysql_database}_faults", link_table="faults_links",
            hbase_table="faults_links", hdfs_root=f"{root}-faults", poll_interval=0.2,
            run_buckets=2, service_timeout=min(config.service_timeout, 20.0))
        self.work_dir = Path(work_dir).absolute()
        self.report = report
        self.answer_sample = answers
        # Kept across campaigns: generated once per input spec.
        self.input_dir = (config.state_dir / "faults" / "input").absolute()
        self.log_dir = self.work_dir / "logs"
        self._references: dict[tuple[Path, int | None], Reference] = {}
        self._runs = 0
        self.hot_bytes: int | None = None

    # -- input and environment

    def prepare(self) -> None:
        """Generate the input once (kept across campaigns) and size chunks and buckets to it."""
        ensure_input(INPUT, self.input_dir, ReportProgress(self.report))
        files = LocalSource(self.input_dir).list()
        self.hot_bytes = sum(f.size for f in files[-HOT_FILES:])
        cold = sum(f.size for f in files[:-HOT_FILES])
        self.config = self.config.replace(bucket_target_bytes=max(1, cold // BUCKETS),
                                          bucket_target_covers_heaviest=False)

    def env(self, **extra: str) -> dict[str, str]:
        return procs.config_env(self.config, **extra)

    def reference(self, directory: Path | None = None, hot_bytes: int | None = -1) -> Reference:
        directory = directory or self.input_dir
        hot = self.hot_bytes if hot_bytes == -1 else hot_bytes
        key = (directory, hot)
        if key not in self._references:
            self._references[key] = Reference.of(directory, hot)
        return self._references[key]

    def log(self, name: str) -> Path:
        self._runs += 1
        return self.log_dir / f"{self._runs:04d}-{name}.log"

    def start(self, argv: list[str], name: str, **env: str) -> procs.Running:
        return procs.start(argv, self.env(**env), self.log(name), cwd=self.work_dir)

    def run(self, argv: list[str], name: str, timeout: float, **env: str) -> procs.Outcome:
        return procs.run(argv, self.env(**env), self.log(name), timeout, cwd=self.work_dir)

    # -- the standard commands

    def load_argv(self, hot: bool = True) -> list[str]:
        argv = ["load", str(self.input_dir), "--chunk-size", CHUNK]
        return argv + (["--hot-bytes", str(self.hot_bytes)] if hot else ["--no-hot"])

    def latest_load(self):
        """The namespace's latest load; None also when its catalog is another DeBL version's
        (the next load replaces it)."""
        try:
            with Catalog(self.config) as catalog:
                return catalog.load()
        except CatalogVersionError:
            return None

    def ensure_dataset(self, timeout: float = 600.0, reset: bool = True) -> None:
        """An up load of the campaign's input with its hot files; with *reset*, nothing of it
        in HBase."""
        load = self.latest_load()
        want_source = str(self.input_dir)
        if not (load and load.state == "up" and load.source == want_source
                and load.approach == "debl"):
            outcome = self.run(self.load_argv(), "setup-load", timeout)
            if not outcome.ok:
                raise RuntimeError(f"the campaign's setup load failed: {outcome.output[-2000:]}")
        if reset:
            self.reset_conversion()

    def ensure_half_converted(self) -> tuple[int, int]:
        """An up load whose lower buckets are loaded into HBase and whose upper ones are left
        to the raw route (marked pending again): a dataset gen_HF is half-way through, where a
        query may need MySQL, HBase or HDFS. Returns (loaded, raw) bucket counts."""
        self.ensure_dataset(reset=False)
        with Catalog(self.config) as catalog:
            buckets = catalog.buckets()
        lower, upper = buckets[:len(buckets) // 2], buckets[len(buckets) // 2:]
        with HBaseStore(self.config) as hbase:
            converted = hbase.table_exists() and all(b.state == "loaded" for b in lower)
        if not converted:
            self.reset_conversion()
            outcome = self.run(["gen-hf", "--until-complete"], "setup-gen-hf", 900.0)
            if not outcome.ok:
                raise RuntimeError(f"the campaign's setup gen-hf failed: "
                                   f"{outcome.output[-2000:]}")
        with Catalog(self.config) as catalog:
            catalog.set_job_state([b.b_index for b in upper], "pending")
        return len(lower), len(upper)

    def reset_conversion(self) -> None:
        """Undo gen_HF's work on the current load (every bucket pending, the HBase table and
        HFile directories gone): the state right after a load, without loading again."""
        with Catalog(self.config) as catalog:
            catalog.set_job_state([b.b_index for b in catalog.buckets()], "pending")
        with HBaseStore(self.config) as hbase:
            hbase.drop_table()
        WebHDFS(self.config).delete(f"{self.config.hdfs_root.rstrip('/')}/hfiles",
                                    recursive=True)

    # -- checks shared by every target

    def verify_and_compare(self, trial: Trial, hbase: bool, directory: Path | None = None,
                           hot_bytes: int | None = -1, source: bool = True) -> None:
        """``debl verify`` (without re-reading the source if not *source*), then the stores
        and answers against the reference."""
        outcome = self.run(["verify"] + ([] if source else ["--no-source"]), "verify", 300.0)
        trial.steps.append(Step.of(outcome))
        trial.verify_ok = outcome.ok
        if not outcome.ok:
            trial.verify_failures = [line for line in outcome.output.splitlines()
                                     if line.startswith("MISMATCH") or line.startswith("Error")]
        ref = self.reference(directory, hot_bytes)
        checks = [check_mysql(self.config, ref), check_hdfs(self.config, ref)]
        if hbase:
            if all_loaded(self.config):
                checks.append(check_hbase(self.config, ref))
            else:
                trial.problems.append("not every bucket was loaded into HBase")
        for c in checks:
            trial.lost += c.lost
            trial.doubled += c.doubled
            trial.examples += c.examples
        trial.left_unread = checks[1].unread_leftovers
        answers = check_answers(self.config, ref, self.answer_sample, trial.seed)
        trial.answers = answers.asked
        trial.wrong_answers = answers.wrong + answers.errors
        trial.examples += answers.examples


# ---------------------------------------------------------------------------- kill points


def load_point(config: Config, before: str | None) -> list[str]:
    """Where a load stands now: the open phases of the latest load and, for the hot path,
    the statement MySQL runs for it."""
    with Catalog(config) as catalog:
        load = catalog.load()
        if load is None or load.load_id == before:
            return ["start-up (before the load is recorded)"]
        if load.state == "up":
            return ["after uptime"]
        phases = catalog.phases(load.load_id)
        statements = catalog.running_statements()
    points = []
    for p in phases:
        if p.ended is not None:
            continue
        if p.phase == "hot":
            kinds = [_statement_kind(s) for s in statements]
            points += [f"hot: {k}" for k in kinds if k] or ["hot: parsing and streaming"]
        else:
            points.append(p.phase)
    if not points:
        points = ["load recorded, no phase open" if not phases else "between phases"]
    return sorted(set(points))


def _statement_kind(statement: str) -> str | None:
    s = statement.lstrip().upper()
    for prefix, kind in (("LOAD DATA", "LOAD DATA"), ("INSERT", "merge (INSERT ... SELECT)"),
                         ("ALTER TABLE", "index build"), ("CREATE", "table"),
                         ("DROP", "table"), ("TRUNCATE", "table")):
        if s.startswith(prefix):
            return kind
    return None


GEN_HF_START = "start-up (Spark, table)"


def gen_hf_point(config: Config, since: float) -> list[str]:
    """Where gen_HF stands now: inside a run's HFile writing or bulk load (open phases), just
    after a bulk load (ended, buckets not yet marked), or outside runs."""
    with Catalog(config) as catalog:
        load = catalog.load()
        phases = [p for p in catalog.phases(load.load_id) if p.started >= since
                  and p.phase in ("hfiles", "bulkload")]
        jobs = catalog.jobs()
    running = {j.run_id for j in jobs if j.state == "running"}
    open_steps = [p for p in phases if p.ended is None]
    if open_steps:
        return sorted({"HFile writing" if p.phase == "hfiles" else "bulk load"
                       for p in open_steps})
    if running:
        ended_loads = {p.item for p in phases if p.phase == "bulkload"}
        if running & ended_loads:
            return ["after a bulk load, before the buckets are marked loaded"]
        return ["run started, before its HFiles"]
    if all(j.state == "loaded" for j in jobs):
        return ["after the last run"]
    return [GEN_HF_START if not phases else "between runs"]


# ---------------------------------------------------------------------------- targets


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
        if procs.spark_jvm(running.tree()) is not None:
            t = running.elapsed()
            first = t if first is None else first
            last = t
        time.sleep(0.2)
    outcome = running.wait(max(0.0, deadline - time.monotonic()))
    return outcome, Window(outcome.seconds, None if first is None else (first, last))


def _kill_at(camp: Campaign, running: procs.Running, trial: Trial, at: float, victim: str,
             probe: Callable[[], list[str]]) -> list[procs.Proc] | None:
    """Wait until *at* seconds after the start, note the kill point, and SIGKILL the victim
    (``main``: the command's process; ``jvm``: its Spark driver JVM, waiting for one to exist).
    Returns the process tree as it was at the kill, or None if the command ended first."""
    while running.elapsed() < at and not running.done():
        time.sleep(0.02)
    while victim == "jvm" and not running.done() and procs.spark_jvm(running.tree()) is None:
        time.sleep(0.05)
    tree = [] if running.done() else running.tree()
    target = (tree[0] if tree else None) if victim == "main" else procs.spark_jvm(tree)
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
        lo, hi = (0.0, window.seconds) if self.victim == "main" else window.jvm
        at = rng.uniform(lo, hi)
        running = camp.start(argv, f"{self.name}-{trial.number}")
        tree = _kill_at(camp, running, trial, at, self.victim, probe)
        outcome = running.wait(_timeout(window))
        if tree is not None:
            if self.victim == "jvm":  # the command itself must fail, clearly and promptly
                trial.steps.append(Step.of(outcome))
                if outcome.ok:
                    trial.problems.append("the command succeeded although its Spark JVM was "
                                          "killed")
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
        elif load.state != "up":
            step = camp.run(argv + ["--resume", load.load_id],
                            f"{self.name}-{trial.number}-resume", _timeout(window))
            trial.steps.append(Step.of(step))
            if not step.ok:
                trial.problems.append("the resumed load failed")
        camp.verify_and_compare(trial, hbase=False, hot_bytes=camp.hot_bytes if self.hot else None)


class GenHFTarget(LoadTarget):
    """``debl gen-hf --until-complete`` killed in a run, then started again."""

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
LOAD_AIMS = [("watch", "hot: LOAD DATA"), ("watch", "hot: merge (INSERT ... SELECT)"),
             ("hook", "hot-loaded"), ("watch", "copy"), ("watch", "dist_ch"),
             ("hook", "dist_ch-done"), ("hook", "index-recorded")]
GEN_HF_AIMS = [("watch", "HFile writing"), ("watch", "bulk load"), ("hook", "bulk-loaded")]


class _Aimed:
    """A LoadTarget or GenHFTarget whose kill is aimed at a point instead of a moment."""

    aims: list[tuple[str, str]] = []

    def strike(self, camp: Campaign, trial: Trial, rng: random.Random, window: Window,
               argv: list[str], probe: Callable[[], list[str]]) -> None:
        how, point = self.aims[trial.number % len(self.aims)]
        extra = {"DEBL_FAULT_POINT": point} if how == "hook" else {}
        running = camp.start(argv, f"{self.name}-{trial.number}", **extra)
        seen: dict[tuple[int, int], procs.Proc] = {}  # every process of its tree, while it ran
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
        return "DEBL_RAW_AFTER=off debl " + " ".join(self.argv(1))

    def measure(self, camp: Campaign) -> Window:
        return Window(3.0)  # the kill comes within this after the first buffered query

    def trial(self, camp: Campaign, trial: Trial, rng: random.Random, window: Window) -> None:
        camp.ensure_dataset()
        argv = self.argv(trial.seed)
        running = camp.start(argv, f"{self.name}-{trial.number}", DEBL_RAW_AFTER="off")
        deadline = time.monotonic() + 120.0
        with Catalog(camp.config) as catalog:
            while not catalog.demand() and not running.done() and time.monotonic() < deadline:
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
            workers = [p for p in tree if p.ppid != running.pid and p.pid != running.pid
                       and "forkserver" in p.cmdline
                       and any(q.pid == p.ppid and "forkserver" in q.cmdline for q in tree)]
            with Catalog(camp.config) as catalog:
                waiting = sum(catalog.demand().values())
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
        again = camp.run(argv, f"{self.name}-{trial.number}-again", 600.0, DEBL_RAW_AFTER="off")
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
    if load.state != "up":
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


# ---------------------------------------------------------------------------- running it


def _one_trial(camp: Campaign, target: Target, number: int, seed: int, window: Window) -> Trial:
    trial = Trial(target.name, target.fault, number, seed, window_s=round(window.seconds, 1))
    started = time.monotonic()
    try:
        target.trial(camp, trial, random.Random(seed), window)
    except Exception as exc:  # noqa: BLE001 -- a trial that breaks is a finding
        trial.problems.append(f"the trial broke: {type(exc).__name__}: {exc}"[:500])
    trial.seconds = round(time.monotonic() - started, 1)
    trial.finish()
    return trial


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


def markdown(rows: list[dict], seed: int, trials: int) -> str:
    """The campaign's table as Markdown."""
    head = ("| target | fault | trials | kill points covered | rows lost | rows doubled | "
            "orphans | clear message | clean | s / trial | command |\n"
            "|---|---|---:|---|---:|---:|---:|---|---:|---:|---|\n")
    lines = [f"| `{r['target']}` | {r['fault']} | {r['trials']} | "
             f"{'; '.join(r['kill_points'])} | {r['lost']} | {r['doubled']} | {r['orphans']} | "
             f"{r['clear']} | {r['clean']} of {r['trials']} | {r['seconds_per_trial']} | "
             f"`{r['command']}` |" for r in rows]
    repro = (f"\nReproduce: `python scripts/faults.py --trials {trials} --seed {seed} "
             "--targets TARGET` (the target's command runs inside).\n")
    return head + "\n".join(lines) + "\n" + repro


def run_campaign(config: Config, work_dir: Path, targets: list[Target], trials: int, seed: int,
                 report: Callable[[str], None] = print,
                 answers: int = ANSWER_SAMPLE) -> tuple[CampaignResult, list[dict]]:
    """Run *trials* trials of each of *targets* (``KILLS``, ``debl.faults.outages.OUTAGES``);
    returns the trials and the table's rows, and writes ``results.json`` and ``table.md``
    into *work_dir*."""
    t0 = time.time()
    camp = Campaign(config, work_dir, report, answers)
    camp.prepare()
    rng = random.Random(seed)
    windows: dict[str, Window] = {}
    done: list[Trial] = []
    missed: list[Trial] = []  # kills that came after the command's end, run again
    for target in targets:
        name = target.name
        report(f"{name}: measuring {target.command(camp)} without a kill")
        windows[name] = target.measure(camp)
        report(f"{name}: {windows[name]}")
        for number in range(trials):
            for attempt in range(MISS_RETRIES + 1):
                trial = _one_trial(camp, target, number, rng.randrange(1 << 30), windows[name])
                report(f"{name} #{number}: kill at {trial.kill_at_s} s of {trial.window_s} "
                       f"({', '.join(trial.landed)}): "
                       + ("clean" if trial.clean else "; ".join(trial.problems))
                       + f" [{trial.seconds:.0f} s]")
                if trial.rerun_s is not None:
                    # The machine is slower (or faster) than when the window was measured:
                    # follow it, else every kill lands in the start-up of a slowed command.
                    windows[name] = windows[name].scaled(trial.rerun_s)
                if trial.ran_s is None or attempt == MISS_RETRIES:
                    break
                # The machine runs faster than when the window was measured: shrink it.
                windows[name] = windows[name].scaled(trial.ran_s)
                missed.append(trial)
            done.append(trial)
    result = CampaignResult(seed, done, {k: asdict(v) for k, v in windows.items()},
                            round(time.time() - t0, 1))
    shared = str(camp.input_dir.parent)
    rows = result.rows({t.name: t.command(camp).replace(shared, "<state_dir>/faults")
                        for t in targets})
    work_dir.mkdir(parents=True, exist_ok=True)
    (work_dir / "results.json").write_text(json.dumps(
        {"seed": seed, "trials_per_target": trials, "seconds": result.seconds,
         "windows": result.windows, "rows": rows, "trials": [t.as_dict() for t in done],
         "missed": [t.as_dict() for t in missed]},
        indent=2) + "\n")
    (work_dir / "table.md").write_text(markdown(rows, seed, trials))
    return result, rows
