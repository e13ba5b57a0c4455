"""The tail's instrument (docs/BENCHMARKS.md, "The tail"): a request's record of where its time
went (``debl.measure.request_cost``), the slowest requests kept and merged across processes with
every route's latencies (``debl.workload.tail``), and the bench's file and report of them
(``debl.bench.tail``). Pure unit tests: a fake clock where durations are asserted, the
in-memory store, synthetic benches; no service. The coordinator's own records:
tests/test_coordinator_logic.py; the client over worker processes:
tests/test_workload_client_processes.py."""

from __future__ import annotations

import gc
import json
import random
import threading
import time

import numpy as np
import pytest
from click.testing import CliRunner

from debl.measure import request_cost
from debl.bench import ApproachRun
from debl.bench.results import PhaseSpan
from debl.bench.tail import (beside_rows, burst_rows, read_tails, tail_line, tail_path,
                             write_tail)
from debl.cli import main
from debl.measure.histogram import Histogram
from debl.measure.request_cost import COMPONENTS, HBASE, HDFS_META, MERGE, MYSQL, RequestCost, Timed
from debl.report import Report, write_report
from debl.workload.client import ClientSpec, run_client
from debl.workload.requests import RequestSpec
from debl.workload.tail import (CAUSES, TailBreakdown, TailCounts, TailKeeper, TailSample,
                                route_label, share_of, tail_capacity)
from tests.test_report import _write_bench as write_bench  # bench.json, the runs, the report


@pytest.fixture
def clock(monkeypatch):
    """The records' clock, moved by hand: ``clock[0] += seconds``."""
    now = [100.0]
    monkeypatch.setattr(request_cost, "perf_counter", lambda: now[0])
    yield now
    request_cost.finish()  # a test that failed inside a record leaves none behind


def _cost(route: str = "", hot: str = "", outcome: str = "", **seconds: float) -> RequestCost:
    cost = RequestCost()
    for name, s in seconds.items():
        cost.spent[COMPONENTS.index(name)] = s
    cost.route, cost.hot, cost.outcome = route, hot, outcome
    return cost


# ----------------------------------------------------------------------------- one request

def test_steps_are_charged_to_the_calling_threads_record_only(clock):
    request_cost.charge(MYSQL, clock[0])  # no record: nothing to charge, no error
    cost = request_cost.begin()
    since = request_cost.perf_counter()
    clock[0] += 0.5
    request_cost.charge(MYSQL, since)
    elsewhere = threading.Thread(target=request_cost.charge, args=(HBASE, since))
    elsewhere.start()
    elsewhere.join()  # another thread, without a record of its own: this one untouched
    assert request_cost.current() is cost
    assert request_cost.finish() is cost and request_cost.current() is None
    request_cost.charge(MYSQL, since)  # after finish: no longer this request's
    assert cost.spent[MYSQL] == 0.5 and cost.charged() == 0.5


def test_nested_steps_are_counted_once_and_other_is_the_rest(clock):
    cost = request_cost.begin()
    with Timed(MERGE):  # the merge, with a store's call and a bucket opened inside it
        clock[0] += 1.0
        since = request_cost.perf_counter()
        clock[0] += 2.0
        request_cost.charge(HBASE, since)
        with Timed(HDFS_META):
            clock[0] += 0.25
            since = request_cost.perf_counter()
            clock[0] += 0.5
            request_cost.charge_reads(since, 3, 300)
        clock[0] += 1.0
    request_cost.note_runs(2)
    request_cost.routed(0.125, "raw", "mysql", "raw")
    request_cost.finish()
    spent = dict(zip(COMPONENTS, cost.spent))
    assert spent == {"wait": 0.125, "mysql": 0.0, "hbase": 2.0, "hdfs": 0.5, "hdfs_meta": 0.25,
                     "merge": 2.0, "late": 0.0}
    assert (cost.hdfs_reads, cost.hdfs_bytes, cost.runs) == (3, 300, 2)
    assert (cost.route, cost.hot, cost.outcome) == ("raw", "mysql", "raw")
    assert cost.other_s(5.0) == pytest.approx(0.125)
    assert cost.other_s(4.0) == 0.0  # never below 0, whatever the rounding


