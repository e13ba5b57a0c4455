"""The day operations' campaign (docs/RELIABILITY.md, "Day operations"): its draw, its timeline
of the current day and its checks of the clients' answers, pure, on made-up records; and a short
sequence on the real stack (three operations on tiny days) whose every check must pass, so that
the campaign keeps working (`python scripts/day_ops.py` runs its full form)."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.days_checks import AnswerTally, in_outage, scan_logs, tally
from harness.days_clients import ERROR, RAW_ERROR, Record, digest
from harness.days_ops import OPERATIONS, draw
from harness.days_timeline import CurrentWatcher, longest_gap
from debl.format.link import Link

# --------------------------------------------------------------------------- the draw


def test_a_seed_draws_the_same_operations_and_only_the_allowed_ones():
    a = draw(random.Random(7), 40)
    assert a == draw(random.Random(7), 40)
    assert set(a) <= set(OPERATIONS) and len(set(a)) > 5
    assert set(draw(random.Random(7), 40, ("rollback", "cleanup"))) == {"rollback", "cleanup"}
    assert "kill-cleanup" in draw(random.Random(7), 40)


# --------------------------------------------------------------------------- the timeline


def _watcher(history) -> CurrentWatcher:
    w = CurrentWatcher(config=None)
    for since, load_id in history:
        w.note(since, load_id)
    return w


def test_lateness_is_zero_while_current_and_counts_from_the_switch_after():
    w = _watcher([(100.0, "A"), (200.0, "B"), (300.0, "A")])  # A, B, then a rollback to A
    assert w.current_at(150.0) == "A" and w.current_at(250.0) == "B" and w.current_at(99) is None
    assert w.lateness("A", 150.0, 151.0) == 0.0
    assert w.lateness("A", 201.5, 202.0) == pytest.approx(1.5)  # routed before the poll saw B
    assert w.lateness("A", 310.0, 311.0) == 0.0  # current again after the rollback
    assert w.lateness("B", 150.0, 199.0) is None  # not current before it was answered
    assert w.lateness("C", 150.0, 151.0) is None


def test_the_longest_stretch_leaves_the_outages_out_but_counts_a_slow_recovery():
    times = [0.0, 1.0, 2.0, 30.0, 31.0]
    assert longest_gap(times, []) == (28.0, 2.0)
    assert longest_gap(times, [(1.5, 29.5)]) == (1.0, 0.0)
    # an outage from 5 to 10 s, answers again only at 30 s: 20 s after the restart count
    assert longest_gap(times, [(5.0, 10.0)]) == (20.0, 10.0)
    assert longest_gap([5.0], []) == (0.0, 0.0)


# --------------------------------------------------------------------------- the answers


def _links(n: int) -> list[Link]:
    return [Link(1, 123456789, n, 1, b"x", 1000 + n, 0)]


def _world(windows=()):
    """What ``tally`` reads of a World: two days' digests of two keys, the outage windows."""
    pool = [SimpleNamespace(number=0, directory=Path("/in/0")),
            SimpleNamespace(number=1, directory=Path("/in/1"))]
    return SimpleNamespace(
        pool=pool, keys=[(1, 123456789), (2, 123456789)], windows=list(windows),
        expected=[[digest(_links(1)), digest([])], [digest(_links(2)), digest(_links(3))]],
        day_of_source=lambda source: next((d for d in pool if str(d.directory) == source),
                                          None))


def _loads(dropped_b: float | None = None, dropping_b: float | None = None):
    return {"A": SimpleNamespace(source="/in/0", dropping=None, dropped=None),
            "B": SimpleNamespace(source="/in/1", dropping=dropping_b, dropped=dropped_b)}


def test_each_answer_is_its_days_and_its_day_was_current():
    world = _world()
    w = _watcher([(100.0, "A"), (200.0, "B")])
    t = AnswerTally()
    tally(world, w, [Record(150.0, 150.1, 0, "A", digest(_links(1)), "raw"),
                     Record(250.0, 250.1, 1, "B", digest(_links(3)), "merged"),
                     Record(201.0, 201.1, 1, "A", digest([]), "mysql")],  # 1 s after the switch
          t, _loads())
    assert (t.answers, t.wrong, t.not_current, t.from_dropped, t.late) == (3, 0, 0, 0, 1)
    assert t.max_late_s == pytest.approx(1.0) and t.problems() == []
    assert t.by_day == {"A": 2, "B": 1} and t.times == [150.1, 250.1, 201.1]


def test_wrong_answers_are_told_apart_and_dropped_or_stale_days_are_caught():
    world = _world()
    w = _watcher([(100.0, "A"), (200.0, "B")])
    t = AnswerTally()
    tally(world, w, [Record(150.0, 150.1, 0, "A", digest(_links(2)), "raw"),  # B's answer
                     Record(150.0, 150.1, 0, "A", digest(_links(9)), "raw"),  # no day's
                     Record(260.0, 260.1, 0, "A", digest(_links(1)), "raw"),  # A, 60 s stale
                     Record(250.0, 250.1, 0, "B", digest(_links(2)), "raw"),  # B, dropped
                     Record(250.0, 250.1, 0, "Z", "0", "raw")],  # not the sequence's
          t, _loads(dropped_b=240.0))
    assert (t.wrong, t.wrong_day, t.mixed) == (2, 1, 1)
    assert t.not_current == 1 and t.from_dropped == 1 and t.unknown_load == 1
    assert len(t.problems()) == 4 and len(t.examples) == 5


