"""The stack's MariaDB servers: ``MariaDBServer``, what a server of the stack is (its own data
directory, socket, temporary directory and pid file under ``.debl/<service>/``, and its accounts,
each with a generated password), and ``MariaDB``, DeBL's own, with the ``debl`` user. The source
database (``debl.stack.source_db``) is the other server.

This module is one of the named places that hold SQL outside the catalog and the stores
(docs/ARCHITECTURE.md, "SQL"): the bootstrap of the servers' accounts and DeBL's server's probe.

Pitfall: MariaDB runs as the invoking user with its own data directory; when that user is root
the server needs ``--user=root`` explicitly.
"""

from __future__ import annotations

import getpass
import os
import secrets
import shutil
import socket
import subprocess
from abc import abstractmethod
from dataclasses import dataclass
from pathlib import Path

import pymysql
from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

from debl.errors import StackError
from debl.stack.daemon import Daemon
from debl.stack.service import Service, require_free


@dataclass(frozen=True)
class Account:
    """A user of a stack server (at 127.0.0.1 and localhost), its password and its grants:
    ``(privileges, on)`` pairs, e.g. ``("SELECT", "`db`.`t`")``; names checked by Config."""

    user: str
    password: str
    grants: tuple[tuple[str, str], ...]


def stack_password(configured: str | None, path: Path) -> str:
    """The password of an account the stack creates: the configured one, else the file's, else
    a new one written to *path* with mode 0600 (it reaches the server on stdin, never in
    argv)."""
    if configured is not None:
        return configured
    path = path.absolute()
    if path.exists():
        return path.read_text().strip()
    password = secrets.token_urlsafe(24)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(password + "\n")
    return password


class MariaDBServer(Service):
    """A MariaDB server of the stack: installed once into ``<home>/data``, started with the
    options every server shares and its own (``options``), its databases and accounts made
    (idempotent) once it accepts connections on its socket."""

    @property
    def daemons(self) -> list[Daemon]:
        return [Daemon(self.daemon_name, self.home)]

    @property
    @abstractmethod
    def daemon_name(self) -> str: ...

    @property
    @abstractmethod
    def port(self) -> int: ...

    @abstractmethod
    def options(self) -> list[str]:
        """This server's own options: memory, logs, connections."""

    @abstractmethod
    def databases(self) -> list[str]:
        """The databases it holds (created if missing)."""

    @abstractmethod
    def accounts(self) -> list[Account]:
        """Its users (created, their passwords and grants set, at every start)."""

    def schema(self) -> list[str]:
        """Statements run after the databases are made and before the grants (which may name
        the tables they create)."""
        return []

    @property
    def socket_path(self) -> Path:
        return self.home / "mysqld.sock"

    def start(self) -> None:
        daemon = self.daemons[0]
        if daemon.pid() is not None:
            return
        server = (shutil.which("mariadbd")
                  or shutil.which("mariadbd", path="/usr/sbin:/usr/local/sbin"))
        install = shutil.which("mariadb-install-db")
        if not server or not install:
            raise StackError(self.name, "mariadbd is not installed: run scripts/setup.sh")
        require_free(daemon, self.port)
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
                raise StackError(self.name, "mariadb-install-db failed", None,
                                 result.stderr[-2000:])
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
            f"--tmpdir={tmp}", f"--port={self.port}", "--bind-address=127.0.0.1",
            f"--pid-file={self.home / 'mysqld.pid.server'}", "--log-error=",  # to our log file
            "--local-infile=1", "--skip-name-resolve", *self.options(), *user,
        ])
        self._wait_socket(daemon)
        self._bootstrap()

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

    def _bootstrap(self) -> None:
        """Create the databases, the schema and the accounts (idempotent), as the operating
        system's user over the socket; the passwords reach the server on stdin."""
        accounts = self.accounts()
        quoted = {a.user: a.password.replace("\\", "\\\\").replace("'", "\\'")
                  for a in accounts}
        sql = [f"CREATE DATABASE IF NOT EXISTS `{db}` CHARACTER SET utf8mb4;"
               for db in self.databases()]
        sql += [statement + ";" for statement in self.schema()]
        for account in accounts:
            user, password = account.user, quoted[account.user]
            for host in ("127.0.0.1", "localhost"):
                sql += [f"CREATE USER IF NOT EXISTS '{user}'@'{host}' IDENTIFIED BY '{password}';",
                        f"ALTER USER '{user}'@'{host}' IDENTIFIED BY '{password}';"]
                sql += [f"GRANT {privileges} ON {on} TO '{user}'@'{host}';"
                        for privileges, on in account.grants]
        result = subprocess.run(
            ["mariadb", "--no-defaults", f"--socket={self.socket_path}", "-u", getpass.getuser()],
            input="\n".join(sql) + "\nFLUSH PRIVILEGES;\n", capture_output=True, text=True)
        if result.returncode != 0:
            stderr = result.stderr
            for password in quoted.values():
                stderr = stderr.replace(password, "***")
            raise StackError(self.name, "creating the databases and users failed", None,
                             stderr[-2000:])


class MariaDB(MariaDBServer):
    """DeBL's own MariaDB: the catalog and the loads' MySQL tables, and the ``debl`` user."""

    name = "MariaDB"
    daemon_name = "mariadb"

    @property
    def port(self) -> int:
        return self.config.mysql.port

    @property
    def address(self) -> str:
        return f"{self.config.mysql.host}:{self.config.mysql.port}"

    def options(self) -> list[str]:
        return ["--max-allowed-packet=256M",
                "--innodb-buffer-pool-size=1G", "--innodb-log-file-size=512M",
                "--innodb-flush-log-at-trx-commit=2", "--key-buffer-size=256M",
                "--bulk-insert-buffer-size=64M", "--myisam-sort-buffer-size=256M",
                "--max-connections=500"]

    def databases(self) -> list[str]:
        return [self.config.mysql.database]

    def accounts(self) -> list[Account]:
        db = self.config.mysql.database
        return [Account(self.config.mysql.user,
                        stack_password(self.config.mysql.password, self.config.mysql_password_file),
                        (("ALL PRIVILEGES", f"`{db}`.*"), ("ALL PRIVILEGES", f"`{db}\\_%`.*")))]

    def probe(self) -> str:
        # No database named: the server's health is its answer, and mysql.database may be one
        # not made yet (DeBL's connections make it on first use: debl.mysql.connect).
        conn = pymysql.connect(host=self.config.mysql.host, port=self.config.mysql.port,
                               user=self.config.mysql.user, password=self.config.mysql_secret,
                               connect_timeout=3)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT VERSION()")
                (version,) = cur.fetchone() or ("unknown",)
        finally:
            conn.close()
        return f"MariaDB {version}"
