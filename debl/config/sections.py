"""Config's typed sections, by role: every setting of DeBL but the three Config holds itself,
with its type, its default and why (``debl.config`` assembles them; ``SECTIONS`` lists them).

Each section checks its own values when made (``__post_init__``), so a Config that exists is
valid. The defaults point at the local stack on 127.0.0.1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from debl.config.values import (ENGINES, USER_NAME, check_name, check_not_negative,
                                check_positive, check_seconds, jvm_bytes)
from debl.errors import ConfigError

MiB = 1 << 20


@dataclass(frozen=True)
class _Section:
    """A typed section of Config: a frozen dataclass whose fields are settings. ``SECTION`` is
    its attribute of Config and its TOML table: the field ``port`` of ``SECTION = "mysql"`` is
    the setting ``mysql.port`` (``[mysql] port``, ``DEBL_MYSQL_PORT``)."""

    SECTION: ClassVar[str] = ""

    @classmethod
    def name_of(cls, field_name: str) -> str:
        """The setting's name, as messages give it: ``mysql.port``."""
        return f"{cls.SECTION}.{field_name}"


@dataclass(frozen=True)
class MysqlConfig(_Section):
    """MySQL (MariaDB): where it is, who DeBL is there, the dataset's database and table."""

    SECTION: ClassVar[str] = "mysql"

    host: str = "127.0.0.1"
    port: int = 3316
    user: str = "debl"
    password: str | None = field(default=None, repr=False)
    database: str = "debl"
    engine: str = "InnoDB"
    link_table: str = "linktable"
    # Connections per MySQLStore and driver (link reads on mysqlclient, the rest on pymysql),
    # shared by its threads: the server sees at most this many per store and driver.
    pool_size: int = 32

    def __post_init__(self) -> None:
        for name in ("database", "link_table"):
            check_name(self.name_of(name), getattr(self, name))
        if not USER_NAME.match(self.user):
            raise ConfigError(f"mysql.user={self.user!r} is not a plain MySQL user name "
                              "(letters, digits, underscore, dot, hyphen; at most 80)")
        if self.engine not in ENGINES:
            raise ConfigError(f"mysql.engine={self.engine!r}: choose one of {', '.join(ENGINES)}")
        check_positive(self, "pool_size")


@dataclass(frozen=True)
class HdfsConfig(_Section):
    """HDFS: the NameNode, DeBL's root directory, and the local stack's ports."""

    SECTION: ClassVar[str] = "hdfs"

    uri: str = "hdfs://127.0.0.1:9820"
    root: str = "/debl"
    http_port: int = 9870
    datanode_port: int = 9866
    datanode_http_port: int = 9864
    datanode_ipc_port: int = 9867
    # Read this host's DataNode's block files directly (docs/COORDINATOR.md, "Local block reads")
    local_reads: bool = True


@dataclass(frozen=True)
class HBaseConfig(_Section):
    """HBase and its Thrift1 server."""

    SECTION: ClassVar[str] = "hbase"

    thrift_host: str = "127.0.0.1"  # where DeBL reaches Thrift
    thrift_port: int = 9090
    # Where the local stack's Thrift server listens: loopback unless set. Not hbase.thrift_host:
    # Thrift1 has no authentication, so naming a remote host to reach must never open the
    # local server to the network.
    thrift_bind: str = "127.0.0.1"
    zookeeper_quorum: str = "127.0.0.1"
    zookeeper_port: int = 2181
    master_port: int = 16000
    regionserver_port: int = 16020
    table: str = "linktable"
    heap: str = "1g"
    root_dir: str = "/hbase"  # hbase.rootdir in HDFS: where the bench measures the tables' disk

    def __post_init__(self) -> None:
        check_name("hbase.table", self.table)