def test_an_answer_after_cleanup_began_dropping_its_day_is_from_a_dropped_day():
    """A day's stores start going once cleanup marks it dropping (a killed cleanup may never
    mark it dropped): an answer of it that came back after the mark is a finding."""
    w = _watcher([(100.0, "A"), (200.0, "B")])
    t = AnswerTally()
    tally(_world(), w, [Record(250.0, 250.1, 1, "B", digest(_links(3)), "raw"),
                        Record(250.0, 250.5, 1, "B", digest(_links(3)), "raw")],
          t, _loads(dropping_b=250.3))
    assert t.answers == 2 and t.from_dropped == 1 and t.problems() == ["1 answers from a "
                                                                        "dropped day"]


def test_errors_count_inside_an_outage_only_and_a_raw_error_is_a_finding():
    world = _world(windows=[("mariadb", 100.0, 110.0)])
    assert in_outage(world, 105.0, 106.0, 0.0) and in_outage(world, 111.0, 112.0, 20.0)
    assert not in_outage(world, 150.0, 151.0, 20.0)
    t = AnswerTally()
    tally(world, _watcher([(50.0, "A")]),
          [Record(105.0, 105.5, 0, error=ERROR, route="ServiceError", message="MySQL at x"),
           Record(99.0, 100.5, 0, error=ERROR, route="ServiceError", message="MySQL at x"),
           Record(113.0, 113.5, 0, error=ERROR, route="ServiceError", message="HBase at y"),
           Record(150.0, 150.5, 0, error=ERROR, route="ServiceError", message="HBase at y"),
           Record(106.0, 106.5, 0, error=RAW_ERROR, route="KeyError", message="")],
          t, _loads())
    assert (t.errors_in_outage, t.errors_outside, t.raw_errors, t.no_message) == (4, 1, 1, 1)
    assert t.errors_after_restart == 1 and t.max_error_after_s == pytest.approx(3.0)
    assert t.answers == 0 and len(t.problems()) == 3


def test_a_record_line_reads_back():
    answer = Record.parse("1.5\t2.5\t7\tL1\tabcd\traw\n")
    assert answer == Record(1.5, 2.5, 7, "L1", "abcd", "raw")
    error = Record.parse(f"1.5\t2.5\t7\t{ERROR}\tQueryTimeout\tgave up | after 1 s\n")
    assert error.error == ERROR and error.route == "QueryTimeout" and "gave up" in error.message
    assert digest(_links(1)) == digest(list(_links(1))) != digest(_links(2))


def test_scan_logs_finds_a_traceback_once(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("fine\nTraceback (most recent call last):\n  File \"x\", line 1\n"
                   "KeyError: 'a'\n")
    seen: dict = {}
    assert scan_logs([log, tmp_path / "absent.log"], seen) == ["x.log: KeyError: 'a'"]
    assert scan_logs([log], seen) == []  # already read


# --------------------------------------------------------------------------- the real stack


@pytest.mark.long
@pytest.mark.xdist_group("day-ops-sequence")
@pytest.mark.stack
def test_a_short_sequence_of_day_operations_is_clean(stack_config, tmp_path):
    """The next day's load and a kill -9 of it; the next day loaded again and a cleanup killed
    while it drops the previous day, then a rollback (refused: that day is being dropped) and
    a cleanup that finishes the drop; a rollback (refused: that day was dropped); then the end:
    cleanup, the disk; two clients asking throughout, on tiny days. Every check of the campaign
    must pass. keep_previous_load is long enough that the gen_HF service's own cleanup does
    not drop the previous day before the killed cleanup reaches it."""
    from harness.days_runner import markdown, run_day_ops
    from harness.days_world import DayOpsSpec

    # The clients pause 5 ms between asks: unpaced, they took both cores from the suite's
    # other workers for no check the paced ones do not make (docs/ARCHITECTURE.md, "The test
    # suite's wall time, measured").
    spec = DayOpsSpec(sequences=1, seed=5, max_id=5001, files=3, clients=2, threads=2,
                      ask_pause_s=0.005, keys=300, keep_previous_s=30.0, pause_s=1.0, look_s=0.0,
                      fixed=("next-day", "kill-load", "kill-cleanup", "rollback"))
    results = run_day_ops(stack_config, tmp_path / "dayops", spec,
                          report=lambda text: print(text, file=sys.stderr))
    print(markdown(spec, results))
    (result,) = results
    assert result.drawn == ["next-day", "kill-load", "kill-cleanup", "rollback"]
    assert result.clean, result.problems
    assert result.answers.answers > 0 and result.current.verified >= 5
    assert result.links.answers == result.current.links >= 5
    assert [op.name for op in result.ops] == ["first day", "next-day", "kill-load",
                                              "kill-cleanup", "rollback", "end"]
    killed = result.ops[3]
    assert killed.label.startswith("killed at cleanup-") and "rollback refused" in killed.label
    assert "began dropping" in killed.detail, killed.detail
