"""The day operations' clients (docs/RELIABILITY.md, "Day operations"): processes that each
hold one coordinator, as an application holds it, and ask ``get_link_list`` from a few threads
without pause (or with ``pause_s`` between a thread's asks), recording every answer with the
load that answered and when, or the error.

A client is a process of its own (``python -m harness.days_clients SPEC``, in a session of
its own) so that the campaign can kill -9 it as a user's process dies; ``ClientPool`` starts,
kills, restarts and stops them, and reads what they recorded (``Record``).

Records go to a file, one line each, written and flushed every ``FLUSH_S``: a killed client
loses at most its last ``FLUSH_S`` of records, which are then neither checked nor counted. A
line is tab-separated: the ask and answer instants (``time.time()``), the key's index in the
campaign's key list, then either the load that answered, the answer's ``digest`` and its route,
or ``!`` (a DeblError) or ``!!`` (any other exception: a raw error, which is a finding), the
error's class and its message.

Pitfalls:

- The client stops when its *stop file* exists (no multiprocessing primitive: a lock held by a
  process killed with -9 would hang the campaign).
- A coordinator cannot be built while MySQL is down: the client retries every
  ``ERROR_PAUSE_S`` until it can, as an application restarted during an outage would.
- After an error a thread pauses ``ERROR_PAUSE_S``: an outage would otherwise fill the record
  file with millions of errors a second.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
import threading
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

from coordinator import Coordinator
from debl.config import load_config
from debl.errors import DeblError, ServiceError
from harness import procs

FLUSH_S = 0.25
QUERY_TIMEOUT_S = 120.0  # far above service_timeout: a query that reaches it hung
ERROR_PAUSE_S = 0.1
STOP_WAIT_S = 60.0  # a client asked to stop must be gone by then
ERROR, RAW_ERROR = "!", "!!"


def digest(links) -> str:
    """A short digest of an answer (a list of ``Link``s, newest first): equal answers, equal
    digests; the reference's answers are digested alike."""
    return hashlib.blake2b(repr(list(links)).encode(), digest_size=8).hexdigest()


@dataclass(frozen=True)
class ClientSpec:
    """What one client process does: its threads ask keys of *keys_file* (JSON list of
    [id1, link_type]) at random from *seed*, each *pause_s* after its last answer, record to
    *records*, stop at *stop_file*."""

    keys_file: str
    records: str
    stop_file: str
    threads: int
    seed: int
    pause_s: float = 0.0


@dataclass(frozen=True)
class Record:
    """One query a client asked: an answer (``load_id``, ``digest``, ``route``) or an error
    (``error``: ERROR or RAW_ERROR, ``route`` its class, ``message``)."""

    t0: float
    t1: float
    key: int
    load_id: str = ""
    digest: str = ""
    route: str = ""
    error: str = ""
    message: str = ""

    @staticmethod
    def parse(line: str) -> "Record":
        f = line.rstrip("\n").split("\t")
        if f[3] in (ERROR, RAW_ERROR):
            return Record(float(f[0]), float(f[1]), int(f[2]), error=f[3], route=f[4],
                          message=f[5] if len(f) > 5 else "")
        return Record(float(f[0]), float(f[1]), int(f[2]), f[3], f[4], f[5])


def _one_line(text: str) -> str:
    return text.replace("\t", " ").replace("\n", " | ")[:500]


class _Asker:
    """The threads of one client process and their record buffer."""

    def __init__(self, spec: ClientSpec, keys: list[tuple[int, int]]):
        self.spec, self.keys = spec, keys
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.buffer: list[str] = []

    def ask(self, coordinator, n: int) -> None:
        rng = random.Random(self.spec.seed * 1000 + n)
        while not self.stop.is_set():
            i = rng.randrange(len(self.keys))
            t0 = time.time()
            try:
                answer = coordinator.query(*self.keys[i], timeout=QUERY_TIMEOUT_S)
            except DeblError as exc:
                self._note(f"{t0}\t{time.time()}\t{i}\t{ERROR}\t{type(exc).__name__}\t"
                           f"{_one_line(str(exc))}")
                self.stop.wait(ERROR_PAUSE_S)
                continue
            except Exception as exc:  # noqa: BLE001 -- a raw error is a finding: recorded
                traceback.print_exc()
                self._note(f"{t0}\t{time.time()}\t{i}\t{RAW_ERROR}\t{type(exc).__name__}\t"
                           f"{_one_line(str(exc))}")
                self.stop.wait(ERROR_PAUSE_S)
                continue
            self._note(f"{t0}\t{time.time()}\t{i}\t{answer.load_id}\t{digest(answer.links)}\t"
                       f"{answer.route.value}")
            if self.spec.pause_s:
                self.stop.wait(self.spec.pause_s)

    def _note(self, line: str) -> None:
        with self.lock:
            self.buffer.append(line + "\n")

    def drain(self) -> str:
        with self.lock:
            lines, self.buffer = self.buffer, []
        return "".join(lines)