@dataclass(frozen=True)
class SparkConfig(_Section):
    """Spark: the master of DeBL's applications, their memory and cores, and the stack's own
    standalone cluster."""

    SECTION: ClassVar[str] = "spark"

    # The master when spark.workers is 0: local[N] runs the tasks in the driver's JVM;
    # spark://, yarn, k8s:// on a cluster (docs/RUNTIME.md, "Spark on a cluster").
    master: str = "local[2]"
    driver_memory: str = "2g"
    # Extra options of the application's JVMs (spark.driver.extraJavaOptions and
    # spark.executor.extraJavaOptions). The test suite sets "-XX:TieredStopAtLevel=1": its jobs
    # are seconds long, and the C1 JIT alone runs them on less CPU (docs/ARCHITECTURE.md, "The
    # test suite's wall time, measured"); a day's load runs long enough for C2 to pay.
    java_options: str = ""
    # Each executor's heap and cores on a cluster (spark.executor.memory, .cores; local[N] has
    # no executors). Its tasks share the heap: gen_HF refuses buckets over a quarter of it per
    # core (docs/ONLINE.md).
    executor_memory: str = "1g"
    executor_cores: int = 1
    # Cores one application may hold on a cluster (spark.cores.max). 0: half the executors the
    # stack's own cluster has room for when spark.workers > 0, no cap on another master. A bench
    # (or a load) and its gen_HF are two applications running at once, and an application
    # keeps its executors until it ends: one allowed everything would starve the other.
    cores_max: int = 0
    # > 0: `debl stack up` also starts a Spark standalone master and this many workers on
    # 127.0.0.1 from the installed pyspark, and DeBL's applications run there
    # (spark://127.0.0.1:<spark.master_port>; spark.master must then stay local[...], unused).
    # 0: no cluster; spark.master as set.
    workers: int = 0
    worker_cores: int = 1  # cores each worker offers its executors
    worker_memory: str = "1g"  # memory each worker offers (executors of spark.executor_memory)
    daemon_memory: str = "256m"  # heap of the master and of each worker daemon itself
    master_port: int = 7077
    master_webui_port: int = 8080  # the stack's health probe reads /json here
    worker_port: int = 7078  # worker i (1..N) listens on spark.worker_port + i - 1
    worker_webui_port: int = 8081  # worker i's web UI: spark.worker_webui_port + i - 1

    def __post_init__(self) -> None:
        for name in ("driver_memory", "executor_memory", "worker_memory", "daemon_memory"):
            jvm_bytes(self.name_of(name), getattr(self, name))
        if self.executor_cores <= 0:
            raise ConfigError(f"spark.executor_cores must be positive, not "
                              f"{self.executor_cores}")
        if self.workers < 0 or self.cores_max < 0:
            raise ConfigError("spark.workers and spark.cores_max must be 0 or positive, not "
                              f"{self.workers} and {self.cores_max}")
        if self.workers == 0:
            return
        if self.worker_cores < self.executor_cores:
            raise ConfigError(f"spark.worker_cores ({self.worker_cores}) must be at least "
                              f"spark.executor_cores ({self.executor_cores})")
        if not self.master.startswith("local"):
            raise ConfigError(
                f"spark.workers={self.workers} runs DeBL on the stack's own Spark cluster, "
                f"but spark.master={self.master!r} names another: set spark.workers = 0 to "
                "use that master, or leave spark.master at its default")
        if self.executor_slots < 2:
            raise ConfigError(
                f"the stack's Spark cluster ({self.workers} worker(s) of "
                f"{self.worker_cores} core(s) and {self.worker_memory}) has room for "
                f"{self.executor_slots} executor(s) of {self.executor_cores} core(s) and "
                f"{self.executor_memory}: it needs "
                "two, one for a load's (or bench's) application and one for gen_HF's. Add "
                "workers, cores or spark.worker_memory, or lower spark.executor_memory")

    @property
    def executor_slots(self) -> int:
        """Executors (of spark.executor_cores and _memory) the stack's cluster has room for (0
        when spark.workers is 0)."""
        per_worker = min(self.worker_cores // self.executor_cores,
                         jvm_bytes("spark.worker_memory", self.worker_memory)
                         // jvm_bytes("spark.executor_memory", self.executor_memory))
        return self.workers * per_worker

    @property
    def url(self) -> str:
        """The master DeBL's applications use: the stack's own cluster when spark.workers > 0,
        else spark.master."""
        if self.workers > 0:
            return f"spark://127.0.0.1:{self.master_port}"
        return self.master

    @property
    def app_cores(self) -> int | None:
        """spark.cores.max for each application, or None (no cap): spark.cores_max, or by
        default half the executors of the stack's cluster (see spark.cores_max)."""
        if self.cores_max > 0:
            return self.cores_max
        if self.workers > 0:
            return max(1, self.executor_slots // 2) * self.executor_cores
        return None


@dataclass(frozen=True)
class LoadingConfig(_Section):
    """The offline phase (``debl load``): chunks, buckets, the split-point sample, the hot path,
    bad lines, and when a load's stores may go."""

    SECTION: ClassVar[str] = "loading"

    chunk_size: int = 256 * MiB
    # > 0: fixed-width buckets (b = id1 // bucket_width). 0: split points sampled from the cold
    # files before the copy, for buckets of about bucket_target_bytes (loaders.sampling).
    bucket_width: int = 0
    # What one gen_HF task merges in memory: smaller buckets let demand steer more finely, each
    # run costing a Spark job and a bulk load more (docs/ONLINE.md, "Measured").
    bucket_target_bytes: int = 32 * MiB
    # One bucket holds an id whole. True: the target is raised to the heaviest id's bytes, so
    # buckets stay even when one id outweighs bucket_target_bytes, as LinkBench's rank-0 id
    # does (docs/LOADING.md, "Bucket boundaries"). False: cold bytes / bucket_target_bytes
    # buckets all the same, that id alone in the largest (debl bench --buckets N wants N).
    bucket_target_covers_heaviest: bool = True
    # The split-point sample: ranged reads per bucket_target_bytes of cold input (a bucket
    # boundary is placed to about 1/this of a bucket per file), each of sample_bytes. What
    # the defaults read and cost: docs/LOADING.md, "Bucket boundaries", "What the sample costs".
    sample_reads_per_bucket: int = 32
    sample_bytes: int = 4096
    dist_ch_tasks: int = 2  # parallel Spark tasks per chunk, each on a line-aligned slice
    max_bad: int = -1  # -1: no limit
    # When MySQL's hot path starts (docs/LOADING.md, "Uptime without MySQL"): "uptime" (once
    # every chunk is bucketed: nothing then competes with the copy and dist_ch) or "copied" (the
    # hot chunks in HDFS: MySQL takes them over sooner, competing with dist_ch for the CPUs).
    hot_path_start: str = "uptime"
    # A line longer than this (its line end not counted) is rejected without ever being held
    # whole, by the hot path, the cold copy and dist_ch alike; the reject file keeps its first
    # 1 KiB (docs/DESIGN.md section 8). Valid LinkBench lines are under 400 bytes.
    max_line_bytes: int = 4 * MiB
    # How long a load, or cleanup, waits for running coordinators to leave a load's stores
    # (or hot files) before it drops them (docs/RELIABILITY.md, "Concurrency").
    coordinator_ack_timeout: float = 60.0
    # Answers before uptime, waiting keys' bytes fetched ahead of the bulk copy (docs/LOADING.md,
    # "Answers before the copy ends", "The copy follows demand").
    early_answers: bool = True
    demand_fetch: bool = True
    # Seconds the previous day's stores are kept after the next day became current, for
    # `debl rollback`, then dropped once no coordinator serves them (docs/LOADING.md, "Days").
    keep_previous_load: float = 600.0

    def __post_init__(self) -> None:
        for name in ("chunk_size", "bucket_target_bytes", "dist_ch_tasks", "max_line_bytes",
                     "sample_reads_per_bucket", "sample_bytes"):
            check_positive(self, name)
        check_seconds(self.name_of("coordinator_ack_timeout"), self.coordinator_ack_timeout,
                      zero="no wait")
        check_seconds(self.name_of("keep_previous_load"), self.keep_previous_load,
                      zero="dropped once no coordinator serves it")
        if self.hot_path_start not in ("uptime", "copied"):
            raise ConfigError(f"loading.hot_path_start must be \"uptime\" or \"copied\", not "
                              f"{self.hot_path_start!r}")
        if self.bucket_width < 0:
            raise ConfigError(f"loading.bucket_width must be 0 (sampled split points) or positive, "
                              f"not {self.bucket_width}")


@dataclass(frozen=True)
class SourceConfig(_Section):
    """An HTTP source: resumed transfers and HTTP basic authentication (loaders.source, README
    "Configuration")."""

    SECTION: ClassVar[str] = "source"

    # An HTTP transfer that ends early resumes with Range from the first byte not received;
    # after this many fruitless resumes in a row the load fails naming file and offset.
    retries: int = 5
    # Never in the URL, which would put the password in `debl load`'s argv. The password comes
    # from source.password (DEBL_SOURCE_PASSWORD) or else from the first line of
    # source.password_file, which must be readable by its owner alone; the user from
    # source.user, else the URL's user@.
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    password_file: Path | None = None
    # HTTP basic authentication is the password in clear text: over http:// to a host outside
    # the loopback, anyone on the way reads it. Refused unless this says to send it anyway
    # (then with a warning); https:// and the loopback need nothing.
    allow_password_over_http: bool = False

    def __post_init__(self) -> None:
        check_not_negative(self, "retries")


@dataclass(frozen=True)
class SourceDbConfig(_Section):
    """The source database (docs/FRESHNESS.md): a MariaDB with LinkBench's link table and its
    binary log on, which clients write to and `debl source dump` dumps; the local stack starts
    one (docs/RUNTIME.md, "The source database")."""

    SECTION: ClassVar[str] = "source_db"

    host: str = "127.0.0.1"
    port: int = 3317  # beside the stack's own MariaDB (mysql.port)
    # The user that fills, dumps and writes the table (every privilege on source_db.database)
    # and the follower's (replication: REPLICATION SLAVE, BINLOG MONITOR, SELECT on the
    # table). Passwords as MySQL's: the setting, else a 0600 file `debl stack up` writes under
    # the state directory (Config.source_db_password_file, source_db_replication_password_file).
    user: str = "debl_source"
    password: str | None = field(default=None, repr=False)
    replication_user: str = "debl_repl"
    replication_password: str | None = field(default=None, repr=False)
    database: str = "linkbench"
    table: str = "linktable"
    # The server's id in its GTIDs (domain-server-seq): any other than a replica's of it.
    server_id: int = 1
    # The id `debl follow` gives itself as the source's replica (each replica of a server needs
    # its own: a second connection with the same id ends the first). 0: derived from the
    # catalog's database and the table (debl.store.source_binlog.replica_server_id), so the
    # followers of several datasets reading one source never share one (docs/RUNTIME.md, "The
    # source database").
    follower_server_id: int = 0
    # Seconds the server keeps its binary log (binlog_expire_logs_seconds; 0: until purged by
    # hand). A follower starts at the dump's position of the oldest load kept, so the log must
    # reach back past a day's dump, the next day's load and the previous day kept for a
    # rollback, and a follower down for some hours: two days. A position older than the log
    # is lost for good (docs/FRESHNESS.md, "Capture").
    log_expire: int = 2 * 86400

    def __post_init__(self) -> None:
        for name in ("database", "table"):
            check_name(self.name_of(name), getattr(self, name))
        for name in ("user", "replication_user"):
            if not USER_NAME.match(getattr(self, name)):
                raise ConfigError(f"{self.name_of(name)}={getattr(self, name)!r} is not a plain "
                                  "MySQL user name (letters, digits, underscore, dot, hyphen; "
                                  "at most 80)")
        if not 1 <= self.server_id <= 0xFFFFFFFF:
            raise ConfigError(f"source_db.server_id must be 1 to 4294967295, not "
                              f"{self.server_id}")
        if not 0 <= self.follower_server_id <= 0xFFFFFFFF or (
                self.follower_server_id == self.server_id):
            raise ConfigError(f"source_db.follower_server_id must be 0 (derived) or 1 to "
                              f"4294967295 and not the source's own source_db.server_id "
                              f"({self.server_id}), not {self.follower_server_id}")
        if not 0 <= self.log_expire <= MAX_LOG_EXPIRE:
            raise ConfigError(f"source_db.log_expire must be 0 (kept until purged by hand) to "
                              f"{MAX_LOG_EXPIRE} seconds (MariaDB's 99 days), not "
                              f"{self.log_expire}")

    @property
    def url(self) -> str:
        """The SQLAlchemy URL of the source database, without the password
        (``Config.source_db_url`` gives it whole, for a client to connect)."""
        return f"mysql+pymysql://{self.user}@{self.host}:{self.port}/{self.database}"


MAX_LOG_EXPIRE = 99 * 86400  # binlog_expire_logs_seconds' largest value


@dataclass(frozen=True)
class GenHFConfig(_Section):
    """gen_HF, the online phase: how much one run converts, in what order, at what priority."""

    SECTION: ClassVar[str] = "gen_hf"

    run_buckets: int = 2
    run_bytes: int = 512 * MiB
    # At a new day's uptime gen_HF first converts the buckets the previous day's queries asked
    # most (docs/ONLINE.md, "Demand carried over"); False: today's demand, then bucket order.
    carry_demand: bool = True
    nice: int = 10  # `debl gen-hf`'s and its Spark JVM's CPU niceness (docs/ONLINE.md, "Priority")

    def __post_init__(self) -> None:
        for name in ("run_buckets", "run_bytes"):
            check_positive(self, name)
        if not 0 <= self.nice <= 19:
            raise ConfigError(f"gen_hf.nice must be 0 (as is) to 19, not {self.nice}")


@dataclass(frozen=True)
class CoordinatorConfig(_Section):
    """The coordinator: its poll of the catalog, the raw route, and a query's deadline."""

    SECTION: ClassVar[str] = "coordinator"

    # Seconds between the poller's reads of the catalog (the current load, its buckets' states)
    # and the raw reader's checks of its buckets' listings; gen_HF retries after multiples of it.
    poll_interval: float = 0.5
    # The raw route (docs/COORDINATOR.md): a query whose bucket is not loaded waits at most this
    # many seconds for gen_HF, then is answered exactly from the bucket's files in HDFS; "off"
    # (None) waits for the conversion, as the paper does. 0, at once: waiting holds the
    # client's thread and rarely sees the bucket land (docs/COORDINATOR.md, "Measured").
    raw_after: float | None = 0.0
    # The raw route's LRU cache of bucket file blocks and indexes, per coordinator.
    raw_cache_bytes: int = 128 * MiB
    # The raw route's HDFS reads in flight per coordinator: more than the cores can serve only
    # queue at the DataNode and raise the p99 (docs/BENCHMARKS.md, "The read threads").
    raw_read_threads: int = 8
    # Raw answers from local files run at once, the rest queue in arrival order; 0: no queue
    # (docs/COORDINATOR.md, "Threads").
    raw_slots: int = 4
    # A query through the coordinator that gives no timeout of its own waits at most this many
    # seconds for uptime or its bucket, then gets QueryTimeout: never forever.
    query_timeout: float = 600.0

    def __post_init__(self) -> None:
        for name in ("raw_cache_bytes", "raw_read_threads"):
            check_positive(self, name)
        for name in ("poll_interval", "query_timeout"):
            check_seconds(self.name_of(name), getattr(self, name))
        if self.raw_after is not None:
            check_seconds(self.name_of("raw_after"), self.raw_after,
                          zero='the raw route at once; "off": never')
        check_not_negative(self, "raw_slots")


@dataclass(frozen=True)
class ClientConfig(_Section):
    """The query client (`debl query`, the bench's query phase)."""

    SECTION: ClassVar[str] = "client"

    # Worker processes that share the client threads, each with its own connections. 0: one
    # per core (at most one per thread): one Python process's interpreter lock caps its
    # requests per second (docs/WORKLOAD.md, "Worker processes").
    processes: int = 0

    def __post_init__(self) -> None:
        if self.processes < 0:
            raise ConfigError(f"client.processes must be 0 (one per core) or positive, "
                              f"not {self.processes}")


@dataclass(frozen=True)
class UIConfig(_Section):
    """`debl ui`, the live status page (docs/UI.md)."""

    SECTION: ClassVar[str] = "ui"

    # Its port, always on 127.0.0.1; 0: a free port the system picks (the command prints it).
    port: int = 8790

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"ui.port must be a TCP port (0 for any free one), not {self.port}")


@dataclass(frozen=True)
class FreshConfig(_Section):
    """Fresh answers: the source's changes since the dump, captured by `debl follow` and applied
    for a query before it is answered (docs/FRESHNESS.md). Only a load whose listing carries
    the dump's position is kept fresh."""

    SECTION: ClassVar[str] = "fresh"

    # on: a query waits for the source's head after its arrival, captured and applied to its
    # key range (the contract, docs/FRESHNESS.md, "The contract"); serial: the same with one
    # range refreshed at a time in a process (the comparison: maintenance one batch at a time);
    # off: no wait, what the background refresh has applied ("near real-time", the comparison).
    mode: str = "on"
    # Seconds an answer may be older than its query's arrival (the papers' tolerance window):
    # it relaxes only the lower bound; 0, the default, none.
    tolerance: float = 0.0
    # Changes buffered in a key range past which it is refreshed in the background, not waiting
    # for a query; idle ranges are refreshed every fresh.idle_refresh seconds.
    buffer_threshold: int = 1000
    idle_refresh: float = 1.0
    # The follower writes what it has captured as soon as nothing more is read ahead (a group
    # commit), at most this many changes and this many seconds after the first of them at
    # once: one catalog transaction for a burst of source transactions keeps up with the
    # source's write rate, the wait bounds the follower's lag.
    capture_batch: int = 1000
    capture_wait: float = 0.005
    # How often a process that answers reads the change log's new rows while queries wait
    # for them (and when idle, ten times less often).
    tail_interval: float = 0.002

    def __post_init__(self) -> None:
        if self.mode not in FRESH_MODES:
            raise ConfigError(f"fresh.mode={self.mode!r}: choose one of "
                              f"{', '.join(FRESH_MODES)}")
        check_seconds("fresh.tolerance", self.tolerance, zero="no tolerance")
        for name in ("idle_refresh", "capture_wait", "tail_interval"):
            check_seconds(self.name_of(name), getattr(self, name))
        check_positive(self, "buffer_threshold")
        check_positive(self, "capture_batch")


FRESH_MODES = ("on", "serial", "off")


# Config's sections: its attribute (the section's SECTION, its TOML table) -> the class.
SECTIONS: dict[str, type[_Section]] = {cls.SECTION: cls for cls in (
    MysqlConfig, HdfsConfig, HBaseConfig, SparkConfig, LoadingConfig, SourceConfig,
    SourceDbConfig, GenHFConfig, CoordinatorConfig, FreshConfig, ClientConfig, UIConfig)}
