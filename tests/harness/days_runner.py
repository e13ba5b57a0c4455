"""Running the day operations' campaign (docs/RELIABILITY.md, "Day operations"): sequences of
operations drawn at random while clients ask without pause, checked after each operation and at
the end of each sequence; ``results.json`` and ``table.md`` in the work directory.

One sequence:

1. every load of the campaign's namespace dropped; the first day loaded; the gen_HF service and
   the clients started;
2. per operation drawn (``harness.days_ops``): run it, a pause of up to ``pause_s`` while
   the clients ask, the background commands that ended judged, the gen_HF service and clients
   that ended started again (a supervisor's part), then the checks
   (``harness.days_checks``): the clients answer again, the current day verified and
   compared, one ``debl links``, the answers so far, the logs;
3. at the end: running loads waited for, the newest one resumed until it is complete, one
   ``keep_previous_load`` waited out and ``debl cleanup --wait``; the checks once more, then the
   disk, and the longest stretch with no answer outside the outage windows.
"""

from __future__ import annotations

import json
import random
import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from debl.catalog import Catalog, HotState, LoadState
from debl.config import Config
from harness.days_checks import (AnswerTally, CurrentCheck, check_current, check_disk,
                                     judge, judge_step, scan_logs, sequence_loads, tally)
from harness.days_clients import ClientPool
from harness.days_ops import Operations, draw
from harness.days_timeline import CurrentWatcher, longest_gap
from harness.days_world import DayOpsSpec, OpRecord, World
from harness.table import markdown_table
from harness.trial import Step
from debl.hdfs import HdfsClient
from loaders.cleanup import drop_every_load

ANSWER_WAIT_S = 180.0  # after an operation the clients must answer again within this
FINISH_S = 900.0  # the end of a sequence: running loads and resumes


@dataclass
class SequenceResult:
    """One sequence: the operations drawn and what each did, the answers checked (the clients'
    and ``debl links``'), the current day's checks, tracebacks, the disk at the end, the longest
    stretch with no answer; ``problems`` says in words why it is not clean."""

    number: int
    seed: int
    drawn: list[str]
    ops: list[OpRecord] = field(default_factory=list)
    answers: AnswerTally = field(default_factory=AnswerTally)
    links: AnswerTally = field(default_factory=AnswerTally)
    current: CurrentCheck = field(default_factory=CurrentCheck)
    tracebacks: list[str] = field(default_factory=list)
    disk: list[str] = field(default_factory=list)
    longest_gap_s: float = 0.0
    longest_gap_during: str = ""
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.problems

    def finish(self) -> None:
        p = self.problems
        for op in self.ops:
            p += [f"op {op.index} {op.name}: {x}" for x in op.problems]
            if op.orphans:
                p.append(f"op {op.index} {op.name}: orphans {', '.join(op.orphans)}")
        p += self.answers.problems() + [f"debl links: {x}" for x in self.links.problems()]
        p += self.current.problems + [f"traceback in {x}" for x in self.tracebacks] + self.disk

    def as_dict(self) -> dict:
        d = asdict(self)
        d["answers"].pop("times")
        d["links"].pop("times")
        d["clean"] = self.clean
        return d


