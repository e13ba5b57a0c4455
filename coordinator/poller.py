"""A coordinator's poller thread: it reads the catalog every ``poll_interval`` seconds (the
current load and its job states, in one transaction), hands what it read to the coordinator
(a ``PollResult``: a new current load, MySQL's take-over of the hot keys, buckets landed), and
publishes what the coordinator knows (a ``Publication``): its demand (``coordinator.demand``'s
policy), its answers per route, the queries asked per bucket, and its heartbeat, which says the
load it serves and whether it reads that load's hot keys from MySQL only (docs/COORDINATOR.md,
"Days", "Hot keys").

The hand-over is this module's two dataclasses and the ``Served`` protocol, which the
coordinator implements: the poller never imports the coordinator, nor reaches into it.

A failing poll (MySQL restarting) is logged, kept in ``last_error`` and retried each interval on
a fresh pooled connection; the coordinator keeps answering from the state it has.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from debl.catalog import LoadRecord, ServingCatalog, ServingState
from coordinator.demand import DemandPolicy

log = logging.getLogger("debl.coordinator")

_JOIN_TIMEOUT_S = 10.0
ASKS_EVERY_S = 10.0  # the queries asked per bucket, published at most this often


@dataclass(frozen=True)
class PollResult:
    """What one poll read, in one transaction: the current load (None before the first is
    up), the newest load (a new day being loaded, or one that failed), the current load's job
    states; and *read_serving_state*, which reads the whole serving state (the current load with
    its buckets and key filter, in one transaction) when the coordinator needs it: a new current
    load, or MySQL's take-over of the hot keys."""

    current: LoadRecord | None
    newest: LoadRecord | None
    states: dict[int, str]
    read_serving_state: Callable[[], ServingState | None]


@dataclass(frozen=True)
class Publication:
    """What the coordinator publishes, read at one instant. ``load_id``: the load it serves
    (None: none yet), whose ``demand`` (bucket -> queries, ``coordinator.demand``),
    ``answered`` (route or outcome -> queries) and ``asked`` (bucket -> queries) these are.
    ``acknowledged``: what the heartbeat says, the load served with no query of another in
    flight (None while one is); ``hot_mysql``: no query reads that load's hot files any more
    while MySQL has its hot keys."""

    load_id: str | None
    demand: dict[int, int]
    answered: dict[str, int]
    asked: dict[int, int]
    acknowledged: str | None
    hot_mysql: bool

    @staticmethod
    def none() -> "Publication":
        """Nothing served yet: nothing to publish, a heartbeat of no load."""
        return Publication(None, {}, {}, {}, None, False)


class Served(Protocol):
    """What the poller needs of the coordinator it polls for."""

    coordinator_id: str

    def demand(self) -> dict[int, int]:
        """The demand per bucket now (what the publication policy watches)."""

    def take_poll(self, result: PollResult) -> None:
        """Take what a poll read."""

    def publication(self, now: float) -> Publication:
        """What to publish, at the ``time.monotonic()`` *now*."""


class Poller:
    """The poller of *coordinator* over the catalog's *serving* role, every *interval* seconds
    (see the module); ``start``, ``wake``, ``stop``."""

    def __init__(self, coordinator: Served, serving: ServingCatalog, interval: float):
        self.coordinator = coordinator
        self.serving = serving
        self.interval = max(interval, 0.01)  # 0 would spin
        self.policy = DemandPolicy(self.interval)
        self.polls = 0
        self.last_error: str | None = None
        self._wake = threading.Event()
        self._stopped = False
        self._published: dict[tuple[str, str], dict] = {}  # (what, load) -> last published
        self._published_at: dict[str, float] = {"answers": float("-inf"),
                                                "asks": float("-inf")}
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"debl-coordinator-{coordinator.coordinator_id}")

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        """Publish soon: a query changed the demand."""
        self._wake.set()

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()
        self._thread.join(_JOIN_TIMEOUT_S)

    # -- one poll

    def poll(self) -> None:
        """Read the current load and its job states; hand them to the coordinator; then the
        heartbeat."""
        current, newest, states = self.serving.poll()
        coordinator = self.coordinator
        coordinator.take_poll(PollResult(current, newest, states, self.serving.serving_state))
        said = coordinator.publication(time.monotonic())
        self.serving.heartbeat(coordinator.coordinator_id, said.acknowledged, said.hot_mysql,
                               self.interval)

    def publish(self, now: float) -> None:
        """Publish the demand when the policy says so, the answer counts when they changed (at
        most once per poll interval), the asks at most every ASKS_EVERY_S."""
        coordinator = self.coordinator
        said = coordinator.publication(now)
        load_id = said.load_id
        if load_id is None:
            return
        if self.policy.due(said.demand, now):
            self.serving.publish_demand(load_id, coordinator.coordinator_id, said.demand)
            self.policy.done(said.demand, now)
        if self._changed("answers", load_id, said.answered, now, self.policy.min_interval):
            self.serving.publish_answers(load_id, coordinator.coordinator_id, said.answered)
        if self._changed("asks", load_id, said.asked, now, ASKS_EVERY_S):
            self.serving.publish_asks(load_id, coordinator.coordinator_id, said.asked)

    def _changed(self, what: str, load_id: str, counts: dict, now: float,
                 every: float) -> bool:
        if counts == self._published.get((what, load_id), {}) or \
                now - self._published_at[what] < every:
            return False
        self._published[(what, load_id)], self._published_at[what] = counts, now
        return True

    def publish_last(self) -> None:
        """At close: no demand any more, the final counts."""
        coordinator = self.coordinator
        said = coordinator.publication(time.monotonic())
        self.serving.forget_coordinator(coordinator.coordinator_id)
        if said.load_id is not None:
            self.serving.publish_demand(said.load_id, coordinator.coordinator_id, {})
            self.serving.publish_answers(said.load_id, coordinator.coordinator_id, said.answered)
            self.serving.publish_asks(said.load_id, coordinator.coordinator_id, said.asked)

    # -- the thread

    def _run(self) -> None:
        """Poll every interval; publish demand when it changed (at most once per interval) and
        as a heartbeat. A failing poll is logged and retried: never let the poller die."""
        coordinator = self.coordinator
        next_poll = time.monotonic() + self.interval
        while not self._stopped:
            now = time.monotonic()
            due = self.policy.next_due(coordinator.demand(), now)
            wake_at = next_poll if due is None else min(next_poll, due)
            if wake_at > now:
                self._wake.wait(wake_at - now)
                self._wake.clear()
                continue  # re-read the counts: a query may have changed them
            try:
                if now >= next_poll:
                    next_poll = now + self.interval
                    self.poll()
                    self.polls += 1
                self.publish(time.monotonic())
                self.last_error = None
            except Exception as exc:  # noqa: BLE001 -- never let the poller die
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("coordinator %s: poll failed (retrying): %s",
                            coordinator.coordinator_id, self.last_error)
                # The catalog's pool replaces a broken connection on the next call.
                next_poll = time.monotonic() + self.interval
                # Back off publishing too, or a dead server turns the loop into a busy one.
                self.policy.last = time.monotonic()
