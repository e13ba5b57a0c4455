"""A coordinator's poller thread: it reads the catalog every ``poll_interval`` seconds (the
current load and its job states, in one transaction), hands what it read to the coordinator
(a ``PollResult``: a new current load, MySQL's take-over of the hot keys, buckets landed), and
publishes what the coordinator knows (a ``Publication``): its demand (``coordinator.demand``'s
policy), its answers per route, the queries asked per bucket, its early answers per id1 (added
at every turn of its loop), and its heartbeat, which says the load it serves and whether it
reads that load's hot keys from MySQL only (docs/COORDINATOR.md, "Days", "Hot keys").

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

from debl.catalog import EarlyCatalog, EarlyState, LoadRecord, ServingCatalog, ServingState
from coordinator.demand import DemandPolicy
from coordinator.early import EarlyAnswerTally

log = logging.getLogger("debl.coordinator")

_JOIN_TIMEOUT_S = 10.0
ASKS_EVERY_S = 10.0  # the queries asked per bucket, published at most this often
# While no load is up, or the one served answers before its uptime, the poll comes this often at
# least: its answerable keys grow with every chunk it buckets (docs/COORDINATOR.md, "Answers
# before uptime"); so does the publication of the keys waited for, which the copy fetches first.
EARLY_POLL_S = 0.1


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
    # With no load current: the newest load's state before its uptime, if it answers early.
    early: EarlyState | None = None


@dataclass(frozen=True)
class EarlyServing:
    """A load served before its uptime, as the coordinator knows it: the generation of its
    answerable keys it has, the keys its queries wait for."""

    load_id: str
    gen: int
    waiting: dict[int, int]


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
    early: EarlyServing | None = None  # the load served answers before its uptime

    @staticmethod
    def none() -> "Publication":
        """Nothing served yet: nothing to publish, a heartbeat of no load."""
        return Publication(None, {}, {}, {}, None, False)


class Served(Protocol):
    """What the poller needs of the coordinator it polls for."""

    coordinator_id: str
    early_answers: EarlyAnswerTally  # its early answers not yet in the catalog's counts

    def demand(self) -> dict[int, int]:
        """The demand per bucket now (what the publication policy watches)."""

    def take_poll(self, result: PollResult) -> None:
        """Take what a poll read."""

    def publication(self, now: float) -> Publication:
        """What to publish, at the ``time.monotonic()`` *now*."""


class Poller:
    """The poller of *coordinator* over the catalog's *serving* and *early* roles, every
    *interval* seconds (see the module); ``start``, ``wake``, ``stop``."""

    def __init__(self, coordinator: Served, serving: ServingCatalog, early: EarlyCatalog,
                 interval: float):
        self.coordinator = coordinator
        self.serving, self.early = serving, early
        self.interval = max(interval, 0.01)  # 0 would spin
        self.policy = DemandPolicy(self.interval)
        self.key_policy = DemandPolicy(min(self.interval, EARLY_POLL_S) / 4)
        self._keys_of: str | None = None  # the load its published waiting keys are for
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
        coordinator.take_poll(PollResult(current, newest, states, self.serving.serving_state,
                                         self._early_state() if current is None else None))
        said = coordinator.publication(time.monotonic())
        self.serving.heartbeat(coordinator.coordinator_id, said.acknowledged, said.hot_mysql,
                               self.interval)

    def _early_state(self) -> EarlyState | None:
        """The newest load's state before its uptime if it answers early, its answerable keys
        only when they changed since the coordinator read them (None: it does not)."""
        found = self.early.early_load()
        if found is None:
            return None
        early = self.coordinator.publication(time.monotonic()).early
        return self.early.early_state(
            found[0], early.gen if early is not None and early.load_id == found[0] else -1)

    def publish(self, now: float) -> None:
        """Add the early answers given since the last turn to the catalog's counts; publish
        the demand when the policy says so, the answer counts when they changed (at most once
        per poll interval), the asks at most every ASKS_EVERY_S; before uptime, the keys waited
        for soon after they change."""
        coordinator = self.coordinator
        self.record_early_answers()
        said = coordinator.publication(now)
        if said.early is not None:
            self._publish_early(said.early, now)
        else:  # the load is up (or gone): no key waits for it any more
            self._forget_keys()
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

    def _publish_early(self, early: EarlyServing, now: float) -> None:
        coordinator = self.coordinator
        if self.key_policy.due(early.waiting, now):
            self.early.publish_key_demand(early.load_id, coordinator.coordinator_id,
                                          early.waiting)
            self.key_policy.done(early.waiting, now)
            self._keys_of = early.load_id if early.waiting else None

    def record_early_answers(self) -> None:
        """Add the coordinator's early answers not yet counted to the catalog's counts
        (``debl_early_answers``); what MySQL did not take is kept for the next turn, and its
        ServiceError raised."""
        tally = self.coordinator.early_answers
        taken = tally.take()
        try:
            self.early.add_early_answers(taken)
        except BaseException:
            tally.give_back(taken)
            raise

    def _forget_keys(self) -> None:
        if self._keys_of is not None:
            self.early.publish_key_demand(self._keys_of, self.coordinator.coordinator_id, {})
            self._keys_of = None

    def _changed(self, what: str, load_id: str, counts: dict, now: float,
                 every: float) -> bool:
        if counts == self._published.get((what, load_id), {}) or \
                now - self._published_at[what] < every:
            return False
        self._published[(what, load_id)], self._published_at[what] = counts, now
        return True

    def publish_last(self) -> None:
        """At close: the early answers not yet counted, no demand any more, the final counts."""
        coordinator = self.coordinator
        self.record_early_answers()
        said = coordinator.publication(time.monotonic())
        self.serving.forget_coordinator(coordinator.coordinator_id)
        self._forget_keys()
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
            said = coordinator.publication(now)
            fast = said.load_id is None or said.early is not None  # not up: poll often
            interval = min(self.interval, EARLY_POLL_S) if fast else self.interval
            next_poll = min(next_poll, now + interval)
            dues = [self.policy.next_due(said.demand, now), None if said.early is None
                    else self.key_policy.next_due(said.early.waiting, now)]
            wake_at = min([next_poll, *(d for d in dues if d is not None)])
            if wake_at > now:
                self._wake.wait(wake_at - now)
                self._wake.clear()
                continue  # re-read the counts: a query may have changed them
            try:
                if now >= next_poll:
                    next_poll = now + interval
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
