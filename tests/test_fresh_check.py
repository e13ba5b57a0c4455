"""The check of fresh answers on constructed runs (docs/FRESHNESS.md, "The checker"): a dump of a
few rows with its position, writes with their positions and the client's instants, answers
logged as the client logs them. Each kind of violation is found (an answer older than a write
acknowledged before it was sent, an answer mixing two positions, a client going back), a
correct answer at a write sent but not acknowledged passes, and so does a correct run; the
history's problems (a gap, another writer, a change log that is not the writes) are found.
The logs round-trip. No service is needed: the stack test is tests/test_fresh_check_run.py."""

from __future__ import annotations

import functools
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from debl.catalog import Change
from debl.errors import ConfigError
from debl.format.link import MAX_ID, Link, Origin
from debl.format.overlay import overlay
from debl.position import DumpPosition
from debl.store.memory import MemoryStore
from debl.workload.client import ClientSpec, TargetSource, run_client
from debl.workload.answer_log import (AnswerLog, answer_digest, prepare_dir, read_answer_logs,
                                      rows_digest)
from debl.workload.fresh_check import OLDER, WENT_BACK, WRONG, check_fresh
from debl.workload.fresh_history import build_history
from debl.workload.requests import RequestSpec
from debl.workload.mix import COUNT_LINK, GET_LINK_LIST, MULTIGET_LINK, READ_OPS
from debl.workload.write_log import read_writes, save_writes
from debl.workload.writers import WriteRecord
from loaders.listing import listing_entry, write_index
from loaders.verify_source import SourceComparison, _compare, _ranges

LT = 123456789
DUMP = DumpPosition("0-1-100", "source-of-the-test")
ROWS = [Link(1, LT, 10, 1, b"ten", 1000, 0), Link(1, LT, 11, 1, b"eleven", 1001, 0),
        Link(2, LT, 20, 1, b"twenty", 1002, 0), Link(3, LT, 30, 1, b"x", 5, 0)]
NEW = Link(1, LT, 12, 1, b"twelve", 2000, 0)  # add_link at 101
EDIT = Link(1, LT, 11, 1, b"eleven again", 3000, 0)  # update_link at 103
# (record, the row after it): w1 add at 101, w2 delete (hide id2 10) at 102, w3 update at 103,
# acknowledged late (sent at 3000, acknowledged at 5000)
WRITES = [WriteRecord("add_link", 1, LT, 12, 900, 1000, 1100, "0-1-101", False, True, row=NEW),
          WriteRecord("delete_link", 1, LT, 10, 1900, 2000, 2100, "0-1-102", True, True),
          WriteRecord("update_link", 1, LT, 11, 2900, 3000, 5000, "0-1-103", True, True,
                      row=EDIT),
          WriteRecord("add_link", 3, LT, 30, 2950, 2950, 2990, None, True, False,
                      row=Link(3, LT, 30, 1, b"x", 5, 0))]  # the same row: nothing changed
GET, COUNT, MULTI = (READ_OPS.index(op) for op in (GET_LINK_LIST, COUNT_LINK, MULTIGET_LINK))


def state(version: int) -> MemoryStore:
    """The source after the first *version* writes (the reference, by hand)."""
    rows = {link.key: link for link in ROWS}
    if version >= 1:
        rows[NEW.key] = NEW
    if version >= 2:
        rows[(1, LT, 10)] = rows[(1, LT, 10)]._replace(visibility=0)
    if version >= 3:
        rows[EDIT.key] = EDIT
    store = MemoryStore()
    store.write_links((link, Origin(0, 0, 0)) for link in rows.values())
    return store


def make_dump(directory: Path, rows=ROWS, position: DumpPosition | None = DUMP) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "links-000.tsv"
    path.write_bytes(b"".join(link.to_line() for link in rows))
    write_index(directory, [listing_entry(path, None, position)], 1_000_000_000)
    return directory


