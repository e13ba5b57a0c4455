"""The bench end to end on the real stack, in a namespace of its own: a tiny input, three
approaches with their query phases, the result files, the report; the HBase baselines on their
own; every store checked against the in-memory reference built from the raw files."""

from __future__ import annotations

import csv
import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from debl.bench import (DEFAULT_LAYOUT, DEFAULT_RECENCY_SHARE, BenchProgress, BenchSpec,
                        bucket_target_bytes, ensure_input, hot_bytes_for_share, load_options,
                        max_id_for_size, query_client_spec, read_bench, reset_stores,
                        run_bench)
from debl.bench.baselines import APPROACHES, run_approach
from debl.catalog import Catalog
from debl.config import Config
from debl.errors import ConfigError
from debl.store.hbase import HBaseStore
from debl.store.mysql import MySQLStore
from debl.workload.spec import GenerateSpec
from loaders.load import LoadOptions, load_debl
from loaders.source import LocalSource, SourceFile
from loaders.split import split_files
from tests.dataset import reference_store

APPROACHES_RUN = ("fileCopy", "bulkLoad-mysql", "debl", "debl-raw")
# The bench's default setting: a range dump, requests that follow recency (DEFAULT_RECENCY_SHARE)
INPUT = GenerateSpec(max_id=8001, files=10, days=10, seed=3, max_degree=40, update_share=0.2,
                     hidden_share=0.3, bad_lines=3, layout="ranges")


def namespaced(config):
    return config.replace(mysql_database="debl_benchtest", hbase_table="benchtest_links",
                          mysql_link_table="benchtest_links", hdfs_root="/debl-benchtest")


def hot_names(config, load_id: str) -> set[str]:
    with Catalog(config) as catalog:
        return {f.name for f in catalog.files.files(load_id) if f.hot}


def _namespace(config, load_id: str):
    with Catalog(config) as catalog:
        return catalog.loads.get(load_id).namespace


def hbase_count(config, load_id: str) -> int:
    with HBaseStore(config, _namespace(config, load_id).hbase_table) as hbase:
        return hbase.count() if hbase.table_exists() else 0


def mysql_count(config, load_id: str) -> int:
    table = _namespace(config, load_id).link_table
    with MySQLStore(config, table) as mysql:
        return mysql.count() if mysql.table_exists() else 0


class Snapshots(BenchProgress):
    """The stores' row counts right after each approach, before the next one resets them."""

    def __init__(self):
        self.counts: dict[str, dict] = {}
        self.phases: list[tuple[str, str]] = []

    def phase(self, name, phase):
        self.phases.append((name, phase))

    def finished(self, run, config):
        self.counts[run.approach] = {"mysql": mysql_count(config, run.load_id),
                                     "hbase": hbase_count(config, run.load_id),
                                     "hot": hot_names(config, run.load_id)}


@pytest.fixture(scope="module")
def config(stack_config):
    return namespaced(stack_config)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("bench-input")


@pytest.fixture(scope="module")
def bench(config, spark, data_dir, tmp_path_factory):
    spec = BenchSpec(INPUT, data_dir, APPROACHES_RUN, source_rate=4.0, threads=4,
                     requests=300, chunk_size=128 * 1024, bucket_width=1500,
                     query_timeout=120.0, full_timeout=300.0)
    progress = Snapshots()
    result = run_bench(config, spec, progress,
                       directory=tmp_path_factory.mktemp("bench-results") / "B-test")
    yield result, progress
    reset_stores(config)  # leave the test namespace empty


