"""gen_HF's choices without the stack: which buckets a run takes, and how the service rides out
failed runs. (The real conversion, on the real stack: tests/test_online.py.)"""

from __future__ import annotations

import re
from dataclasses import replace
from types import SimpleNamespace

import pytest

from debl.catalog import Bucket, LoadRecord
from debl.config import Config
from debl.errors import ConfigError, DeblError, ServiceError
from debl.spark.session import driver_memory_bytes
from loaders import gen_hf
from loaders.gen_hf import GenHF, RunResult, carried_demand, pick_buckets


def bucket(b: int, state: str = "pending", size: int = 100) -> Bucket:
    return Bucket(b, b * 10, b * 10 + 9, 5, size, 0, f"/b/{b}", state, b * 10, b * 10 + 9)


def chosen(*args, **kw) -> list[int]:
    return [b.b_index for b in pick_buckets(*args, **kw)]


def test_demand_order_takes_the_most_wanted_then_the_lowest_index():
    buckets = [bucket(b) for b in range(6)]
    assert chosen(buckets, {4: 3, 2: 7, 5: 3}, 2, 10_000) == [2, 4]
    assert chosen(buckets, {4: 3, 2: 7, 5: 3}, 3, 10_000) == [2, 4, 5]
    assert chosen(buckets, {}, 2, 10_000) == [0, 1]  # no demand: bucket order, never starved


def test_running_buckets_of_a_crashed_run_come_first_and_loaded_ones_never():
    buckets = [bucket(0, "loaded"), bucket(1), bucket(2, "running"), bucket(3, "failed")]
    assert chosen(buckets, {1: 9, 3: 5}, 2, 10_000) == [2, 1]
    assert chosen(buckets, {1: 9}, 2, 10_000, order="fifo") == [2, 1]
    assert chosen(buckets, {}, 5, 10_000) == [2, 1, 3]
    assert chosen([bucket(0, "loaded")], {0: 1}, 2, 10_000) == []


def test_fifo_ignores_demand():
    buckets = [bucket(b) for b in range(4)]
    assert chosen(buckets, {3: 100}, 2, 10_000, order="fifo") == [0, 1]


def test_run_bytes_caps_a_run_unless_the_first_alone_is_larger():
    buckets = [bucket(0, size=300), bucket(1, size=300), bucket(2, size=50)]
    assert chosen(buckets, {}, 3, 650) == [0, 1, 2]
    assert chosen(buckets, {}, 3, 620) == [0, 1]
    assert chosen(buckets, {}, 3, 599) == [0]
    assert chosen(buckets, {}, 3, 100) == [0]  # larger than run_bytes on its own: still taken


def test_unknown_order_is_refused():
    with pytest.raises(DeblError, match="unknown order"):
        pick_buckets([bucket(0)], {}, 2, 100, order="random")


class _Service(GenHF):
    """GenHF's serve loop over scripted run outcomes (no Spark, no MySQL)."""

    def __init__(self, outcomes):
        self.config = Config(coordinator_poll_interval=0.001)
        self.outcomes = list(outcomes)
        self.reports: list[str] = []
        self.report = self.reports.append

    def run_once(self):
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


RUN = RunResult("R1", (0,), {0: 1}, 10, 8, 0.1)


def test_serve_retries_service_errors_then_goes_on():
    service = _Service([ServiceError("HBase bulk load failed: down"), ServiceError("again"), RUN,
                        ServiceError("once more"), RUN])
    runs = service.serve(should_stop=lambda: not service.outcomes)
    assert runs == 2
    assert [r.split(";")[1].strip() for r in service.reports] == [
        "retry 1 of 5 in 0.0 s", "retry 2 of 5 in 0.0 s", "retry 1 of 5 in 0.0 s"]
    assert "HBase bulk load failed: down" in service.reports[0]


def test_serve_gives_up_after_too_many_failures_in_a_row():
    errors = [ServiceError(f"failure {i}") for i in range(gen_hf.RETRIES + 1)]
    service = _Service(errors)
    with pytest.raises(ServiceError, match=f"failure {gen_hf.RETRIES}"):
        service.serve()
    assert len(service.reports) == gen_hf.RETRIES


def test_serve_gives_up_service_timeout_after_a_runs_first_failure():
    """Retries of one run stop once service_timeout has passed since its first failure; the
    next run that fails counts from its own first failure, not the earlier run's."""
    service = _Service([])
    service.config = Config(service_timeout=10.0)

    def failures(*times: float) -> list[bool]:
        """Whether serve gives up after each failure of one run (tenacity's one state)."""
        state, gave_up = SimpleNamespace(), []
        for n, t in enumerate(times, 1):
            state.attempt_number, state.outcome_timestamp = n, t
            gave_up.append(service._gives_up(state))
        return gave_up

    assert failures(100.0, 105.0, 110.0) == [False, False, True]
    assert failures(500.0, 509.0, 510.0) == [False, False, True]


