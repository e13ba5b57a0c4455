"""What the day operations' campaign checks (docs/RELIABILITY.md, "Day operations"), after
each operation and at the end of a sequence:

- **answers** (``tally``): every answer a client recorded equals the reference of the day it
  names (a wrong one is another day's, or no day's: a mix), that day was current while it was
  asked (give or take the coordinator's poll, ``SLACK_S``), and its stores had not been dropped
  before it came back; every error is a DeblError with a message, inside an outage window (from
  the stop to the end of the start, plus ``ERROR_GRACE_S``);
- **the current day** (``check_current``): ``debl verify`` (every input line once), its stores
  against the reference (``harness.checks``: rows lost and doubled), and one ``debl links``
  as a user asks it;
- **commands** (``judge``): a failure says what happened (``procs.clear_failure``: no
  traceback, no signal), and a command expected to succeed fails only in or after an outage;
- **logs** (``scan_logs``): no traceback in any command's or client's output;
- **the disk** (``check_disk``), at the end: the stores hold the current day and at most the
  previous one, every drop a cleanup began was finished, and nothing of a dropped day is left.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from debl.catalog import Catalog, LoadRecord
from debl.config import Config
from debl.errors import DeblError
from harness import procs
from harness.checks import check_hdfs, check_mysql
from harness.days_clients import ERROR, Record, digest
from harness.days_timeline import CurrentWatcher
from harness.days_world import Background, OpRecord, World
from harness.trial import Step
from debl.hdfs import HdfsClient
from debl.format.link import Link
from debl.store.hbase import HBaseStore
from debl.store.mysql import MySQLStore

# A coordinator moves to a new current day at its next poll (coordinator.poll_interval, set
# by the campaign, plus the poll itself): an answer routed within this after a switch may name
# the day before.
SLACK_S = 3.0
# A query asked this long after a restart ended may still fail of it (HBase assigns its regions
# after Thrift answers); how many did, and how late, are figures of their own.
ERROR_GRACE_S = 10.0
TRACEBACK = "Traceback (most recent call last)"


def failure_bound(world: World) -> float:
    """How long after an outage a command may fail because of it: the service timeout, its
    retries and gen_HF's retries of a failed run (as ``harness.outages.bound``)."""
    return 4 * world.config.service_timeout + 90.0


def in_outage(world: World, t0: float, t1: float, after: float) -> bool:
    """Whether [t0, t1] meets an outage window extended by *after* seconds."""
    return any(t0 <= end + after and t1 >= start for _, start, end in world.windows)


def judge(world: World, bg: Background, outcome: procs.Outcome) -> None:
    """A background command ended: record how, and what is wrong with it."""
    op = bg.op
    step = Step.of(outcome)
    op.steps.append(step)
    what = f"`{step.command}`"
    if bg.kind != "gen-hf":  # how the load ended, for the summary of the operations
        op.label += "; " + ("killed" if bg.killed else "done" if outcome.ok else
                            "its JVM killed, failed" if bg.expect == "fail" else
                            "failed in an outage" if bg.expect == "ok" else "refused")
    if bg.killed:
        return
    if outcome.hung:
        op.problems.append(f"{what} hung")
    elif bg.expect == "fail" and outcome.ok:
        # Right too: a load buckets chunks of up to 8 MiB in its own process (docs/LOADING.md,
        # "Answers before the copy ends"), so the campaign's small days may never need the JVM;
        # the day is verified as any other.
        op.label += " (the JVM was not needed)"
    elif not outcome.ok and not step.clear:
        op.problems.append(f"{what} failed without a clear message (exit "
                           f"{outcome.returncode}): {step.message[-300:]}")
    elif not outcome.ok and bg.expect == "ok" and not in_outage(
            world, bg.started, time.time(), failure_bound(world)):
        op.problems.append(f"{what} failed outside any outage: {step.message[-300:]}")


