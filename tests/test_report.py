"""The report's service figures (docs/DESIGN.md section 11, the paper's Figure 7.6 in numbers) and
its answers since the load started (the first answer, the share by a plain copy's end, the
curve), computed from synthetic per-second timelines: pure unit tests, no stack."""

from __future__ import annotations

import csv
import json

import pytest

from debl.bench import ApproachRun, BenchSpec, read_bench
from debl.bench.answers import answered_by, answered_curve, answers_summary, copy_end
from debl.bench.results import write_timeline
from debl.bench.service import answered_share, least_margin
from debl.report import spark_line, service_from_uptime, write_report
from debl.workload.spec import GenerateSpec

UPTIME, START = 10.0, 10.2  # the client starts 0.2 s after uptime
# completions per second of the query phase: 3 s served, 5 s stalled (one straggler), 9 s at
# 200/s, and a last half second with 100
PER_SECOND = [100, 100, 100, 0, 0, 1, 0, 0] + [200] * 9 + [100]
LAST = START + 17.5


def run(name: str = "debl", full: float | None = 20.2, per_second=PER_SECOND,
        last: float | None = LAST, uptime: float = UPTIME, start: float = START) -> ApproachRun:
    timeline = tuple((round(start + i, 3), n, 0, 1.0, 2.0) for i, n in enumerate(per_second))
    completed = sum(per_second)
    return ApproachRun(
        approach=name, load_id="L1", load_started=1000.0, uptime_s=uptime,
        summary={"hot_bytes": 0}, phases=(), target="debl", query_start_s=start,
        all_served_s=last, full_availability_s=full,
        query={"completed": completed, "errors": 0, "throughput": 1.0,
               "latency": {k: 1.0 for k in ("p50", "p95", "p99", "mean", "max")}},
        waits={"immediate_share": 0.9, "mean_wait_s": 2.0, "p95_wait_s": 4.0,
               "answered": completed},
        gen_hf={"completed": True} if name.startswith("debl") else None, timeline=timeline)


def test_requests_served_in_the_first_window_after_uptime():
    # [10, 20): the first three seconds (300), the stall (1), 18.2-19.2 (200) and 0.8 of the
    # second 19.2-20.2 (160)
    assert service_from_uptime(run(), window_s=10.0).first_window == 661
    # a window longer than the phase holds every request
    assert service_from_uptime(run()).first_window == sum(PER_SECOND) == 2201


def test_throughput_once_everything_is_loaded():
    # from full availability at 20.2 to the last query at 27.7: 7 seconds of 200 and a last
    # half second of 100: 1,500 requests in 7.5 s
    sv = service_from_uptime(run())
    assert sv.loaded_from_s == 20.2
    assert sv.loaded_rate == pytest.approx(200.0)
    # an approach that loads everything before its uptime: from uptime, stalls included
    baseline = service_from_uptime(run("bulkLoad-mysql", full=UPTIME))
    assert baseline.loaded_rate == pytest.approx(2201 / (LAST - UPTIME))
    # full availability after the last query, or never: no such throughput
    assert service_from_uptime(run(full=27.5)).loaded_rate is None
    assert service_from_uptime(run(full=None)).loaded_rate is None


def test_longest_stall_and_last_query():
    sv = service_from_uptime(run())
    # seconds 3..7 of the phase (13.2 to 18.2): under 1% of the best second (200/s), the
    # straggler included; the 0.2 s before the client started is a shorter stall
    assert sv.longest_stall_s == pytest.approx(5.0)
    assert sv.stall_at_s == pytest.approx(13.2)
    assert sv.last_query_s == LAST
    steady = service_from_uptime(run(per_second=[50] * 6, last=UPTIME + 5.5, start=UPTIME,
                                     full=UPTIME))
    assert steady.longest_stall_s == 0.0 and steady.stall_at_s is None
    assert steady.first_window == 300 and steady.loaded_rate == pytest.approx(300 / 5.5)