class _Sequence:
    """One sequence's run (see the module)."""

    def __init__(self, world: World, result: SequenceResult, report: Callable[[str], None]):
        self.world, self.result, self.report = world, result, report
        self.rng = random.Random(result.seed)
        self.seen: dict[Path, int] = {}
        self.since = 0.0
        self.watcher: CurrentWatcher | None = None
        self.clients: ClientPool | None = None

    def run(self) -> None:
        world, result = self.world, self.result
        world.reset()
        world.camp.log_dir = world.work_dir / f"seq{result.number:02d}" / "logs"
        Catalog(world.config, replace_older=True).close()
        drop_every_load(world.config)
        # The namespace is the campaign's own: a directory a killed campaign left with no
        # catalog row (its schema replaced) would be reported as this sequence's stray.
        HdfsClient(world.config).delete(f"{world.config.hdfs.root.rstrip('/')}/loads",
                                     recursive=True)
        self.since = time.time()
        setup = OpRecord(0, "first day", started=time.time())
        world.ops.append(setup)
        day = world.take_input()
        first = world.camp.run(day.load_argv(world.spec.chunk), "00-first-day", 900.0)
        setup.steps.append(Step.of(first))
        if not first.ok:
            raise RuntimeError(f"the sequence's first load failed:\n{first.output[-2000:]}")
        self.watcher = CurrentWatcher(world.config)
        self.watcher.start()
        world.start("gen-hf", ["gen-hf"], setup, "ok")
        self.clients = ClientPool(world.camp.env(), world.work_dir / f"seq{result.number:02d}"
                                  / "clients", world.keys, world.spec.clients,
                                  world.spec.threads, result.seed, cwd=world.work_dir,
                                  pause_s=world.spec.ask_pause_s)
        try:
            self._wait_for_answers(setup, time.time())
            setup.ended = time.time()
            ops = Operations(world, self.clients, self.rng)
            for index, name in enumerate(result.drawn, 1):
                op = OpRecord(index, name)
                world.ops.append(op)
                ops.run(op)
                self.report(f"  {index:2d} {name}: {op.detail}")
                time.sleep(self.rng.uniform(0.0, world.spec.pause_s))
                self._supervise(op)
                self._check(op)
            self._finish()
        finally:
            self._stop()
        result.ops = world.ops
        self._gaps()
        result.finish()

    # -- between operations

    def _supervise(self, op: OpRecord) -> None:
        """Judge what ended; start the gen_HF service and the clients again if they ended."""
        self.world.reap(lambda bg, outcome: judge(self.world, bg, outcome))
        if not self.world.gen_hf_running():
            self.world.start("gen-hf", ["gen-hf"], op, "ok")
        assert self.clients is not None  # started by run()
        for outcome in self.clients.supervise():
            op.problems.append(f"a client ended by itself (exit {outcome.returncode}): "
                               f"{outcome.output.strip()[-300:]}")

    def _read_answers(self) -> list:
        assert self.clients is not None  # started by run()
        records = self.clients.read()
        loads = sequence_loads(self.world, self.since)
        tally(self.world, self.watcher, records, self.result.answers, loads)
        links, self.world.links_records = self.world.links_records, []
        tally(self.world, self.watcher, links, self.result.links, loads)
        return records

    def _wait_for_answers(self, op: OpRecord, since: float) -> None:
        deadline = time.monotonic() + ANSWER_WAIT_S
        while time.monotonic() < deadline:
            if any(not r.error and r.t1 > since for r in self._read_answers()):
                return
            time.sleep(0.5)
        op.problems.append(f"the clients did not answer within {ANSWER_WAIT_S:.0f} s after "
                           "the operation")

    def _check(self, op: OpRecord) -> None:
        self._wait_for_answers(op, op.ended)
        check_current(self.world, op, self.result.current, self.rng)
        self._read_answers()
        self._scan()

    def _scan(self) -> None:
        assert self.clients is not None  # started by run()
        logs = sorted(self.world.camp.log_dir.glob("*.log")) + self.clients.logs()
        self.result.tracebacks += scan_logs(logs, self.seen)

    # -- the end

    def _finish(self) -> None:
        """Loads waited for, the newest completed, a cleanup past keep_previous_load, the
        checks and the disk."""
        world = self.world
        op = OpRecord(len(world.ops), "end")
        world.ops.append(op)
        op.started = time.time()
        deadline = time.monotonic() + FINISH_S
        while world.running_loads() and time.monotonic() < deadline:
            time.sleep(1.0)
        world.reap(lambda bg, outcome: judge(world, bg, outcome), hard_limit=0.0)
        for _ in range(3):
            newest = world.camp.latest_load()
            if (newest.state == LoadState.UP
                    and newest.hot_state not in (HotState.LOADING, HotState.FAILED)):
                break
            day = world.day_of_source(newest.source)
            started = time.time()
            outcome = world.camp.run(day.load_argv(world.spec.chunk)
                                     + ["--resume", newest.load_id], "end-resume", FINISH_S)
            op.steps.append(Step.of(outcome))
            judge_step(world, op, op.steps[-1], "ok", started)
        with Catalog(world.config) as catalog:
            current = catalog.loads.current()
        switched = (current.switched if current is not None else None) or 0.0
        time.sleep(max(0.0, switched + world.spec.keep_previous_s + 1.0 - time.time()))
        started = time.time()
        outcome = world.camp.run(["cleanup", "--wait"], "end-cleanup", 300.0)
        op.steps.append(Step.of(outcome))
        judge_step(world, op, op.steps[-1], "ok", started)
        op.ended = time.time()
        self._check(op)
        self.result.disk = check_disk(world, self.since, keep_passed=True)

    def _stop(self) -> None:
        """Stop the clients (they must stop when asked), the gen_HF service, the watcher."""
        world = self.world
        if self.clients is not None:
            for outcome in self.clients.stop():
                if not outcome.ok:
                    self.result.problems.append(f"a client did not stop cleanly (exit "
                                                f"{outcome.returncode})")
            self._read_answers()
            self._scan()
        for bg in world.loads + [world.gen_hf]:
            if bg is not None and not bg.running.done():
                bg.killed = True
                bg.running.proc.send_signal(signal.SIGTERM)
                bg.running.wait(60.0)
        if self.watcher is not None:
            self.watcher.stop()

    def _gaps(self) -> None:
        """The longest stretch with no answer outside the outage windows, and the operation
        running then."""
        times = sorted(self.result.answers.times)
        gap, at = longest_gap(times, [(s, e) for _, s, e in self.world.windows])
        self.result.longest_gap_s = round(gap, 3)
        # the operation under way when the stretch began: the last one started before it
        during = [op for op in self.world.ops if op.started <= at]
        self.result.longest_gap_during = (f"{during[-1].index} {during[-1].name}" if during
                                          else "")


