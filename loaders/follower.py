"""The follower (``debl follow``): the source's committed changes of its link table, captured
from its binary log into the change log (docs/FRESHNESS.md, "Capture: `debl follow`").

Where it starts: where it has got to (its row in ``debl_follower``), or, the first time, at the
dump's position of the oldest kept load (a load whose stores are not dropped) whose listing
carried one; a follower behind that position skips to it (no kept day needs what lies
between). Without such a load there is nothing to follow. The source must be the one the
loads were dumped from (its ``debl_source_state`` id).

How it keeps what it captures: a thread reads the log (``debl.store.source_binlog``) ahead of
the writes; the main thread writes batches of whole committed transactions
(``loaders.capture``) with the position they reach in one catalog transaction
(``Catalog.changes.append``). A follower killed at any point resumes at the last position
written: nothing lost, nothing twice.

Errors: a source or catalog that cannot be reached (ServiceError) is retried with exponential
pauses (tenacity), said on stderr and in the follower's row (state ``catching-up`` with the
error), and the follower resumes from the position the catalog holds; with ``until_caught_up``
it gives up once it has failed for ``service_timeout``. A position the log no longer holds, a
changed table, a statement it cannot read (SourceError) stop it: state ``failed`` with the
message, which says what to do; but when a kept load was dumped after a lost position, the
follower goes on from that load's dump (the changes in between are lost whatever it does).
``debl status`` shows the row.

One follower per dataset: a MySQL named lock (``debl_follow.<database>``), checked again every
few seconds (a server that closed its session released it).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import pymysql
from tenacity import (RetryCallState, Retrying, retry_if_exception_type,
                      retry_if_not_exception_type, stop_never)

from debl.catalog import Catalog, LoadRecord, NamedLock
from debl.config import Config
from debl.errors import DeblError, FollowerLockHeld, ServiceError, SourceError
from debl.position import DumpPosition, parse_gtid
from debl.store import source_db
from debl.store.source_binlog import BinlogReader, Committed, PositionLost
from loaders.capture import Batch

LOCK = "debl_follow"
READ_AHEAD = 10_000  # transactions read and not yet written, at most (the reader then waits)
HOUSEKEEPING_S = 1.0  # the head read, a sign of life in the follower's row, the lock checked
PRUNE_EVERY_S = 60.0
PROGRESS_EVERY_S = 10.0
MAX_PAUSE_S = 30.0
_NOTHING = object()


@dataclass
class FollowResult:
    """What one ``serve`` did: the position reached, the changes and transactions captured,
    the catalog transactions (batches) that wrote them."""

    gtid: str
    seq: int
    changes: int = 0
    transactions: int = 0
    batches: int = 0


def kept_positions(loads: list[LoadRecord]) -> list[DumpPosition]:
    """The dump's positions of the kept loads (their stores not dropped, nor being dropped)."""
    return [load.position for load in loads if load.position is not None
            and load.dropped is None and load.dropping is None]


def kept_position(loads: list[LoadRecord], source: str, where: str) -> DumpPosition:
    """The dump's position of the oldest kept load (stores not dropped) of source *source*:
    where the follower starts, and below which no kept day needs a change. DeblError when no
    kept load carries a position (nothing to follow), or only positions of other sources."""
    kept = kept_positions(loads)
    if not kept:
        raise DeblError(
            "no load of this dataset carries a dump's position: nothing to follow. `debl "
            "follow` captures the source's changes since the dump a load was made from: dump "
            "the source (`debl source dump DIR`), load the dump (`debl load DIR`), then start "
            "`debl follow`")
    mine = [p for p in kept if p.source == source]
    if not mine:
        others = ", ".join(sorted({p.source for p in kept}))
        raise DeblError(
            f"the loads of this dataset were dumped from source {others}, but {where} is "
            f"source {source} (its debl_source_state): its log's positions mean nothing for "
            "those loads. Point [source_db] at the source the loads were dumped from, or dump "
            "this one and load the dump (`debl source dump DIR`, `debl load DIR`)")
    return min(mine, key=lambda p: p.seq)


