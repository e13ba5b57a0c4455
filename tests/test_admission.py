"""The coordinator's admission in arrival order (coordinator.admission): at most its slots inside
at once, and the callers that waited let in in the order they came."""

from __future__ import annotations

import threading
import time

import pytest

from coordinator.admission import FifoGate


def test_at_most_its_slots_run_at_once():
    gate, inside, most, lock = FifoGate(2), [0], [0], threading.Lock()

    def body() -> None:
        with gate:
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(0.01)
            with lock:
                inside[0] -= 1

    threads = [threading.Thread(target=body) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert most[0] == 2 and inside[0] == 0


def test_waiting_callers_are_let_in_in_the_order_they_came():
    gate, order = FifoGate(1), []
    gate.__enter__()  # the one slot taken: every caller below waits
    threads = []
    for i in range(6):
        def body(i: int = i) -> None:
            with gate:
                order.append(i)
        t = threading.Thread(target=body)
        t.start()
        threads.append(t)
        deadline = time.monotonic() + 5
        while len(gate._waiting) < i + 1 and time.monotonic() < deadline:
            time.sleep(0.001)  # caller i is in line before caller i + 1 comes
    gate.__exit__(None, None, None)
    for t in threads:
        t.join(5)
    assert order == list(range(6))


def test_a_gate_without_slots_is_refused():
    with pytest.raises(ValueError, match="at least one slot"):
        FifoGate(0)