def test_a_phase_that_is_all_stall():
    sv = service_from_uptime(run(per_second=[0, 0, 0, 5], last=START + 3.5, full=None))
    assert sv.first_window == 5
    # until the last half second, the best there is
    assert sv.longest_stall_s == pytest.approx(3.0 + 0.2)
    assert sv.stall_at_s == UPTIME


def test_no_query_phase_no_service_figures():
    copy = run("fileCopy", per_second=[], last=None)
    copy = ApproachRun(**{**copy.__dict__, "query": None, "query_start_s": None})
    assert service_from_uptime(copy) is None


def test_report_shows_service_and_reads_old_benches(tmp_path):
    """The report of a bench holds the service table and its ratios; a bench.json from before
    layouts and recency (no such keys) still reads as days and LinkBench alone."""
    spec = BenchSpec(GenerateSpec(max_id=1001), tmp_path / "in",
                     ("bulkLoad-mysql", "bulkLoad-hbase", "debl"))
    old_spec = spec.to_dict()
    old_spec.pop("recency_share")
    old_spec["input"].pop("layout")
    meta = {"bench_id": "B-synthetic", "state": "done", "spec": old_spec, "command": None,
            "machine": {"cpus": 2, "cpu_model": "", "memory_gib": 1, "system": "Linux",
                        "python": "3"},
            "code": None, "input": {"bytes": 1_000_000, "files": 10}}
    (tmp_path / "bench.json").write_text(json.dumps(meta))
    runs = [run("bulkLoad-mysql", full=UPTIME, per_second=[400] * 10, last=START + 9.5),
            run("bulkLoad-hbase", full=UPTIME, last=LAST + 10), run("debl")]
    for r in runs:
        (tmp_path / f"{r.approach}.json").write_text(json.dumps(r.to_dict()))
    _, read = read_bench(tmp_path)
    assert [r.approach for r in read] == ["bulkLoad-mysql", "bulkLoad-hbase", "debl"]
    assert BenchSpec.from_dict(old_spec).recency_share == 0.0
    assert BenchSpec.from_dict(old_spec).input.layout == "days"

    report = write_report(tmp_path)
    md = report.markdown.read_text()
    assert "layout days" in md and "0% of the id1s by recency" in md
    assert "## Service from uptime" in md
    # debl: 2,201 requests in its first 30 s; bulkLoad-mysql: all its 4,000
    assert "| debl | 10.0 | 2,201 | 100% | 20.2 | 200 | 5.0 | 13.2 | 27.7 |" in md
    assert "| served in 1st 30 s after uptime / bulkLoad-mysql's | debl | 0.55 | - |" in md
    assert "| last query / bulkLoad-hbase's last query | debl | 0.73 | < 1 |" in md
    assert report.html.read_text().count("<table>") == 6
    assert "## Answered by each second since the load started" in md
    assert "spark: not recorded" in md  # a bench.json from before the Spark master was


def test_report_names_the_spark_master_of_the_bench():
    line = spark_line({"master": "spark://127.0.0.1:7077", "workers": 2, "cores_max": 2})
    assert line == "spark: spark://127.0.0.1:7077, a standalone cluster of 2 worker(s), 2 cores " \
        "per application"
    assert spark_line({"master": "local[2]", "workers": 0, "cores_max": None}) == \
        "spark: local[2]"


def test_the_share_answered_by_each_second_since_the_load_started():
    early = run("debl-raw", per_second=[100] * 20, last=START + 20.0)  # up at 10 s, 100/s
    late = run("bulkLoad-mysql", per_second=[400] * 5, last=30.2 + 5.0, uptime=30.0,
               start=30.2)  # up at 30 s, then 400/s
    assert answered_share(early, 9.0) == 0.0 and answered_share(early, 20.2) == 0.5
    assert answered_share(early, 40.0) == 1.0
    assert answered_share(late, 30.0) == 0.0 and answered_share(late, 32.2) == 0.4
    worst, at = least_margin(early, late)
    assert worst >= 0  # at or above it at every second
    faster = run("bulkLoad-hbase", per_second=[2000], last=11.2, uptime=10.0, start=10.2)
    worst, at = least_margin(early, faster)
    assert worst < 0 and 10.0 <= at <= 12.0  # the faster one is ahead right after its uptime


