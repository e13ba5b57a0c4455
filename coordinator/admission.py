"""Admission in arrival order: at most *slots* callers inside at once, the others let in one by
one in the order they came (docs/COORDINATOR.md, "Threads").

Why: a raw answer read from this host's block files is pure Python work, and the threads of one
process run it under one interpreter lock. Left to themselves, many client threads take that
lock (and the coordinator's own) in whatever order the operating system wakes them: most answers
finish at once and a few wait behind many others, which is the p99. In a queue served in arrival
order each waits for the answers ahead of it, about the same for all (docs/COORDINATOR.md,
"Threads", has the measurement).

Pitfalls:

- Only for work that does not wait on another server: a slot held across a network call idles
  while the queue behind it waits. The coordinator admits here only raw answers whose files are
  all local.
- No timeout: a caller waits only for the answers ahead of it, each CPU work alone. A query's
  deadline is decided when it is routed, before the queue.
"""

from __future__ import annotations

import threading
from collections import deque


class FifoGate:
    """``with gate:`` runs its body with at most *slots* bodies at once, in arrival order."""

    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError(f"a gate needs at least one slot, not {slots}")
        self._lock = threading.Lock()
        self._free = slots
        self._waiting: deque[threading.Lock] = deque()
        self._mine = threading.local()  # each thread's own lock to wait on, made once

    def __enter__(self) -> None:
        with self._lock:
            if self._free and not self._waiting:
                self._free -= 1
                return
            turn = getattr(self._mine, "turn", None)
            if turn is None:
                turn = self._mine.turn = threading.Lock()
            turn.acquire()  # held until a leaving caller hands its slot over
            self._waiting.append(turn)
        turn.acquire()
        turn.release()

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            if self._waiting:
                self._waiting.popleft().release()  # the slot passes to the first in line
            else:
                self._free += 1