class Log:
    """Answers as one client process logs them."""

    def __init__(self, directory: Path, process: int = 0):
        self.log = AnswerLog(directory, process, [0])
        self.thread = self.log.thread(0)

    def get(self, sent: int, recv: int, answer: list[Link], id1: int = 1) -> None:
        self.thread.add(GET, id1, LT, (), sent, recv, answer, True)

    def count(self, sent: int, recv: int, count: int, id1: int = 1) -> None:
        self.thread.add(COUNT, id1, LT, (), sent, recv, count, True)

    def multi(self, sent: int, recv: int, id2s: tuple, answer: list[Link]) -> None:
        self.thread.add(MULTI, 1, LT, id2s, sent, recv, answer, True)

    def close(self) -> None:
        self.thread.flush()
        self.log.close()


def check(tmp_path, logs: list[Log], writes=WRITES, **kw):
    for log in logs:
        log.close()
    dump = tmp_path / "dump"
    if not dump.exists():
        make_dump(dump)
    return check_fresh(dump, writes, read_answer_logs(tmp_path / "answers"), **kw)


@pytest.fixture
def log(tmp_path):
    return Log(prepare_dir(tmp_path / "answers"))


def test_a_correct_run_passes(tmp_path, log):
    log.get(1200, 1300, state(1).get_link_list(1, LT))  # after the add was acknowledged
    log.count(1200, 1300, state(1).count_link(1, LT))
    log.get(50, 60, state(0).get_link_list(2, LT), id1=2)  # a key nobody wrote
    log.multi(2200, 2300, (10, 12, 99), state(2).multiget_link(1, LT, (10, 12, 99)))
    log.get(2200, 2300, state(2).get_link_list(1, LT))
    log.get(2200, 2300, state(0).get_link_list(4, LT), id1=4)  # no row at all
    log.get(6000, 6100, state(3).get_link_list(1, LT))
    log.thread.add(GET, 1, LT, (), 6000, 6100, None, False)  # failed: nothing to check
    report = check(tmp_path, [log])
    assert report.ok, report.to_dict()
    assert (report.answers, report.checked, report.failed) == (8, 7, 1)
    assert (report.keys, report.writes, report.last_seq, report.dump) == (3, 3, 103, "0-1-100")


def test_an_answer_at_a_write_sent_but_not_acknowledged_is_valid(tmp_path, log):
    # Between 3000 and 5000 the update may or may not have committed: both states are valid,
    # to two clients (to one, in this order, they would be going back: below).
    log.get(3100, 3200, state(3).get_link_list(1, LT))
    other = Log(tmp_path / "answers", process=1)
    other.get(3100, 3200, state(2).get_link_list(1, LT))
    other.count(3300, 3400, state(3).count_link(1, LT))
    report = check(tmp_path, [log, other])
    assert report.ok and report.checked == 3, report.to_dict()


def test_an_answer_older_than_a_write_acknowledged_before_it_was_sent(tmp_path, log):
    log.get(2200, 2300, state(1).get_link_list(1, LT))  # the delete was acked at 2100
    log.count(2200, 2300, 7)  # no state ever had that count: wrong
    report = check(tmp_path, [log])
    assert report.violations.counts == {OLDER: 1, WRONG: 1}, report.to_dict()
    assert "lo 102, hi 102" in report.violations.examples[OLDER][0]
    assert "from position 101 until 101" in report.violations.examples[OLDER][0]


def test_a_tolerance_relaxes_the_lower_bound(tmp_path, log):
    log.get(2200, 2300, state(1).get_link_list(1, LT))
    assert check(tmp_path, [log], tolerance_s=150e-9).ok  # acked at 2100 >= 2200 - 150


def test_an_answer_mixing_two_positions_is_wrong_at_every_position(tmp_path, log):
    mixed = [link for link in state(3).get_link_list(1, LT) if link.id2 != 12]  # 103, not 101
    log.get(6000, 6100, mixed)
    log.multi(6000, 6100, (10, 11), [ROWS[0], EDIT])  # 10 still shown, 11 already edited
    report = check(tmp_path, [log])
    assert report.violations.counts == {WRONG: 2}, report.to_dict()
    assert "nor at any position since the dump" in report.violations.examples[WRONG][0]


