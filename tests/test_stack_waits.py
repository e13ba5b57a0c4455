"""How a service of the local stack waits for its daemons to answer (``Service.wait_healthy``),
with real processes and a probe that the test scripts: retried while it fails, refused at once
when the daemon has died, refused with the last probe error at the timeout."""

from __future__ import annotations

import sys
import time

import pytest

from debl.config import Config
from debl.errors import StackError
from debl.stack.daemon import Daemon
from debl.stack.service import Service


class ScriptedService(Service):
    """A service of one real process whose probe fails *failures* times, then answers."""

    name = "Scripted"

    def __init__(self, config: Config, failures: int):
        super().__init__(config)
        self.failures = failures
        self.probes = 0
        self.daemon = Daemon("scripted daemon", self.home)

    @property
    def daemons(self) -> list[Daemon]:
        return [self.daemon]

    @property
    def address(self) -> str:
        return "nowhere"

    def start(self, seconds: float = 30.0) -> None:
        # The command line names the home, as Daemon.start requires.
        self.daemon.start([sys.executable, "-c", f"import time; time.sleep({seconds})",
                           str(self.home)])

    def probe(self) -> str:
        self.probes += 1
        if self.probes <= self.failures:
            raise ConnectionError(f"refused (probe {self.probes})")
        return "answers"


@pytest.fixture
def service(tmp_path):
    services: list[ScriptedService] = []

    def make(failures: int) -> ScriptedService:
        s = ScriptedService(Config(state_dir=tmp_path), failures)
        services.append(s)
        return s

    yield make
    for s in services:
        s.daemon.stop(timeout=5)


def test_a_probe_that_fails_is_tried_again_until_it_answers(service):
    s = service(failures=2)
    s.start()
    assert s.wait_healthy(timeout=30) == "answers"
    assert s.probes == 3


def test_a_daemon_that_died_fails_at_once_with_its_log(service):
    s = service(failures=10**6)
    s.start(seconds=0)
    while not s.daemon.exited():
        time.sleep(0.05)
    with pytest.raises(StackError, match="exited during start-up") as err:
        s.wait_healthy(timeout=600)
    assert err.value.log == str(s.daemon.log_file)
    assert s.probes == 0


def test_a_probe_that_never_answers_fails_at_the_timeout_with_its_last_error(service):
    s = service(failures=10**6)
    s.start()
    with pytest.raises(StackError, match=r"did not answer within 2 s \(refused \(probe \d+\)\)"):
        s.wait_healthy(timeout=2)
    assert s.probes >= 2


def test_a_port_released_while_a_daemon_starts_is_waited_for_and_one_held_is_named(tmp_path):
    """A daemon killed just before can hold its port for a while: `stack up` waits for it
    instead of failing at once; a port that stays taken fails naming the port."""
    import socket
    import threading

    from debl.stack.service import require_free as _require_free

    daemon = Daemon("portly", tmp_path)
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    with pytest.raises(StackError, match=f"port {port} on 127.0.0.1 is in use by another program"):
        _require_free(daemon, port, wait=0.5)
    threading.Timer(1.0, holder.close).start()
    _require_free(daemon, port, wait=30.0)  # returns once the holder let go


def test_a_daemon_started_again_rotates_a_log_grown_past_the_limit(tmp_path, monkeypatch):
    """A log over LOG_ROTATE_BYTES becomes <log>.1 at the next start (the older .1 dropped); a
    smaller one is appended to: the stack's logs stay bounded however often it restarts."""
    import debl.stack.daemon as daemon_module

    monkeypatch.setattr(daemon_module, "LOG_ROTATE_BYTES", 100)
    daemon = Daemon("rotating", tmp_path)
    old = daemon.log_file.with_name(daemon.log_file.name + ".1")
    old.write_text("the oldest\n")
    daemon.log_file.write_text("x" * 101)
    argv = [sys.executable, "-c", f"print('started', flush=True)  # {tmp_path}"]
    daemon.start(argv)
    _wait_for(daemon, "started")
    assert old.read_text() == "x" * 101  # the grown log kept once, the oldest gone
    first = daemon.log_file.read_text()
    assert "starting rotating" in first and "x" not in first
    daemon.start(argv)  # under the limit: appended to
    _wait_for(daemon, "started", times=2)
    assert daemon.log_file.read_text().startswith(first) and old.read_text() == "x" * 101


def _wait_for(daemon: Daemon, text: str, times: int = 1) -> None:
    deadline = time.monotonic() + 10
    while daemon.log_file.read_text().count(text) < times:
        assert time.monotonic() < deadline, daemon.log_file.read_text()
        time.sleep(0.05)


def test_a_daemon_whose_log_cannot_be_written_fails_naming_it(tmp_path):
    """A log that cannot be opened (here a directory stands in its place) is a StackError naming
    the log and what to check, never an OSError's traceback; nothing is started."""
    daemon = Daemon("unloggable", tmp_path)
    daemon.log_file.mkdir()
    with pytest.raises(StackError, match=f"cannot write its log {daemon.log_file}.*writable"):
        daemon.start([sys.executable, "-c", f"print('started')  # {tmp_path}"])
    assert not daemon.pid_file.exists()
