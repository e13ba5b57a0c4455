"""DeBL on the stack's own Spark standalone cluster (docs/RUNTIME.md, "Spark on a cluster"), real
processes throughout:

- ``stack up`` with ``spark_workers = 2`` starts a master and two workers from the installed
  pyspark, on the configured ports of 127.0.0.1 only, and ``stack status`` reports them;
- the unchanged ``debl gen-hf`` and ``debl load`` commands, each in its own process, run as two
  applications on it at once: gen_HF's holds its executor (spark.cores.max) while the load's
  dist_ch gets the other one, neither starved; every bucket reaches HBase and every answer
  equals the in-memory reference's;
- stopping the cluster (as ``stack down`` does, also when the config no longer asks for it)
  ends master, workers and a running application's executors: no Spark process is left.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import replace
from pathlib import Path

import psutil
import pytest
from click.testing import CliRunner

from coordinator import Coordinator
from debl.catalog import Catalog
from debl.commands.stack import stack as stack_command
from debl.config import Config
from debl.stack.spark_cluster import SparkCluster
from debl.stack.stack import all_services, stack_status, stack_up
from loaders.source import LocalSource
from loaders.split import split_files
from loaders.verify import verify_load
from tests.dataset import make_dataset, reference_store

pytestmark = [pytest.mark.stack, pytest.mark.long]  # long: scheduled first (tests/conftest.py)

WORKERS = 2
HOT_BYTES = 900_000  # the newest file
TIMEOUT = 300.0


@pytest.fixture(scope="module")
def cluster(stack_config):
    """The stack's config with a two-worker cluster, which is up. A cluster that ran before the
    module is running again after it."""
    with_cluster = replace(stack_config, spark_workers=WORKERS, spark_worker_cores=1,
                           spark_worker_memory="512m", spark_executor_memory="512m",
                           spark_driver_memory="1g")
    was_up = SparkCluster(with_cluster).running()
    results = {r.service: r for r in stack_up(with_cluster)}
    assert "Spark" in results
    yield with_cluster
    SparkCluster(with_cluster).stop()
    if was_up:
        stack_up(with_cluster)


def namespace(config: Config) -> Config:
    """A dataset of this module's own, on *config*'s stack."""
    return config.replace(mysql_database="debl_clustertest", mysql_link_table="cluster_links",
                   hbase_table="cluster_links", hdfs_root="/debl-clustertest",
                   coordinator_poll_interval=0.2, gen_hf_run_buckets=4,
                   loading_bucket_target_bytes=512 * 1024)


def env_of(config: Config, base: Config) -> dict[str, str]:
    """This process's environment plus the ``DEBL_*`` variables of the settings in which
    *config* differs from *base* (their names from the config's one table, through
    ``child_env``): a child ``debl`` command then loads *config*."""
    env = dict(os.environ)
    base_env = base.child_env()
    env.update({k: v for k, v in config.child_env().items()
                if k.startswith("DEBL_") and base_env.get(k) != v})
    return env


def master_state(config: Config) -> dict:
    with urllib.request.urlopen(
            f"http://127.0.0.1:{config.spark.master_webui_port}/json/", timeout=10) as r:
        return json.load(r)


def listeners(port: int) -> set[str]:
    """Local addresses of the TCP sockets listening on *port*."""
    found = set()
    for c in psutil.net_connections(kind="tcp"):
        if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port:
            found.add(c.laddr.ip)
    return found


LOOPBACK = {"127.0.0.1", "::ffff:127.0.0.1"}


def spark_processes(home: Path) -> list[tuple[int, str]]:
    """Every process whose command line or working directory is under the cluster's home:
    master, workers, executors and their Python workers."""
    found = []
    for proc in psutil.process_iter(["cmdline", "cwd"]):
        cmdline, cwd = proc.info["cmdline"], proc.info["cwd"]
        if cmdline is None or cwd is None:  # not ours, or ended meanwhile
            continue
        line = " ".join(cmdline)
        if f"{home}/" in line or f"{cwd}/".startswith(f"{home}/"):
            found.append((proc.pid, line))
    return found


def wait_for(what: str, check, timeout: float = TIMEOUT, procs=()):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        for proc in procs:
            assert proc.poll() is None, f"{proc.args[3]} exited with {proc.returncode} " \
                                        f"while waiting for {what}"
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def test_status_shows_the_master_and_both_workers_on_loopback(cluster):
    health = {h.service: h for h in stack_status(cluster)}["Spark"]
    assert health.healthy, health.detail
    assert len(health.pids) == 1 + WORKERS and all(health.pids)
    assert len(health.rss_kib) == len(health.pids) and all(r and r > 0 for r in health.rss_kib)
    assert health.address.startswith(f"spark://127.0.0.1:{cluster.spark.master_port}")
    assert f"{WORKERS} workers" in health.detail

    state = master_state(cluster)
    alive = sorted(w["port"] for w in state["workers"] if w["state"] == "ALIVE")
    assert alive == [cluster.spark.worker_port + i for i in range(WORKERS)]
    ports = [cluster.spark.master_port, cluster.spark.master_webui_port,
             *(cluster.spark.worker_port + i for i in range(WORKERS)),
             *(cluster.spark.worker_webui_port + i for i in range(WORKERS))]
    for port in ports:
        assert listeners(port) and listeners(port) <= LOOPBACK, (port, listeners(port))

    result = CliRunner().invoke(stack_command, ["status", "--json"], obj=cluster)
    assert result.exit_code == 0, result.output
    listed = {s["service"]: s for s in json.loads(result.output)}
    assert listed["Spark"]["healthy"] and listed["Spark"]["pids"] == list(health.pids)


@pytest.fixture(scope="module")
def loaded(cluster, stack_config, tmp_path_factory):
    """gen_HF started first on an empty namespace (its application takes its executor and
    waits for a load), then the load: both commands unchanged, in processes of their own."""
    from debl.mysql import connect

    config = namespace(cluster)
    with connect(config, database=False) as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{config.mysql.database}`")
    directory = tmp_path_factory.mktemp("cluster")
    make_dataset(directory, max_id=45001, files=5, seed=17)
    env = env_of(config, stack_config)
    logs = tmp_path_factory.mktemp("cluster-logs")
    started = time.monotonic()
    with open(logs / "gen-hf.log", "wb") as out:
        gen_hf = subprocess.Popen([sys.executable, "-m", "debl", "gen-hf", "--until-complete"],
                                  env=env, stdout=out, stderr=subprocess.STDOUT)
    load = None
    try:
        app = wait_for("gen_HF's application to hold its executor", lambda: next(
            (a for a in master_state(cluster)["activeapps"]
             if a["name"] == "debl-gen_HF" and a["cores"] > 0), None), procs=[gen_hf])
        assert app["cores"] == config.spark.app_cores == 1
        with open(logs / "load.log", "wb") as out:
            load = subprocess.Popen(
                [sys.executable, "-m", "debl", "load", str(directory), "--hot-bytes",
                 str(HOT_BYTES), "--chunk-size", "1MiB", "--json"],
                env=env, stdout=subprocess.PIPE, stderr=out)
        stdout, _ = load.communicate(timeout=TIMEOUT)
        assert load.returncode == 0, (logs / "load.log").read_text()[-3000:]
        summary = json.loads(stdout)
        assert gen_hf.wait(timeout=TIMEOUT) == 0, (logs / "gen-hf.log").read_text()[-3000:]
    finally:
        for proc in (gen_hf, load):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    seconds = time.monotonic() - started
    hot = {f.name for f in split_files(LocalSource(directory).list(), hot_bytes=HOT_BYTES).hot}
    return config, summary, reference_store(directory, hot), app, seconds


def test_load_and_gen_hf_run_on_the_workers_and_answer_as_the_reference(cluster, loaded):
    config, summary, reference, gen_hf_app, seconds = loaded
    assert summary["hot_files"] >= 1 and summary["cold_files"] >= 3 and summary["buckets"] >= 4

    # Both applications ran their executors on the cluster's workers.
    state = master_state(cluster)
    apps = {a["name"]: a for a in state["completedapps"] if a["state"] == "FINISHED"
            and a["starttime"] >= gen_hf_app["starttime"]}
    assert {"debl-gen_HF", "debl-dist_ch"} <= set(apps), state["completedapps"]
    home = SparkCluster(cluster).home
    for name in ("debl-gen_HF", "debl-dist_ch"):
        assert any(home.glob(f"work-*/{apps[name]['id']}/*/stderr")), name

    load_id = summary["load_id"]
    with Catalog(config) as catalog:
        assert catalog.loads.current().load_id == load_id
        assert set(catalog.jobs.job_states(load_id).values()) == {"loaded"}
        assert len(catalog.index.buckets(load_id)) == summary["buckets"]
    report = verify_load(config)
    assert report.ok, report.failures
    # Buffering only: an answer can come only from MySQL and HBase, not from the raw route. A
    # sample of the 35,000 lists (every one takes minutes on a busy 2-core machine), from
    # every bucket.
    sample = sorted(reference.keys())[::17]
    with Catalog(config) as catalog:
        bucket_map = catalog.loads.load(load_id).bucket_map
        assert {bucket_map.bucket_of(id1) for id1, _ in sample} >= \
            {b.b_index for b in catalog.index.buckets(load_id)}
    with Coordinator(config.replace(coordinator_raw_after=None)) as coordinator:
        for key in sample:
            answer = coordinator.query(*key, timeout=10)
            assert answer.complete and answer.route in ("mysql", "merged"), (key, answer.route)
            assert answer.links == reference.get_link_list(*key), key
    print(f"\nload + gen-hf on the two-worker cluster: {seconds:.1f} s")


def test_stopping_the_cluster_leaves_no_spark_process(cluster, stack_config, tmp_path, loaded):
    home = SparkCluster(cluster).home
    # An application holding an executor: gen-hf serving (every bucket is loaded, it polls).
    with open(tmp_path / "gen-hf.log", "wb") as out:
        serving = subprocess.Popen([sys.executable, "-m", "debl", "gen-hf"],
                                   env=env_of(loaded[0], stack_config), stdout=out,
                                   stderr=subprocess.STDOUT)
    try:
        wait_for("an executor of the serving gen_HF", lambda: any(
            a["name"] == "debl-gen_HF" and a["cores"] > 0
            for a in master_state(cluster)["activeapps"]), procs=[serving])
        # The master grants the cores before the worker has started the executor's JVM.
        wait_for("the executor's process", lambda: [
            pid for pid, cmd in spark_processes(home) if "CoarseGrainedExecutorBackend" in cmd],
            procs=[serving])

        # What `stack down` stops with a config that no longer asks for the cluster.
        leftover = [s for s in all_services(cluster.replace(spark_workers=0), leftovers=True)
                    if s.name == "Spark"]
        assert leftover, "a running cluster must be found even with spark_workers = 0"
        assert leftover[0].stop()
        assert wait_for("every Spark process to end", lambda: not spark_processes(home),
                        timeout=30) is True
        health = {h.service: h for h in stack_status(cluster)}["Spark"]
        assert not health.healthy and health.detail == "not running"
        assert not any(home.glob("*.pid"))
    finally:
        serving.terminate()
        serving.wait(timeout=60)
