"""The client over several worker processes: same requests, exact counts, every answer right.

Worker processes import what a ``TargetSource`` names, so the targets here are module-level.
"""

from __future__ import annotations

import functools
import itertools
import threading
import time

import pytest

from debl.config import Config
from debl.errors import ServiceError
from debl.format.link import Link, Origin
from debl.store.memory import MemoryStore
from debl.workload.client import ClientSpec, TargetSource, run_client
from debl.workload.pacing import PoissonSchedule
from debl.workload.requests import RequestSpec

REQ = RequestSpec(max_id=2001, seed=4)
TABLE = "client_proc_links"


def _links(max_id: int = 2001) -> list[tuple[Link, Origin]]:
    """Links with a hidden row and an update per id1 that has any, so the merge rule matters."""
    rows = []
    for i in range(1, max_id):
        for j in range(i % 5):
            rows.append((Link(i, 123456789 + (i + j) % 2, i + j, 1, b"d%d" % j, 1000 + j, 0),
                         Origin(1, 0, j)))
        if i % 5 >= 2:  # a newer version of link j=0: hidden for odd i
            rows.append((Link(i, 123456789 + i % 2, i, 0 if i % 2 else 1, b"new", 5000, 1),
                         Origin(1, 1, 0)))
    return rows


def memory_store() -> MemoryStore:
    store = MemoryStore()
    store.write_links(_links())
    return store


def no_target() -> MemoryStore:
    raise ServiceError("MySQL at 127.0.0.1:1 is not reachable (test)")


class CheckedTarget:
    """MySQL answers, each compared in the worker with the in-memory reference store."""

    def __init__(self, config: Config) -> None:
        from debl.store.mysql import MySQLStore

        self.mysql = MySQLStore(config, table=TABLE)
        self.reference = memory_store()
        self.checked, self.lock = 0, threading.Lock()
        self.wrong: list = []

    def get_link_list(self, id1: int, link_type: int) -> list[Link]:
        got = self.mysql.get_link_list(id1, link_type)
        want = self.reference.get_link_list(id1, link_type)
        with self.lock:  # the threads of one worker share this target
            self.checked += 1
            if got != want:
                self.wrong.append((id1, link_type))
        return got

    def report(self) -> tuple[int, list]:
        return self.checked, self.wrong

    def close(self) -> None:
        self.mysql.close()


def test_processes_run_the_same_requests_as_one(tmp_path):
    spec = ClientSpec(REQ, threads=3, total=2001)
    one = run_client(memory_store(), spec)
    two = run_client(TargetSource(open=memory_store, name="memory"),
                     ClientSpec(REQ, threads=3, total=2001, processes=2))
    assert two.completed == one.completed == 2001 and two.errors == 0
    assert (two.rows, two.empty) == (one.rows, one.empty)
    assert two.latency.count == 2001
    assert sum(p.completed for p in two.timeline) == 2001
    assert two.spec.processes == 2 and len(two.target_reports) == 2
    assert two.cpu_s > 0 and one.cpu_s > 0  # the workers' CPU, summed
    # The slowest 1% of both workers merged (docs/BENCHMARKS.md, "The tail"): the run's max
    # first, the fastest kept at or above the run's p99 (reported up to 1/1024 high).
    tail = two.tail.breakdown()
    assert (tail.answered, tail.slowest, tail.exact) == (2001, 21, True)
    assert [(r.route, r.requests) for r in tail.routes] == [("memory", 2001)]
    assert tail.samples[0].latency_ms == two.latency.max
    assert tail.threshold_ms >= two.latency.p99 / (1 + 1 / 1024) - 1e-6


def test_duration_bounds_every_process():
    rate, threads = 300.0, 2
    result = run_client(TargetSource(open=memory_store),
                        ClientSpec(REQ, threads=threads, total=None, duration=1.0, rate=rate,
                                   processes=2))
    # No request is sent at or after the deadline: at most the scheduled instants before it.
    scheduled = sum(sum(1 for _ in itertools.takewhile(
        lambda t: t < 1e9, PoissonSchedule(rate / threads, REQ.seed, thread)))
        for thread in range(threads))
    assert 0 < result.completed <= scheduled and result.errors == 0


class AnswersFrom:
    """Fails every request until epoch second *at*, then answers (picklable by its module)."""

    def __init__(self, at: float) -> None:
        self.at = at

    def get_link_list(self, id1: int, link_type: int) -> list:
        if time.time() < self.at:
            time.sleep(0.005)
            raise TimeoutError("not answerable yet")
        return [1]

    def close(self) -> None:
        pass


def test_the_first_answer_is_the_earliest_over_the_processes():
    at = time.time() + 0.5  # after the workers' start-up, so the first requests fail
    result = run_client(TargetSource(open=functools.partial(AnswersFrom, at)),
                        ClientSpec(REQ, threads=2, total=None, duration=3.0, processes=2))
    assert result.completed > 0
    assert result.started_at + result.first_answer_s >= at - 0.01
    assert result.first_answer_s <= result.elapsed_s


