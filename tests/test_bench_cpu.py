"""Where a bench's CPU went (``debl.bench.cpu``, ``debl.measure.thread_cpu``): processes by
role, gen-hf's Spark JVM as gen_HF's, the bench's own process by phase, and the per-GB table
of docs/BENCHMARKS.md, "Where the CPU goes"."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import psutil

from debl.bench.cpu import (BENCH, CLIENT, GEN_HF, PER_GB_HEADERS, SPARK, CpuMeter, CpuSample,
                             per_gb_rows)
from debl.bench.results import ApproachRun
from debl.config import Config
from debl.measure import thread_cpu


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_phase_counts_the_cpu_of_the_threads_inside_it_and_nothing_else():
    before = thread_cpu.totals().get("test-phase", 0.0)
    threads = [threading.Thread(target=lambda: _count(0.1)) for _ in range(2)]
    for t in threads:
        t.start()
    _spin(0.1)  # outside any phase: not counted
    for t in threads:
        t.join()
    assert 0.19 <= thread_cpu.totals()["test-phase"] - before < 0.3


def _count(seconds: float) -> None:
    with thread_cpu.counted("test-phase"):
        _spin(seconds)


def test_a_spark_jvm_started_by_gen_hf_is_gen_hfs_and_another_is_the_loads(tmp_path):
    """Roles come from command lines: a process whose command line names SparkSubmit is the
    load's Spark, unless its parent is a gen-hf (its own JVM)."""
    child = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', " \
            "'import time; time.sleep(30)', 'SparkSubmit']); time.sleep(30)"
    gen_hf = subprocess.Popen([sys.executable, "-c", child, "gen-hf"])
    spark = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)",
                              "SparkSubmit"])
    try:
        deadline = time.monotonic() + 10
        while True:
            sample = CpuSample.take(Config(state_dir=tmp_path))
            roles = {pid: role for (pid, _), (role, _) in sample.processes.items()}
            jvm = [p.pid for p in psutil.Process(gen_hf.pid).children()]
            if (jvm and jvm[0] in roles) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert roles[gen_hf.pid] == GEN_HF and len(jvm) == 1 and roles[jvm[0]] == GEN_HF
        assert roles[spark.pid] == SPARK
    finally:
        for p in (*psutil.Process(gen_hf.pid).children(), gen_hf, spark):
            p.kill()
        gen_hf.wait()  # its own child, killed, is reaped by init then
        spark.wait()


def _run(name: str, to_uptime: dict, after: dict) -> ApproachRun:
    return ApproachRun(name, "L1", 0.0, 10.0, {}, (), None, cpu={"to_uptime": to_uptime,
                                                                 "after_uptime": after})


def test_the_per_gb_table_splits_the_bench_process_and_sums_both_parts():
    part = {"seconds": 10.0, "cores": 2, "busy_s": 18.0,
            "by_role": {BENCH: 6.0, GEN_HF: 4.0, CLIENT: 2.0},
            "bench_by_phase": {thread_cpu.COPY: 1.0, thread_cpu.BUCKETING: 2.0,
                               thread_cpu.SOURCE_SERVER: 0.5}}
    later = {"seconds": 5.0, "cores": 2, "busy_s": 9.0, "by_role": {GEN_HF: 3.0},
             "bench_by_phase": {}}
    rows = per_gb_rows([_run("debl", part, later), ApproachRun("x", "L2", 0.0, 1.0, {}, (),
                                                                None)], 2 * 10**9)
    assert len(rows) == 1  # a run without CPU figures (an older bench) has no row
    row = dict(zip(PER_GB_HEADERS, rows[0]))
    assert (row["up s"], row["done s"], row["machine busy"]) == ("10.0", "15.0", "14")
    assert (row["copy"], row["bucketing in Python"], row["source server"]) == \
        ("0.5", "1.0", "0.2")
    assert row["load process, the rest"] == "1.2"  # (6 - 1 - 2 - 0.5) / 2
    assert (row["gen_HF"], row["query client"], row["HBase"]) == ("3.5", "1.0", "0.0")


def test_a_process_that_lived_between_two_snapshots_counts(tmp_path):
    """The query client's workers end before the end of a load's work: the meter remembers
    each process's last CPU seen, so that its CPU counts but for its last moments."""
    burn = "import time\nend = time.process_time() + 1.0\nwhile time.process_time() < end: pass"
    with CpuMeter(Config(state_dir=tmp_path), every=0.02) as meter:
        meter.snapshot()
        child = subprocess.Popen([sys.executable, "-c", burn, "SparkSubmit"])
        child.wait()
        time.sleep(0.1)
        seen = {pid: used for (pid, _), (role, used) in meter.snapshot().processes.items()
                if role == SPARK}
    assert 0.6 <= seen.get(child.pid, 0.0) <= 1.1
    # a sample alone knows only the processes alive
    assert child.pid not in {pid for pid, _ in CpuSample.take(Config(state_dir=tmp_path))
                             .processes}


def test_the_report_has_the_cpu_table_only_for_a_bench_that_measured_it():
    from debl.report import cpu_sections

    part = {"seconds": 4.0, "cores": 2, "busy_s": 8.0, "by_role": {SPARK: 3.0},
            "bench_by_phase": {}}
    meta = {"input": {"bytes": 10**9}}
    [(title, table)] = cpu_sections([_run("debl", part, part)], meta)
    assert "CPU seconds per GB" in title and table.rows[0][:4] == ("debl", "4.0", "8.0", "16")
    assert cpu_sections([ApproachRun("old", "L", 0.0, 1.0, {}, (), None)], meta) == []
