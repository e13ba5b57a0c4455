"""The local stack's services: MariaDB, HDFS (NameNode + DataNode), HBase (standalone) and its
Thrift1 server, and, when ``spark_workers`` > 0, a Spark standalone cluster, each on 127.0.0.1
with its state under ``.debl/<service>/``.

Each service knows how to prepare its state once (initialise a data directory, format the
NameNode), start its daemons, and prove that it answers (a query, an HDFS write and read, an HBase
table listing through Thrift). ``debl.stack.stack`` orders them and waits.

Pitfalls:

- The JVM runtime comes from Maven (``.debl/lib/stack``, resolved by scripts/setup.sh); there is
  no Hadoop or HBase install, so the usual ``bin/`` scripts' JDK 17 flags are set here.
- HBase keeps its root directory on this HDFS, so HDFS must be up before HBase starts and must
  stop after it.
- MariaDB runs as the invoking user with its own data directory; when that user is root the
  server needs ``--user=root`` explicitly.
"""

from __future__ import annotations

import getpass
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

import pymysql
from tenacity import (Retrying, retry_if_exception_type, retry_if_not_exception_type,
                      retry_if_result, stop_after_delay, wait_fixed)

from debl.config import Config
from debl.errors import StackError
from debl.stack.daemon import Daemon
from debl.webhdfs import WebHDFS

JDK17_FLAGS = [
    "-XX:+UseG1GC",
    "-Djava.net.preferIPv4Stack=true",
    "-Dorg.apache.hbase.thirdparty.io.netty.tryReflectionSetAccessible=true",
    "--add-modules", "jdk.unsupported",
    *[f"--add-opens=java.base/{pkg}=ALL-UNNAMED" for pkg in (
        "java.io", "java.nio", "sun.nio.ch", "java.lang", "jdk.internal.ref",
        "java.lang.reflect", "java.util", "java.util.concurrent", "java.net")],
    "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED",
    "--add-exports=java.base/sun.net.dns=ALL-UNNAMED",
    "--add-exports=java.base/sun.net.util=ALL-UNNAMED",
]

LOG4J2 = """\
status = warn
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_OUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{ISO8601} %-5p [%t] %c{2}: %m%n
rootLogger = INFO, console
logger.zk.name = org.apache.zookeeper
logger.zk.level = WARN
logger.hadoopmetrics.name = org.apache.hadoop.metrics2
logger.hadoopmetrics.level = WARN
"""


@dataclass(frozen=True)
class Health:
    service: str
    address: str
    pids: tuple[int | None, ...]
    healthy: bool
    detail: str
    rss_kib: tuple[int | None, ...] = ()  # per daemon, in the order of pids

    def as_dict(self) -> dict:
        return {"service": self.service, "address": self.address, "pids": list(self.pids),
                "healthy": self.healthy, "detail": self.detail, "rss_kib": list(self.rss_kib)}


class Service(ABC):
    """One service of the local stack."""

    name: str
    #: Services whose daemons this one keeps files open on; restarted when one of them is.
    lives_on: tuple[str, ...] = ()

    def __init__(self, config: Config):
        self.config = config
        self.home = (config.state_dir / self.slug).absolute()

    @property
    def slug(self) -> str:
        return self.name.split()[0].lower()

    @property
    @abstractmethod
    def daemons(self) -> list[Daemon]: ...

    @property
    @abstractmethod
    def address(self) -> str: ...

    @abstractmethod
    def start(self) -> None:
        """Prepare state if needed and start every daemon that is not running."""

    @abstractmethod
    def probe(self) -> str:
        """Prove the service answers; returns a short description, raises on failure."""

    def running(self) -> bool:
        return all(d.pid() is not None for d in self.daemons)

    def wait_healthy(self, timeout: float) -> str:
        """Probe every second until it answers or timeout; a daemon that died fails at once
        with its log."""
        def attempt() -> str:
            for daemon in self.daemons:
                if daemon.exited():
                    raise daemon.failure("the process exited during start-up")
            return self.probe()

        # Any failure of a probe means "not yet"; a StackError (a daemon died) means "never".
        retrying = Retrying(retry=retry_if_exception_type(Exception)
                            & retry_if_not_exception_type(StackError),
                            stop=stop_after_delay(timeout), wait=wait_fixed(1.0), reraise=True)
        try:
            return retrying(attempt)
        except StackError:
            raise
        except Exception as exc:
            raise self.daemons[-1].failure(
                f"did not answer within {timeout:.0f} s ({exc})") from exc

    def stop(self) -> bool:
        stopped = False
        for daemon in reversed(self.daemons):
            stopped |= daemon.stop()
        return stopped

    def health(self) -> Health:
        pids = tuple(d.pid() for d in self.daemons)
        if any(p is None for p in pids):
            return Health(self.name, self.address, pids, False, "not running")
        try:
            detail, healthy = self.probe(), True
        except Exception as exc:
            detail, healthy = f"not answering: {exc}", False
        rss = tuple(d.rss_kib() for d in self.daemons)
        return Health(self.name, self.address, pids, healthy, detail, rss)


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


