"""One service of the local stack, the base of MariaDB, the source database, HDFS, HBase +
Thrift and the Spark standalone cluster (``debl.stack.mariadb``, ``source_db``, ``hdfs``,
``hbase``, ``spark_cluster``), each on 127.0.0.1 with its state under ``.debl/<service>/``; and
the wait for a port that a killed daemon still holds.

Each service knows how to prepare its state once (initialise a data directory, format the
NameNode), start its daemons, and prove that it answers (a query, an HDFS write and read, an HBase
table listing through Thrift). ``debl.stack.stack`` orders them and waits.
"""

from __future__ import annotations

import socket
from abc import ABC, abstractmethod
from dataclasses import dataclass

from tenacity import (Retrying, retry_if_exception_type, retry_if_not_exception_type,
                      retry_if_result, stop_after_delay, wait_fixed)

from debl.config import Config
from debl.errors import StackError
from debl.stack.daemon import Daemon


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
        """Its state directory's name under the state directory."""
        return self.name.split()[0].lower()

    @property
    def key(self) -> str:
        """Its name as commands take it: ``mariadb``, ``source-db``, ``hdfs``."""
        return self.name.lower().replace(" ", "-")

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


# A daemon that was just killed (a crash, `debl stack stop --crash`) can hold its ports after
# its pid is gone, on a loaded machine for long (docs/RUNTIME.md: what CI saw).
PORT_RELEASE_S = 120.0


def require_free(daemon: Daemon, *ports: int, wait: float = PORT_RELEASE_S) -> None:
    """Wait up to *wait* seconds for each port to be free; then fail naming the port."""
    for port in ports:
        if port <= 0:
            continue
        waiting = Retrying(retry=retry_if_result(lambda free: not free), reraise=True,
                           stop=stop_after_delay(wait), wait=wait_fixed(0.5),
                           retry_error_callback=lambda _: False)  # still in use
        if not waiting(_port_free, port):
            raise StackError(daemon.name, f"port {port} on 127.0.0.1 is in use by another program "
                             f"(still after {wait:.0f} s); stop it or choose other ports in "
                             "debl.toml", str(daemon.log_file))
