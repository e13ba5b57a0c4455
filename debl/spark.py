"""The Spark session factory: one place that knows how DeBL's Spark applications are configured.

The master comes from config (``local[2]`` by default; ``spark://...``, ``yarn`` or ``k8s://...``
work unchanged). The jars that DeBL's jobs need on the JVM side — hbase-shaded-mapreduce and its
few unrelocated dependencies (``lib/spark``), and DeBL's own JVM tasks (``lib/debl-jobs.jar``:
dist_ch's and gen_HF's per-row work, table creation, bulk load) — go on the driver and executor
classpaths; ``fs.defaultFS`` is the configured HDFS. ``call_jvm`` calls into those classes and
turns a Java exception into a ServiceError that names its innermost cause.

Pitfalls:

- One JVM per Python process: ``getOrCreate`` returns the running session if there is one, with
  whatever jars it started with. DeBL's long-lived jobs (dist_ch, gen_HF) rely on that reuse.
- Spark brings its own Hadoop client (3.3.4, shaded); no ``hadoop-*`` jar may be added.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from pathlib import Path

from debl.config import Config
from debl.errors import ConfigError, JvmGone, ServiceError


def spark_jars(config: Config) -> list[Path]:
    """The jars every DeBL Spark application needs; an error names the set-up step if missing."""
    lib = config.lib_dir
    jars = sorted((lib / "spark").glob("*.jar"))
    own = lib / "debl-jobs.jar"
    if not jars or not own.exists():
        raise ConfigError(f"the Spark-side HBase jars are missing under {lib}: run scripts/setup.sh")
    return [*jars, own]


_JVM_UNITS = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def driver_memory_bytes(config: Config) -> int:
    """``spark_driver_memory`` in bytes, read as Spark reads it: ``2g``, ``512m``, ``1t``, or a
    plain number of MiB. ConfigError for anything else."""
    text = config.spark_driver_memory.strip().lower().removesuffix("b")
    unit = _JVM_UNITS.get(text[-1:], 1 << 20) if text else 0
    digits = text[:-1] if text[-1:] in _JVM_UNITS else text
    if not digits.isdigit() or int(digits) == 0:
        raise ConfigError(f"spark_driver_memory {config.spark_driver_memory!r} is not a JVM "
                          "memory size (e.g. 2g, 512m)")
    return int(digits) * unit


def spark_session(config: Config, app_name: str = "debl"):
    """Start (or reuse) the SparkSession for DeBL's jobs."""
    from pyspark.sql import SparkSession

    # Executors must run the same Python as the driver (a venv or pyenv interpreter).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if config.spark_master.startswith("local"):
        # Everything binds to loopback anyway; said here, Spark stops warning that the host name
        # resolves to it.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    classpath = os.pathsep.join(str(j) for j in spark_jars(config))
    builder = (
        SparkSession.builder.master(config.spark_master)
        .appName(app_name)
        .config("spark.driver.memory", config.spark_driver_memory)
        .config("spark.driver.extraClassPath", classpath)
        .config("spark.executor.extraClassPath", classpath)
        .config("spark.jars", ",".join(str(j) for j in spark_jars(config)))
        .config("spark.hadoop.fs.defaultFS", config.hdfs_uri)
        .config("spark.hadoop.dfs.client.use.datanode.hostname", "false")
        .config("spark.hadoop.dfs.replication", "1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")  # DeBL draws its own progress
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.local.dir", str(config.state_dir / "spark-tmp"))
    )
    try:
        session = builder.getOrCreate()
    except Exception as exc:  # py4j and Java gateway errors carry no useful type
        raise ServiceError(f"Spark could not start (master {config.spark_master}): {exc}") from exc
    session.sparkContext.setLogLevel("WARN")
    _quiet(session)
    return session


# Warnings that are expected in DeBL's use and tell a user nothing: a second getOrCreate in one
# process (dist_ch, gen_HF reuse the session by design), HBase's client registry and metrics
# defaults.
_QUIET_LOGGERS = ("org.apache.spark.sql.SparkSession",
                  "org.apache.hadoop.hbase.client.ZKConnectionRegistry",
                  "org.apache.hadoop.metrics2.impl.MetricsConfig")


def _quiet(session) -> None:
    jvm = session.sparkContext._jvm
    try:
        error = jvm.org.apache.logging.log4j.Level.ERROR
        for name in _QUIET_LOGGERS:
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, error)
    except Exception:  # noqa: BLE001 - another logging backend: the warnings stay, no harm
        pass


def call_jvm(what: str, fn, *args):
    """``fn(*args)`` through py4j; a Java exception becomes ServiceError("<what> failed: <the
    innermost Java exception>"), without the Spark job-abort wrapping around a task's error.

    A JVM that is gone (killed, crashed) becomes JvmGone, which callers must not retry. Pass a
    ``lambda`` for *fn* when the call names JVM classes (``sc._jvm.debl.jobs.X.m``): looking a
    class up is itself a call into the JVM, and must fail the same way."""
    try:
        return fn(*args)
    except Exception as exc:  # py4j errors carry the Java exception in their text only
        if _jvm_gone(exc):
            raise JvmGone(f"{what} failed: the Spark driver JVM of this process is gone (killed "
                          "or crashed); start the command again: what it left half done is "
                          "redone") from exc
        lines = str(exc).strip().splitlines()  # line 2: ": <java exception>: <message>"
        causes = [line[len("Caused by: "):] for line in lines if line.startswith("Caused by: ")]
        cause = causes[-1] if causes else (lines[1] if len(lines) > 1 else lines[0]).lstrip(": ")
        cause = re.sub(r"^.*most recent failure: Lost task .*?\): ", "", cause)
        raise ServiceError(f"{what} failed: {cause}") from exc


def _jvm_gone(exc: BaseException) -> bool:
    """Whether py4j lost its JVM rather than the JVM throwing: the gateway's process has ended,
    or *exc* (or what it was raised from) is a closed or refused gateway connection. (py4j turns
    a connection lost in a call into a plain Py4JError "An error occurred while calling ...":
    the process is what tells.)"""
    from py4j.protocol import Py4JNetworkError
    from pyspark import SparkContext

    proc = getattr(SparkContext._gateway, "proc", None)
    if proc is not None and proc.poll() is not None:
        return True
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, (Py4JNetworkError, ConnectionError)):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


class _LostGatewayTrace(logging.Filter):
    """Drops py4j's "Exception while sending command." records: py4j logs a lost JVM
    connection with its whole traceback on the root logger, which a user takes for a crash;
    call_jvm reports the JVM's death itself (JvmGone)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.getMessage().startswith("Exception while sending command")
                    and "py4j" in record.pathname)


logging.getLogger().addFilter(_LostGatewayTrace())