def judge_step(world: World, op: OpRecord, step: Step, expect: str, started: float) -> None:
    """A foreground command of *op* ended (already in ``op.steps``)."""
    if step.hung:
        op.problems.append(f"`{step.command}` hung")
    elif step.returncode != 0 and not step.clear:
        op.problems.append(f"`{step.command}` failed without a clear message (exit "
                           f"{step.returncode}): {step.message[-300:]}")
    elif step.returncode != 0 and expect == "ok" and not in_outage(
            world, started, time.time(), failure_bound(world)):
        op.problems.append(f"`{step.command}` failed outside any outage: {step.message[-300:]}")


@dataclass
class AnswerTally:
    """The clients' answers and errors of one sequence, checked."""

    answers: int = 0
    wrong: int = 0  # not its day's reference
    wrong_day: int = 0  # ... but another day's
    mixed: int = 0  # ... and no day's
    unknown_load: int = 0  # names a load that is not one of the sequence's
    from_dropped: int = 0
    not_current: int = 0  # its day was not current while it was asked, even with SLACK_S
    late: int = 0  # its day had stopped being current less than SLACK_S before the ask
    max_late_s: float = 0.0
    errors_in_outage: int = 0
    errors_after_restart: int = 0  # of those: asked after the restart had ended (its grace)
    max_error_after_s: float = 0.0  # the latest of those, after the restart's end
    errors_outside: int = 0
    raw_errors: int = 0
    no_message: int = 0
    # plain dicts, not Counters: dataclasses.asdict turns a Counter into one of its items
    by_day: dict[str, int] = field(default_factory=dict)
    by_route: dict[str, int] = field(default_factory=dict)
    error_messages: dict[str, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)
    times: list[float] = field(default_factory=list)  # when each answer came

    def note(self, text: str) -> None:
        if len(self.examples) < 10:
            self.examples.append(text)

    def problems(self) -> list[str]:
        p = []
        for name, n in (("wrong answers", self.wrong), ("answers of an unknown load",
                                                          self.unknown_load),
                        ("answers from a dropped day", self.from_dropped),
                        ("answers of a day not current when asked", self.not_current),
                        ("errors outside an outage", self.errors_outside),
                        ("raw (not DeblError) errors", self.raw_errors),
                        ("errors without a message", self.no_message)):
            if n:
                p.append(f"{n} {name}")
        return p


def tally(world: World, watcher: CurrentWatcher, records: list[Record], t: AnswerTally,
          loads: dict[str, LoadRecord]) -> None:
    """Check *records* (see the module) into *t*. *loads*: the sequence's loads by id, read
    after the records were (so a drop before an answer came back is in it)."""
    for r in records:
        if r.error:
            kind = "raw" if r.error != ERROR else r.route
            _count(t.error_messages, f"{kind}: {r.message[:160]}")
            if r.error != ERROR:
                t.raw_errors += 1
            if not r.message.strip():
                t.no_message += 1
            if in_outage(world, r.t0, r.t1, ERROR_GRACE_S):
                t.errors_in_outage += 1
                if not in_outage(world, r.t0, r.t1, 0.0):  # asked after a restart's end
                    after = min(r.t0 - end for _, _, end in world.windows if r.t0 >= end)
                    t.errors_after_restart += 1
                    t.max_error_after_s = max(t.max_error_after_s, after)
            else:
                t.errors_outside += 1
                t.note(f"error outside an outage at {r.t0:.1f}: {r.route}: {r.message[:200]}")
            continue
        t.answers += 1
        t.times.append(r.t1)
        _count(t.by_route, r.route)
        load = loads.get(r.load_id)
        day = world.day_of_source(load.source) if load is not None else None
        if load is None or day is None:
            t.unknown_load += 1
            t.note(f"answer of load {r.load_id!r}, not one of the sequence's")
            continue
        _count(t.by_day, r.load_id)
        if r.digest != world.expected[day.number][r.key]:
            t.wrong += 1
            others = [d for d in range(len(world.pool)) if d != day.number
                      and world.expected[d][r.key] == r.digest]
            if others:
                t.wrong_day += 1
            else:
                t.mixed += 1
            t.note(f"key {world.keys[r.key]} from {r.load_id} (input {day.number}) at "
                   f"{r.t0:.2f}: " + (f"the answer of input {others[0]}" if others
                                      else "no day's answer"))
        gone = load.dropping or load.dropped  # its first store goes once it is marked dropping
        if gone is not None and gone < r.t1:
            t.from_dropped += 1
            t.note(f"key {world.keys[r.key]} answered by {r.load_id} at {r.t1:.2f}, dropped "
                   f"from {gone:.2f}")
        late = watcher.lateness(r.load_id, r.t0, r.t1)
        if late is None or late > SLACK_S:
            t.not_current += 1
            t.note(f"key {world.keys[r.key]} answered by {r.load_id} asked at {r.t0:.2f}, when "
                   f"{watcher.current_at(r.t0)} was current")
        elif late > 0.0:
            t.late += 1
            t.max_late_s = max(t.max_late_s, late)


