"""The kill campaign's ``follow`` target (docs/RELIABILITY.md, "Kill campaign"), and what it
shares with tests/test_follower.py: a writer that writes LinkBench's writes to the source at a
steady rate, each acknowledged write with its GTID, and the check of a change log against those
writes, the dump and the source's table.

A trial: the writer writes to the source's table (``faults_source``, filled from the campaign's
input, dumped and loaded once per campaign), ``debl follow`` runs, and is killed (``kill -9``)
at a moment uniform over ``FOLLOW_S`` seconds; it is started again while the writer goes on
for ``AFTER_S`` seconds, the writer stops, the follower catches up with the source's head and
is stopped (SIGTERM, which must end it cleanly). Then ``check_capture``: every write the
writer got acknowledged is in the change log once (its GTID's changes: the key written, the
row written, hidden or deleted), and the dump's rows with every change applied in position
order equal the source's table. Trials add to one change log (the campaign's load stays), so
each check covers every change since the dump.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from debl.catalog import Catalog, Change
from debl.config import Config
from debl.format.link import Link, parse_line
from debl.position import parse_gtid
from debl.store import source_db
from debl.store.linkbench_writes import SourceLinks
from harness import procs
from harness.campaign import CHUNK, Campaign
from harness.kills import Target, Window, _kill_at, _orphans, _timeout
from harness.trial import Step, Trial
from loaders.cleanup import drop_every_load

SOURCE_TABLE = "faults_source"
WRITE_RATE = 200.0  # writes a second, over all writers
WRITERS = 2
FOLLOW_S = 8.0  # the kill's moment is uniform over this many seconds of the follower's run
AFTER_S = 2.0  # writes after the restart
CATCH_UP_S = 120.0  # the restarted follower must reach the head within this (else it hung)
# data bytes the line format holds that a writer may get wrong: NUL, not UTF-8, escapes, quotes
DATA = [b"\x00", b"\xff\xfe", b"\\", b"'", b'"', b"\\'\"\x00\xff end \\", b"plain"]


@dataclass(frozen=True)
class Ack:
    """A write the source acknowledged with a GTID: its key and what the change must be:
    ``row`` (the link written), ``hidden`` (visibility 0) or ``deleted``."""

    seq: int
    key: tuple[int, int, int]
    kind: str
    link: Link | None = None


class SourceWriter:
    """*writers* threads writing to *config*'s source table at *rate* writes a second:
    LinkBench's add_link (new keys), update_link, delete_link (hide) and expunges of the
    table's keys *keys*. ``stop()`` returns the acknowledged writes that changed a row."""

    def __init__(self, config: Config, keys: list[tuple[int, int, int]], seed: int,
                 rate: float = WRITE_RATE, writers: int = WRITERS):
        self.links = SourceLinks(config.source_db_url(with_password=True),
                                 config.source_db.table)
        self.rate, self.seed = rate, seed
        self.keys = list(keys)
        self.acks: list[Ack] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(w,), daemon=True)
                         for w in range(writers)]

    def start(self) -> "SourceWriter":
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> list[Ack]:
        self._stop.set()
        for t in self._threads:
            t.join(30.0)
        return sorted(self.acks, key=lambda a: a.seq)

    def _run(self, writer: int) -> None:
        rng = random.Random(self.seed * 31 + writer)
        pause = len(self._threads) / self.rate
        with self.links.session() as session:
            while not self._stop.wait(rng.expovariate(1.0 / pause)):
                try:
                    self._write(session, rng)
                except Exception as exc:  # noqa: BLE001 -- counted: the check names it
                    self.errors.append(f"{type(exc).__name__}: {exc}"[:200])

    def _write(self, session, rng: random.Random) -> None:
        with self._lock:
            key = rng.choice(self.keys)
        op = rng.random()
        if op < 0.4:  # a new key
            key = (key[0], key[1], rng.randrange(1 << 40, 1 << 41))
            link = Link(*key, 1, rng.choice(DATA), int(time.time() * 1000), 0)
            ack, kind = session.add_link(link), "row"
            with self._lock:
                self.keys.append(key)
        elif op < 0.7:
            link = Link(*key, 1, rng.choice(DATA), int(time.time() * 1000), rng.randrange(100))
            ack, kind = session.update_link(link), "row"
        elif op < 0.85:
            ack, kind, link = session.delete_link(*key), "hidden", None
        else:
            ack, kind, link = session.delete_link(*key, expunge=True), "deleted", None
        if ack.changed and ack.gtid:
            with self._lock:
                self.acks.append(Ack(parse_gtid(ack.gtid)[2], key, kind, link))