def test_going_back_is_per_process_and_needs_no_valid_choice(tmp_path, log):
    # Each answer alone is valid (lo 102, hi 103); shown 103, then 102 by one process: back.
    log.get(3100, 3200, state(3).get_link_list(1, LT))
    log.get(3300, 3400, state(2).get_link_list(1, LT))
    # Overlapping in time (sent before the other was received): no order between them; a
    # count_link equal at 102 and 103 fits after either.
    other = Log(tmp_path / "answers", process=1)
    other.get(3500, 3700, state(3).get_link_list(1, LT))
    other.get(3600, 3800, state(2).get_link_list(1, LT))
    other.count(3900, 4000, state(2).count_link(1, LT))
    report = check(tmp_path, [log, other])
    assert report.violations.counts == {WENT_BACK: 1}, report.to_dict()
    example = report.violations.examples[WENT_BACK][0]
    assert example.startswith("get_link_list(1, 123456789) of process 0 thread 0") and (
        "is the source's only from position 102 until 102, older than from position 103 on"
        in example), example


def test_the_history_must_be_the_writes_and_nothing_else(tmp_path, log):
    log.get(1200, 1300, state(1).get_link_list(1, LT))
    gap = [*WRITES[:2], WriteRecord("update_link", 1, LT, 11, 2900, 3000, 5000, "0-1-105",
                                    True, True, row=EDIT)]
    report = check(tmp_path, [log], writes=gap)
    assert report.history.counts == {"position no write holds": 2}, report.to_dict()
    assert not report.ok and report.violations.total == 0
    # another writer: the delete found no visible row
    wrong = [*WRITES[:2], WriteRecord("delete_link", 1, LT, 10, 2900, 3000, 3100, "0-1-103",
                                      True, True)]
    assert check(tmp_path, [], writes=wrong).history.counts == {
        "write contradicts the history": 1}
    bad = [*WRITES[:3], WriteRecord("add_link", 9, LT, 9, 1, 2, None, None, None, None,
                                    "ServiceError: connection lost")]
    assert check(tmp_path, [], writes=bad).history.counts == {"write of unknown outcome": 1}


def test_the_change_log_must_be_the_writes(tmp_path, log):
    log.close()
    hidden = ROWS[0]._replace(visibility=0)

    def change(seq, link, key=None):
        return Change(seq, 0, *(key or link.key), link, 0.0, 0.0)

    right = [change(101, NEW), change(102, hidden), change(103, EDIT)]
    assert check(tmp_path, [], changes=right, changes_upto=103).ok
    wrong = [change(101, NEW), change(102, ROWS[0]), change(104, EDIT)]
    report = check(tmp_path, [], changes=wrong, changes_upto=104)
    assert report.history.counts == {"change differs from its write": 1,
                                     "change no write made": 1,
                                     "write missing from the change log": 1}, report.to_dict()
    late = check(tmp_path, [], changes=right[:2], changes_upto=102)
    assert late.history.counts == {"write past the follower": 1}
    # a position no write holds, and no change either: another table's transaction
    moved = [*WRITES[:2], WriteRecord("update_link", 1, LT, 11, 2900, 3000, 5000, "0-1-105",
                                      True, True, row=EDIT)]
    other = [change(101, NEW), change(102, hidden), change(105, EDIT)]
    assert check(tmp_path, [], writes=moved, changes=other, changes_upto=106).ok
    assert check(tmp_path, [], writes=moved).history.counts == {"position no write holds": 2}


def test_the_dump_is_read_by_the_merge_rule_and_its_position_is_needed(tmp_path, log):
    older = ROWS[1]._replace(time=1, data=b"older")
    make_dump(tmp_path / "dump", rows=[*ROWS, older])  # the newer row of the key wins
    log.get(1200, 1300, state(1).get_link_list(1, LT))
    assert check(tmp_path, [log]).ok
    make_dump(tmp_path / "bare", position=None)
    with pytest.raises(ConfigError, match="carries no position"):
        check_fresh(tmp_path / "bare", WRITES, read_answer_logs(tmp_path / "answers"))
    assert check_fresh(tmp_path / "bare", WRITES, read_answer_logs(tmp_path / "answers"),
                       position=DUMP).ok