def _count(counts: dict[str, int], key: str) -> None:
    counts[key] = counts.get(key, 0) + 1


def sequence_loads(world: World, since: float) -> dict[str, LoadRecord]:
    return {load.load_id: load for load in world.loads_of_sequence(since)}


# -- the current day


@dataclass
class CurrentCheck:
    """The checks of the current day after one step."""

    verified: int = 0
    verify_failed: int = 0
    lost: int = 0
    doubled: int = 0
    links: int = 0
    problems: list[str] = field(default_factory=list)


def _dropped_since(world: World, load: LoadRecord) -> bool:
    """The load stopped being current and its stores went while it was checked (a rollback or
    a new day, then cleanup): the check's failure is not one."""
    with Catalog(world.config) as catalog:
        now, current = catalog.loads.get(load.load_id), catalog.loads.current()
    return ((now.dropping or now.dropped) is not None and current is not None
            and current.load_id != load.load_id)


def check_current(world: World, op: OpRecord, c: CurrentCheck, rng: random.Random) -> None:
    """``debl verify`` of the current day, its stores against the reference, one ``debl
    links`` (see the module); a check that a switch and cleanup overtook is done again."""
    for _ in range(3):
        with Catalog(world.config) as catalog:
            load = catalog.loads.current()
        assert load is not None, "no current day to check"
        day = world.day_of_source(load.source)
        outcome = world.camp.run(["verify", load.load_id, "--json"],
                                 f"{op.index:02d}-verify", 300.0)
        if not outcome.ok and _dropped_since(world, load):
            continue
        step = Step.of(outcome)
        op.steps.append(step)
        c.verified += 1
        if not outcome.ok:
            c.verify_failed += 1
            bad = [line for line in outcome.output.splitlines()
                   if '"ok": false' in line or line.startswith("Error")]
            c.problems.append(f"verify {load.load_id} failed (exit {outcome.returncode}): "
                              + (_mismatches(outcome.output) or "; ".join(bad)[:300]))
        ref = world.references[day.number]
        try:
            found = [check_hdfs(world.config, ref, load)]
            if load.hot_in_mysql:
                found.append(check_mysql(world.config, ref, load))
        except DeblError as exc:
            if _dropped_since(world, load):
                continue
            c.problems.append(f"the stores of {load.load_id} could not be read: {exc}"[:300])
            found = []
        for f in found:
            c.lost += f.lost
            c.doubled += f.doubled
            if f.lost or f.doubled:
                c.problems.append(f"{load.load_id}: {f.store} {f.lost} lost, {f.doubled} "
                                  f"doubled: {'; '.join(f.examples[:2])}"[:400])
        break
    _links(world, op, c, rng)


def _mismatches(output: str) -> str:
    try:
        doc = json.loads(output[output.index("{"):])
    except ValueError:
        return ""
    return "; ".join(f"{k['what']}: expected {k['expected']}, found {k['found']}"
                     for k in doc["checks"] if not k["ok"])[:400]