# --- answers since the load started (docs/BENCHMARKS.md, "Answers before the copy ends") ---

REQUESTS = 1000
# A DeBL approach whose client started with its load, 0.3 s in: four seconds without an answer,
# six of early answers (50/s, the first at 4.6 s), up at 10 s, then 200/s.
EARLY = [0, 0, 0, 0] + [50] * 6 + [200] * 3


def from_load(name: str = "debl-cold", per_second=EARLY, first: float | None = 4.6,
              uptime: float = UPTIME) -> ApproachRun:
    r = run(name, full=uptime + 2, per_second=per_second, last=0.3 + len(per_second) - 0.5,
            uptime=uptime, start=0.3)
    return ApproachRun(**{**r.__dict__, "queries_from": "load", "first_answer_s": first,
                          "waits": {**(r.waits or {}), "early": 300}})


def file_copy(uptime: float = 8.0) -> ApproachRun:
    r = run("fileCopy", per_second=[], last=None, uptime=uptime, full=uptime)
    return ApproachRun(**{**r.__dict__, "query": None, "query_start_s": None, "target": None,
                          "waits": None})


def test_the_first_answer_and_the_share_answered_by_the_copys_end():
    r = from_load()
    end = copy_end([file_copy(8.0), r], 100_000_000, 12.5)
    assert (end.seconds, end.basis) == (8.0, "fileCopy")  # the copy measured in the bench wins
    # [4.3, 7.3): 150 answers, and 0.7 of the second [7.3, 8.3): 35
    assert answered_by(r, 8.0, REQUESTS) == pytest.approx(0.185)
    # inside the first answer's second but before it: nothing, however its second is spread
    assert answered_by(r, 4.5, REQUESTS) == 0.0 and answered_by(r, 4.3, REQUESTS) == 0.0
    assert answered_by(r, 100.0, REQUESTS) == pytest.approx(0.9)  # 900 of the 1,000 asked
    # without fileCopy: the input's bytes at the source's rate; uncapped: unknown
    rated = copy_end([r], 100_000_000, 12.5)
    assert (rated.seconds, rated.basis) == (8.0, "source rate")
    assert copy_end([r], 100_000_000, None) is None
    assert answered_by(file_copy(), 8.0, REQUESTS) is None  # no query phase


def test_the_curve_of_answers_since_the_load_started():
    r = from_load()
    curve = answered_curve(r)
    assert curve[0] == (0.3, 0)  # the client's start
    assert curve[1:5] == ((1.3, 0), (2.3, 0), (3.3, 0), (4.3, 0))
    assert curve[5] == (5.3, 50) and curve[10] == (10.3, 300)
    assert curve[-1] == (r.all_served_s, 900)  # the last second ends at the last query
    assert [n for _, n in curve] == sorted(n for _, n in curve)
    assert answered_curve(file_copy()) == ()


