"""What one sequence of day operations works on (docs/RELIABILITY.md, "Day operations"): the
spec, the days' inputs and their references, the keys the clients ask, and the processes that
run beside the operations (the loads, the gen_HF service, the clients), each judged when it ends.

The days: a pool of ``POOL`` small change logs (``debl generate``, one seed each, the same ids),
generated once under ``<state_dir>/dayops/input`` and loaded in turn, so that two loads of one
input are never kept at once (at most the current day, the previous one and one being loaded).
The reference of a day is the merge rule over its files (``harness.checks.Reference``); the
expected answer of each key is kept as a digest (``harness.days_clients.digest``), for
every day of the pool, so that a wrong answer can be told apart: another day's, or no day's (a
mix).

The namespace is the campaign's own (``<mysql_database>_dayops``, ``dayops_links``,
``<hdfs_root>-dayops``), with ``keep_previous_load`` short so that cleanup drops days while the
sequence runs. Pitfall: a sequence drops every load of that namespace first.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from debl.bench.inputs import ensure_input
from debl.bench.results import ReportProgress
from debl.catalog import Catalog, LoadRecord
from debl.config import Config
from harness import procs
from harness.campaign import Campaign
from harness.checks import Reference
from harness.days_clients import digest
from harness.trial import Step
from debl.workload.spec import GenerateSpec
from loaders.source import LocalSource

POOL = 6  # distinct day inputs, loaded in turn
EXTRA_KEYS = 50  # keys drawn from the whole id space besides the first day's (many hold nothing)
NAMESPACE = "dayops"
HARD_LIMIT_S = 900.0  # a background command still running this long hung


@dataclass(frozen=True)
class DayOpsSpec:
    """One campaign: *sequences* sequences of *operations* operations drawn from *allowed*
    (every operation when empty; *fixed*: these operations in this order instead of a draw),
    over days of *max_id* ids in *files* files, with *clients* client processes of *threads*
    threads asking throughout (each thread *ask_pause_s* after its last answer: 0, as fast as
    it can)."""

    sequences: int = 10
    operations: int = 10
    seed: int = 1
    allowed: tuple[str, ...] = ()
    fixed: tuple[str, ...] = ()
    max_id: int = 20001
    files: int = 3
    max_degree: int = 40
    clients: int = 2
    threads: int = 3
    ask_pause_s: float = 0.0
    keys: int = 2000
    keep_previous_s: float = 15.0
    pause_s: float = 6.0  # at most this long after an operation, clients asking, before checks
    look_s: float = 40.0  # a rollback waiting for a new day comes up to this long after its uptime
    chunk: str = "256KiB"
    buckets: int = 4  # cold bytes / bucket_target_bytes


@dataclass(frozen=True)
class DayInput:
    """One input of the pool: its directory and its hot bytes (its newest file)."""

    number: int
    seed: int
    directory: Path
    hot_bytes: int

    def load_argv(self, chunk: str) -> list[str]:
        return ["load", str(self.directory), "--hot-bytes", str(self.hot_bytes),
                "--chunk-size", chunk]


@dataclass
class OpRecord:
    """One operation of a sequence: what ran, how each command ended, what it found."""

    index: int
    name: str
    detail: str = ""
    label: str = ""  # what kind of case it was, for the campaign's summary
    started: float = 0.0
    ended: float = 0.0
    steps: list[Step] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class Background:
    """A command running beside the operations: a load, a resume or the gen_HF service.
    *expect*: ``ok`` (a failure must be explained by an outage) or ``either`` (a refusal with
    a clear message is right too)."""

    kind: str
    running: procs.Running
    op: OpRecord
    expect: str
    started: float = field(default_factory=time.time)
    day: DayInput | None = None
    before: str | None = None  # the newest load when it started (kill points)
    killed: bool = False
    judged: bool = False


class World:
    """One campaign's shared state (the inputs, the references, the keys) and one sequence's
    running processes."""

    def __init__(self, config: Config, spec: DayOpsSpec, work_dir: Path,
                 report: Callable[[str], None] = print):
        self.spec = spec
        self.report = report
        self.camp = Campaign(config, work_dir, report, namespace=NAMESPACE)
        self.camp.config = self.camp.config.replace(
            loading_keep_previous_load=spec.keep_previous_s,
            loading_coordinator_ack_timeout=20.0, coordinator_raw_after=0.0,
            gen_hf_carry_demand=True)
        self.work_dir = self.camp.work_dir
        self.pool: list[DayInput] = []
        self.keys: list[tuple[int, int]] = []
        self.expected: list[list[str]] = []  # per pool day, per key: the answer's digest
        self.references: dict[int, Reference] = {}
        # one sequence's
        self.loads: list[Background] = []
        self.gen_hf: Background | None = None
        self.ops: list[OpRecord] = []
        self.windows: list[tuple[str, float, float]] = []  # (service, down from, back at)
        self.links_records: list = []  # `debl links` answers, checked as the clients' are
        self.next_input = 0
        self.load_seconds = [40.0]  # durations of loads that ran to the end: kill moments

    @property
    def config(self) -> Config:
        return self.camp.config

    # -- the inputs, once per campaign

    def prepare(self) -> None:
        """Generate the pool (kept across campaigns), its references and the keys."""
        root = (self.config.state_dir / NAMESPACE / "input").absolute()
        for n in range(POOL):
            seed = 1000 + n
            gen = GenerateSpec(max_id=self.spec.max_id, files=self.spec.files,
                               days=self.spec.files, seed=seed, update_share=0.2,
                               hidden_share=0.3, bad_lines=2, max_degree=self.spec.max_degree)
            directory = root / f"{self.spec.max_id}-{self.spec.files}-{seed}"
            ensure_input(gen, directory, ReportProgress(self.report))
            files = LocalSource(directory).list()
            self.pool.append(DayInput(n, seed, directory, files[-1].size))
        cold = sum(f.size for f in LocalSource(self.pool[0].directory).list()[:-1])
        self.camp.config = self.config.replace(
            loading_bucket_target_bytes=max(1, cold // self.spec.buckets),
            loading_bucket_target_covers_heaviest=False)
        for day in self.pool:
            self.references[day.number] = Reference.of(day.directory, day.hot_bytes)
        rng = random.Random(self.spec.seed)
        first = sorted(self.references[0].all_store.keys())
        keys = rng.sample(first, min(self.spec.keys, len(first)))
        keys += [(rng.randrange(1, self.spec.max_id), rng.choice((123456789, 123456790)))
                 for _ in range(EXTRA_KEYS)]
        self.keys = keys
        self.expected = [[digest(self.references[d.number].all_store.get_link_list(*k))
                          for k in keys] for d in self.pool]

    def day_of_source(self, source: str) -> DayInput | None:
        return next((d for d in self.pool if str(d.directory) == source), None)

    def take_input(self) -> DayInput:
        """The next day's input: the pool in turn."""
        day = self.pool[self.next_input % POOL]
        self.next_input += 1
        return day

    # -- one sequence's processes

    def reset(self) -> None:
        self.loads, self.gen_hf, self.ops, self.windows = [], None, [], []
        self.links_records = []

    def start(self, kind: str, argv: list[str], op: OpRecord, expect: str,
              day: DayInput | None = None) -> Background:
        """Start a command in the background (a load or resume: in ``loads``)."""
        before = getattr(self.camp.latest_load(), "load_id", None) if kind != "gen-hf" else None
        bg = Background(kind, self.camp.start(argv, f"{op.index:02d}-{kind}"), op, expect,
                        day=day, before=before)
        if kind == "gen-hf":
            self.gen_hf = bg
        else:
            self.loads.append(bg)
        return bg

    def running_loads(self) -> list[Background]:
        return [b for b in self.loads if not b.running.done()]

    def gen_hf_running(self) -> bool:
        return self.gen_hf is not None and not self.gen_hf.running.done()

    def loads_of_sequence(self, since: float) -> list[LoadRecord]:
        with Catalog(self.config) as catalog:
            return [load for load in catalog.loads.loads() if load.started >= since]

    def reap(self, judge: Callable[[Background, procs.Outcome], None],
             hard_limit: float = HARD_LIMIT_S) -> None:
        """Judge every background command that ended (or ran past *hard_limit*: hung)."""
        for bg in [b for b in self.loads + [self.gen_hf] if b is not None]:
            if bg.judged:
                continue
            # the gen_HF service runs until stopped; a load past the limit hung
            if bg.running.done() or (bg.kind != "gen-hf"
                                     and time.time() - bg.started > hard_limit):
                outcome = bg.running.wait(0)
                bg.judged = True
                if bg.kind == "load" and outcome.ok and bg.day is not None:
                    self.load_seconds.append(outcome.seconds)
                judge(bg, outcome)