@pytest.mark.stack
def test_result_files_hold_every_approach(bench):
    result, progress = bench
    meta, runs = read_bench(result.directory)
    assert meta["state"] == "done"
    assert [r.approach for r in runs] == list(APPROACHES_RUN)
    assert meta["input"]["files"] == INPUT.files
    for name in APPROACHES_RUN:
        with open(result.directory / f"{name}.timeline.csv") as f:
            rows = list(csv.DictReader(f))
        run = next(r for r in runs if r.approach == name)
        assert len(rows) == len(run.timeline)
        if APPROACHES[name].target is None:
            assert run.query is None and not rows
        else:
            assert run.query["completed"] + run.query["errors"] == 300
            assert run.query["errors"] == 0, run.query["error_samples"]
            assert sum(int(r["completed"]) for r in rows) == 300
            # the timeline counts from the load's start; the query phase starts at uptime
            assert float(rows[0]["t_s"]) >= run.uptime_s - 0.01
    assert ("debl", "gen_HF to full availability") in progress.phases


@pytest.mark.stack
def test_times_are_ordered(bench):
    result, _ = bench
    runs = {r.approach: r for r in result.runs}
    copy = runs["fileCopy"].uptime_s
    for r in result.runs:
        assert r.uptime_s > 0
        assert r.full_availability_s is not None and r.full_availability_s >= r.uptime_s - 0.01
        if r.all_served_s is not None:
            assert r.all_served_s >= r.query_start_s >= r.uptime_s - 0.01
        if r.approach != "fileCopy":
            assert r.uptime_s >= copy, "no load can be faster than copying the input"
        assert {"copy"} <= {p.phase for p in r.phases} or r.approach == "bulkLoad-mysql"
    # the bench's input is one run of the hot path: its listing layout has no index to build
    assert {"mysql_load", "mysql_merge"} <= {p.phase for p in runs["bulkLoad-mysql"].phases}
    debl = runs["debl"]
    assert debl.gen_hf["completed"], debl.gen_hf
    assert debl.waits["answered"] == 300
    assert 0.0 <= debl.waits["immediate_share"] <= 1.0
    assert debl.waits["raw"] == 0  # debl is the paper's coordinator: buffering only
    raw = runs["debl-raw"]
    assert raw.gen_hf["completed"] and raw.waits["answered"] == 300
    assert raw.waits["buffered"] + raw.waits["raw"] + raw.waits["immediate"] == 300
    assert raw.waits["timeouts"] == 0 and raw.summary["hot_bytes"] == debl.summary["hot_bytes"]


@pytest.mark.stack
def test_stores_hold_the_merged_rows_of_the_raw_files(bench, data_dir):
    _, progress = bench
    every = {f.name for f in LocalSource(data_dir).list()}
    everything = reference_store(data_dir, every).count()
    mysql_only = progress.counts["bulkLoad-mysql"]
    assert mysql_only["mysql"] == everything and mysql_only["hot"] == every

    debl = progress.counts["debl"]
    assert debl["hot"] and debl["hot"] != every
    assert debl["mysql"] == reference_store(data_dir, debl["hot"], only="hot").count()
    assert debl["hbase"] == reference_store(data_dir, debl["hot"], only="cold").count()

    assert progress.counts["fileCopy"]["mysql"] == 0  # it loads nothing