def test_the_answer_log_round_trips_and_survives_a_cut(tmp_path, log):
    answers = [(GET, 1, (), 10, 20, state(0).get_link_list(1, LT)),
               (MULTI, 1, (11, 10, 99), 30, 45, state(0).multiget_link(1, LT, (11, 10, 99))),
               (COUNT, 2, (), 50, 70, 1)]
    for op, id1, id2s, sent, recv, result in answers:
        log.thread.add(op, id1, LT, id2s, sent, recv, result, True)
    log.thread.flush()
    log.thread.add(GET, 5, LT, (), 80, 90, [], True)
    log.close()
    read = read_answer_logs(tmp_path / "answers")
    assert len(read) == 4 and read.files == ["answers-p0.bin"] and not read.notes
    r = read.records
    assert r["op"].tolist() == [GET, MULTI, COUNT, GET]
    assert r["id1"].tolist() == [1, 1, 2, 5] and set(r["link_type"].tolist()) == {LT}
    assert (r["sent_ns"].tolist(), r["recv_ns"].tolist()) == ([10, 30, 50, 80], [20, 45, 70, 90])
    assert r["rows"].tolist() == [2, 2, 0, 0] and r["digest"][2] == 1
    assert read.id2s_of(1) == (11, 10, 99) and read.id2s_of(0) == ()
    path = tmp_path / "answers" / "answers-p0.bin"
    path.write_bytes(path.read_bytes()[:-10])  # killed while writing its last block
    cut = read_answer_logs(tmp_path / "answers")
    assert len(cut) == 3 and "cut short" in cut.notes[0]
    with pytest.raises(ConfigError, match="already holds the answer logs"):
        prepare_dir(tmp_path / "answers")
    np.testing.assert_array_equal(cut.records, read.records[:3])
    # processes killed as they opened their logs: one empty, one cut inside its header
    whole = path.read_bytes()
    (tmp_path / "answers" / "answers-p1.bin").write_bytes(b"")
    (tmp_path / "answers" / "answers-p2.bin").write_bytes(whole[:20])
    killed = read_answer_logs(tmp_path / "answers")
    assert len(killed) == 3 and len(killed.notes) == 3
    assert all("cut inside its header" in n for n in killed.notes[1:])
    (tmp_path / "answers" / "answers-p3.bin").write_bytes(b"not a log at all")
    with pytest.raises(ConfigError, match="is not an answer log"):
        read_answer_logs(tmp_path / "answers")


def test_the_write_log_round_trips(tmp_path):
    odd = WriteRecord("add_link", 1, LT, 5, 1, 2, 3, "0-1-7", False, True,
                      row=Link(1, LT, 5, 1, b"\x00\t\xff,\"", 9, 0))
    records = [*WRITES, odd, WriteRecord("delete_link", 1, LT, 6, 4, None, None, None, None,
                                         None, "ServiceError: lost, \"quoted\"")]
    assert read_writes(save_writes(records, tmp_path / "w.csv")) == records
    (tmp_path / "old.csv").write_text("op,id1\nadd_link,1\n")
    with pytest.raises(ConfigError, match="lacks the rows written"):
        read_writes(tmp_path / "old.csv")


# ------------------------------------------------------------------ the pieces, one at a time

def test_the_history_is_the_dump_then_each_write_at_its_position(tmp_path):
    """Per (id1, link_type): the dump's rows, then a version per write that changed a row, in
    position order whatever order the log has them in; a write at or before the dump's
    position is in the dump already and is not applied again; delete_link hides the row it
    found and keeps the rest of it."""
    make_dump(tmp_path / "dump")
    early = WriteRecord("update_link", 2, LT, 20, 1, 2, 3, "0-1-99", True, True,
                        row=Link(2, LT, 20, 1, b"before the dump", 1, 0))
    writes = [WRITES[2], early, WRITES[0], WRITES[1], WRITES[3]]  # out of position order
    history = build_history(tmp_path / "dump", writes, {(1, LT), (2, LT), (4, LT)})
    assert history.problems.total == 0, history.problems.to_dict()
    assert history.dump_seq == 100 and history.dump_rows == 4  # id1 3: written, not changed
    one = history.key(1, LT)
    assert one.base == {10: ROWS[0], 11: ROWS[1]}
    assert one.seqs == [101, 102, 103]
    assert one.changes == [(12, NEW), (10, ROWS[0]._replace(visibility=0)), (11, EDIT)]
    two = history.key(2, LT)
    assert two.base == {20: ROWS[2]} and two.seqs == []  # the write of 99 is the dump's
    assert history.key(4, LT).base == {} and history.key(4, LT).seqs == []
    assert sorted(history.seqs) == [99, 101, 102, 103]


