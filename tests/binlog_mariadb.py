"""A throwaway MariaDB with its binary log on (ROW format, GTIDs), for tests of LinkBench's writes
on a source database (debl.store.linkbench_writes): the stack's own MariaDB keeps no binary log,
so its commits have no GTID. The same server binary as the stack's (scripts/setup.sh installs
it), its own data directory, socket and loopback port, a user with a generated password; stopped
(by its own process id) when the block ends.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

START_S = 60.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def binlog_mariadb(directory: Path, database: str = "source") -> Iterator[str]:
    """Run a MariaDB with a binary log in *directory*; yield the SQLAlchemy URL of *database*
    on it (``mysql+pymysql://writer:...@127.0.0.1:PORT/source``)."""
    server = shutil.which("mariadbd") or shutil.which("mariadbd", path="/usr/sbin:/usr/local/sbin")
    install = shutil.which("mariadb-install-db")
    assert server and install, "mariadbd is not installed: run scripts/setup.sh"
    data, sock, tmp = directory / "data", directory / "mysqld.sock", directory / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    subprocess.run([install, "--no-defaults", f"--datadir={data}", "--skip-test-db",
                    "--auth-root-authentication-method=socket", f"--user={getpass.getuser()}"],
                   check=True, capture_output=True)
    port = _free_port()
    user = ["--user=root"] if os.geteuid() == 0 else []
    log = open(directory / "mariadb.log", "wb")
    proc = subprocess.Popen(
        [server, "--no-defaults", f"--datadir={data}", f"--socket={sock}", f"--tmpdir={tmp}",
         f"--port={port}", "--bind-address=127.0.0.1", "--skip-name-resolve",
         "--log-bin=binlog", "--binlog-format=ROW", "--server-id=1",
         "--innodb-buffer-pool-size=32M", *user], stdout=log, stderr=subprocess.STDOUT)
    try:
        password = secrets.token_urlsafe(16)
        sql = (f"CREATE DATABASE `{database}`; "
               f"CREATE USER 'writer'@'127.0.0.1' IDENTIFIED BY '{password}'; "
               f"GRANT ALL PRIVILEGES ON `{database}`.* TO 'writer'@'127.0.0.1';")
        deadline = time.monotonic() + START_S
        while True:  # until the server takes the statements on its socket
            assert proc.poll() is None, (directory / "mariadb.log").read_text()[-2000:]
            done = subprocess.run(["mariadb", "--no-defaults", f"--socket={sock}", "-u",
                                   getpass.getuser()], input=sql, capture_output=True, text=True)
            if done.returncode == 0:
                break
            assert time.monotonic() < deadline, done.stderr
            time.sleep(0.2)
        yield f"mysql+pymysql://writer:{password}@127.0.0.1:{port}/{database}"
    finally:
        proc.terminate()
        proc.wait(60)
        log.close()