@pytest.mark.stack
def test_report_has_a_row_per_approach(bench, config):
    result, _ = bench
    from debl.commands.bench import report as report_command

    out = CliRunner().invoke(report_command, [str(result.directory)], obj=config)
    assert out.exit_code == 0, out.output
    md = (result.directory / "report.md").read_text()
    for name in APPROACHES_RUN:
        assert f"| {name} |" in md
    assert "| uptime / fileCopy uptime | debl |" in md
    assert "| all queries served / bulkLoad-mysql uptime | debl |" in md
    assert "raw answers" in md
    assert "| debl | " in md.split("## Service from uptime")[1]  # the service table's row
    assert "layout ranges" in md and f"{DEFAULT_RECENCY_SHARE:.0%} of the id1s by recency" in md
    # phases, latency, service from uptime, answered by each second, answers before the copy
    # ends, ratios, where the CPU goes, and the tail's five (by route, by cause, every answer,
    # what ran beside, stalls)
    assert (result.directory / "report.html").read_text().count("<table>") == 12
    cpu = md.split("## Where the CPU goes: CPU seconds per GB of input")[1].split("## ")[0]
    for name in APPROACHES_RUN:  # each measured: the machine was busy while it loaded
        row = next(line for line in cpu.splitlines() if line.startswith(f"| {name} |"))
        assert float(row.split("|")[4].replace(",", "")) > 0
    assert "| debl | uptime |" in md.split("## Answers before the copy ends")[1]
    png = (result.directory / "throughput.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


@pytest.mark.stack
@pytest.mark.parametrize("approach", ["bulkLoad-hbase", "batchPut-hbase"])
def test_hbase_baselines_hold_every_merged_row_at_uptime(config, spark, bench, data_dir,
                                                         approach):
    every = {f.name for f in LocalSource(data_dir).list()}
    summary = run_approach(config, str(data_dir),
                           LoadOptions(chunk_size=128 * 1024, bucket_width=1500,
                                       approach=approach))
    assert hbase_count(config, summary.load_id) == reference_store(data_dir, every).count()
    with Catalog(config) as catalog:
        load = catalog.loads.load(summary.load_id)
        phases = {p.phase for p in catalog.phases.phases(summary.load_id)}
    assert load.approach == approach and load.state == "up"
    assert abs(load.uptime - load.started - summary.uptime_s) < 0.01
    step = "gen_hf" if approach == "bulkLoad-hbase" else "batch_put"
    assert {"copy", "dist_ch", step} <= phases
    assert summary.phases[step] > 0


def test_only_debl_raw_has_the_raw_route():
    from debl.bench import coordinator_config

    on = Config(coordinator_raw_after=2.0)
    assert coordinator_config(on, APPROACHES["debl"].raw_route).coordinator.raw_after is None
    assert coordinator_config(on, APPROACHES["debl-fifo"].raw_route).coordinator.raw_after is None
    assert coordinator_config(on, APPROACHES["debl-cold"].raw_route).coordinator.raw_after is None
    assert coordinator_config(on, APPROACHES["debl-raw"].raw_route).coordinator.raw_after == 2.0
    off = Config(coordinator_raw_after=None)
    assert Config().coordinator.raw_after is not None  # debl-raw falls back on the default
    assert coordinator_config(off, APPROACHES["debl-raw"].raw_route).coordinator.raw_after == \
        Config().coordinator.raw_after


def test_approach_options_are_checked():

    with pytest.raises(ConfigError, match="unknown approach"):
        run_approach(Config(), "/nonexistent", LoadOptions(approach="bulkLoad"))
    with pytest.raises(ConfigError, match="every file is cold"):
        run_approach(Config(), "/nonexistent", LoadOptions(approach="debl-cold", hot_bytes=1))
    with pytest.raises(ConfigError, match="every file is hot"):
        run_approach(Config(), "/nonexistent", LoadOptions(approach="bulkLoad-mysql",
                                                           hot_since=0.0))


def test_debl_load_runs_debls_own_load_and_refuses_a_baseline():
    """`debl load` calls ``load_debl`` for debl and debl-cold: a baseline is not its to run."""
    with pytest.raises(ConfigError, match="debl.bench.baselines"):
        load_debl(Config(), "/nonexistent", LoadOptions(approach="bulkLoad-hbase"))
    with pytest.raises(ConfigError, match="every file is cold"):
        load_debl(Config(), "/nonexistent", LoadOptions(approach="debl-cold", hot_since=0.0))


def test_bench_spec_round_trips_and_repeats_as_a_command(tmp_path):
    spec = BenchSpec(GenerateSpec(max_id=max_id_for_size(300_000_000), layout="ranges"), tmp_path,
                     ("fileCopy", "debl"), source_rate=12.5, requests=2000, recency_share=0.5,
                     request_rate=800.0)
    assert BenchSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    older = {k: v for k, v in json.loads(json.dumps(spec.to_dict())).items()
             if k not in ("gen_hf_start", "queries_from")}
    assert BenchSpec.from_dict(older).gen_hf_start == "uptime"  # as benches before 24 Nov ran
    assert spec.gen_hf_start == "load" and "--gen-hf-start" not in spec.command_line()
    assert BenchSpec.from_dict(older).queries_from == "uptime"  # as every bench before
    assert spec.queries_from == "uptime" and "--queries-from uptime" in spec.command_line()
    from_load = dataclasses.replace(spec, queries_from="load")
    assert "--queries-from load" in from_load.command_line()
    assert BenchSpec.from_dict(json.loads(json.dumps(from_load.to_dict()))) == from_load
    with pytest.raises(ConfigError, match="--queries-from"):
        dataclasses.replace(spec, queries_from="copy")
    line = spec.command_line()
    assert "--source-rate 12.5" in line and "--approaches fileCopy,debl" in line
    assert "--layout ranges" in line and "--recency-share 0.5" in line and "--rate 800" in line
    assert query_client_spec(spec, Config()).rate == 800.0  # open loop
    assert query_client_spec(dataclasses.replace(spec, request_rate=None), Config()).rate \
        is None  # closed loop, the default
    with pytest.raises(ConfigError):
        dataclasses.replace(spec, request_rate=0.0)
    assert 900_000 < spec.input.max_id < 1_100_000  # ~300 MB: about 1M ids (measured 304 MB)
    with pytest.raises(ConfigError):
        BenchSpec(spec.input, tmp_path, ("fileCopy", "nope"))


def test_bench_defaults_are_the_papers_setting(tmp_path):
    from debl.commands.bench import bench as bench_command

    assert DEFAULT_LAYOUT == "ranges" and 0 < DEFAULT_RECENCY_SHARE < 1
    assert BenchSpec(GenerateSpec(max_id=101), tmp_path).recency_share == DEFAULT_RECENCY_SHARE
    options = {o.name: o.default for o in bench_command.params}
    assert options["layout"] == DEFAULT_LAYOUT
    assert options["recency_share"] == DEFAULT_RECENCY_SHARE
    assert options["queries_from"] == "uptime"  # today's query phase, unless asked
    with pytest.raises(ConfigError, match="--recency-share"):
        BenchSpec(GenerateSpec(max_id=101), tmp_path, recency_share=1.2)


def _files(*sizes_oldest_first: int) -> list[SourceFile]:
    return [SourceFile(f"links-{k:03d}.tsv", size, 1000.0 + k)
            for k, size in enumerate(sizes_oldest_first)]


@pytest.mark.parametrize("sizes, hot_files", [
    ((98, 106, 91, 98, 87, 86, 107, 94, 96, 138), 2),  # 1 GiB ranges: 13.8% + 9.6% beats 13.8%
    ((91, 101, 101, 101, 101, 101, 101, 101, 101, 101), 2),  # days: 20.2% beats 10.1%
    ((100, 100, 100, 100, 100, 100, 100, 100, 100, 390), 1),  # one big newest file: 30%
    ((10, 990), 1),  # at least one file stays cold
])
def test_hot_bytes_take_the_newest_whole_files_closest_to_the_share(sizes, hot_files):
    files = _files(*sizes)
    hot = hot_bytes_for_share(files, 0.2)
    split = split_files(files, hot)
    assert [f.name for f in split.hot] == [f.name for f in files[len(files) - hot_files:]]
    assert hot == sum(f.size for f in split.hot)


def test_buckets_set_the_bucket_target_of_each_approachs_cold_bytes(tmp_path):
    files = _files(*([100] * 8), 110, 110)
    spec = BenchSpec(GenerateSpec(max_id=101), tmp_path, buckets=16)
    debl, target = load_options(spec, "debl", files, chunk_size=64)
    assert debl.hot_bytes == 220 and debl.chunk_size == 64 and debl.bucket_width == 0
    assert target == bucket_target_bytes(spec, 800) == 50  # 800 cold bytes in 16 buckets
    cold, target = load_options(spec, "debl-cold", files, chunk_size=64)
    assert cold.hot_bytes is None and target == 64  # 1,020 bytes in 16 buckets, rounded up
    assert load_options(spec, "bulkLoad-hbase", files, 64)[1] == 64
    assert load_options(spec, "bulkLoad-mysql", files, 64)[1] is None  # nothing cold
    fixed = BenchSpec(GenerateSpec(max_id=101), tmp_path, bucket_width=500)
    options, target = load_options(fixed, "debl", files, 64)
    assert options.bucket_width == 500 and target is None


def test_the_input_cache_keys_on_the_layout(tmp_path):
    days = GenerateSpec(max_id=301, files=3, days=3, max_degree=5)
    ranges = GenerateSpec(max_id=301, files=3, days=3, max_degree=5, layout="ranges")
    messages = []

    class Recorder(BenchProgress):
        def message(self, text):
            messages.append(text)

    ensure_input(days, tmp_path, Recorder())
    first_ids = {int(line.split(b"\t")[0]) for line in open(tmp_path / "links-000.tsv", "rb")}
    ensure_input(days, tmp_path, Recorder())
    ensure_input(ranges, tmp_path, Recorder())
    ranged_ids = {int(line.split(b"\t")[0]) for line in open(tmp_path / "links-000.tsv", "rb")}
    assert [m.split()[0] for m in messages] == ["generating", "reusing", "generating"]
    assert max(ranged_ids) < 101 < max(first_ids)  # the ranges dump's first file: ids 1..100


@pytest.mark.stack
def test_queries_from_the_load_are_answered_before_uptime(config, spark,
                                                          tmp_path_factory):
    """`debl bench --queries-from load`: debl-cold's client asks before its load starts (a
    source slow enough that the copy takes seconds), its first answers come before the uptime
    (every byte of their keys bucketed: the early route), and the report says so; every
    request answered."""
    from debl.commands.bench import bench as bench_command

    data = tmp_path_factory.mktemp("bench-from-load")
    out = CliRunner().invoke(bench_command, [
        "--approaches", "debl-cold", "--max-id", "8001", "--max-degree", "40", "--files", "10",
        "--days", "10", "--input-seed", "3", "--data", str(data), "--source-rate", "0.1",
        "--threads", "4", "--requests", "200", "--chunk-size", "131072",
        "--bucket-width", "1500", "--query-timeout", "600", "--queries-from", "load", "--json"],
        obj=config)  # fetches on demand (the default) bring the waited keys: answered early
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    directory = Path(doc["directory"])
    try:
        meta, (run,) = read_bench(directory)
        assert meta["spec"]["queries_from"] == "load" and "--queries-from load" in meta["command"]
        assert run.queries_from == "load"
        assert run.query_start_s <= 0.0  # its requests were sent before the load started
        assert run.query["completed"] == 200 and run.query["errors"] == 0, \
            run.query["error_samples"]
        assert run.query_start_s <= run.first_answer_s < run.uptime_s
        assert run.waits["early"] > 0  # the coordinator's answers before the uptime
        answers = meta["answers"]
        assert answers["copy_end"]["basis"] == "source rate"  # no fileCopy: bytes / rate
        ours = answers["approaches"]["debl-cold"]
        assert ours["first_answer_s"] == run.first_answer_s and ours["answered_by_uptime"] > 0
        with open(directory / "debl-cold.timeline.csv") as f:
            rows = list(csv.DictReader(f))
        assert int(rows[-1]["answered"]) == 200
        assert float(rows[0]["t_s"]) < run.uptime_s  # the curve starts with the load
        md = (directory / "report.md").read_text()
        assert "| debl-cold | load |" in md.split("## Answers before the copy ends")[1]
        assert (directory / "answered.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        shutil.rmtree(directory, ignore_errors=True)
        reset_stores(config)
