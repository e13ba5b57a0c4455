"""DeBL's configuration: one frozen dataclass, every key in one place.

Values come, in increasing precedence, from the defaults below, a TOML file (``debl.toml`` in
the working directory, or the path in ``DEBL_CONFIG``) and ``DEBL_*`` environment variables.
A TOML table names the prefix of its keys: ``[mysql] port = 3316`` sets ``mysql_port``, and so
does ``DEBL_MYSQL_PORT=3316``.

The defaults point at the local stack that ``debl stack up`` starts on 127.0.0.1; pointing DeBL at
remote services or a Spark cluster means changing only these values.

Pitfalls:

- The MySQL password is never a command-line argument. It comes from ``mysql_password``
  (config file or ``DEBL_MYSQL_PASSWORD``) or else from ``mysql_password_file``, which the local
  stack writes with mode 0600.
- SQL identifiers taken from config (database and table names, the MySQL user name) are
  validated here, once, so the rest of the code may interpolate them into SQL.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from debl.errors import ConfigError

MiB = 1 << 20

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
# A MariaDB user name (at most 80 characters) that is safe inside '...' in the stack's
# CREATE USER / GRANT statements, which cannot take it as a bound parameter.
_USER_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,79}$")
_ENGINES = ("InnoDB", "MyISAM", "Aria")


def check_identifier(value: str, what: str) -> str:
    """*value* if it is a plain SQL identifier (letters, digits, underscore; not starting with
    a digit; at most 64 characters), else ConfigError naming *what*: names DeBL puts into SQL
    are checked once, so that the rest of the code may interpolate them."""
    if not _IDENTIFIER.match(value):
        raise ConfigError(f"{what}={value!r} is not a plain SQL identifier "
                          "(letters, digits, underscore; not starting with a digit)")
    return value
# Each load's tables are named <name>_<load id> (debl.namespace: 22 characters), its staging
# table <link_table>_<load id>_staging.
_NAME_ROOM = {"mysql_database": 64 - len("debl_gen_hf."),
              "link_table": 64 - len("_L20261125_172208_ab12") - len("_staging"),
              "hbase_table": 64 - len("_L20261125_172208_ab12")}


@dataclass(frozen=True)
class Config:
    """Every setting of DeBL. Picklable: Spark jobs carry it to executors."""

    # Where DeBL keeps its local state: the stack's data and logs, the Maven-resolved JVM
    # runtime (lib/), load rejects, bench runs. Relative to the working directory.
    state_dir: Path = Path(".debl")

    # MySQL (MariaDB).
    mysql_host: str = "127.0.0.1"
    mysql_port: int = 3316
    mysql_user: str = "debl"
    mysql_password: str | None = None
    mysql_database: str = "debl"
    mysql_engine: str = "InnoDB"
    link_table: str = "linktable"
    # Connections per MySQLStore and driver (the link reads on mysqlclient, the rest on
    # pymysql), shared by all its threads: the server sees at most this many per store and
    # driver (HBaseStore pools 32).
    mysql_pool_size: int = 32

    # HDFS.
    hdfs_uri: str = "hdfs://127.0.0.1:9820"
    hdfs_root: str = "/debl"
    hdfs_http_port: int = 9870
    hdfs_datanode_port: int = 9866
    hdfs_datanode_http_port: int = 9864
    hdfs_datanode_ipc_port: int = 9867

    # HBase and its Thrift1 server.
    hbase_thrift_host: str = "127.0.0.1"  # where DeBL reaches Thrift
    hbase_thrift_port: int = 9090
    # Where the local stack's Thrift server listens: loopback unless set. Not hbase_thrift_host:
    # Thrift1 has no authentication, so naming a remote host to reach must never open the
    # local server to the network.
    hbase_thrift_bind: str = "127.0.0.1"
    hbase_zookeeper_quorum: str = "127.0.0.1"
    hbase_zookeeper_port: int = 2181
    hbase_master_port: int = 16000
    hbase_regionserver_port: int = 16020
    hbase_table: str = "linktable"
    hbase_heap: str = "1g"
    # HBase's root directory in HDFS (hbase.rootdir): the local stack's, and where the bench
    # measures what the HBase tables hold on disk.
    hbase_root_dir: str = "/hbase"

    # Spark. The master of DeBL's applications when spark_workers is 0: local[N] runs the tasks
    # in the driver's JVM; spark://, yarn and k8s:// run them on a cluster (docs/RUNTIME.md,
    # "Spark on a cluster").
    spark_master: str = "local[2]"
    spark_driver_memory: str = "2g"
    # Each executor's heap and cores on a cluster (spark.executor.memory, .cores; local[N] has
    # no executors). Its tasks share the heap: gen_HF refuses buckets over a quarter of it per
    # core (docs/ONLINE.md).
    spark_executor_memory: str = "1g"
    spark_executor_cores: int = 1
    # Cores one application may hold on a cluster (spark.cores.max). 0: half the executors the
    # stack's own cluster has room for when spark_workers > 0, no cap on another master. A bench
    # (or a load) and its gen_HF are two applications running at once, and an application
    # keeps its executors until it ends: one allowed everything would starve the other.
    spark_cores_max: int = 0
    # > 0: `debl stack up` also starts a Spark standalone master and this many workers on
    # 127.0.0.1 from the installed pyspark, and DeBL's applications run there
    # (spark://127.0.0.1:spark_master_port; spark_master must then stay local[...], unused).
    # 0: no cluster; spark_master as set.
    spark_workers: int = 0
    spark_worker_cores: int = 1  # cores each worker offers its executors
    spark_worker_memory: str = "1g"  # memory each worker offers (executors of spark_executor_memory)
    spark_daemon_memory: str = "256m"  # heap of the master and of each worker daemon itself
    spark_master_port: int = 7077
    spark_master_webui_port: int = 8080  # the stack's health probe reads /json here
    spark_worker_port: int = 7078  # worker i (1..N) listens on spark_worker_port + i - 1
    spark_worker_webui_port: int = 8081  # worker i's web UI: spark_worker_webui_port + i - 1

    # Loading.
    chunk_size: int = 256 * MiB
    # > 0: fixed-width buckets (b = id1 // bucket_width). 0: split points sampled from the cold
    # files before the copy, for buckets of about bucket_target_bytes (loaders.sampling).
    bucket_width: int = 0
    # A bucket is what one gen_HF task merges in memory; smaller buckets let demand steer the
    # order more finely, each run costing a Spark job and a bulk load more (docs/ONLINE.md,
    # "Measured").
    bucket_target_bytes: int = 32 * MiB
    # One bucket holds an id whole. True: the target is raised to the heaviest id's bytes, so
    # buckets stay even (largest / mean near 1) when one id outweighs bucket_target_bytes, as
    # LinkBench's rank-0 id does (docs/LOADING.md, "Bucket boundaries"). False: cold bytes /
    # bucket_target_bytes buckets all
    # the same, that id alone in the largest (debl bench --buckets N wants N buckets).
    bucket_target_covers_heaviest: bool = True
    # The split-point sample: ranged reads per bucket_target_bytes of cold input (a bucket
    # boundary is placed to about 1/this of a bucket per file), each of sample_bytes. The
    # defaults read 0.4% of the input.
    sample_reads_per_bucket: int = 32
    sample_bytes: int = 4096
    dist_ch_tasks: int = 2  # parallel Spark tasks per chunk, each on a line-aligned slice
    run_buckets: int = 2
    run_bytes: int = 512 * MiB
    # At a new day's uptime gen_HF first converts the buckets whose key ranges the previous
    # day's queries asked most (docs/ONLINE.md, "Demand carried over"); False: today's demand
    # alone, then bucket order.
    carry_demand: bool = True
    max_bad: int = -1  # -1: no limit
    # When MySQL's hot path starts taking the hot files in (docs/LOADING.md, "Uptime without
    # MySQL"): "uptime" (once every chunk is bucketed: nothing then competes with the copy and
    # dist_ch, the load is up as soon as it could be) or "copied" (as soon as the hot chunks are
    # in HDFS: MySQL takes them over sooner, competing with dist_ch for the CPUs).
    hot_path_start: str = "uptime"
    # A line longer than this (its line end not counted) is rejected without ever being held
    # whole, by the hot path, the cold copy and dist_ch alike; the reject file keeps its first
    # 1 KiB (docs/DESIGN.md section 8). Valid LinkBench lines are under 400 bytes.
    max_line_bytes: int = 4 * MiB
    # An HTTP transfer that ends early is resumed with Range from the first byte not received;
    # after this many resumes in a row that bring no byte, the load fails naming the file and
    # the offset (loaders.source).
    source_retries: int = 5
    # HTTP basic authentication for an HTTP source (loaders.source, README "Configuration"):
    # never in the URL, which would put the password in `debl load`'s argv. The password comes
    # from source_password (DEBL_SOURCE_PASSWORD) or else from the first line of
    # source_password_file, which must be readable by its owner alone; the user from
    # source_user, else the URL's user@.
    source_user: str | None = None
    source_password: str | None = None
    source_password_file: Path | None = None
    # How long a load, or cleanup, waits for running coordinators to leave a load's stores
    # (or hot files) before it drops them (docs/RELIABILITY.md, "Concurrency").
    coordinator_ack_timeout: float = 60.0
    # Seconds the previous day's stores are kept after the next day became current, for
    # `debl rollback`; then cleanup drops them once no coordinator serves them (docs/LOADING.md,
    # "Days"). 0: as soon as no coordinator serves them.
    keep_previous_load: float = 600.0

    # The longest DeBL waits on a service that does not answer (a MySQL statement of the
    # query path or the catalog, a WebHDFS request, a Thrift call, the HBase client of the
    # JVM jobs), in seconds: past it the command fails with a message naming the service.
    # The hot path's LOAD DATA, merge and index build may run longer and are not bounded by it
    # (a server that dies still ends them at once: its socket closes). docs/RELIABILITY.md.
    service_timeout: float = 60.0

    # For fault campaigns only (docs/RELIABILITY.md): the name of a point in debl.faultpoints
    # where the process kills itself. Empty: none.
    fault_point: str = ""

    # Coordinator.
    poll_interval: float = 0.5
    # The raw route (docs/COORDINATOR.md): a query whose bucket is not loaded waits at most this
    # many seconds for gen_HF, then is answered exactly from the bucket's files in HDFS; "off"
    # (None) waits for the conversion, as the paper does. 0 (at once) measured best: waiting
    # holds the client's thread and rarely sees the bucket land.
    raw_after: float | None = 0.0
    # The raw route's LRU cache of bucket file blocks and indexes, per coordinator.
    raw_cache_bytes: int = 128 * MiB
    # A query through the coordinator that gives no timeout of its own waits at most this many
    # seconds for uptime or its bucket, then gets QueryTimeout: never forever.
    query_timeout: float = 600.0

    # Query client (`debl query`, the bench's query phase): worker processes that share the
    # client threads, each with its own connections. 0: one per core (at most one per thread);
    # one Python process tops out at a few thousand requests/s (docs/BENCHMARKS.md).
    client_processes: int = 0

    # `debl ui`: the live status page's port, always on 127.0.0.1 (docs/UI.md); 0: a free port
    # the system picks (the command prints it).
    ui_port: int = 8790

    def __post_init__(self) -> None:
        for name in ("mysql_database", "link_table", "hbase_table"):
            value = check_identifier(getattr(self, name), name)
            # Names built from these must stay within MySQL's 64 characters: the hot path's
            # `<link_table>_staging`, the locks `debl_gen_hf.<database>`, `debl_load.<db>`.
            longest = _NAME_ROOM.get(name, 64)
            if len(value) > longest:
                raise ConfigError(f"{name}={value!r} is longer than {longest} characters (DeBL "
                                  "derives longer names from it)")
        if not _USER_NAME.match(self.mysql_user):
            raise ConfigError(f"mysql_user={self.mysql_user!r} is not a plain MySQL user name "
                              "(letters, digits, underscore, dot, hyphen; at most 80)")
        if self.mysql_engine not in _ENGINES:
            raise ConfigError(f"mysql_engine={self.mysql_engine!r}: choose one of {', '.join(_ENGINES)}")
        for name in ("chunk_size", "bucket_target_bytes", "run_buckets", "run_bytes",
                     "dist_ch_tasks", "max_line_bytes", "mysql_pool_size",
                     "sample_reads_per_bucket", "sample_bytes", "raw_cache_bytes",
                     "query_timeout"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, not {getattr(self, name)}")
        for name in ("source_retries", "coordinator_ack_timeout", "keep_previous_load"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be 0 or more, not {getattr(self, name)}")
        if self.client_processes < 0:
            raise ConfigError(f"client_processes must be 0 (one per core) or positive, "
                              f"not {self.client_processes}")
        if not 0 <= self.ui_port <= 65535:
            raise ConfigError(f"ui_port must be a TCP port (0 for any free one), not "
                              f"{self.ui_port}")
        if not self.service_timeout > 0:
            raise ConfigError(f"service_timeout must be positive seconds, not "
                              f"{self.service_timeout}")
        if self.hot_path_start not in ("uptime", "copied"):
            raise ConfigError(f"hot_path_start must be \"uptime\" or \"copied\", not "
                              f"{self.hot_path_start!r}")
        if self.raw_after is not None and not self.raw_after >= 0:
            raise ConfigError(f"raw_after must be \"off\" or seconds >= 0, not {self.raw_after}")
        self._check_spark()
        if self.bucket_width < 0:
            raise ConfigError(f"bucket_width must be 0 (sampled split points) or positive, "
                              f"not {self.bucket_width}")

    def _check_spark(self) -> None:
        for name in ("spark_driver_memory", "spark_executor_memory", "spark_worker_memory",
                     "spark_daemon_memory"):
            jvm_bytes(name, getattr(self, name))
        if self.spark_executor_cores <= 0:
            raise ConfigError(f"spark_executor_cores must be positive, not "
                              f"{self.spark_executor_cores}")
        if self.spark_workers < 0 or self.spark_cores_max < 0:
            raise ConfigError("spark_workers and spark_cores_max must be 0 or positive, not "
                              f"{self.spark_workers} and {self.spark_cores_max}")
        if self.spark_workers == 0:
            return
        if self.spark_worker_cores < self.spark_executor_cores:
            raise ConfigError(f"spark_worker_cores ({self.spark_worker_cores}) must be at least "
                              f"spark_executor_cores ({self.spark_executor_cores})")
        if not self.spark_master.startswith("local"):
            raise ConfigError(
                f"spark_workers={self.spark_workers} runs DeBL on the stack's own Spark cluster, "
                f"but spark_master={self.spark_master!r} names another: set spark_workers = 0 to "
                "use that master, or leave spark_master at its default")
        if self.spark_executor_slots < 2:
            raise ConfigError(
                f"the stack's Spark cluster ({self.spark_workers} worker(s) of "
                f"{self.spark_worker_cores} core(s) and {self.spark_worker_memory}) has room for "
                f"{self.spark_executor_slots} executor(s) of {self.spark_executor_cores} core(s) and "
                f"{self.spark_executor_memory}: it needs "
                "two, one for a load's (or bench's) application and one for gen_HF's. Add "
                "workers, cores or spark_worker_memory, or lower spark_executor_memory")

    @property
    def spark_executor_slots(self) -> int:
        """Executors (of spark_executor_cores and _memory) the stack's cluster has room for (0
        when spark_workers is 0)."""
        per_worker = min(self.spark_worker_cores // self.spark_executor_cores,
                         jvm_bytes("spark_worker_memory", self.spark_worker_memory)
                         // jvm_bytes("spark_executor_memory", self.spark_executor_memory))
        return self.spark_workers * per_worker

    @property
    def spark_url(self) -> str:
        """The master DeBL's applications use: the stack's own cluster when spark_workers > 0,
        else spark_master."""
        if self.spark_workers > 0:
            return f"spark://127.0.0.1:{self.spark_master_port}"
        return self.spark_master

    @property
    def spark_app_cores(self) -> int | None:
        """spark.cores.max for each application, or None (no cap): spark_cores_max, or by
        default half the executors of the stack's cluster (see spark_cores_max)."""
        if self.spark_cores_max > 0:
            return self.spark_cores_max
        if self.spark_workers > 0:
            return max(1, self.spark_executor_slots // 2) * self.spark_executor_cores
        return None

    @property
    def lib_dir(self) -> Path:
        """The JVM runtime resolved by scripts/setup.sh: lib/stack, lib/spark, lib/debl-jobs.jar."""
        return self.state_dir / "lib"

    @property
    def mysql_password_file(self) -> Path:
        """Where the local stack keeps the generated ``debl`` password (mode 0600)."""
        return self.state_dir / "mysql" / "password"

    @property
    def mysql_secret(self) -> str:
        """The MySQL password: from config/env, else from the password file."""
        if self.mysql_password is not None:
            return self.mysql_password
        try:
            return self.mysql_password_file.read_text().strip()
        except FileNotFoundError:
            raise ConfigError(
                f"no MySQL password: set DEBL_MYSQL_PASSWORD or run `debl stack up`, "
                f"which writes {self.mysql_password_file}") from None

    def __repr__(self) -> str:  # keeps the passwords out of logs and tracebacks
        shown = {f.name: getattr(self, f.name) for f in fields(self)
                 if f.name not in ("mysql_password", "source_password")}
        return "Config(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"

    def replace(self, **changes: Any) -> "Config":
        return dataclasses.replace(self, **changes)


_JVM_UNITS = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def jvm_bytes(name: str, text: str) -> int:
    """A JVM memory size (``2g``, ``512m``, ``1t``, or a plain number of MiB, as Spark reads
    ``spark.*.memory``) in bytes; ConfigError naming the setting *name* for anything else."""
    value = str(text).strip().lower().removesuffix("b")
    digits = value[:-1] if value[-1:] in _JVM_UNITS else value
    if not digits.isdigit() or int(digits) == 0:
        raise ConfigError(f"{name} {text!r} is not a JVM memory size (e.g. 2g, 512m)")
    return int(digits) * _JVM_UNITS.get(value[-1:], 1 << 20)


def _coerce(name: str, raw: Any, target: type | str) -> Any:
    kind = target if isinstance(target, str) else target.__name__
    if "float" in kind and "None" in kind and str(raw).strip().lower() == "off":
        return None  # an optional duration switched off (raw_after)
    try:
        if "Path" in kind:
            return Path(raw)
        if kind == "bool":
            if isinstance(raw, bool):
                return raw
            if str(raw).lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
                return str(raw).lower() in ("1", "true", "yes", "on")
            raise ValueError(raw)
        if "int" in kind and "None" not in kind:
            return int(raw)
        if "float" in kind:
            return float(raw)
        return None if raw is None else str(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}={raw!r} is not a valid {kind}") from None


def load_config(path: Path | str | None = None, env: dict[str, str] | None = None) -> Config:
    """Read ``debl.toml`` (or *path*, or ``$DEBL_CONFIG``) and ``DEBL_*`` variables.

    Unknown keys are an error, so a misspelt setting never silently does nothing. Relative paths
    in the result are resolved against the working directory.
    """
    env = os.environ if env is None else env
    known = {f.name: f.type for f in fields(Config)}
    values: dict[str, Any] = {}

    path = Path(path or env.get("DEBL_CONFIG") or "debl.toml")
    if path.exists():
        try:
            doc = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: {exc}") from None
        for key, value in doc.items():
            items = ({f"{key}_{k}": v for k, v in value.items()} if isinstance(value, dict)
                     else {key: value})
            for name, raw in items.items():
                if name not in known:
                    raise ConfigError(f"{path}: unknown setting {name!r}")
                values[name] = raw
    elif "DEBL_CONFIG" in env or (path.name != "debl.toml"):
        raise ConfigError(f"config file {path} does not exist")

    for key, raw in env.items():
        if key.startswith("DEBL_") and key != "DEBL_CONFIG":
            name = key[5:].lower()
            if name not in known:
                raise ConfigError(f"environment variable {key}: unknown setting {name!r}")
            values[name] = raw

    typed = {name: _coerce(name, raw, known[name]) for name, raw in values.items()}
    config = Config(**typed)
    return config.replace(**{f.name: getattr(config, f.name).absolute()
                             for f in fields(config) if isinstance(getattr(config, f.name), Path)})
