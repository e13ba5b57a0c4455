"""The LinkBench-style client against the memory store, targets, and ``debl query``."""

from __future__ import annotations

import csv
import json
import threading
import time

import pytest
from click.testing import CliRunner

from debl.cli import main
from debl.config import Config
from debl.errors import ConfigError, ServiceError
from debl.format.link import Link, Origin
from debl.store.memory import MemoryStore
from debl.workload import targets
from debl.workload.client import (ClientSpec, TargetSource, default_processes, run_client,
                                  write_result)
from debl.workload.requests import RequestSpec, RequestStream

REQ = RequestSpec(max_id=2001, seed=4)


@pytest.fixture(scope="module")
def store():
    s = MemoryStore()
    s.write_links((Link(i, 123456789 + i % 2, i + j, 1, b"x", 1000 + j, 0), Origin(0, 0, j))
                  for i in range(1, 2001) for j in range(i % 5))
    return s


def test_counts_requests_and_summarizes(store):
    calls = []
    result = run_client(store, ClientSpec(REQ, threads=4, total=2001),
                        progress=lambda done, elapsed: calls.append(done))
    assert result.completed == 2001 and result.errors == 0
    lat = result.latency
    assert lat.count == 2001
    assert 0 < lat.p25 <= lat.p50 <= lat.p75 <= lat.p95 <= lat.p99 <= lat.max
    assert lat.p25 <= lat.mean <= lat.max
    assert sum(p.completed for p in result.timeline) == 2001
    assert [p.second for p in result.timeline] == list(range(len(result.timeline)))
    assert result.rows > 0 and 0 < result.empty < 2001
    assert calls and calls[-1] == 2001
    assert result.throughput > 0


def test_threads_replay_their_own_streams(store):
    class Recorder:
        def __init__(self):
            self.seen, self.lock = [], threading.Lock()

        def get_link_list(self, id1, link_type):
            with self.lock:
                self.seen.append((threading.current_thread().name, id1, link_type))
            return []

    rec = Recorder()
    run_client(rec, ClientSpec(REQ, threads=3, total=30))
    for t in range(3):
        mine = [(i, lt) for name, i, lt in rec.seen if name == f"debl-client-{t}"]
        stream = RequestStream(REQ, stream=t)
        assert mine == [next(stream) for _ in range(10)]


def test_errors_are_counted_not_fatal():
    class Flaky:
        def __init__(self):
            self.n = 0

        def get_link_list(self, id1, link_type):
            self.n += 1
            if self.n % 4 == 0:
                raise RuntimeError("bucket not loaded")
            return [1, 2]

    result = run_client(Flaky(), ClientSpec(REQ, threads=1, total=100))
    assert result.errors == 25 and result.completed == 75
    assert result.error_samples == ("RuntimeError: bucket not loaded",)
    assert result.latency.count == 75 and result.rows == 150
    assert sum(p.errors for p in result.timeline) == 25


class AnswersFrom:
    """Fails every request (a timeout, say) until epoch second *at*, then answers."""

    def __init__(self, at: float) -> None:
        self.at = at

    def get_link_list(self, id1, link_type):
        if time.time() < self.at:
            time.sleep(0.005)
            raise TimeoutError("not answerable yet")
        return [1]


def test_first_answer_is_the_first_success_not_the_first_error():
    at = time.time() + 0.3
    result = run_client(AnswersFrom(at), ClientSpec(REQ, threads=2, total=None, duration=0.8))
    assert result.errors > 0 and result.completed > 0
    # the instant itself (its timeline second would say 0): never before the first success
    assert result.started_at + result.first_answer_s >= at - 0.01
    assert result.first_answer_s <= result.elapsed_s
    assert result.to_dict()["first_answer_s"] == result.first_answer_s
    never = run_client(AnswersFrom(float("inf")), ClientSpec(REQ, threads=1, total=5))
    assert never.errors == 5 and never.first_answer_s is None
    assert run_client(MemoryStore(), ClientSpec(REQ, threads=1, total=3)).first_answer_s > 0


def test_duration_and_open_loop_rate(store):
    t0 = time.perf_counter()
    result = run_client(store, ClientSpec(REQ, threads=2, total=None, duration=1.2, rate=200))
    elapsed = time.perf_counter() - t0
    assert 1.0 <= elapsed < 2.5
    assert 150 <= result.completed <= 330  # Poisson arrivals at 200/s for 1.2 s
    assert len(result.timeline) == 2  # seconds 0 and 1, ceil(1.2)


def test_requests_limit_wins_over_duration(store):
    result = run_client(store, ClientSpec(REQ, threads=2, total=50, duration=30))
    assert result.completed == 50 and result.elapsed_s < 5


def test_write_result_csv_and_json(store, tmp_path):
    result = run_client(store, ClientSpec(REQ, threads=2, total=200))
    with open(write_result(result, tmp_path / "t.csv")) as f:
        rows = list(csv.DictReader(f))
    assert sum(int(r["completed"]) for r in rows) == 200
    assert set(rows[0]) == {"second", "completed", "errors", "mean_ms", "p95_ms"}
    doc = json.loads(write_result(result, tmp_path / "r" / "run.json").read_text())
    assert doc["completed"] == 200 and doc["latency"]["count"] == 200
    assert doc["spec"]["requests"]["max_id"] == 2001