def test_a_worker_that_cannot_open_its_target_fails_the_run():
    with pytest.raises(ServiceError, match="not reachable"):
        run_client(TargetSource(open=no_target), ClientSpec(REQ, threads=2, total=10,
                                                            processes=2))


@pytest.mark.stack
def test_two_processes_against_mysql_answer_exactly_the_reference(stack_config):
    from debl.store.mysql import MySQLStore

    with MySQLStore(stack_config, table=TABLE) as store:
        store.reset()
        store.write_links(_links())
    try:
        source = TargetSource(open=functools.partial(CheckedTarget, stack_config),
                              report=CheckedTarget.report)
        total = 3001
        result = run_client(source, ClientSpec(REQ, threads=4, total=total, processes=2))
        assert result.errors == 0, result.error_samples
        assert result.completed == total and result.latency.count == total
        assert [wrong for _, wrong in result.target_reports] == [[], []]
        assert sum(checked for checked, _ in result.target_reports) == total
        reference = run_client(memory_store(), ClientSpec(REQ, threads=4, total=total))
        assert (result.rows, result.empty) == (reference.rows, reference.empty)
        assert 0 < result.empty < total and result.rows > 0
    finally:
        with MySQLStore(stack_config, table=TABLE) as store:
            store.drop_table()


class Stuck:
    """A target whose every query waits for ever, as one buffered on a bucket nobody loads."""

    def get_link_list(self, id1: int, link_type: int) -> list[Link]:
        threading.Event().wait()
        return []

    def close(self) -> None:
        pass


_KILLED_CLIENT = """
import functools, sys
sys.path.insert(0, {root!r})
from debl.workload.client import ClientSpec, TargetSource, run_client
from debl.workload.requests import RequestSpec
from tests.test_workload_client_processes import Stuck
run_client(TargetSource(open=functools.partial(Stuck)),
           ClientSpec(RequestSpec(max_id=100, seed=1), threads=2, total=4, processes=2))
"""


def test_worker_processes_end_with_a_client_killed_by_sigkill(tmp_path):
    """kill -9 of the client while its workers' queries wait: the workers, their forkserver and
    the resource tracker end too (no orphan keeps a coordinator's queries waiting for ever)."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from harness import procs

    root = str(Path(__file__).resolve().parents[1])
    client = subprocess.Popen([sys.executable, "-c", _KILLED_CLIENT.format(root=root)],
                              start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        workers: list = []
        while len(workers) < 2 and time.monotonic() < deadline and client.poll() is None:
            time.sleep(0.2)
            tree = procs.tree(client.pid)
            forkservers = {p.pid for p in tree if "forkserver" in p.cmdline
                           and p.ppid == client.pid}
            workers = [p for p in tree if p.ppid in forkservers]
        assert len(workers) == 2, "the workers never started"
        time.sleep(1.0)  # their queries are waiting now
        tree = procs.tree(client.pid)
        os.kill(client.pid, signal.SIGKILL)
        client.wait()
        left = procs.survivors(tree[1:], grace=15.0)
        procs.kill(left)
        assert left == [], [p.describe() for p in left]
    finally:
        os.killpg(client.pid, signal.SIGKILL) if client.poll() is None else None


class DiesHoldingLocks(Stuck):
    """In worker process 1, the first query kills its process while it holds every lock it
    shares with the other processes (the worst moment a kill -9 can land); in the others every
    query waits for ever, as buffered ones do."""

    def get_link_list(self, id1: int, link_type: int) -> list[Link]:
        import gc
        import multiprocessing
        import os
        import signal
        from multiprocessing.synchronize import SemLock

        if multiprocessing.current_process().name == "debl-client-p1":
            gc.unfreeze()  # the requesters froze what the process held (get_objects skips it)
            for lock in [o for o in gc.get_objects() if isinstance(o, SemLock)]:
                lock.acquire(False)
            os.kill(os.getpid(), signal.SIGKILL)
        return super().get_link_list(id1, link_type)


_DYING_WORKER = """
import sys
sys.path.insert(0, {root!r})
from debl.errors import ServiceError
from debl.workload.client import ClientSpec, TargetSource, run_client
from debl.workload.requests import RequestSpec
from tests.test_workload_client_processes import DiesHoldingLocks
try:
    run_client(TargetSource(open=DiesHoldingLocks),
               ClientSpec(RequestSpec(max_id=100, seed=1), threads=4, total=8, processes=2))
except ServiceError as exc:
    print(exc)
    sys.exit(3)
"""


def test_a_client_whose_worker_dies_says_which_and_exits():
    """Defect: a worker killed while it held a lock of the client's shared Events
    or Queue left it held, and the client waited for ever in ``stop.set()`` (the kill campaign's
    `coordinator` target saw it hang). The client now names the dead worker and exits non-zero,
    its other worker's waiting queries stopped. The timeout only catches a hang."""
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])
    try:
        done = subprocess.run([sys.executable, "-c", _DYING_WORKER.format(root=root)],
                              capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise AssertionError("the client hung after its worker died") from None
    assert done.returncode == 3, done.stderr[-2000:]
    assert "client worker process debl-client-p1 (pid " in done.stdout
    assert "died (killed by signal 9) before reporting" in done.stdout