# A daemon that was just killed (a crash, `debl stack stop --crash`) can hold its ports for a
# moment after its pid is gone, on a loaded machine for over a minute: seen in CI, where
# `stack up` right after a DataNode's SIGKILL found its port taken and left HDFS down.
PORT_RELEASE_S = 120.0


def _require_free(daemon: Daemon, *ports: int, wait: float = PORT_RELEASE_S) -> None:
    """Wait up to *wait* seconds for each port to be free; then fail naming the port."""
    for port in ports:
        if port <= 0:
            continue
        waiting = Retrying(retry=retry_if_result(lambda free: not free), reraise=True,
                           stop=stop_after_delay(wait), wait=wait_fixed(0.5),
                           retry_error_callback=lambda state: state.outcome.result())
        if not waiting(_port_free, port):
            raise StackError(daemon.name, f"port {port} on 127.0.0.1 is in use by another program "
                             f"(still after {wait:.0f} s); stop it or choose other ports in "
                             "debl.toml", str(daemon.log_file))


# --------------------------------------------------------------------------- MariaDB


class MariaDB(Service):
    name = "MariaDB"

    @property
    def daemons(self) -> list[Daemon]:
        return [Daemon("mariadb", self.home)]

    @property
    def address(self) -> str:
        return f"{self.config.mysql_host}:{self.config.mysql_port}"

    @property
    def socket_path(self) -> Path:
        return self.home / "mysqld.sock"

    def start(self) -> None:
        daemon = self.daemons[0]
        if daemon.pid() is not None:
            return
        server = shutil.which("mariadbd") or shutil.which("mariadbd", path="/usr/sbin:/usr/local/sbin")
        install = shutil.which("mariadb-install-db")
        if not server or not install:
            raise StackError(self.name, "mariadbd is not installed: run scripts/setup.sh")
        _require_free(daemon, self.config.mysql_port)
        data = self.home / "data"
        user = ["--user=root"] if os.geteuid() == 0 else []
        if not (data / "mysql").is_dir():
            data.mkdir(parents=True, exist_ok=True)
            result = subprocess.run(
                [install, "--no-defaults", f"--datadir={data}", "--skip-test-db",
                 "--auth-root-authentication-method=socket", f"--user={getpass.getuser()}"],
                capture_output=True, text=True)
            if result.returncode != 0:
                shutil.rmtree(data, ignore_errors=True)
                raise StackError(self.name, "mariadb-install-db failed", None, result.stderr[-2000:])
        # A server killed with the machine leaves its socket file behind: its existence must
        # not pass for readiness (the port is free, so no server owns it).
        self.socket_path.unlink(missing_ok=True)
        # A temporary directory of its own: a MariaDB starting on the same machine deletes the
        # `#sql*` files of its tmpdir, and in a shared /tmp those are another server's internal
        # temporary tables in use (a second stack's start failed a hot path's merge with
        # "Error on delete of '/tmp/#sql-temptable-...'", docs/RUNTIME.md).
        tmp = self.home / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        daemon.start([
            server, "--no-defaults", f"--datadir={data}", f"--socket={self.socket_path}",
            f"--tmpdir={tmp}",
            f"--port={self.config.mysql_port}", "--bind-address=127.0.0.1",
            f"--pid-file={self.home / 'mysqld.pid.server'}", "--log-error=",  # to our log file
            "--local-infile=1", "--skip-name-resolve", "--max-allowed-packet=256M",
            "--innodb-buffer-pool-size=1G", "--innodb-log-file-size=512M",
            "--innodb-flush-log-at-trx-commit=2", "--key-buffer-size=256M",
            "--bulk-insert-buffer-size=64M", "--myisam-sort-buffer-size=256M",
            "--max-connections=500", *user,
        ])
        self._wait_socket(daemon)
        self._bootstrap_user()

    def _wait_socket(self, daemon: Daemon, timeout: float = 60.0) -> None:
        """Until the server accepts connections on its socket (crash recovery can take a while
        after the socket file appears)."""
        def accepts() -> bool:
            if daemon.exited():
                raise daemon.failure("mariadbd exited during start-up")
            return self._socket_accepts()

        retrying = Retrying(retry=retry_if_result(lambda accepted: not accepted),
                            stop=stop_after_delay(timeout), wait=wait_fixed(0.2),
                            retry_error_callback=lambda _: False)
        if not retrying(accepts):
            raise daemon.failure(f"no socket after {timeout:.0f} s")

    def _socket_accepts(self) -> bool:
        with socket.socket(socket.AF_UNIX) as s:
            try:
                s.connect(str(self.socket_path))
            except OSError:
                return False
        return True

    def _bootstrap_user(self) -> None:
        """Create the database and the ``debl`` user with a generated password (idempotent).

        The password goes to a 0600 file and reaches the server on stdin, never in argv."""
        pw_file = self.config.mysql_password_file.absolute()
        if self.config.mysql_password is not None:
            password = self.config.mysql_password
        elif pw_file.exists():
            password = pw_file.read_text().strip()
        else:
            password = secrets.token_urlsafe(24)
            pw_file.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(pw_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(password + "\n")
        db, user = self.config.mysql_database, self.config.mysql_user
        quoted = password.replace("\\", "\\\\").replace("'", "\\'")
        sql = [f"CREATE DATABASE IF NOT EXISTS `{db}` CHARACTER SET utf8mb4;"]
        for host in ("127.0.0.1", "localhost"):
            sql += [f"CREATE USER IF NOT EXISTS '{user}'@'{host}' IDENTIFIED BY '{quoted}';",
                    f"ALTER USER '{user}'@'{host}' IDENTIFIED BY '{quoted}';",
                    f"GRANT ALL PRIVILEGES ON `{db}`.* TO '{user}'@'{host}';",
                    f"GRANT ALL PRIVILEGES ON `{db}\\_%`.* TO '{user}'@'{host}';"]
        result = subprocess.run(
            ["mariadb", "--no-defaults", f"--socket={self.socket_path}", "-u", getpass.getuser()],
            input="\n".join(sql) + "\nFLUSH PRIVILEGES;\n", capture_output=True, text=True)
        if result.returncode != 0:
            raise StackError(self.name, "creating the debl user failed", None,
                             result.stderr.replace(quoted, "***")[-2000:])

    def probe(self) -> str:
        conn = pymysql.connect(host=self.config.mysql_host, port=self.config.mysql_port,
                               user=self.config.mysql_user, password=self.config.mysql_secret,
                               database=self.config.mysql_database, connect_timeout=3)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT VERSION()")
                (version,) = cur.fetchone()
        finally:
            conn.close()
        return f"MariaDB {version}"


# --------------------------------------------------------------------------- JVM services


def _site_xml(props: dict[str, object]) -> str:
    body = "".join(f"  <property><name>{escape(k)}</name><value>{escape(str(v))}</value></property>\n"
                   for k, v in props.items())
    return f'<?xml version="1.0"?>\n<configuration>\n{body}</configuration>\n'


class JvmService(Service):
    """A service run from the Maven-resolved jars with plain ``java``."""

    heap = "512m"

    @property
    def conf_dir(self) -> Path:
        return self.home / "conf"

    def classpath(self) -> str:
        lib = (self.config.lib_dir / "stack").absolute()
        if not any(lib.glob("hbase-server-*.jar")):
            raise StackError(self.name, f"the HBase/Hadoop runtime is missing in {lib}: "
                             "run scripts/setup.sh")
        return f"{self.conf_dir}:{lib}/*"

    def java_argv(self, main_class: str, *args: str, heap: str | None = None) -> list[str]:
        java = shutil.which("java")
        if not java:
            raise StackError(self.name, "java is not installed: run scripts/setup.sh")
        return [java, f"-Xmx{heap or self.heap}", *JDK17_FLAGS,
                f"-Dlog4j2.configurationFile={self.conf_dir / 'log4j2.properties'}",
                f"-Dhadoop.log.dir={self.home / 'logs'}", f"-Dhbase.log.dir={self.home / 'logs'}",
                "-cp", self.classpath(), main_class, *args]

    def write_conf(self, files: dict[str, str]) -> None:
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        (self.home / "logs").mkdir(exist_ok=True)
        for name, text in {**files, "log4j2.properties": LOG4J2}.items():
            (self.conf_dir / name).write_text(text)
        # Hadoop's HTTP servers look up webapps/<name> on the classpath, and the Maven jars do
        # not ship those resources; empty directories are enough for WebHDFS and JMX.
        for webapp in ("hdfs", "datanode", "secondary", "static"):
            (self.conf_dir / "webapps" / webapp).mkdir(parents=True, exist_ok=True)


def hdfs_site(config: Config, home: Path) -> dict[str, object]:
    lo = "127.0.0.1"
    return {
        "dfs.replication": 1,
        "dfs.namenode.name.dir": f"file://{home / 'name'}",
        "dfs.datanode.data.dir": f"file://{home / 'data'}",
        "dfs.permissions.enabled": "false",
        "dfs.client.block.write.replace-datanode-on-failure.enable": "false",
        "dfs.namenode.rpc-address": f"{lo}:{_port(config.hdfs_uri)}",
        "dfs.namenode.http-address": f"{lo}:{config.hdfs_http_port}",
        "dfs.namenode.https-address": f"{lo}:0",
        "dfs.namenode.secondary.http-address": f"{lo}:0",
        "dfs.namenode.secondary.https-address": f"{lo}:0",
        "dfs.datanode.address": f"{lo}:{config.hdfs_datanode_port}",
        "dfs.datanode.http.address": f"{lo}:{config.hdfs_datanode_http_port}",
        "dfs.datanode.https.address": f"{lo}:0",
        "dfs.datanode.ipc.address": f"{lo}:{config.hdfs_datanode_ipc_port}",
        "dfs.datanode.hostname": lo,
        "dfs.namenode.datanode.registration.ip-hostname-check": "false",
        "dfs.webhdfs.enabled": "true",
        "dfs.namenode.safemode.extension": 0,
        "dfs.namenode.fs-limits.min-block-size": 0,
        "dfs.datanode.du.reserved": 0,
        # A laptop-size disk: do not refuse writes when it is 90% full.
        "dfs.namenode.resource.du.reserved": 1 << 30,
    }


def _port(uri: str) -> int:
    return int(uri.rsplit(":", 1)[1].split("/")[0])


class HDFS(JvmService):
    name = "HDFS"

    @property
    def daemons(self) -> list[Daemon]:
        return [Daemon("namenode", self.home), Daemon("datanode", self.home)]

    @property
    def address(self) -> str:
        return self.config.hdfs_uri

    def start(self) -> None:
        core = {"fs.defaultFS": self.config.hdfs_uri, "hadoop.tmp.dir": str(self.home / "tmp")}
        self.write_conf({"core-site.xml": _site_xml(core),
                         "hdfs-site.xml": _site_xml(hdfs_site(self.config, self.home))})
        namenode, datanode = self.daemons
        if not (self.home / "name" / "current" / "VERSION").exists():
            result = subprocess.run(
                self.java_argv("org.apache.hadoop.hdfs.server.namenode.NameNode",
                               "-format", "-nonInteractive", "-force"),
                capture_output=True, text=True)
            if result.returncode != 0:
                raise StackError("HDFS NameNode", "formatting the NameNode failed", None,
                                 (result.stdout + result.stderr)[-2000:])
        if namenode.pid() is None:
            _require_free(namenode, _port(self.config.hdfs_uri), self.config.hdfs_http_port)
            namenode.start(self.java_argv("org.apache.hadoop.hdfs.server.namenode.NameNode"))
        if datanode.pid() is None:
            _require_free(datanode, self.config.hdfs_datanode_port,
                          self.config.hdfs_datanode_http_port, self.config.hdfs_datanode_ipc_port)
            datanode.start(self.java_argv("org.apache.hadoop.hdfs.server.datanode.DataNode"))

    def probe(self) -> str:
        """Write a small file through WebHDFS, read it back, delete it."""
        fs = WebHDFS(self.config)
        path = "/tmp/debl-probe"
        payload = secrets.token_bytes(64)
        fs.write(path, payload, overwrite=True)
        if fs.read(path) != payload:
            raise RuntimeError("read back different bytes")
        fs.delete(path)
        return "write and read back OK"


class HBase(JvmService):
    name = "HBase"
    lives_on = ("HDFS",)

    @property
    def daemons(self) -> list[Daemon]:
        return [Daemon("hbase-master", self.home), Daemon("thrift", self.home)]

    @property
    def address(self) -> str:
        return (f"zk 127.0.0.1:{self.config.hbase_zookeeper_port}, "
                f"thrift {self.config.hbase_thrift_host}:{self.config.hbase_thrift_port}")

    def site(self) -> dict[str, object]:
        c = self.config
        return {
            "hbase.cluster.distributed": "false",
            "hbase.rootdir": f"{c.hdfs_uri}/hbase",
            "hbase.tmp.dir": str(self.home / "tmp"),
            "hbase.zookeeper.quorum": c.hbase_zookeeper_quorum,
            "hbase.zookeeper.property.clientPort": c.hbase_zookeeper_port,
            "hbase.zookeeper.property.clientPortAddress": "127.0.0.1",
            "hbase.zookeeper.property.dataDir": str(self.home / "zookeeper"),
            "hbase.master.port": c.hbase_master_port,
            "hbase.regionserver.port": c.hbase_regionserver_port,
            "hbase.master.ipc.address": "127.0.0.1",
            "hbase.regionserver.ipc.address": "127.0.0.1",
            "hbase.master.hostname": "127.0.0.1",
            "hbase.regionserver.hostname": "127.0.0.1",
            "hbase.master.info.port": -1,
            "hbase.regionserver.info.port": -1,
            "hbase.thrift.info.port": -1,
            "hbase.wal.provider": "filesystem",
            "hbase.unsafe.stream.capability.enforce": "false",
            "hbase.thrift.server.socket.read.timeout": 3_600_000,
            "hbase.thrift.minWorkerThreads": 64,
            "hbase.regionserver.thrift.framed": "false",
            "hbase.regionserver.thrift.compact": "false",
            "dfs.replication": 1,
            "dfs.client.block.write.replace-datanode-on-failure.enable": "false",
            # Bulk loads of many buckets: allow many HFiles per region and family.
            "hbase.mapreduce.bulkload.max.hfiles.perRegion.perFamily": 1024,
            "hbase.hstore.blockingStoreFiles": 200,
            "hbase.bulkload.retries.retryOnIOException": "true",
        }

    def start(self) -> None:
        self.write_conf({"hbase-site.xml": _site_xml(self.site()),
                         "core-site.xml": _site_xml({"fs.defaultFS": self.config.hdfs_uri}),
                         "hdfs-site.xml": _site_xml({"dfs.replication": 1})})
        master, thrift = self.daemons
        if master.pid() is None:
            _require_free(master, self.config.hbase_zookeeper_port, self.config.hbase_master_port,
                          self.config.hbase_regionserver_port)
            master.start(self.java_argv("org.apache.hadoop.hbase.master.HMaster", "start",
                                        heap=self.config.hbase_heap))
        if thrift.pid() is None:
            _require_free(thrift, self.config.hbase_thrift_port)
            thrift.start(self.thrift_argv())

    def thrift_argv(self) -> list[str]:
        """The Thrift server's command line. It listens on ``hbase_thrift_bind`` (loopback by
        default), never on ``hbase_thrift_host``: that is where clients reach a Thrift server,
        and Thrift1 has no authentication."""
        return self.java_argv("org.apache.hadoop.hbase.thrift.ThriftServer",
                              "-b", self.config.hbase_thrift_bind,
                              "-p", str(self.config.hbase_thrift_port), "start", heap="256m")

    def probe(self) -> str:
        # lazy import: happybase would cost every `debl` command's start-up
        # (docs/ARCHITECTURE.md, "Lazy imports")
        import happybase

        conn = happybase.Connection(self.config.hbase_thrift_host, self.config.hbase_thrift_port,
                                    timeout=10_000, autoconnect=True)
        try:
            tables = conn.tables()
        finally:
            conn.close()
        return f"{len(tables)} table(s) listed through Thrift"


# --------------------------------------------------------------------------- Spark


class SparkCluster(Service):
    """A Spark standalone master and ``spark_workers`` workers, run by the installed pyspark's
    ``bin/spark-class`` (its own jars, nothing downloaded), every port from config and on
    127.0.0.1 (SPARK_LOCAL_IP binds the web UIs there too).

    Executors are the workers' children, started per application and ended with it (or with
    their worker: a worker stopping kills its executors); they and their Python workers run in
    ``work-<i>/`` and ``local-<i>/``, so no process of the cluster lives outside its home.
    Workers beyond ``spark_workers`` (left by an earlier, larger configuration) are stopped by
    ``start`` and ``stop``.
    """

    name = "Spark"

    @property
    def slug(self) -> str:
        # Not ".debl/spark": Daemon.pid recognises a daemon by its home in the command line,
        # and every local[N] driver's names ".debl/spark-tmp" (its spark.local.dir).
        return "spark-standalone"

    @property
    def daemons(self) -> list[Daemon]:
        left = [int(p.stem.rsplit("-", 1)[1]) for p in self.home.glob("spark-worker-*.pid")
                if p.stem.rsplit("-", 1)[1].isdigit()]
        count = max([self.config.spark_workers, *left])
        return [Daemon("spark-master", self.home),
                *(Daemon(f"spark-worker-{i}", self.home) for i in range(1, count + 1))]

    @property
    def address(self) -> str:
        return f"{self.config.spark_url}, ui :{self.config.spark_master_webui_port}"

    @property
    def conf_dir(self) -> Path:
        return self.home / "conf"

    def spark_home(self) -> Path:
        try:
            # lazy import: pyspark would cost every `debl` command's start-up (docs/ARCHITECTURE.md,
            # "Lazy imports"); only the cluster's start needs its install path
            import pyspark
        except ImportError:
            raise StackError(self.name, "pyspark is not installed: run scripts/setup.sh") from None
        home = Path(pyspark.__file__).parent
        if not (home / "bin" / "spark-class").exists() or not (home / "jars").is_dir():
            raise StackError(self.name, f"{home} has no bin/spark-class and jars/: reinstall "
                             "pyspark (scripts/setup.sh)")
        return home

    def _env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
        # The daemons only schedule and the launcher only prints a command line: the C1 JIT and
        # the serial GC take half the CPU to start them (measured: 3 s against 7 s for a master).
        quick = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
        env.update(SPARK_HOME=str(self.spark_home()), SPARK_CONF_DIR=str(self.conf_dir),
                   SPARK_LOCAL_IP="127.0.0.1", SPARK_DAEMON_MEMORY=self.config.spark_daemon_memory,
                   SPARK_DAEMON_JAVA_OPTS=quick, SPARK_LAUNCHER_OPTS=quick,
                   SPARK_LOG_DIR=str(self.home / "logs"), **extra)
        return env

    def _argv(self, main_class: str, *args: str) -> list[str]:
        # --properties-file puts the home in the command line, which Daemon.pid relies on.
        return [str(self.spark_home() / "bin" / "spark-class"), main_class,
                "--properties-file", str(self.conf_dir / "spark-defaults.conf"), *args]

    def start(self) -> None:
        c = self.config
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        (self.home / "logs").mkdir(exist_ok=True)
        (self.conf_dir / "log4j2.properties").write_text(LOG4J2)
        # An executor's stdout and stderr files under work-<i>/ grow with its application; a
        # worker removes those of applications ended over a day ago.
        (self.conf_dir / "spark-defaults.conf").write_text(
            "spark.worker.cleanup.enabled true\n"
            "spark.worker.cleanup.appDataTtl 86400\n")
        master, *workers = self.daemons
        for index, worker in enumerate(workers, start=1):
            if index > c.spark_workers:
                worker.stop()
        if master.pid() is None:
            _require_free(master, c.spark_master_port, c.spark_master_webui_port)
            master.start(self._argv("org.apache.spark.deploy.master.Master",
                                    "--host", "127.0.0.1", "--port", str(c.spark_master_port),
                                    "--webui-port", str(c.spark_master_webui_port)),
                         env=self._env(), cwd=self.home)
        # A worker that finds no master retries only after 5-15 s: start them once it answers.
        try:
            Retrying(retry=retry_if_exception_type(Exception)
                     & retry_if_not_exception_type(StackError), stop=stop_after_delay(90),
                     wait=wait_fixed(0.5), reraise=True)(self._master_alive, master)
        except StackError:
            raise
        except Exception as exc:
            raise master.failure(f"did not answer within 90 s ({exc})") from exc
        for index, worker in enumerate(workers[:c.spark_workers], start=1):
            if worker.pid() is not None:
                continue
            port, ui = c.spark_worker_port + index - 1, c.spark_worker_webui_port + index - 1
            _require_free(worker, port, ui)
            work, local = self.home / f"work-{index}", self.home / f"local-{index}"
            work.mkdir(exist_ok=True)
            local.mkdir(exist_ok=True)
            worker.start(self._argv("org.apache.spark.deploy.worker.Worker",
                                    "--host", "127.0.0.1", "--port", str(port),
                                    "--webui-port", str(ui), "--cores", str(c.spark_worker_cores),
                                    "--memory", c.spark_worker_memory, "--work-dir", str(work),
                                    c.spark_url),
                         env=self._env(SPARK_LOCAL_DIRS=str(local)), cwd=self.home)

    def _master_alive(self, master: Daemon) -> dict:
        if master.exited():
            raise master.failure("the Spark master exited during start-up")
        with urllib.request.urlopen(
                f"http://127.0.0.1:{self.config.spark_master_webui_port}/json/", timeout=5) as r:
            state = json.load(r)
        if state.get("status") != "ALIVE":
            raise RuntimeError(f"master is {state.get('status')}")
        return state

    def stop(self) -> bool:
        """Stop the workers and the master, then every process still working in the cluster's
        home: a worker ends its executors as it stops, but asynchronously, and a worker killed
        after its grace period leaves them orphaned. Returns once none is left."""
        stopped = super().stop()
        for attempt in range(2):
            left = self._processes()
            if not left:
                break
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL if attempt else signal.SIGTERM)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + (30.0 if attempt == 0 else 10.0)
            while time.monotonic() < deadline and self._processes():
                time.sleep(0.2)
            stopped = True
        return stopped

    def _processes(self) -> list[int]:
        """Processes whose command line or working directory is under the cluster's home
        (executors and their Python workers run in work-<i>/ and local-<i>/)."""
        home, found = f"{self.home}/", []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or int(proc.name) == os.getpid():
                continue
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                    errors="replace")
                cwd = os.readlink(proc / "cwd")
            except OSError:
                continue
            if home in cmdline or f"{cwd}/".startswith(home):
                found.append(int(proc.name))
        return found

    def probe(self) -> str:
        """The master's own account (/json on its web UI): ALIVE, with every worker of the
        config registered and ALIVE."""
        state = self._master_alive(self.daemons[0])
        alive = [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]
        want = self.config.spark_workers
        if want == 0:
            raise RuntimeError("left running by an earlier configuration (spark_workers is 0 "
                               "now): `debl stack down` stops it")
        if len(alive) != want:
            raise RuntimeError(f"{len(alive)} of {want} workers registered")
        return (f"{len(alive)} workers, cores {state['coresused']}/{state['cores']} used, "
                f"memory {state['memoryused']}/{state['memory']} MiB used, "
                f"{len(state.get('activeapps', []))} application(s)")


def all_services(config: Config, leftovers: bool = False) -> list[Service]:
    """The stack in start order (stop order is the reverse). The Spark cluster belongs to it
    when ``spark_workers`` > 0; with *leftovers*, also when one still runs from an earlier
    configuration (``stack down`` and ``status`` must not miss it)."""
    services: list[Service] = [MariaDB(config), HDFS(config), HBase(config)]
    spark = SparkCluster(config)
    if config.spark_workers > 0 or (leftovers and any(d.pid() for d in spark.daemons)):
        services.append(spark)
    return services