def test_serve_raises_a_data_error_at_once():
    service = _Service([DeblError("bucket 3: 5 rows in its HDFS files, the bucket index says 6")])
    with pytest.raises(DeblError, match="bucket 3"):
        service.serve()
    assert service.reports == []


def test_a_cleanup_that_fails_between_runs_is_reported_and_the_service_goes_on(monkeypatch):
    """Defect: marking a load dropped once raised LoadStateError in the service's cleanup
    (a rollback had made the load current meanwhile), which the service did not catch: gen_HF
    died. A cleanup that fails for any of DeBL's reasons is reported; the next one tries
    again."""
    from debl.errors import LoadStateError

    def failing(config, report):
        raise LoadStateError("load L1 is the current load: it is never dropped")

    monkeypatch.setattr(gen_hf, "cleanup", failing)
    service = _Service([None, RUN])
    service.catalog = SimpleNamespace(loads=SimpleNamespace(current=lambda: None))
    service._cleaned = float("-inf")
    runs = service.serve(should_stop=lambda: not service.outcomes)
    assert runs == 1
    assert service.reports == ["cleanup failed: load L1 is the current load: it is never dropped"]


@pytest.mark.parametrize("text, expected", [
    ("2g", 2 << 30), ("512m", 512 << 20), ("1024", 1024 << 20), ("2GB", 2 << 30), ("1t", 1 << 40)])
def test_driver_memory_is_read_as_spark_reads_it(text, expected):
    assert driver_memory_bytes(Config(spark_driver_memory=text)) == expected


@pytest.mark.parametrize("text", ["", "g", "0", "2x", "1.5g", "-1g"])
def test_a_bad_driver_memory_is_refused(text):
    with pytest.raises(ConfigError, match="not a JVM memory size"):
        driver_memory_bytes(Config(spark_driver_memory=text))


class _Catalog:
    """The catalog calls of a run, over a scripted bucket index (job states recorded): one
    object in every role gen_HF reads."""

    def __init__(self, buckets):
        self.loads = self.index = self.serving = self.jobs = self
        self.by_index = {b.b_index: b for b in buckets}
        self.calls = []

    def current(self):
        return LoadRecord("L1", "debl", "src", "up", None, 1, {}, 0.0, 1.0, None, None, None,
                          0, None, None, "links_L1", "links_L1", "/debl/loads/L1")

    def previous(self):
        return None

    def buckets(self, load_id):
        return list(self.by_index.values())

    def demand(self, load_id):
        return {}

    def set_job_state(self, load_id, buckets, state, run_id=None, error=None, **where):
        self.calls.append((list(buckets), state, error))
        for b in buckets:
            self.by_index[b] = replace(self.by_index[b], state=state)
        return list(buckets)

    def finish_run(self, load_id, run_id, loaded):
        for b in loaded:
            self.by_index[b] = replace(self.by_index[b], state="loaded")
        return list(loaded)


class _Runs(GenHF):
    """GenHF's run_once and serve over a scripted catalog; the conversion itself recorded."""

    def __init__(self, config, buckets):
        self.config, self.order = config, "demand"
        self.catalog = _Catalog(buckets)
        self.reports: list[str] = []
        self.report = self.reports.append
        self.converted: list[int] = []
        self._carried, self._cleaned = None, float("inf")  # no cleanup between scripted runs

    def _keep_lock(self):
        pass

    def ensure_table(self, load, buckets):
        pass

    def _convert(self, load, run_id, chosen):
        self.converted += [b.b_index for b in chosen]
        return 0, 0, {b.b_index: (b.rows, 0) for b in chosen}, {}


def test_a_bucket_too_large_to_merge_is_refused_and_the_others_are_still_converted():
    """One oversized bucket once stopped gen_HF for good: it raised before converting
    anything, and a restarted gen_HF picked the same bucket first again."""
    config = Config(spark_driver_memory="1g",
                    coordinator_poll_interval=0.001)  # at most 134 MB a bucket
    buckets = [bucket(0, size=200_000_000), bucket(1), bucket(2)]
    service = _Runs(config, buckets)
    assert service.run_once().buckets == (1, 2)
    assert service.converted == [1, 2]
    # Marked failed with the reason, once: the coordinators release its waiters with it.
    ((marked, state, reason),) = [c for c in service.catalog.calls if c[1] == "failed"]
    assert (marked, state) == ([0], "failed")
    assert re.search(r"bucket 0 holds 200 MB.* at most 134 MB with spark\.driver_memory 1g.* "
                     r"Raise spark\.driver_memory \(DEBL_SPARK_DRIVER_MEMORY\) to at least 2g",
                     reason)
    assert service.run_once() is None
    assert len([c for c in service.catalog.calls if c[1] == "failed"]) == 1
    # Until complete: every other bucket is converted, then the refusal is what the user reads.
    restarted = _Runs(config, [bucket(0, state="failed", size=200_000_000), bucket(1),
                               bucket(2), bucket(3)])
    with pytest.raises(DeblError, match="every bucket is loaded but 1, too large to convert: "
                                        "bucket 0 holds 200 MB"):
        restarted.serve(until_complete=True)
    assert restarted.converted == [1, 2, 3]


