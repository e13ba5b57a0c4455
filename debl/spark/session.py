"""The Spark session factory: one place that knows how DeBL's Spark applications are configured.

The master comes from config (``Config.spark.url``): ``local[2]`` by default, the stack's own
standalone cluster (``spark://127.0.0.1:spark_master_port``) when ``spark.workers`` > 0, or any
``spark://...``, ``yarn`` or ``k8s://...`` set as ``spark.master``. The jars that DeBL's jobs need
on the JVM side — hbase-shaded-mapreduce and its few unrelocated dependencies (``lib/spark``),
and DeBL's own JVM tasks (``lib/debl-jobs.jar``: dist_ch's and gen_HF's per-row work, table
creation, bulk load) — go on the driver and executor classpaths; ``fs.defaultFS`` is the
configured HDFS. Only ``loaders.jobs`` calls into those classes (docs/ARCHITECTURE.md, "The JVM
tasks").

Pitfalls:

- One JVM per Python process: ``getOrCreate`` returns the running session if there is one, with
  whatever jars it started with. DeBL's long-lived jobs (dist_ch, gen_HF) rely on that reuse.
- The driver JVM, and what spark-submit starts for it, end with this Python process even when
  it dies before the JVM's gateway runs (``debl.spark.jvm_reaper``).
- Spark brings its own Hadoop client (3.3.4, shaded); no ``hadoop-*`` jar may be added.
- On a cluster an application keeps its executors until it ends; ``spark.cores.max``
  (``Config.spark.app_cores``) leaves room for the second application (gen_HF next to a load or
  a bench), without which that one waits for executors forever (docs/RUNTIME.md).
- The stack's own cluster shares this machine's files, so the executors take the jars from
  ``spark.executor.extraClassPath``; ``spark.jars`` would also copy all of them into every
  executor's work directory, for every application (docs/RUNTIME.md, "Spark on a cluster").
  Any other master gets ``spark.jars`` (each executor fetches them from the driver), as its
  machines do not have these paths.
"""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from debl.config import Config
from debl.config.values import jvm_bytes
from debl.errors import ConfigError, ServiceError
from debl.spark.jvm_reaper import reaped_on_parent_death


def spark_jars(config: Config) -> list[Path]:
    """The jars every DeBL Spark application needs; an error names the set-up step if missing."""
    lib = config.lib_dir
    jars = sorted((lib / "spark").glob("*.jar"))
    own = lib / "debl-jobs.jar"
    if not jars or not own.exists():
        raise ConfigError(f"the Spark-side HBase jars are missing under {lib}: run "
                          "scripts/setup.sh")
    built = lib / ".debl-jobs.stamp"
    if (JVM_SOURCES.is_dir() and built.is_file()
            and built.read_text().strip() != jvm_sources_digest()):
        raise ConfigError(f"{own} was built from other sources than this checkout's "
                          f"{JVM_SOURCES} (its classes would be missing or stale): run "
                          "bash scripts/build_jobs_jar.sh")
    return [*jars, own]


JVM_SOURCES = Path(__file__).resolve().parents[2] / "loaders" / "jvm"


def jvm_sources_digest(root: Path = JVM_SOURCES) -> str:
    """The digest scripts/build_jobs_jar.sh writes next to the jar it built: sha256 over
    ``sha256sum``'s lines for pom.xml and every file under src/, in byte order of their paths."""
    paths = sorted(["pom.xml", *(str(p.relative_to(root)) for p in (root / "src").rglob("*")
                                 if p.is_file())], key=os.fsencode)
    lines = "".join(f"{hashlib.sha256((root / p).read_bytes()).hexdigest()}  {p}\n" for p in paths)
    return hashlib.sha256(lines.encode()).hexdigest()


def driver_memory_bytes(config: Config) -> int:
    """``spark.driver_memory`` in bytes, read as Spark reads it: ``2g``, ``512m``, ``1t``, or a
    plain number of MiB. ConfigError for anything else."""
    return jvm_bytes("spark.driver_memory", config.spark.driver_memory)


@dataclass(frozen=True)
class TaskHeap:
    """Where DeBL's Spark tasks run and how many share that heap: the driver's under local[N]
    (N tasks), an executor's on a cluster (spark.executor_cores tasks)."""

    setting: str  # the name of the setting that sizes the heap (spark.driver_memory)
    heap_bytes: int
    tasks: int

    @property
    def per_task(self) -> int:
        """One task's share of the heap, in bytes."""
        return self.heap_bytes // self.tasks