def run_day_ops(config: Config, work_dir: Path, spec: DayOpsSpec,
                report: Callable[[str], None] = print) -> list[SequenceResult]:
    """Run *spec*'s sequences (see the module); returns them, and writes ``results.json`` and
    ``table.md`` into *work_dir*."""
    t0 = time.time()
    world = World(config, spec, work_dir, report)
    report("preparing the days' inputs and references")
    world.prepare()
    rng = random.Random(spec.seed)
    results = []
    for number in range(1, spec.sequences + 1):
        seed = rng.randrange(1 << 30)
        drawn = list(spec.fixed) or draw(random.Random(seed), spec.operations, spec.allowed)
        report(f"sequence {number} (seed {seed}): {', '.join(drawn)}")
        result = SequenceResult(number, seed, drawn)
        started = time.monotonic()
        try:
            _Sequence(world, result, report).run()
        except Exception as exc:  # noqa: BLE001 -- a sequence that breaks is a finding
            result.problems.append(f"the sequence broke: {type(exc).__name__}: {exc}"[:500])
        result.seconds = round(time.monotonic() - started, 1)
        if result.clean:  # a clean sequence's answer records are large and no longer needed
            for records in (work_dir / f"seq{number:02d}" / "clients").glob("*.tsv"):
                records.unlink()
        report(f"sequence {number}: {result.answers.answers} answers, "
               + ("clean" if result.clean else "; ".join(result.problems)[:2000]))
        results.append(result)
        _write(work_dir, spec, results, time.time() - t0)
    return results


