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
    hbase_thrift_host: str = "127.0.0.1"
    hbase_thrift_port: int = 9090
    hbase_zookeeper_quorum: str = "127.0.0.1"
    hbase_zookeeper_port: int = 2181
    hbase_master_port: int = 16000
    hbase_regionserver_port: int = 16020
    hbase_table: str = "linktable"
    hbase_heap: str = "1g"

    # Spark.
    spark_master: str = "local[2]"
    spark_driver_memory: str = "2g"

    # Loading.
    chunk_size: int = 256 * MiB
    # > 0: fixed-width buckets (b = id1 // bucket_width). 0: split points sampled from the cold
    # files before the copy, for buckets of about bucket_target_bytes (loaders.sampling).
    bucket_width: int = 0
    # A bucket is what one gen_HF task merges in memory; smaller buckets let demand steer the
    # order more finely, each run costing a Spark job and a bulk load (~2 s) more.
    bucket_target_bytes: int = 32 * MiB
    # One bucket holds an id whole. True: the target is raised to the heaviest id's bytes, so
    # buckets stay even (largest / mean near 1) when one id outweighs bucket_target_bytes, as
    # LinkBench's rank-0 id (~64 MB) does. False: cold bytes / bucket_target_bytes buckets all
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
    max_bad: int = -1  # -1: no limit
    # A line longer than this (its line end not counted) is rejected without ever being held
    # whole, by the hot path, the cold copy and dist_ch alike; the reject file keeps its first
    # 1 KiB (docs/DESIGN.md section 8). Valid LinkBench lines are under 400 bytes.
    max_line_bytes: int = 4 * MiB

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

    # Query client (`debl query`, the bench's query phase): worker processes that share the
    # client threads, each with its own connections. 0: one per core (at most one per thread);
    # one Python process tops out at a few thousand requests/s (docs/BENCHMARKS.md).
    client_processes: int = 0

    def __post_init__(self) -> None:
        for name in ("mysql_database", "link_table", "hbase_table"):
            value = getattr(self, name)
            if not _IDENTIFIER.match(value):
                raise ConfigError(f"{name}={value!r} is not a plain SQL identifier "
                                  "(letters, digits, underscore; not starting with a digit)")
        if not _USER_NAME.match(self.mysql_user):
            raise ConfigError(f"mysql_user={self.mysql_user!r} is not a plain MySQL user name "
                              "(letters, digits, underscore, dot, hyphen; at most 80)")
        if self.mysql_engine not in _ENGINES:
            raise ConfigError(f"mysql_engine={self.mysql_engine!r}: choose one of {', '.join(_ENGINES)}")
        for name in ("chunk_size", "bucket_target_bytes", "run_buckets", "run_bytes",
                     "dist_ch_tasks", "max_line_bytes", "mysql_pool_size",
                     "sample_reads_per_bucket", "sample_bytes", "raw_cache_bytes"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, not {getattr(self, name)}")
        if self.client_processes < 0:
            raise ConfigError(f"client_processes must be 0 (one per core) or positive, "
                              f"not {self.client_processes}")
        if not self.service_timeout > 0:
            raise ConfigError(f"service_timeout must be positive seconds, not "
                              f"{self.service_timeout}")
        if self.raw_after is not None and not self.raw_after >= 0:
            raise ConfigError(f"raw_after must be \"off\" or seconds >= 0, not {self.raw_after}")
        if self.bucket_width < 0:
            raise ConfigError(f"bucket_width must be 0 (sampled split points) or positive, "
                              f"not {self.bucket_width}")

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

    def __repr__(self) -> str:  # keeps the password out of logs and tracebacks
        shown = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "mysql_password"}
        return "Config(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"

    def replace(self, **changes: Any) -> "Config":
        return dataclasses.replace(self, **changes)


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