def dump_rows(directory: Path) -> dict[tuple[int, int, int], Link]:
    """The rows of a dump's files, by key."""
    rows = [parse_line(line) for f in sorted(Path(directory).glob("links-*.tsv"))
            for line in f.read_bytes().splitlines(keepends=True)]
    return {link.key: link for link in rows}


def source_sql(config: Config, sql: str, args=()) -> list[tuple]:
    """*sql* on the source database, in a connection of its own; its rows."""
    conn = source_db.connect(config)
    try:
        with conn.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())
    finally:
        conn.close()


def table_rows(config: Config) -> dict[tuple[int, int, int], Link]:
    """The source's table now, by key."""
    rows = source_sql(config, f"SELECT id1, link_type, id2, visibility, data, time, version "
                              f"FROM `{config.source_db.table}`")
    return {(r[0], r[1], r[2]): Link(r[0], r[1], r[2], r[3], bytes(r[4]), r[5], r[6])
            for r in rows}


def head_seq(config: Config) -> int:
    """The sequence number of the source's head."""
    return parse_gtid(source_db.one_domain(source_sql(config, "SELECT @@gtid_binlog_pos")[0][0],
                                           "the source's head"))[2]


def logged_changes(catalog: Catalog, source: str, after: int) -> list[Change]:
    """Every change of the log past *after*, in position order."""
    out: list[Change] = []
    while True:
        changes, upto = catalog.changes.since(source, after)
        out += changes
        if upto == after:
            return out
        after = upto


@dataclass
class CaptureCheck:
    """What ``check_capture`` found: acknowledged writes missing from the log (``lost``) or
    there more than once (``doubled``), and the other problems in words."""

    lost: int = 0
    doubled: int = 0
    problems: list[str] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)


def check_capture(config: Config, dump: dict, dump_seq: int, acks: list[Ack]) -> CaptureCheck:
    """The change log since the dump against the writes *acks* and the source's table, once
    the follower has caught up with the writes (see the module)."""
    found = CaptureCheck()
    with Catalog(config) as catalog:
        follower = next(f for f in catalog.changes.followers())
        changes = logged_changes(catalog, follower.source, dump_seq)
    # Other clients (other tests' writers) may write to the same source server: the follower
    # must have passed the last acknowledged write, and never the head.
    head, last = head_seq(config), max((a.seq for a in acks), default=dump_seq)
    if not last <= follower.seq <= head:
        found.problems.append(f"the follower is at seq {follower.seq}: the last write is at "
                              f"{last}, the source's head at {head}")
    positions = [(c.seq, c.row_no) for c in changes]
    if positions != sorted(set(positions)):
        found.problems.append("the change log's positions are not unique and increasing")
    by_seq: dict[int, list[Change]] = {}
    for c in changes:
        by_seq.setdefault(c.seq, []).append(c)
    for ack in acks:
        mine = by_seq.get(ack.seq, [])
        if not mine:
            found.lost += 1
            _example(found, f"write at seq {ack.seq} ({ack.kind} {ack.key}) is not in the log")
        elif len(mine) > 1:
            found.doubled += 1
            _example(found, f"write at seq {ack.seq} has {len(mine)} changes")
        elif not _matches(mine[0], ack):
            found.problems.append(f"the change at seq {ack.seq} is {mine[0]}, the write was "
                                  f"{ack}")
    state = dict(dump)
    for c in changes:  # past the dump the log's order is the truth
        if c.link is None:
            state.pop(c.key, None)
        else:
            state[c.key] = c.link
    table = table_rows(config)
    if state != table:
        wrong = [k for k in state.keys() | table.keys() if state.get(k) != table.get(k)]
        found.problems.append(f"the dump with the change log applied differs from the source's "
                              f"table in {len(wrong)} keys, e.g. {sorted(wrong)[:3]}")
    return found


def _matches(change: Change, ack: Ack) -> bool:
    if change.key != ack.key:
        return False
    if ack.kind == "deleted":
        return change.link is None
    if ack.kind == "hidden":
        return change.link is not None and change.link.visibility == 0
    return change.link == ack.link


def _example(found: CaptureCheck, text: str) -> None:
    if len(found.examples) < 5:
        found.examples.append(text)