def test_a_full_collection_during_a_request_is_recorded():
    request_cost.watch_gc()
    request_cost.watch_gc()  # once: the callback is not added twice
    assert gc.callbacks.count(request_cost._on_gc) == 1
    gc.disable()  # no automatic collection in between
    try:
        quiet = request_cost.begin()
        request_cost.finish()
        busy = request_cost.begin()
        gc.collect()
        request_cost.finish()
    finally:
        gc.enable()
    assert (quiet.gc_full, quiet.gc_ns) == (0, 0)
    assert busy.gc_full == 1 and busy.gc_ns > 0


# ----------------------------------------------------------------------------- the slowest

def test_the_share_of_a_count_is_not_the_floats():
    assert [share_of(n, 0.01) for n in (0, 1, 99, 100, 101, 700, 50_000)] == [0, 1, 1, 1, 2, 7,
                                                                               500]
    assert share_of(100, 0.07) == 7  # 0.07 * 100 is 7.000000000000001
    assert tail_capacity(700) == 7 and tail_capacity(None) > 0


def test_route_labels():
    assert route_label("", "", "", "hbase") == "hbase"  # a plain store: the target's name
    assert route_label("raw", "none", "raw", "debl") == "raw"
    assert route_label("raw", "raw", "raw", "debl") == "raw, hot raw"
    assert route_label("merged", "mysql", "buffered", "debl") == "merged (buffered)"
    assert (route_label("mysql", "raw", "waited_uptime", "debl")
            == "mysql, hot raw (waited for uptime)")


def test_a_target_naming_too_many_routes_gets_one_more_not_an_error():
    keeper = TailKeeper(10, "store")
    indices = [keeper.route_of(_cost(f"r{i}")) for i in range(200)]
    assert len(keeper.labels) == 127 and keeper.labels[-1] == "(other routes)"
    assert indices[:126] == list(range(126)) and set(indices[126:]) == {126}
    assert keeper.route_of(_cost("r5")) == 5


