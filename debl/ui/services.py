"""Whether HDFS and HBase answer, for the page's service marks (MySQL's mark comes from the
status read itself, ``debl.ui.sampler``).

The probes only read: the NameNode's status of ``/``, and HBase's table list
through Thrift, each with a short timeout. ``debl stack status``'s own probe of HDFS writes a
file, and would make a page that is open all day write to HDFS every few seconds.

A probe runs every ``every_s`` seconds in a thread of its own, so a service that hangs delays
neither the status nor the page: the page shows the last result with its age.
"""

from __future__ import annotations

import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import asdict, dataclass

from debl.config import Config
from debl.hdfs import HdfsClient

PROBE_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class ServiceMark:
    """One service as the page shows it; ``ok`` None: not probed yet."""

    service: str
    address: str
    ok: bool | None
    detail: str
    checked: float | None  # seconds since the epoch

    def as_dict(self) -> dict:
        return asdict(self)


def _hdfs(config: Config) -> str:
    # Not closed: a close would wait for a call that timed out as long again; the client's
    # threads end on their own (debl.hdfs.calls).
    HdfsClient(config, timeout=PROBE_TIMEOUT_S).status("/")
    return "the NameNode answers"


def _hbase(config: Config) -> str:
    # lazy import: happybase would cost every `debl` command's start-up (`debl ui`'s module
    # is a plain import of the CLI; docs/ARCHITECTURE.md, "Lazy imports")
    import happybase

    conn = happybase.Connection(config.hbase.thrift_host, config.hbase.thrift_port,
                                timeout=int(PROBE_TIMEOUT_S * 1000), autoconnect=True)
    try:
        tables = conn.tables()
    finally:
        conn.close()
    return f"Thrift answers ({len(tables)} table(s))"


def probes(config: Config) -> list[tuple[str, str, Callable[[Config], str]]]:
    """(service, address, probe) for each service the page marks besides MySQL."""
    namenode = urllib.parse.urlparse(config.hdfs.uri).netloc
    return [("HDFS", namenode, _hdfs),
            ("HBase", f"{config.hbase.thrift_host}:{config.hbase.thrift_port}", _hbase)]


def probe(config: Config, service: str, address: str,
          check: Callable[[Config], str]) -> ServiceMark:
    """Run one probe: its answer, or what went wrong in one line (never a traceback)."""
    try:
        return ServiceMark(service, address, True, check(config), time.time())
    except Exception as exc:  # any failure of the probe says the service does not answer
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return ServiceMark(service, address, False, f"does not answer: {text}", time.time())


class ServiceWatch:
    """Probes every service in turn every *every_s* seconds until ``stop``."""

    def __init__(self, config: Config, every_s: float = 5.0):
        self.config = config
        self.every_s = every_s
        self._probes = probes(config)
        self._marks = {name: ServiceMark(name, address, None, "not probed yet", None)
                       for name, address, _ in self._probes}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="debl-ui-services", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def marks(self) -> list[ServiceMark]:
        with self._lock:
            return list(self._marks.values())

    def _run(self) -> None:
        while not self._stop.is_set():
            for name, address, check in self._probes:
                mark = probe(self.config, name, address, check)
                with self._lock:
                    self._marks[name] = mark
            self._stop.wait(self.every_s)