class FollowTarget(Target):
    """``debl follow`` killed while a writer writes, started again (see the module)."""

    name = "follow"
    fault = f"kill -9 debl follow while a writer writes to the source ({WRITE_RATE:g}/s)"

    def __init__(self) -> None:
        self.dump_dir: Path | None = None
        self.dump: dict = {}
        self.dump_seq = 0

    def command(self, camp: Campaign) -> str:
        return (f"debl follow (the source's table {SOURCE_TABLE}: the input, dumped and "
                f"loaded), a writer at {WRITE_RATE:g} writes/s")

    def config(self, camp: Campaign) -> Config:
        return camp.config.replace(source_db_table=SOURCE_TABLE)

    def _run(self, camp: Campaign, argv: list[str], name: str, timeout: float) -> None:
        outcome = procs.run(argv, self.config(camp).child_env(), camp.log(name), timeout,
                            cwd=camp.work_dir)
        if not outcome.ok:
            raise RuntimeError(f"debl {' '.join(argv)} failed: {outcome.output[-2000:]}")

    def measure(self, camp: Campaign) -> Window:
        """Once per campaign: the source's table filled from the input, dumped, the dump
        loaded (its position recorded: where the follower starts)."""
        self.dump_dir = camp.work_dir / "follow-dump"
        # Only this campaign's load is kept: the follower starts at its dump (an older
        # campaign's follower skips there).
        drop_every_load(camp.config)
        self._run(camp, ["source", "db", "init", str(camp.input_dir), "--replace"],
                  "follow-init", 600.0)
        self._run(camp, ["source", "dump", str(self.dump_dir), "--files", "4", "--overwrite"],
                  "follow-dump", 600.0)
        self._run(camp, ["load", str(self.dump_dir), "--chunk-size", CHUNK, "--no-hot"],
                  "follow-load", 900.0)
        self.dump = dump_rows(self.dump_dir)
        with Catalog(camp.config) as catalog:
            load = catalog.loads.load()
        assert load is not None and load.position is not None, "the dump's load, its position"
        self.dump_seq = load.position.seq
        return Window(FOLLOW_S)

    def trial(self, camp: Campaign, trial: Trial, rng: random.Random, window: Window) -> None:
        config = self.config(camp)
        writer = SourceWriter(config, sorted(table_rows(config)), trial.seed).start()
        try:
            running = procs.start(["follow"], config.child_env(),
                                  camp.log(f"follow-{trial.number}"), cwd=camp.work_dir)
            tree = _kill_at(camp, running, trial, rng.uniform(0.5, window.seconds), "main",
                            lambda: [self._probe(config)])
            if tree is None:
                trial.ran_s = None  # a service never ends by itself: a failure, not a miss
                outcome = running.wait(0)
                trial.steps.append(Step.of(outcome))
                trial.problems.append("debl follow ended before the kill")
                return
            running.wait(30.0)
            _orphans(trial, tree, running.pid)
            again = procs.start(["follow"], config.child_env(),
                                camp.log(f"follow-{trial.number}-again"), cwd=camp.work_dir)
            time.sleep(AFTER_S)
        finally:
            acks = writer.stop()
        if writer.errors:
            trial.problems.append(f"the writer failed: {writer.errors[0]}")
        self._stop_caught_up(config, again, trial)
        found = check_capture(config, self.dump, self.dump_seq, acks)
        trial.lost, trial.doubled = found.lost, found.doubled
        trial.problems += found.problems
        trial.examples += found.examples
        trial.answers = len(acks)

    def _stop_caught_up(self, config: Config, running: procs.Running, trial: Trial) -> None:
        """Wait for the follower to reach the source's head, then stop it with SIGTERM: it
        must end cleanly."""
        head = head_seq(config)
        deadline = time.monotonic() + CATCH_UP_S
        while time.monotonic() < deadline and not running.done():
            with Catalog(config) as catalog:
                rows = catalog.changes.followers()
            if rows and rows[0].seq >= head:
                break
            time.sleep(0.2)
        else:
            trial.problems.append(f"the restarted follower did not reach the head (seq {head}) "
                                  f"in {CATCH_UP_S:g} s")
        if not running.done():
            os.kill(running.pid, signal.SIGTERM)
        outcome = running.wait(_timeout(Window(FOLLOW_S)))
        trial.steps.append(Step.of(outcome))
        if not outcome.ok:
            trial.problems.append("the restarted follower did not stop cleanly: "
                                  f"{outcome.output[-300:]}")

    @staticmethod
    def _probe(config: Config) -> str:
        with Catalog(config) as catalog:
            rows = catalog.changes.followers()
        return ("before its first capture" if not rows else
                f"captured up to seq {rows[0].seq} ({rows[0].changes:,} changes in all)")


FOLLOW_KILLS = {t.name: t for t in [FollowTarget()]}  # scripts/faults.py