def test_the_bounds_are_the_writes_acknowledged_before_sending_and_sent_before_the_answer(
        tmp_path, log):
    """lo counts a write acknowledged strictly before the read was sent; hi a write sent at or
    before the answer came back. The answers here are wrong on purpose, so that each one's
    bounds are printed."""
    log.count(1100, 1999, 99)   # the add acked at 1100: not before 1100; delete sent at 2000
    log.count(1101, 2000, 99)   # acked at 1100 < 1101; delete sent at 2000 <= 2000
    log.count(5001, 5002, 99)   # everything acked
    report = check(tmp_path, [log])
    assert report.violations.counts == {WRONG: 3}
    shown = sorted(e.split(": ")[1].split(";")[0] for e in report.violations.examples[WRONG])
    assert shown == ["lo 100, hi 101", "lo 101, hi 102", "lo 103, hi 103"]


def test_answers_at_the_dumps_moment_are_older_than_their_arrival_on_written_keys(tmp_path,
                                                                                   log):
    """What a DeBL without fresh answers gives: every answer the dump's. An answer on a key
    written before it was sent is older than its arrival, unless the read gives the same at the
    newer positions (count_link of id1 1: one link added, one hidden, still 2); the others
    pass."""
    for id1 in (1, 2, 3):
        log.get(6000, 6100, state(0).get_link_list(id1, LT), id1=id1)
        log.count(6000, 6100, state(0).count_link(id1, LT), id1=id1)
    log.get(500, 600, state(0).get_link_list(1, LT))  # before any write: right
    report = check(tmp_path, [log])
    assert report.violations.counts == {OLDER: 1}, report.to_dict()
    assert report.violations.examples[OLDER][0].startswith("get_link_list(1, 123456789)")
    assert report.history.total == 0 and report.checked == 7


def test_the_digest_tells_order_rows_and_bytes_apart():
    rows = state(3).get_link_list(1, LT)
    assert len(rows) == 2
    assert answer_digest(GET, rows) == (rows_digest(rows), 2)
    assert rows_digest(rows) != rows_digest(rows[::-1])
    assert rows_digest(rows) != rows_digest(rows[:1])
    assert rows_digest(rows) != rows_digest([rows[0]._replace(data=rows[0].data + b"!"),
                                             rows[1]])
    assert rows_digest(rows) != rows_digest([rows[0]._replace(version=1), rows[1]])
    assert rows_digest([]) == answer_digest(GET, None)[0] and answer_digest(GET, [])[1] == 0
    assert answer_digest(COUNT, 7) == (7, 0)


def test_the_overlay_replaces_by_key_in_position_order():
    base = {link.key: link for link in ROWS}
    older = NEW._replace(time=1, version=0)  # past the dump the log's order wins, not the time

    def change(seq, row_no, key, link):
        return Change(seq, row_no, *key, link, 0.0, 0.0)

    applied = overlay(base, [change(101, 0, NEW.key, NEW), change(101, 1, NEW.key, older),
                             change(102, 0, ROWS[0].key, None)])
    assert applied[NEW.key] == older and ROWS[0].key not in applied
    assert base == {link.key: link for link in ROWS}  # not changed in place
    with pytest.raises(ValueError, match="out of position order"):
        overlay(base, [change(102, 0, NEW.key, NEW), change(101, 3, NEW.key, None)])


def test_the_comparison_with_the_source_counts_each_row_once():
    """``debl verify --against-source``'s count, range by range: a row of the source DeBL
    lacks, one DeBL has and the source lacks, one with other values; the id range is covered
    by the cold buckets' ranges and the ranges between them, exactly once."""
    theirs = {link.key: link for link in [*ROWS, NEW]}
    mine = {link.key: link for link in ROWS}
    mine[ROWS[1].key] = EDIT
    mine[(9, LT, 9)] = Link(9, LT, 9, 1, b"", 1, 0)
    found = SourceComparison("load", DUMP.gtid, "0-1-103", 103)
    _compare(found, mine, theirs)
    assert (found.missing, found.extra, found.different) == (1, 1, 1) and not found.ok
    assert (found.source_rows, found.debl_rows) == (5, 5)
    assert "the source holds" in found.examples["missing"][0]
    buckets = [SimpleNamespace(k_lo=10, k_hi=19), SimpleNamespace(k_lo=20, k_hi=29),
               SimpleNamespace(k_lo=40, k_hi=49)]
    ranges = [(lo, hi) for lo, hi, _ in _ranges(buckets)]
    assert ranges == [(0, 9), (10, 19), (20, 29), (30, 39), (40, 49), (50, MAX_ID)]
    assert [(lo, hi) for lo, hi, _ in _ranges([])] == [(0, MAX_ID)]


