"""`debl bench --writes` (docs/FRESHNESS.md, "The bench with writes"): the settings refused
before any work, and one run on the real stack (the source filled, dumped and loaded under
writes, the follower and gen_HF as services) whose figures must agree with what the run did."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from debl.bench import BenchProgress
from debl.bench.fresh import FreshSpec, run_fresh
from debl.errors import ConfigError
from debl.workload.spec import GenerateSpec
from debl.workload.write_log import read_writes

INPUT = GenerateSpec(max_id=2001, files=3, days=3, seed=5, max_degree=30, layout="ranges")


@pytest.mark.parametrize("change, message", [
    ({"modes": ("on", "fast")}, "'fast' is not a freshness setting"),
    ({"mixes": ("reads",)}, "'reads' sends no writes"),
    ({"rounds": 0}, "at least one round"),
])
def test_settings_that_cannot_run_are_refused_naming_the_option(change, message, tmp_path):
    with pytest.raises(ConfigError, match=message):
        FreshSpec(INPUT, tmp_path, **change)


def _config(stack_config, name: str):
    return stack_config.replace(source_db_table=name, mysql_database=f"debl_{name}",
                                hbase_table=f"{name}_links", mysql_link_table=f"{name}_links",
                                hdfs_root=f"/debl-{name}")


@pytest.mark.stack
def test_a_run_under_writes_is_checked_verified_and_reported(stack_config, tmp_path):
    spec = FreshSpec(INPUT, tmp_path / "input", modes=("on",), mixes=("update-heavy",),
                     read_rate=80.0, write_rate=80.0, threads=4, writers=2, duration=12.0)
    result = run_fresh(_config(stack_config, "benchfresh"), spec, BenchProgress(),
                       directory=tmp_path / "bench")

    (run,) = result["runs"]
    assert (run["name"], run["mode"], run["mix"]) == ("update-heavy-on-r1", "on", "update-heavy")
    # every answer checked, none wrong; the load with the changes equals the source
    check = run["check"]
    assert check["checked"] == check["answers"] == run["reads"]["all"]["n"] > 0
    assert check["violations"] == {} and check["history_problems"] == {}
    against = run["against_source"]
    assert (against["missing"], against["extra"], against["different"]) == (0, 0, 0)
    assert against["source_rows"] == against["debl_rows"] > 0
    # every write the run saved with its commit's GTID was captured, with its lag
    run_dir = Path(result["directory"]) / run["name"]
    committed = [w for w in read_writes(run_dir / "writes.csv") if w.gtid is not None]
    assert len(committed) <= run["writes"]["acknowledged"]
    assert run["lag"]["all"]["n"] == len(committed) > 0 and run["lag"]["all"]["p99_ms"] > 0
    # freshness on: a read waits for its range, so changes are applied on demand
    assert run["fresh"]["applied_on_demand"] > 0
    # the phases split the reads; the timeline's seconds add up to them
    phases = run["reads"]
    assert sum(phases[p]["n"] for p in ("load", "conversion", "after")) == phases["all"]["n"]
    assert 0 < run["uptime_s"] <= (run["converted_s"] or float("inf"))
    with open(run_dir / "timeline.csv") as f:
        assert sum(int(row["reads"]) for row in csv.DictReader(f)) == phases["all"]["n"]
    # where the CPU went while the client ran: its workers, the follower and the source did work
    cpu = run["cpu"]
    assert 0 < cpu["busy_s"] <= cpu["cores"] * cpu["seconds"] * 1.05
    for role in ("query client's workers (coordinators)", "follower", "source database"):
        assert cpu["by_role"][role] > 0, cpu
    # the results and the report
    bench = Path(result["directory"])
    assert json.loads((bench / "fresh.json").read_text())["runs"][0]["name"] == run["name"]
    report = (bench / "fresh.md").read_text()
    assert "| update-heavy-on-r1 |" in report and "0 violations." in report
    assert (bench / "fresh.png").stat().st_size > 0


@pytest.mark.stack
def test_a_next_day_and_a_rollback_under_writes_keep_every_answer_fresh(stack_config, tmp_path):
    """The next day dumped and loaded while the writes go on, then rolled back: every answer,
    from either day, is the source at one moment between its arrival and its answer, no
    client sees a key go back, and today's load with the changes is the source."""
    spec = FreshSpec(INPUT, tmp_path / "input", modes=("on",), mixes=("linkbench",),
                     read_rate=80.0, write_rate=80.0, threads=4, writers=2, duration=18.0,
                     next_day=True)
    result = run_fresh(_config(stack_config, "benchday"), spec, BenchProgress(),
                       directory=tmp_path / "bench")
    (run,) = result["runs"]
    day = run["next_day"]
    assert day["load_id"] not in (None, run["load_id"])
    assert 0 < day["dumped_s"] < day["current_s"] < day["rolled_back_s"]
    check = run["check"]
    assert check["checked"] == check["answers"] > 0
    assert check["violations"] == {} and check["history_problems"] == {}
    against = run["against_source"]
    assert against["load_id"] == run["load_id"]  # today's, served again
    assert (against["missing"], against["extra"], against["different"]) == (0, 0, 0)
    assert "rolled back at" in (Path(result["directory"]) / "fresh.md").read_text()