class _Reading(threading.Thread):
    """The log read ahead into a queue: ``Committed``, None (the source is idle), or the
    exception that ended the reading."""

    def __init__(self, config: Config, after: str):
        super().__init__(name="debl-binlog-reader", daemon=True)
        self.queue: queue.Queue = queue.Queue(READ_AHEAD)
        self._stopping = threading.Event()
        self._reader = BinlogReader(config, after)
        self.start()

    def run(self) -> None:
        try:
            for item in self._reader:
                if not self._hand(item):
                    return
        except BaseException as exc:  # noqa: BLE001 -- handed to the main thread
            self._hand(exc)

    def _hand(self, item: object) -> bool:
        """Queue *item*, waiting while the queue is full; False once stopped."""
        while not self._stopping.is_set():
            try:
                self.queue.put(item, timeout=0.5)
                return True
            except queue.Full:
                continue
        return False

    def stop(self) -> None:
        self._stopping.set()
        self._reader.close()
        self.join(5.0)


class Follower:
    """The follower of the source of this dataset's loads. ``with Follower(config) as f:
    f.serve()``; opening takes the lock and finds the start (errors as DeblError)."""

    def __init__(self, config: Config, report: Callable[[str], None] = lambda _: None):
        self.config, self.report = config, report
        self.catalog = Catalog(config)
        try:
            lock = self.catalog.named_lock(f"{LOCK}.{config.mysql.database}")
            if lock is None:
                raise FollowerLockHeld(self._held_by())
        except BaseException:
            self.catalog.close()
            raise
        self._lock: NamedLock = lock
        self._head_conn: pymysql.connections.Connection | None = None
        try:
            self.source = self._source_id()
            self.floor = kept_position(self.catalog.loads.loads(), self.source,
                                       source_db.where(config))
            state = self.catalog.changes.start(self.source, self.floor.gtid, self.floor.seq)
            if state.seq < self.floor.seq:
                self.report(f"the follower was at GTID {state.gtid}, before the oldest kept "
                            f"load's dump ({self.floor.gtid}): it goes on from there")
                state = self.catalog.changes.skip_to(self.source, self.floor.gtid,
                                                     self.floor.seq)
            self.gtid, self.seq = state.gtid, state.seq
            self.state = "catching-up"
            self.head: tuple[str, int] | None = None
            self.result = FollowResult(self.gtid, self.seq)
            self._pruned = self._kept_at = self._progress_at = 0.0
            self._failures = 0
            self._failing_since: float | None = None
            self._last_progress = (0, 0, 0)  # changes, transactions, batches at the last line
            self._prune()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._head_conn is not None:
            self._head_conn.close()
            self._head_conn = None
        self.catalog.close()
        self._lock.release()

    def __enter__(self) -> "Follower":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the service

    def serve(self, until_caught_up: bool = False,
              should_stop: Callable[[], bool] = lambda: False) -> FollowResult:
        """Capture until stopped (*should_stop*, Ctrl-C), or with *until_caught_up* until the
        source's head at the first successful read of it is captured. Errors: see the
        module; the follower's row says ``failed`` (the position is lost, the table changed)
        or, once stopped, ``stopped``."""
        target: list[int] = []  # the head to reach (until_caught_up), once read
        retrying = Retrying(
            retry=retry_if_exception_type(ServiceError)
            & retry_if_not_exception_type(FollowerLockHeld),
            wait=self._pause, stop=self._gives_up if until_caught_up else stop_never,
            before_sleep=self._report_retry, reraise=True)
        try:
            while True:
                try:
                    retrying(self._follow, until_caught_up, target, should_stop)
                    break
                except PositionLost as exc:
                    if not self._skip_past(exc):
                        raise
        except FollowerLockHeld:
            raise  # the row is another follower's now
        except DeblError as exc:
            self._say("failed" if isinstance(exc, SourceError) else "stopped", str(exc))
            raise
        except KeyboardInterrupt:
            self._say("stopped")
            raise
        except Exception as exc:  # a library's own error: its row and the user told, worded
            message = (f"the follower stopped at GTID {self.gtid}: {type(exc).__name__}: {exc}"
                       "; nothing past that position was captured. Start `debl follow` "
                       "again (it resumes there); if it fails the same way, see its log")
            self._say("failed", message)
            raise SourceError(message) from exc
        self._say("stopped")
        return self.result

    def _follow(self, until_caught_up: bool, target: list[int],
                should_stop: Callable[[], bool]) -> None:
        """One connection to the source's log, from the position the catalog holds, until
        stopped, caught up (*target*) or an error."""
        try:
            self._keep_lock()
            state = self.catalog.changes.get(self.source)
            self.gtid, self.seq = state.gtid, state.seq  # the truth after any failure
            self.state = "catching-up"
            self.catalog.changes.report(self.source, self.state)
            self._housekeeping(force=True)
            reading = _Reading(self.config, self.gtid)
        except ServiceError:
            self._failed()
            raise
        if until_caught_up and not target:
            assert self.head is not None  # read by the housekeeping just forced
            target.append(self.head[1])
        batch = Batch(self.config.fresh.capture_batch, self.config.fresh.capture_wait)
        read = False
        try:
            while not should_stop():
                if target and self.seq >= target[0]:
                    self.report(f"caught up: captured up to GTID {self.gtid} (the source's "
                                f"head at the start was seq {target[0]})")
                    return
                timeout = batch.left(time.monotonic()) if batch else HOUSEKEEPING_S
                try:
                    item = reading.queue.get(timeout=timeout)
                except queue.Empty:
                    item = _NOTHING
                if isinstance(item, BaseException):
                    if batch:  # what was read whole is kept
                        self._write(batch)
                    raise item
                if item is not _NOTHING:
                    read = True  # the source's log is read
                if isinstance(item, Committed):
                    if not batch.fits(item):
                        self._write(batch)
                    batch.add(item, time.monotonic())
                # Following, a group commit (what arrives during the write makes the next
                # batch); catching up, by size and wait; with --until-caught-up, the batch that
                # reaches the target at once.
                if batch.due(time.monotonic(),
                             nothing_ahead=self.state == "following" and reading.queue.empty(),
                             target=target[0] if target else None):
                    self._write(batch)
                if self._housekeeping() and read:  # the catalog answers too
                    self._failures, self._failing_since = 0, None
            if batch:
                self._write(batch)
        except ServiceError:
            self._failed()
            raise
        finally:
            reading.stop()

    def _write(self, batch: Batch) -> None:
        """The batch and the position it reaches, in one catalog transaction."""
        last, commit_ts = batch.last, batch.commit_ts
        transactions = len(batch.transactions)
        changes = batch.take(time.time())
        self.catalog.changes.append(self.source, changes, last.gtid, last.seq, commit_ts,
                                    state=self.state)
        self.gtid, self.seq = last.gtid, last.seq
        r = self.result
        r.gtid, r.seq = self.gtid, self.seq
        r.changes += len(changes)
        r.transactions += transactions
        r.batches += 1
        if self.state == "catching-up" and self.head is not None and self.seq >= self.head[1]:
            self._caught_up()

    def _caught_up(self) -> None:
        self.state = "following"
        self.catalog.changes.report(self.source, self.state)
        self.report(f"following: captured up to the source's head, GTID {self.gtid}")

    # -- every HOUSEKEEPING_S: the head, a sign of life, the lock, pruning, progress

    def _housekeeping(self, force: bool = False) -> bool:
        """Whether it ran (and so the source and the catalog answered)."""
        now = time.monotonic()
        if not force and now - self._kept_at < HOUSEKEEPING_S:
            return False
        self._kept_at = now
        head = self.head = self._read_head()
        self.catalog.changes.saw_head(self.source, *head)
        if self.state == "catching-up" and self.seq >= head[1]:
            self._caught_up()
        self._keep_lock()
        if now - self._pruned >= PRUNE_EVERY_S:
            self._prune()
        if now - self._progress_at >= PROGRESS_EVERY_S:
            self._progress(now)
        return True

    def _read_head(self) -> tuple[str, int]:
        """The source's head (GTID, seq); ServiceError when it cannot be read."""
        try:
            if self._head_conn is None:
                self._head_conn = source_db.connect(self.config)
            with self._head_conn.cursor() as cur, source_db.errors(self.config,
                                                                   "the read of its head"):
                gtid = source_db.head(cur)
        except ServiceError:
            if self._head_conn is not None:
                self._head_conn.close()
                self._head_conn = None
            raise
        return gtid, parse_gtid(gtid)[2]

    def _skip_past(self, lost: PositionLost) -> bool:
        """After the source's log lost the follower's position: go on from the oldest kept
        load dumped after it, if there is one (the changes in between are lost for good
        whatever the follower does; the loads dumped before cannot be kept fresh, and
        ``kept_from`` says so). False if there is none."""
        later = [p for p in kept_positions(self.catalog.loads.loads())
                 if p.source == self.source and p.seq > self.seq]
        if not later:
            return False
        to = min(later, key=lambda p: p.seq)
        message = (f"{lost}. A later load's dump is kept: the follower goes on from its "
                   f"position, GTID {to.gtid}; the loads dumped before it cannot be kept fresh")
        self.report(message)
        self._say("catching-up", message)
        self.catalog.changes.skip_to(self.source, to.gtid, to.seq)
        return True

    def _prune(self) -> None:
        """Forget the changes no kept day needs (at or before the oldest kept dump)."""
        self._pruned = time.monotonic()
        try:
            floor = kept_position(self.catalog.loads.loads(), self.source,
                                  source_db.where(self.config))
        except DeblError as exc:  # every load dropped meanwhile (a bench's clean slate)
            self.report(f"nothing forgotten: {exc}")
            return
        forgotten = self.catalog.changes.prune(self.source, floor.seq)
        if forgotten:
            self.report(f"forgot {forgotten:,} changes at or before GTID {floor.gtid} (the "
                        "oldest kept load's dump): no kept day needs them")

    def _progress(self, now: float) -> None:
        r = self.result
        changes, transactions, batches = (r.changes - self._last_progress[0],
                                          r.transactions - self._last_progress[1],
                                          r.batches - self._last_progress[2])
        seconds = now - self._progress_at if self._progress_at else 0.0
        self._progress_at, self._last_progress = now, (r.changes, r.transactions, r.batches)
        head = self.head
        behind = f", {head[1] - self.seq:,} transaction(s) behind its head {head[0]}" \
            if head is not None and head[1] > self.seq else ", at the source's head"
        rate = f" in the last {seconds:.0f} s" if seconds else ""
        self.report(f"{self.state}: GTID {self.gtid}{behind}; {changes:,} changes of "
                    f"{transactions:,} transactions in {batches:,} catalog transactions{rate}")

    def _keep_lock(self) -> None:
        """Make sure the follower still holds its lock (see gen_HF's ``_keep_lock``)."""
        if self._lock.held():
            return
        self._lock.release()
        again = self.catalog.named_lock(self._lock.name)
        if again is None:
            raise FollowerLockHeld(f"the follower lost its MySQL lock {self._lock.name} (the "
                                   "server closed its session) and another follower holds it "
                                   f"now: this one stops. {self._held_by()}")
        self._lock = again

    def _held_by(self) -> str:
        rows = [f for f in self.catalog.changes.followers() if f.state != "stopped"]
        who = "; ".join(f"source {f.source}: host {f.host}, pid {f.pid}, state {f.state}, last "
                        f"sign of life {time.time() - f.heartbeat:,.0f} s ago" for f in rows)
        return (f"another `debl follow` is running on this dataset (MySQL database "
                f"{self.config.mysql.database!r}, lock {LOCK}.{self.config.mysql.database} is "
                f"held){': ' + who if who else ''}; one follower per dataset captures every "
                "change, stop that one first to start another")

    # -- the source's id, errors said

    def _source_id(self) -> str:
        conn = source_db.connect(self.config)
        try:
            with conn.cursor() as cur, source_db.errors(self.config, "the read of its id"):
                state = source_db.init_state(cur, self.config.source_db.table)
        finally:
            conn.close()
        if state is None:
            raise DeblError(
                f"{source_db.where(self.config)} has never dumped its table "
                f"`{self.config.source_db.table}` (no row in debl_source_state): no load can "
                "come from it, so there is nothing to follow. Dump it (`debl source dump "
                "DIR`), load the dump (`debl load DIR`), then start `debl follow`")
        return state.source_id

    def _say(self, state: str, error: str | None = None) -> None:
        """The follower's state in its row, if the catalog answers (it may be what failed)."""
        try:
            self.catalog.changes.report(self.source, state, error)
        except ServiceError:
            pass

    def _report_retry(self, retry: RetryCallState) -> None:
        outcome, action = retry.outcome, retry.next_action
        assert outcome is not None and action is not None  # (before a sleep: both are known)
        exc, pause = outcome.exception(), action.sleep
        message = (f"{exc}; retrying in {pause:.1f} s (attempt {retry.attempt_number}): "
                   f"nothing is lost, capture resumes at GTID {self.gtid}")
        self.report(message)
        self._say("catching-up", message)

    # Failures in a row since the source's log was last read and the catalog last written:
    # the pause grows with them (0.5 s, 1, 2, ... at most MAX_PAUSE_S) and starts again after
    # a recovery.

    def _failed(self) -> None:
        self._failures += 1
        if self._failing_since is None:
            self._failing_since = time.monotonic()

    def _pause(self, retry: RetryCallState) -> float:
        return min(MAX_PAUSE_S, 0.5 * 2 ** max(0, self._failures - 1))

    def _gives_up(self, retry: RetryCallState) -> bool:
        """With until_caught_up: stop retrying once failures have lasted service_timeout."""
        since = self._failing_since
        return since is not None and time.monotonic() - since >= self.config.service_timeout