def _store_of(rows: list[Link]) -> MemoryStore:
    """A worker process's own memory store holding *rows*."""
    store = MemoryStore()
    store.write_links((link, Origin(0, 0, 0)) for link in rows)
    return store


class _Lying(MemoryStore):
    """A store whose answers for one id1 leave out its newest row."""

    def get_link_list(self, id1, link_type, *args, **kwargs):
        rows = super().get_link_list(id1, link_type, *args, **kwargs)
        return rows[1:] if id1 == self.lie_on and rows else rows


@pytest.mark.parametrize("processes", [1, 2])
def test_the_client_logs_every_answer_and_a_static_store_keeps_the_contract(tmp_path,
                                                                             processes):
    """run_client with --answer-log against the memory store (no write: every answer is the
    dump's): every read is logged, in a file per process, and checked right; a store that
    drops a row of one id1 is caught on exactly that id1's answers."""
    rows = [Link(i, LT + i % 2, i + j, 1, b"x%d" % j, 1000 + j, 0)
            for i in range(1, 301) for j in range(i % 4)]
    make_dump(tmp_path / "dump", rows)
    spec = RequestSpec(max_id=301, seed=3, link_types=2)
    honest = MemoryStore()
    honest.write_links((link, Origin(0, 0, 0)) for link in rows)
    target = (honest if processes == 1 else
              TargetSource(functools.partial(_store_of, rows), name="memory"))
    result = run_client(target, ClientSpec(spec, threads=2, total=400, processes=processes,
                                           answer_log=str(tmp_path / "answers")))
    answers = read_answer_logs(tmp_path / "answers")
    assert result.completed == len(answers) == 400
    assert answers.files == [f"answers-p{k}.bin" for k in range(processes)]
    report = check_fresh(tmp_path / "dump", [], answers)
    assert report.ok and report.checked == 400, report.to_dict()

    lying = _Lying()
    lying.write_links((link, Origin(0, 0, 0)) for link in rows)
    r = answers.records
    with_rows = (r["id1"] % 4 > 0) & (r["link_type"] == LT + r["id1"] % 2)
    lying.lie_on = int(np.bincount(r["id1"][with_rows]).argmax())  # asked most, with rows
    run_client(lying, ClientSpec(spec, threads=2, total=400,
                                 answer_log=str(tmp_path / "lies")))
    lies = read_answer_logs(tmp_path / "lies")
    report = check_fresh(tmp_path / "dump", [], lies)
    asked = ((lies.records["id1"] == lying.lie_on)  # its other link type has no row to drop
             & (lies.records["link_type"] == LT + lying.lie_on % 2))
    assert asked.sum() > 0 and report.violations.counts == {WRONG: int(asked.sum())}


def test_two_client_runs_are_two_clients(tmp_path):
    """The answer logs of two `debl query` runs, each with its process 0: numbered apart, so a
    key shown at 103 to one and at 102 to the other later is no going back."""
    make_dump(tmp_path / "dump")
    first, second = Log(prepare_dir(tmp_path / "a")), Log(prepare_dir(tmp_path / "b"))
    first.get(3100, 3200, state(3).get_link_list(1, LT))
    second.get(3300, 3400, state(2).get_link_list(1, LT))
    for log in (first, second):
        log.close()
    both = read_answer_logs(tmp_path / "a", tmp_path / "b")
    assert both.process.tolist() == [0, 1] and len(both.files) == 2
    assert check_fresh(tmp_path / "dump", WRITES, both).ok
    one = Log(prepare_dir(tmp_path / "c"))
    one.get(3100, 3200, state(3).get_link_list(1, LT))
    one.get(3300, 3400, state(2).get_link_list(1, LT))
    one.close()
    report = check_fresh(tmp_path / "dump", WRITES, read_answer_logs(tmp_path / "c"))
    assert report.violations.counts == {WENT_BACK: 1}
