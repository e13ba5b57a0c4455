"""A coordinator's poller thread: it reads the catalog every ``poll_interval`` seconds (the
current load and its job states, in one transaction), hands what changed to the coordinator
(a new current load, MySQL's take-over of the hot keys, buckets landed), and publishes what the
coordinator knows: its demand (``coordinator.demand``'s policy), its answers per route, the
queries asked per bucket, and its heartbeat, which says the load it serves and whether it reads
that load's hot keys from MySQL only (docs/COORDINATOR.md, "Days", "Hot keys").

A failing poll (MySQL restarting) is logged, kept in ``last_error`` and retried each interval on
a fresh pooled connection; the coordinator keeps answering from the state it has.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from debl.catalog import EarlyCatalog, ServingCatalog
from coordinator.demand import DemandPolicy

if TYPE_CHECKING:  # the coordinator owns its poller
    from coordinator.coordinator import Coordinator

log = logging.getLogger("debl.coordinator")

_JOIN_TIMEOUT_S = 10.0
# While no load is up, or the one served answers before its uptime, the poll comes this often at
# least: its answerable keys grow with every chunk it buckets (docs/COORDINATOR.md, "Answers
# before uptime"); so does the publication of the keys waited for, which the copy fetches first.
EARLY_POLL_S = 0.1
ASKS_EVERY_S = 10.0  # the queries asked per bucket, published at most this often


class Poller:
    """The poller of *coordinator* (see the module); ``start``, ``wake``, ``stop``."""

    def __init__(self, coordinator: "Coordinator", serving: ServingCatalog,
                 early: EarlyCatalog):
        self.coordinator = coordinator
        self.serving, self.early = serving, early
        self.interval = max(coordinator.config.coordinator.poll_interval, 0.01)  # 0 would spin
        self.policy = DemandPolicy(self.interval)
        self.key_policy = DemandPolicy(min(self.interval, EARLY_POLL_S) / 2)
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
        coordinator._take(current, newest, states, self.serving.serving_state)
        if current is None:
            coordinator._take_early(self._early_state())
        load_id, hot_mysql = coordinator._acknowledged()
        self.serving.heartbeat(coordinator.coordinator_id, load_id, hot_mysql, self.interval)

    def _early_state(self):
        """The newest load's state before its uptime, if it answers early (None otherwise);
        its answerable keys only when they changed since this coordinator read them."""
        found = self.early.early_load()
        if found is None:
            return None
        serving = self.coordinator._early_serving()
        gen = serving[1] if serving is not None and serving[0] == found[0] else -1
        return self.early.early_state(found[0], gen)

    def publish_early(self, now: float) -> None:
        """Before uptime: the keys queries wait for (soon after they change), and, once a
        claim was found false, the early answers given in the id1s it affects."""
        serving = self.coordinator._early_serving()
        if serving is None:
            return
        load_id, _, waiting, stopped = serving
        if self.key_policy.due(waiting, now):
            self.early.publish_key_demand(load_id, self.coordinator.coordinator_id, waiting)
            self.key_policy.done(waiting, now)
        if stopped:
            claims = self.early.false_claims(load_id)
            self.early.publish_claim_answers(load_id, self.coordinator.coordinator_id,
                                             self.coordinator._claim_answers(claims))

    def publish(self, now: float) -> None:
        """Publish the demand when the policy says so, the answer counts when they changed (at
        most once per poll interval), the asks at most every ASKS_EVERY_S."""
        coordinator = self.coordinator
        self.publish_early(now)
        load_id, demand, answered, asked = coordinator._published_state(now)
        if load_id is None:
            return
        if self.policy.due(demand, now):
            self.serving.publish_demand(load_id, coordinator.coordinator_id, demand)
            self.policy.done(demand, now)
        if self._changed("answers", load_id, answered, now, self.policy.min_interval):
            self.serving.publish_answers(load_id, coordinator.coordinator_id, answered)
        if self._changed("asks", load_id, asked, now, ASKS_EVERY_S):
            self.serving.publish_asks(load_id, coordinator.coordinator_id, asked)

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
        load_id, _, answered, asked = coordinator._published_state(time.monotonic())
        self.serving.forget_coordinator(coordinator.coordinator_id)
        if load_id is not None:
            self.serving.publish_demand(load_id, coordinator.coordinator_id, {})
            self.serving.publish_answers(load_id, coordinator.coordinator_id, answered)
            self.serving.publish_asks(load_id, coordinator.coordinator_id, asked)

    # -- the thread

    def _run(self) -> None:
        """Poll every interval; publish demand when it changed (at most once per interval) and
        as a heartbeat. A failing poll is logged and retried: never let the poller die."""
        coordinator = self.coordinator
        next_poll = time.monotonic() + self.interval
        while not self._stopped:
            now = time.monotonic()
            early = coordinator._early_serving()
            interval = self.interval if coordinator.is_up and early is None else \
                min(self.interval, EARLY_POLL_S)
            next_poll = min(next_poll, now + interval)
            dues = [self.policy.next_due(coordinator.demand(), now),
                    None if early is None else self.key_policy.next_due(early[2], now)]
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