def run_client(spec: ClientSpec) -> None:
    """The client process's body (see the module)."""
    keys = [tuple(k) for k in json.loads(Path(spec.keys_file).read_text())]
    asker = _Asker(spec, keys)
    stop_file = Path(spec.stop_file)
    config = load_config()
    coordinator = None
    while coordinator is None and not stop_file.exists():
        try:
            coordinator = Coordinator(config, default_timeout=QUERY_TIMEOUT_S)
        except ServiceError as exc:
            print(f"no coordinator yet ({exc}); trying again", file=sys.stderr, flush=True)
            time.sleep(ERROR_PAUSE_S)
    if coordinator is None:
        return
    with coordinator, open(spec.records, "a") as out:
        threads = [threading.Thread(target=asker.ask, args=(coordinator, n), daemon=True)
                   for n in range(spec.threads)]
        for t in threads:
            t.start()
        while not stop_file.exists():
            time.sleep(FLUSH_S)
            out.write(asker.drain())
            out.flush()
        asker.stop.set()
        for t in threads:
            t.join(QUERY_TIMEOUT_S)
        out.write(asker.drain())


@dataclass
class _Client:
    number: int
    incarnation: int
    running: procs.Running
    records: Path
    offset: int = 0  # bytes of records read so far


class ClientPool:
    """The campaign's client processes: *clients* of *threads* threads each."""

    def __init__(self, env: dict[str, str], directory: Path, keys: list[tuple[int, int]],
                 clients: int, threads: int, seed: int, cwd: Path | None = None,
                 pause_s: float = 0.0):
        self.env, self.dir, self.cwd = env, directory, cwd
        self.threads, self.seed, self.pause_s = threads, seed, pause_s
        directory.mkdir(parents=True, exist_ok=True)
        self.keys_file = directory / "keys.json"
        self.keys_file.write_text(json.dumps(keys))
        self.stop_file = directory / "stop"
        self.stop_file.unlink(missing_ok=True)
        self.clients: list[_Client] = []
        self._retired: list[_Client] = []  # killed or ended: their records are still read
        self.ended: list[tuple[_Client, procs.Outcome]] = []  # ended without being asked to
        for number in range(clients):
            self.clients.append(self._start(number, 0))

    def _start(self, number: int, incarnation: int) -> _Client:
        name = f"client{number}-{incarnation}"
        spec = ClientSpec(str(self.keys_file), str(self.dir / f"{name}.tsv"),
                          str(self.stop_file), self.threads,
                          self.seed * 100 + number * 10 + incarnation, self.pause_s)
        spec_file = self.dir / f"{name}.json"
        spec_file.write_text(json.dumps(asdict(spec)))
        running = procs.start([str(spec_file)], self.env, self.dir / f"{name}.log", self.cwd,
                              module="harness.days_clients")
        return _Client(number, incarnation, running, Path(spec.records))

    def kill(self, rng: random.Random) -> tuple[str, list[procs.Proc]]:
        """kill -9 one client, at random, and start it again (a new incarnation); returns what
        was killed and its process tree at the kill."""
        client = rng.choice(self.clients)
        tree = client.running.tree()
        procs.kill(tree[:1])
        client.running.wait(60.0)
        self.clients[client.number] = self._start(client.number, client.incarnation + 1)
        self._retired.append(client)
        return f"client {client.number} (pid {client.running.pid})", tree

    def supervise(self) -> list[procs.Outcome]:
        """Start again any client that ended by itself (that is a finding: returned)."""
        ended = []
        for client in list(self.clients):
            if client.running.done():
                outcome = client.running.wait(0)
                ended.append(outcome)
                self.ended.append((client, outcome))
                self._retired.append(client)
                self.clients[client.number] = self._start(client.number,
                                                          client.incarnation + 1)
        return ended

    def read(self) -> list[Record]:
        """The records written since the last read (complete lines only), every client."""
        out = []
        for client in self._retired + self.clients:
            try:
                with open(client.records, "rb") as f:
                    f.seek(client.offset)
                    data = f.read()
            except FileNotFoundError:
                continue
            complete = data[:data.rfind(b"\n") + 1]
            client.offset += len(complete)
            out += [Record.parse(line) for line in complete.decode().splitlines() if line]
        return out

    def logs(self) -> list[Path]:
        return [c.running.log for c in self._retired + self.clients]

    def stop(self) -> list[procs.Outcome]:
        """Ask every client to stop and wait for it; one still running after STOP_WAIT_S is
        killed (its outcome says it hung)."""
        self.stop_file.write_text("")
        return [c.running.wait(STOP_WAIT_S) for c in self.clients]


if __name__ == "__main__":
    run_client(ClientSpec(**json.loads(Path(sys.argv[1]).read_text())))