@pytest.mark.parametrize("kwargs", [dict(threads=0), dict(total=None), dict(rate=0.0),
                                    dict(duration=-1.0), dict(processes=0),
                                    dict(threads=2, processes=3)])
def test_client_spec_validation(kwargs):
    with pytest.raises(ConfigError):
        ClientSpec(REQ, **kwargs)


def test_several_processes_need_a_target_source(store):
    with pytest.raises(ConfigError, match="TargetSource"):
        run_client(store, ClientSpec(REQ, threads=2, total=10, processes=2))


def test_default_processes():
    assert default_processes(8, 3) == 3
    assert default_processes(2, 3) == 2  # never more than the threads
    assert 1 <= default_processes(8) <= 8
    assert default_processes(1) == 1
    with pytest.raises(ConfigError):
        default_processes(4, -1)


def test_target_source_in_one_process_opens_starts_reports_and_closes(store):
    events = []

    class Counted:
        def get_link_list(self, id1, link_type):
            return store.get_link_list(id1, link_type)

        def close(self):
            events.append("close")

    source = TargetSource(open=lambda: events.append("open") or Counted(),
                          on_start=lambda t: events.append("start"),
                          report=lambda t: events.append("report") or "counters")
    result = run_client(source, ClientSpec(REQ, threads=2, total=100))
    assert result.completed == 100 and result.target_reports == ("counters",)
    assert events == ["open", "start", "report", "close"]
    assert "target_reports" not in result.to_dict() and "counts" not in result.to_dict()


def test_open_target_names_and_failures(monkeypatch):
    assert isinstance(targets.open_target(Config(), "memory"), MemoryStore)
    with pytest.raises(ConfigError, match="unknown target"):
        targets.open_target(Config(), "oracle")

    def missing_driver(config, **options):
        raise ModuleNotFoundError("No module named 'happybase'")

    monkeypatch.setitem(targets._TARGETS, "debl", (missing_driver, "the DeBL coordinator"))
    with pytest.raises(ServiceError, match="target 'debl' .* is not available: .*happybase"):
        targets.open_target(Config(), "debl")


def test_target_id_range():
    class WithRange:
        def id_range(self):
            return (1, 501)

    assert targets.target_id_range(WithRange()) == (1, 501)
    assert targets.target_id_range(MemoryStore()) is None


def test_query_command(monkeypatch, store, tmp_path):
    class Ranged:
        def get_link_list(self, id1, link_type):
            return store.get_link_list(id1, link_type)

        def id_range(self):
            return (1, 2001)

        def close(self):
            pass

    monkeypatch.setattr("debl.commands.query.open_target", lambda config, name: Ranged())
    monkeypatch.setattr("debl.commands.query.target_source",
                        lambda config, name: TargetSource(open=Ranged))
    monkeypatch.setattr("debl.commands.query.config_of", lambda ctx: Config())
    out = tmp_path / "timeline.csv"
    result = CliRunner().invoke(main, ["query", "--threads", "2", "--requests", "300",
                                       "--processes", "1", "--target", "mysql", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "GET_LINKS_LIST count = 300" in result.stdout
    assert "with 2 threads in 1 process " in result.stdout
    assert "ids [1, 2001)" in result.stdout
    assert out.exists()
    result = CliRunner().invoke(main, ["query", "--requests", "50", "--max-id", "1001", "--json",
                                       "--processes", "1"])
    doc = json.loads(result.stdout)
    assert doc["completed"] == 50 and doc["spec"]["requests"]["max_id"] == 1001
    assert doc["spec"]["processes"] == 1
    assert doc["spec"]["requests"]["recency_share"] == 0.0  # LinkBench alone by default
    result = CliRunner().invoke(main, ["query", "--requests", "50", "--max-id", "1001",
                                       "--processes", "1", "--recency-share", "0.9"])
    assert result.exit_code == 0, result.output
    assert "90% by recency" in result.stdout
    result = CliRunner().invoke(main, ["query", "--requests", "5", "--max-id", "1001",
                                       "--processes", "1", "--recency-share", "2"])
    assert result.exit_code == 1 and "Error: --recency-share must be in [0, 1]" in result.output
    assert "Traceback" not in result.output


def test_query_command_needs_an_id_range(monkeypatch):
    class Plain:
        def get_link_list(self, id1, link_type):
            return []

        def close(self):
            pass

    monkeypatch.setattr("debl.commands.query.open_target", lambda config, name: Plain())
    monkeypatch.setattr("debl.commands.query.config_of", lambda ctx: Config())
    result = CliRunner().invoke(main, ["query", "--requests", "5"])
    assert result.exit_code == 1 and "pass --max-id" in result.output


def test_the_objects_built_before_the_run_are_out_of_the_collectors_way_during_it():
    """A full collection would scan the target's objects (a coordinator's opened buckets) with
    every thread stopped: they are frozen while the requesters run, and thawed after."""
    import gc

    frozen: list[int] = []

    class Target:
        def get_link_list(self, id1, link_type):
            frozen.append(gc.get_freeze_count())
            return []

    kept = [(i, [i]) for i in range(1000)]  # objects the process holds before the run
    assert gc.get_freeze_count() == 0
    run_client(Target(), ClientSpec(REQ, threads=2, total=20))
    assert len(frozen) == 20 and min(frozen) >= len(kept)
    assert gc.get_freeze_count() == 0