def _write(work_dir: Path, spec: DayOpsSpec, results: list[SequenceResult],
           seconds: float) -> None:
    work_dir.mkdir(parents=True, exist_ok=True)
    (work_dir / "results.json").write_text(json.dumps(
        {"spec": asdict(spec), "seconds": round(seconds, 1),
         "sequences": [r.as_dict() for r in results]}, indent=2, default=str) + "\n")
    (work_dir / "table.md").write_text(markdown(spec, results))


def markdown(spec: DayOpsSpec, results: list[SequenceResult]) -> str:
    """The campaign's table: one row per sequence, then the totals and the operations drawn."""
    head = ["sequence", "seed", "operations", "answers checked", "wrong (another day's / "
            "no day's)", "from a dropped day", "day not current when asked", "verify runs "
            "(failed)", "rows lost / doubled", "errors in outages (asked after a restart's end, "
            "latest) / outside",
            "longest stretch without an answer, outside restarts", "clean", "min"]
    rows = []
    for r in results:
        a = r.answers
        rows.append([r.number, r.seed, " ".join(r.drawn), f"{a.answers + r.links.answers:,}",
                     f"{a.wrong + r.links.wrong} ({a.wrong_day + r.links.wrong_day} / "
                     f"{a.mixed + r.links.mixed})", a.from_dropped + r.links.from_dropped,
                     a.not_current + r.links.not_current,
                     f"{r.current.verified} ({r.current.verify_failed})",
                     f"{r.current.lost} / {r.current.doubled}",
                     f"{a.errors_in_outage} ({a.errors_after_restart}, "
                     f"{a.max_error_after_s:.1f} s) / {a.errors_outside}",
                     f"{r.longest_gap_s:.2f} s ({r.longest_gap_during})",
                     "yes" if r.clean else "no", f"{r.seconds / 60:.1f}"])
    total: Counter[str] = Counter()
    for r in results:
        total.update({"answers": r.answers.answers + r.links.answers,
                      "wrong": r.answers.wrong + r.links.wrong,
                      "dropped": r.answers.from_dropped + r.links.from_dropped,
                      "not_current": r.answers.not_current + r.links.not_current,
                      "verified": r.current.verified, "verify_failed": r.current.verify_failed,
                      "lost": r.current.lost, "doubled": r.current.doubled,
                      "in": r.answers.errors_in_outage, "out": r.answers.errors_outside,
                      "ops": len(r.drawn), "clean": int(r.clean)})
    longest = max(results, key=lambda r: r.longest_gap_s, default=None)
    rows.append(["all", "", f"{total['ops']} operations", f"{total['answers']:,}",
                 total["wrong"], total["dropped"], total["not_current"],
                 f"{total['verified']} ({total['verify_failed']})",
                 f"{total['lost']} / {total['doubled']}", f"{total['in']} / {total['out']}",
                 f"{longest.longest_gap_s:.2f} s" if longest else "",
                 f"{total['clean']} of {len(results)}",
                 f"{sum(r.seconds for r in results) / 60:.0f}"])
    repro = (f"\nReproduce: `python scripts/day_ops.py --sequences {spec.sequences} "
             f"--operations {spec.operations} --seed {spec.seed}`.\n\n")
    return markdown_table(head, rows, {0, 1, 3, 5, 6, 12}) + repro + operations_table(results)


def operations_table(results: list[SequenceResult]) -> str:
    """The operations drawn, each with the cases it met (``OpRecord.label``) and how often."""
    cases: dict[str, Counter] = {}
    for r in results:
        for op in r.ops:
            if 0 < op.index <= len(r.drawn):
                cases.setdefault(op.name, Counter())[op.label or "-"] += 1
    rows = [[f"`{name}`", sum(c.values()), "; ".join(f"{label} ({n})"
                                                   for label, n in c.most_common())]
            for name, c in sorted(cases.items(), key=lambda kv: -sum(kv[1].values()))]
    return markdown_table(["operation", "drawn", "cases (times)"], rows, {1})