def task_heap(config: Config) -> TaskHeap:
    master = config.spark.url
    if master == "local" or master.startswith("local["):
        threads = master[len("local["):-1].split(",")[0] if master != "local" else "1"
        tasks = (os.cpu_count() or 1) if threads == "*" else int(threads)
        return TaskHeap("spark.driver_memory", driver_memory_bytes(config), max(1, tasks))
    return TaskHeap("spark.executor_memory",
                    jvm_bytes("spark.executor_memory", config.spark.executor_memory),
                    config.spark.executor_cores)


# An HDFS client closing a file asks the NameNode to complete it; until the DataNode has reported
# the last block, the NameNode says no and the client sleeps, 400 ms at first by Hadoop's
# default, then twice as long each time. dist_ch closes one file per bucket and slice, which in a
# change log is every bucket of every chunk, and many of those closes slept (docs/LOADING.md,
# "Closing many small files"). Shorter first sleeps, more of them: at least Hadoop's patience in
# all, and a close soon after the DataNode's report.
HDFS_CLOSE_SETTINGS = {
    "dfs.client.block.write.locateFollowingBlock.initial.delay.ms": "25",
    "dfs.client.block.write.locateFollowingBlock.retries": "10",
}


def spark_session(config: Config, app_name: str = "debl"):
    """Start (or reuse) the SparkSession for DeBL's jobs."""
    # lazy import: pyspark would cost every `debl` command's start-up (docs/ARCHITECTURE.md,
    # "Lazy imports")
    from pyspark.sql import SparkSession

    # Executors must run the same Python as the driver (a venv or pyenv interpreter); on the
    # stack's cluster that interpreter has DeBL installed (editable), which is all that the
    # Python side of a task (batchPut's partitions) imports.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    master = config.spark.url
    local = master.startswith("local")
    loopback = local or config.spark.workers > 0  # every JVM of the application on this machine
    if loopback:
        # Everything binds to loopback anyway; said here, Spark stops warning that the host name
        # resolves to it.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    jars = spark_jars(config)
    classpath = os.pathsep.join(str(j) for j in jars)
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.driver.memory", config.spark.driver_memory)
        .config("spark.driver.extraClassPath", classpath)
        .config("spark.executor.extraClassPath", classpath)
        .config("spark.hadoop.fs.defaultFS", config.hdfs.uri)
        .config("spark.hadoop.dfs.client.use.datanode.hostname", "false")
        .config("spark.hadoop.dfs.replication", "1")
        .config(map={f"spark.hadoop.{k}": v for k, v in HDFS_CLOSE_SETTINGS.items()})
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")  # DeBL draws its own progress
        .config("spark.sql.shuffle.partitions", "8")
        # Silences the driver's expected warnings (a reused session, HBase's client retries)
        # from its start: debl.jobs.QuietLogs.
        .config("spark.plugins", "debl.jobs.QuietLogs")
    )
    if local:
        # A cluster's executors take their scratch directories from the cluster manager
        # (SPARK_LOCAL_DIRS, which the stack's workers set); Spark warns if this is set too.
        builder = builder.config("spark.local.dir", str(config.state_dir / "spark-tmp"))
    if loopback:
        # Executors on other machines must reach the driver at an address of this machine's
        # that they can route to: Spark's default (the host name), not loopback.
        builder = (builder.config("spark.driver.bindAddress", "127.0.0.1")
                   .config("spark.driver.host", "127.0.0.1"))
    if config.spark.java_options:
        builder = (builder.config("spark.driver.extraJavaOptions", config.spark.java_options)
                   .config("spark.executor.extraJavaOptions", config.spark.java_options))
    if config.spark.workers == 0:
        builder = builder.config("spark.jars", ",".join(str(j) for j in jars))
    if not local:
        builder = (builder.config("spark.executor.memory", config.spark.executor_memory)
                   .config("spark.executor.cores", str(config.spark.executor_cores)))
        if config.spark.app_cores is not None:
            builder = builder.config("spark.cores.max", str(config.spark.app_cores))
    try:
        with reaped_on_parent_death():
            session = builder.getOrCreate()
    except Exception as exc:  # py4j and Java gateway errors carry no useful type
        raise ServiceError(f"Spark could not start (master {master}): {exc}") from exc
    session.sparkContext.setLogLevel("WARN")
    return session