def _links(world: World, op: OpRecord, c: CurrentCheck, rng: random.Random) -> None:
    """One ``debl links --json`` of a random key, checked as a client's answer."""
    i = rng.randrange(len(world.keys))
    id1, link_type = world.keys[i]
    t0 = time.time()
    outcome = world.camp.run(["links", str(id1), str(link_type), "--json", "--timeout", "120"],
                             f"{op.index:02d}-links", 300.0)
    t1 = time.time()
    step = Step.of(outcome)
    op.steps.append(step)
    c.links += 1
    if not outcome.ok:
        c.problems.append(f"`debl links {id1} {link_type}` failed (exit {outcome.returncode}"
                          f"{', a signal' if (outcome.returncode or 0) < 0 else ''}): "
                          f"{step.message[-300:]}")
        return
    doc = json.loads(outcome.output[outcome.output.index("{"):])
    links = [Link(id1, link_type, x["id2"], x["visibility"], x["data"].encode("latin-1"),
                  x["time"], x["version"]) for x in doc["links"]]
    world.links_records.append(Record(t0, t1, i, doc["load_id"], digest(links), doc["route"]))


# -- logs and the disk


def scan_logs(paths: list[Path], seen: dict[Path, int]) -> list[str]:
    """Tracebacks in *paths* since the last scan (*seen*: bytes already read per file)."""
    found = []
    for path in paths:
        try:
            with open(path, "rb") as f:
                f.seek(seen.get(path, 0))
                text = f.read()
        except FileNotFoundError:
            continue
        seen[path] = seen.get(path, 0) + len(text)
        decoded = text.decode(errors="replace")
        at = decoded.find(TRACEBACK)
        if at >= 0:
            tail = [line for line in decoded[at:].splitlines() if line.strip()]
            last = next((line for line in tail[1:] if not line.startswith(" ")), tail[-1])
            found.append(f"{path.name}: {last[:200]}")
    return found


def check_disk(world: World, since: float, keep_passed: bool) -> list[str]:
    """The stores at the end of a sequence: the loads not dropped are the current one and,
    unless *keep_passed*, the previous; no load is left marked dropping (a drop begun and never
    finished); a dropped load has no MySQL table, HBase table or HDFS directory left, and no
    HDFS load directory belongs to no live load."""
    problems = []
    with Catalog(world.config) as catalog:
        current, previous = catalog.loads.current(), catalog.loads.previous()
        loads = [load for load in catalog.loads.loads() if load.started >= since]
    assert current is not None, "no current day"
    allowed = {current.load_id} | ({previous} if previous and not keep_passed else set())
    live = [load.load_id for load in loads if load.dropped is None and load.dropping is None]
    extra = [load_id for load_id in live if load_id not in allowed]
    if extra:
        problems.append(f"stores of {', '.join(extra)} are kept besides the current day "
                        f"{current.load_id}" + (f" and the previous {previous}"
                                                if previous and not keep_passed else ""))
    unfinished = [load.load_id for load in loads
                  if load.dropping is not None and load.dropped is None]
    if unfinished:
        problems.append(f"the drop of {', '.join(unfinished)} was begun and no cleanup "
                        "finished it")
    for load in [load for load in loads if load.dropped is not None]:
        left = stores_left(world.config, load)
        if left:
            problems.append(f"dropped load {load.load_id} left {', '.join(left)}")
    fs = HdfsClient(world.config)
    root = f"{world.config.hdfs.root.rstrip('/')}/loads"
    live_dirs = {load.namespace.hdfs_dir for load in loads if load.dropped is None}
    if fs.status(root) is not None:  # every load before the sequence was dropped at its start
        stray = [s.path for s in fs.list(root) if s.is_dir and s.path not in live_dirs]
        if stray:
            problems.append(f"HDFS directories of no live load: {', '.join(stray)}")
    return problems


def stores_left(config: Config, load: LoadRecord) -> list[str]:
    """The stores of *load* that exist: its MySQL tables, HBase table, HDFS directory."""
    ns = load.namespace
    left = []
    for table in (ns.link_table, f"{ns.link_table}_staging"):
        with MySQLStore(config, table) as mysql:
            if mysql.table_exists():
                left.append(f"MySQL table {table}")
    with HBaseStore(config, ns.hbase_table) as hbase:
        if hbase.table_exists():
            left.append(f"HBase table {ns.hbase_table}")
    if HdfsClient(config).status(ns.hdfs_dir) is not None:
        left.append(f"HDFS {ns.hdfs_dir}")
    return left