@pytest.mark.parametrize("config, limit_mb, setting", [
    # local[2]: two tasks in the driver's heap.
    (Config(spark_driver_memory="1g"), 134, "spark.driver_memory 1g shared by 2 task"),
    (Config(spark_master="local[4]", spark_driver_memory="2g"), 134,
     "spark.driver_memory 2g shared by 4 task"),
    # On a cluster the tasks run in executors, whatever the driver has.
    (Config(spark_workers=2, spark_executor_memory="512m", spark_worker_memory="512m",
            spark_driver_memory="8g"), 134, "spark.executor_memory 512m shared by 1 task"),
    (Config(spark_master="yarn", spark_executor_memory="4g", spark_executor_cores=2), 537,
     "spark.executor_memory 4g shared by 2 task"),
])
def test_the_bucket_limit_follows_the_heap_the_tasks_run_in(config, limit_mb, setting):
    service = _Runs(config, [])
    small, large = (bucket(0, size=limit_mb * 1_000_000 - 2_000_000),
                    bucket(3, size=limit_mb * 1_000_000 + 2_000_000))
    refused = service.oversized([small, large])
    assert list(refused) == [3]
    assert re.search(rf"at most {limit_mb} MB with {setting}", refused[3])


def test_yesterdays_queries_are_spread_over_todays_buckets_by_id_span():
    old = [bucket(0), bucket(1), bucket(2)]  # spans 0..9, 10..19, 20..29
    new = [Bucket(0, 0, 14, 5, 100, 0, "/b/0", "pending", 0, 14),
           Bucket(1, 15, 99, 5, 100, 0, "/b/1", "pending", 15, 29)]
    carried = carried_demand(old, {0: 10, 1: 4, 2: 6}, new)
    assert carried == pytest.approx({0: 10 + 4 * 5 / 10, 1: 4 * 5 / 10 + 6})
    assert carried_demand(old, {}, new) == {}
    # Carried demand orders what today's demand leaves tied, never above it.
    assert chosen([bucket(b) for b in range(4)], {}, 1, 10_000, carried={3: 2.0, 1: 1.0}) == [3]
    assert chosen([bucket(b) for b in range(4)], {2: 1}, 1, 10_000, carried={3: 9.0}) == [2]


def test_the_gen_hf_service_lowers_its_priority_and_its_spark_jvms():
    """``debl gen-hf`` runs niced (``gen_hf_nice``), and so do the processes it starts after,
    its Spark JVM among them; 0 leaves the priority as it is (docs/ONLINE.md, "Priority")."""
    import subprocess
    import sys

    code = ("import os, subprocess, sys\n"
            "from debl.commands.gen_hf import lower_priority\n"
            "before = os.nice(0)\n"
            "lower_priority(int(sys.argv[1]))\n"
            "child = subprocess.run([sys.executable, '-c', 'import os; print(os.nice(0))'],\n"
            "                       capture_output=True, text=True, check=True).stdout\n"
            "print(os.nice(0) - before, int(child) - before)\n")
    for nice, expected in ((7, "7 7"), (0, "0 0")):
        done = subprocess.run([sys.executable, "-c", code, str(nice)], capture_output=True,
                              text=True, check=True)
        assert done.stdout.split() == expected.split()


def test_an_idle_service_whose_spark_jvm_ended_stops_at_once_with_a_message(monkeypatch):
    """Day operations: the gen_HF service idle after its last run never touched its
    JVM, so a JVM killed then went unnoticed until the next day's work (the campaign, waiting
    for it to fail, killed it with no message after 300 s). Idle, it looks every poll."""
    import subprocess

    from pyspark import SparkContext

    from loaders.jobs import JvmGone

    ended = subprocess.Popen(["true"])
    ended.wait()
    monkeypatch.setattr(SparkContext, "_gateway", SimpleNamespace(proc=ended))
    service = _Service([None] * 1000)
    service.catalog = SimpleNamespace(loads=SimpleNamespace(current=lambda: None))
    service._cleaned = float("inf")  # no cleanup here
    with pytest.raises(JvmGone, match="Spark driver JVM of this process is gone"):
        service.serve(should_stop=lambda: not service.outcomes)
    assert len(service.outcomes) == 999  # at the first idle pass

    alive = subprocess.Popen(["sleep", "30"])
    try:
        monkeypatch.setattr(SparkContext, "_gateway", SimpleNamespace(proc=alive))
        service = _Service([None] * 3)
        service.catalog = SimpleNamespace(loads=SimpleNamespace(current=lambda: None))
        service._cleaned = float("inf")
        assert service.serve(should_stop=lambda: not service.outcomes) == 0
    finally:
        alive.kill()
        alive.wait()