def test_the_timeline_csv_holds_the_curve(tmp_path):
    r = from_load()
    write_timeline(tmp_path / "t.csv", r.timeline)
    with open(tmp_path / "t.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(row["answered"]) for row in rows] == [n for _, n in answered_curve(r)[1:]]
    assert float(rows[4]["t_s"]) == 4.3 and rows[4]["answered"] == "50"  # by 5.3 s


def test_waiting_before_uptime_is_no_stall_of_the_service_from_uptime():
    sv = service_from_uptime(from_load(per_second=EARLY[:4] + [0] * 6 + [200] * 3, first=10.3))
    # the client waited from 0.3 s: the stall after the uptime is from 10 s to the first
    # answer's second at 10.3 s, not the 10 s of the load before it
    assert sv.longest_stall_s == pytest.approx(0.3) and sv.stall_at_s == UPTIME
    assert sv.first_window == 600
    # answers before the uptime are not in its first window
    assert service_from_uptime(from_load()).first_window == 600 + 15  # 0.3 of [9.3, 10.3)


def test_answers_summary_for_bench_json():
    summary = answers_summary([file_copy(8.0), from_load(), run("bulkLoad-hbase")], 10**8,
                              None, REQUESTS)
    assert summary["copy_end"] == {"s": 8.0, "basis": "fileCopy"}
    early = summary["approaches"]["debl-cold"]
    assert early["queries_from"] == "load" and early["first_answer_s"] == 4.6
    assert early["answered_by_copy_end"] == pytest.approx(0.185)
    assert early["answered_by_uptime"] == pytest.approx(0.285)  # 5.7 s of 50/s
    baseline = summary["approaches"]["bulkLoad-hbase"]  # a bench from before: from uptime
    assert baseline["queries_from"] == "uptime" and baseline["answered_by_copy_end"] == 0.0
    assert "fileCopy" not in summary["approaches"]
    assert answers_summary([from_load()], 10**8, None, REQUESTS)["copy_end"] is None


def _write_bench(directory, runs, source_rate=None, queries_from="load"):
    spec = BenchSpec(GenerateSpec(max_id=1001), directory / "in",
                     tuple(r.approach for r in runs), source_rate=source_rate,
                     requests=REQUESTS, queries_from=queries_from)
    meta = {"bench_id": "B-answers", "state": "done", "spec": spec.to_dict(),
            "command": spec.command_line(),
            "machine": {"cpus": 2, "cpu_model": "", "memory_gib": 1, "system": "Linux",
                        "python": "3"},
            "code": None, "input": {"bytes": 100_000_000, "files": 10}}
    (directory / "bench.json").write_text(json.dumps(meta))
    for r in runs:
        (directory / f"{r.approach}.json").write_text(json.dumps(r.to_dict()))
    return write_report(directory)


def test_report_shows_the_answers_before_the_copy_ends_and_their_plot(tmp_path):
    baseline = run("bulkLoad-hbase", full=UPTIME, per_second=[400] * 3, last=START + 2.5)
    report = _write_bench(tmp_path, [file_copy(8.0), from_load(), baseline])
    md = report.markdown.read_text()
    section = md.split("## Answers before the copy ends")[1].split("##")[0]
    assert "| debl-cold | load | 0.3 | 10.0 | 4.60 | 28.5% | 18.5% | 300 |" in section
    assert "| bulkLoad-hbase | uptime | 10.2 | 10.0 | - | 0.0% | 0.0% | - |" in section
    assert "fileCopy |" not in section  # no query phase
    assert "8.0 s, the fileCopy approach's uptime in this bench" in section
    assert "the baselines always" in section
    assert "--queries-from load" in md and "queries from the load's start" in md
    assert "![answered](answered.png)" in md
    page = report.html.read_text()
    assert page.count("<table>") == 6 and '<img src="answered.png"' in page
    png = report.answered.read_bytes()
    assert report.answered.name == "answered.png"
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


@pytest.mark.parametrize("source_rate, says", [
    (12.5, "8.0 s, the input's 100.0 MB at the source's 12.5 MB/s (no fileCopy in this bench)"),
    (None, "'answered by copy end' is not shown: no fileCopy in this bench and an uncapped"),
])
def test_report_says_where_the_copys_end_comes_from(tmp_path, source_rate, says):
    report = _write_bench(tmp_path, [from_load()], source_rate=source_rate)
    section = report.markdown.read_text().split("## Answers before the copy ends")[1]
    assert says in section
    row = "| debl-cold | load | 0.3 | 10.0 | 4.60 | 28.5% | "
    assert row + ("18.5%" if source_rate else "-") + " | 300 |" in section
