"""The stack's MariaDB: a server with its own data directory, socket and temporary directory
under ``.debl/mariadb/``, and DeBL's ``debl`` user, created with a generated password.

This module is one of the named places that hold SQL outside the catalog and the stores
(docs/ARCHITECTURE.md, "SQL"): the bootstrap of the ``debl`` user and the probe.

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
from pathlib import Path

import pymysql
from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

from debl.errors import StackError
from debl.stack.daemon import Daemon
from debl.stack.service import Service, require_free


class MariaDB(Service):
    name = "MariaDB"

    @property
    def daemons(self) -> list[Daemon]:
        return [Daemon("mariadb", self.home)]

    @property
    def address(self) -> str:
        return f"{self.config.mysql.host}:{self.config.mysql.port}"

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
        require_free(daemon, self.config.mysql.port)
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
            f"--tmpdir={tmp}",
            f"--port={self.config.mysql.port}", "--bind-address=127.0.0.1",
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
        if self.config.mysql.password is not None:
            password = self.config.mysql.password
        elif pw_file.exists():
            password = pw_file.read_text().strip()
        else:
            password = secrets.token_urlsafe(24)
            pw_file.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(pw_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(password + "\n")
        db, user = self.config.mysql.database, self.config.mysql.user
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
        conn = pymysql.connect(host=self.config.mysql.host, port=self.config.mysql.port,
                               user=self.config.mysql.user, password=self.config.mysql_secret,
                               database=self.config.mysql.database, connect_timeout=3)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT VERSION()")
                (version,) = cur.fetchone() or ("unknown",)
        finally:
            conn.close()
        return f"MariaDB {version}"