def _offer_all(keeper: TailKeeper, latencies, costs, ids, threads: int = 4) -> np.ndarray:
    """Offer every request (its id1 and completion: its id) from *threads* threads; their
    route indices."""
    routes = np.zeros(len(latencies), dtype=np.int8)

    def offer(part: range) -> None:
        for i in part:
            routes[i] = keeper.route_of(costs[i])
            keeper.offer(latencies[i], ids[i], ids[i], 1, 0, costs[i], routes[i])

    workers = [threading.Thread(target=offer, args=(range(t, len(latencies), threads),))
               for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return routes


def _counts(keeper: TailKeeper, latencies, costs, ids=None) -> TailCounts:
    routes = _offer_all(keeper, latencies, costs, ids or range(len(latencies)))
    n = len(latencies)
    return keeper.counts(np.array(latencies, dtype=np.int64), routes, np.ones(n, dtype=bool),
                         np.array([c.gc_full > 0 for c in costs]))


def test_the_keeper_keeps_exactly_the_slowest_share_from_many_threads():
    latencies = random.Random(7).sample(range(1_000, 10_000_000), 700)
    keeper = TailKeeper(tail_capacity(len(latencies)), "store")
    counts = _counts(keeper, latencies, [RequestCost() for _ in latencies])
    slowest = sorted(latencies, reverse=True)[:7]
    assert [s.latency_ms for s in counts.samples] == [ns / 1e6 for ns in slowest]
    tail = counts.breakdown()
    assert (tail.answered, tail.wanted, tail.slowest, tail.exact) == (700, 7, 7, True)
    assert tail.threshold_ms == slowest[-1] / 1e6
    assert [s.id1 for s in tail.samples] == [latencies.index(ns) for ns in slowest]


def test_a_run_with_more_slow_requests_than_kept_says_so():
    keeper = TailKeeper(3, "store")
    counts = _counts(keeper, list(range(1, 501)), [RequestCost() for _ in range(500)])
    tail = counts.breakdown()  # 1% of 500 is 5, but 3 were kept
    assert (tail.wanted, tail.slowest, tail.exact) == (5, 3, False)
    assert "3 answers from 0.00 ms (of 5: the others were not kept)" in tail_line(tail)
    assert [s.latency_ms * 1e6 for s in tail.samples] == pytest.approx([500, 499, 498])


def test_parts_merge_into_the_slowest_of_the_whole_run():
    """Three processes, each with its own route numbering; the run's slowest all in one of
    them: the merge is what one keeper over every request keeps, the histograms add up."""
    rng = random.Random(3)
    n = 1000
    latencies = rng.sample(range(1_000, 100_000_000), n)
    routes = ["raw", "merged", "mysql"]
    costs = [_cost(rng.choice(routes), "none", "immediate") for _ in range(n)]
    order = sorted(range(n), key=lambda i: -latencies[i])
    parts_of = [order[:10] + order[10:400], order[400:700], order[700:]]  # the slowest: part 0
    capacity = tail_capacity(n)
    parts = [_counts(TailKeeper(capacity, "debl"), [latencies[i] for i in part],
                     [costs[i] for i in part], part) for part in parts_of]
    merged = TailCounts.merge(parts)
    whole = _counts(TailKeeper(capacity, "debl"), latencies, costs)
    assert [s.latency_ms for s in merged.samples] == [s.latency_ms for s in whole.samples]
    assert [s.latency_ms for s in merged.samples] == [latencies[i] / 1e6 for i in order[:10]]
    assert sorted(merged.routes) == sorted(routes)
    for label in routes:
        mine = [latencies[i] for i in range(n) if costs[i].route == label]
        reference = Histogram.of(np.array(mine, dtype=np.int64))
        for q in (50, 99):
            assert merged.routes[label].percentile_ns(q) == reference.percentile_ns(q)
        assert (merged.routes[label].count, merged.routes[label].max_ns) == (len(mine), max(mine))
    assert merged.breakdown() == whole.breakdown()


def test_the_dominant_cause_and_other_never_below_zero():
    ms = 1_000_000  # ns
    spread = TailSample.of(10 * ms, 0, 1, 1, 0, _cost(hdfs=0.004, merge=0.001), "raw")
    assert spread.ms["other"] == pytest.approx(5.0) and spread.dominant == "other"
    reads = TailSample.of(10 * ms, 0, 1, 1, 0, _cost(hdfs=0.006, merge=0.001), "raw")
    assert reads.ms["other"] == pytest.approx(3.0) and reads.dominant == "hdfs"
    tied = TailSample.of(6 * ms, 0, 1, 1, 0, _cost(wait=0.003, mysql=0.003), "mysql")
    assert tied.ms["other"] == 0.0 and tied.dominant == "wait"  # the first in CAUSES
    over = TailSample.of(10 * ms, 0, 1, 1, 0, _cost(hbase=0.008, merge=0.004), "merged")
    assert over.ms["other"] == 0.0 and over.dominant == "hbase"
    assert set(over.ms) == set(CAUSES)


def test_the_breakdown_by_route_and_by_cause_beside_every_routes_percentiles():
    ms = 1_000_000
    latencies = [i * 1_000 for i in range(1, 201)] + [i * ms for i in range(1, 101)]
    costs = [_cost("mysql", "mysql", "immediate", mysql=ns / 2e9) for ns in latencies[:200]]
    costs += [_cost("raw", "mysql", "raw", hdfs=ns * 0.6 / 1e9) for ns in latencies[200:]]
    costs[-2] = _cost("raw", "mysql", "raw", merge=0.060)  # the second slowest: its merge
    costs[-1].gc_full = 1
    tail = _counts(TailKeeper(tail_capacity(300), "debl"), latencies, costs).breakdown()
    assert (tail.answered, tail.wanted, tail.threshold_ms) == (300, 3, 98.0)
    assert [(g.name, g.count) for g in tail.by_route] == [("raw", 3)]
    raw = tail.by_route[0]
    assert raw.share == 1.0 and raw.latency_ms == pytest.approx(99.0) and raw.full_gc == 1
    assert raw.ms["hdfs"] == pytest.approx((60 + 0 + 58.8) / 3)
    assert raw.ms["merge"] == pytest.approx(20.0)
    assert raw.ms["other"] == pytest.approx((40 + 39 + 39.2) / 3)
    assert [(g.name, g.count) for g in tail.by_cause] == [("hdfs", 2), ("merge", 1)]
    assert tail.by_cause[0].share == pytest.approx(2 / 3)
    by = {r.route: r for r in tail.routes}
    assert [r.route for r in tail.routes] == ["mysql", "raw"]  # the most answers first
    assert (by["mysql"].requests, by["mysql"].in_tail, by["raw"].in_tail) == (200, 0, 3)
    assert by["mysql"].share == pytest.approx(2 / 3) and by["raw"].full_gc == 1
    assert by["raw"].p50_ms == pytest.approx(50.0, rel=1e-3)
    assert by["raw"].p99_ms == pytest.approx(99.0, rel=1e-3) and by["raw"].max_ms == 100.0
    assert by["mysql"].p99_ms == pytest.approx(0.198, rel=1e-3)
    assert TailBreakdown.from_dict(json.loads(json.dumps(tail.to_dict()))) == tail


def test_the_client_keeps_its_slowest_and_the_routes_its_target_names():
    """A target that names a route for odd id1s (as the coordinator does) and none for the
    others: the client's own latencies bound what it kept."""
    odd = []

    class Routed:
        def get_link_list(self, id1, link_type):
            if id1 % 2:
                request_cost.routed(0.0, "raw", "none", "raw")
                odd.append(id1)
            return []

    result = run_client(Routed(), ClientSpec(RequestSpec(max_id=2001, seed=4), threads=4,
                                             total=2000))
    tail = result.tail.breakdown()
    assert tail.answered == result.completed == 2000 and tail.slowest == 20
    assert {r.route: r.requests for r in tail.routes} == {"raw": len(odd),
                                                          "Routed": 2000 - len(odd)}
    assert tail.samples[0].latency_ms == result.latency.max
    # the fastest kept is the 1,981st of 2,000: at or above the p99 (the 1,980th), which the
    # histogram reports up to 1/1024 high
    assert tail.threshold_ms >= result.latency.p99 / (1 + 1 / 1024) - 1e-6
    assert all(s.route == ("raw" if s.id1 % 2 else "Routed") for s in tail.samples)
    assert "tail" not in result.to_dict()


def test_an_open_loop_request_sent_late_is_late_not_other():
    """One thread at 1,000 requests a second against a target that takes 5 ms: it falls
    behind its schedule, and the slowest request's wait for its turn is its ``late``."""

    class Slow:
        def get_link_list(self, id1, link_type):
            time.sleep(0.005)
            return []

    result = run_client(Slow(), ClientSpec(RequestSpec(max_id=2001, seed=4), threads=1,
                                           total=50, rate=1000.0))
    (slowest,) = result.tail.breakdown().samples
    assert slowest.dominant == "late"
    assert 0 < slowest.ms["late"] <= slowest.latency_ms - 5.0


# ----------------------------------------------------------------------------- the bench

def _bench(directory, tails: dict[str, TailCounts]) -> tuple[list[ApproachRun], Report]:
    """A bench with one run per approach, its tail written, and its report: query phase from
    10 s, 10 s of 100 answers each, gen_HF's hfiles from 12 to 14 s, a copy over before the
    queries, MySQL's merge still running."""
    phases = (PhaseSpan("copy", "c1", 0.0, 9.0, None, None),
              PhaseSpan("hfiles", "r1", 12.0, 14.0, None, None),
              PhaseSpan("mysql_merge", "all", 5.0, None, None, None))
    runs = [ApproachRun(
        approach=name, load_id="L1", load_started=1000.0, uptime_s=10.0,
        summary={"hot_bytes": 0}, phases=phases, target="debl", query_start_s=10.0,
        all_served_s=20.0, full_availability_s=20.0,
        query={"completed": 1000, "errors": 0, "throughput": 100.0,
               "latency": {k: 1.0 for k in ("p50", "p95", "p99", "mean", "max")}},
        timeline=tuple((10.0 + i, 100, 0, 1.0, 2.0) for i in range(10))) for name in tails]
    for run in runs:
        write_tail(directory, run.approach, tails[run.approach])
    return runs, write_bench(directory, runs, queries_from="uptime")


def _three_slow() -> TailCounts:
    """300 answers; the slowest three raw, 100 ms each, ending 2.5, 8.0 and 1.95 s into the
    query phase (the first overlaps hfiles, the third just before it)."""
    slow = [TailSample(100.0, end, "raw", "raw", 7, 1, 3,
                       {**dict.fromkeys(CAUSES, 0.0), "hdfs": 70.0, "other": 30.0}, hdfs_reads=2)
            for end in (2.5, 8.0, 1.95)]
    fast = Histogram.of(np.arange(1, 298, dtype=np.int64) * 1_000)
    return TailCounts(3, tuple(slow), {"raw": Histogram.merge([fast, Histogram.of(
        np.array([100_000_000] * 3))])}, {"raw": 0})


def test_the_bench_writes_the_tail_and_the_report_shows_it(tmp_path):
    counts = _three_slow()
    runs, report = _bench(tmp_path, {"debl-raw": counts})
    path = tail_path(tmp_path, "debl-raw")
    assert path.name == "debl-raw.tail.json"
    assert read_tails(tmp_path, runs) == {"debl-raw": counts.breakdown()}
    md = report.markdown.read_text()
    by_route = md.split("## The tail: the slowest 1% by route")[1].split("##")[0]
    # 3 slowest, all raw (100% of all answers too), 100 ms, 70 HDFS + 30 other, no GC, 2 reads
    assert "| debl-raw | raw | 3 | 100% | 100.0% | 100.0 | 70.0 | 30.0 | 0% | 2.00 |" in by_route
    assert "MySQL ms" not in by_route  # a column of zeros is left out
    assert "| debl-raw | HDFS reads | 3 | 100% | 100.0 | 70.0 | 30.0 |" in md
    assert "## The tail: every answer by route" in md
    beside = md.split("## The tail: what ran beside the slowest 1%")[1]
    assert "| debl-raw | hfiles | 33% | 20% |" in beside  # 1 of the 3; seconds 12 and 13
    assert "| debl-raw | mysql_merge | 100% | 100% |" in beside  # still running: to the end
    assert "| debl-raw | copy |" not in beside  # over before the queries
    assert "## The tail: stalls in the slowest 1%" in md  # 3 answers seconds apart: no burst
    assert "| debl-raw | 3 | 0% | 0 | 0 | - |" in md
    assert tail_line(read_tails(tmp_path, runs)["debl-raw"]) == (
        "slowest 1%: 3 answers from 100.0 ms; by route raw 100%; by cause HDFS reads 100%")
    printed = CliRunner().invoke(main, ["report", str(tmp_path), "--tail"])
    assert printed.exit_code == 0, printed.output
    assert "## The tail: the slowest 1% by dominant cause" in printed.output
    assert "| debl-raw | HDFS reads | 3 | 100% |" in printed.output


def test_stalls_count_the_slowest_that_ended_together():
    """Six answers ending 10 ms apart are one burst (each within 20 ms of the one before, however
    long the run); four together are too few; a gap of 20 ms or more ends a burst."""
    ends = [1.00 + 0.01 * i for i in range(6)] + [2.0, 2.001, 2.002, 2.003] + [3.0, 3.02]
    samples = tuple(TailSample(50.0 + i, end, "raw", "raw", 7, 1, 1, dict.fromkeys(CAUSES, 0.0))
                    for i, end in enumerate(ends))
    answers = Histogram.of(np.array([1_000] * 1188 + [50_000_000] * 12, dtype=np.int64))
    counts = TailCounts(len(samples), samples, {"raw": answers}, {"raw": 0})  # 12: the 1%
    headers, rows = burst_rows({"debl-raw": counts.breakdown()})
    assert headers == ("approach", "slowest", "in bursts", "bursts", "largest burst",
                       "its slowest ms")
    # 6 of the 12 in one burst; its slowest is the sixth sample (55 ms)
    assert rows == (("debl-raw", "12", "50%", "1", "6", "55.0"),)
    assert burst_rows({"debl-raw": TailCounts(0, (), {}, {}).breakdown()})[1] == (
        ("debl-raw", "0", "-", "0", "0", "-"),)


def test_a_bench_without_tail_files_has_no_tail_section(tmp_path):
    runs, _ = _bench(tmp_path, {"debl-raw": _three_slow()})
    tail_path(tmp_path, "debl-raw").unlink()
    assert read_tails(tmp_path, runs) == {}
    assert beside_rows({}, runs)[1] == ()
    assert "The tail" not in write_report(tmp_path).markdown.read_text()
    printed = CliRunner().invoke(main, ["report", str(tmp_path), "--tail"])
    assert "no tail recorded" in printed.output
