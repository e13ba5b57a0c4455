"""The HBase link store, through the Thrift1 server (happybase).

``get_link_list`` is one bounded range scan over ``hbase_layout.scan_bounds``: the row key puts
one ``(id1, link_type)`` together, newest first, ties by id2 descending, so the scan returns
rows already in the answer's order. Hidden rows are dropped by the region server (a
``ValueFilter`` on the visibility byte that leads the cell value), and the scan asks for exactly
``offset + limit`` rows: a heavy id1 with a million links costs a default query at most
``offset + limit`` rows read and shipped, never the whole list.

``count_link`` counts a list's visible rows on the region server (the same filter, keys only);
``multiget_link`` scans the list and keeps the asked id2s, hidden rows included (``time`` leads
``id2`` in the row key, so a link has no key of its own to get).

``write_links`` is the simple put path (tests and the ``batchPut-hbase`` baseline; ``gen_HF``
bulk-loads HFiles instead). Since ``time`` is part of the row key, one link key may already be
stored under another row key: the write reads the stored rows of each ``(id1, link_type)``,
skips a new row that loses the merge rule, and deletes the stored row key that a winner
replaces. Every cell is written with ``hbase_layout.CELL_TS``.

Pitfalls:

- Thrift1 cannot pre-split a table (its ``createTable`` takes no split keys). ``create_table``
  here creates an unsplit table for tests and the put path; the bulk-load side pre-splits at
  bucket boundaries through the JVM admin API.
- The table is emptied by dropping and re-creating it (``reset``), never by deleting rows: a
  delete marker hides every cell with a timestamp at or below its own until a major compaction,
  so cells written later with ``CELL_TS`` would stay invisible.
- One store object is shared by many threads: calls borrow a connection from a
  ``happybase.ConnectionPool``. A connection that failed in the Thrift layer (``TSocket read 0
  bytes`` after a server restart) is replaced by the pool; the call is then retried once. Every
  call here is idempotent, writes included.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

import happybase
from happybase.table import TScan  # the Thrift struct happybase itself uses
from thriftpy2.thrift import TException
from thriftpy2.transport import TTransportException
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_fixed

from debl.measure import request_cost
from debl.config import Config
from debl.config.values import check_identifier
from debl.errors import ServiceError
from debl.format.link import (DEFAULT_LIMIT, MAX_TIME, Link, Origin, check_ids, check_query,
                              merge_batch, select_id2s)
from debl.retry import retried
from debl.store.base import LinkStore
from debl.store.hbase_layout import (CELL_TS, COLUMN, FAMILY, cell_value, decode, row_key,
                                     id1_boundary, scan_bounds)

DROP_ATTEMPTS = 5

T = TypeVar("T")


def _thrift_message(exc: TException) -> str:
    """What the server said, as text: a Thrift IOError carries the Java trace as bytes."""
    message = getattr(exc, "message", None) or str(exc)
    return message.decode("utf-8", "replace") if isinstance(message, bytes) else message


def _remote_classes(exc: BaseException) -> set[str]:
    """The simple class names of the Java exception chain behind a Thrift IOError.

    Thrift1's IOError has no class field: the server sends the whole Java trace as its
    message, the exception's class first and each cause on a ``Caused by:`` line. The names
    are read from those places only, never from the text of a message."""
    if not isinstance(exc, TException):
        return set()
    lines = _thrift_message(exc).splitlines()
    heads = lines[:1] + [line.removeprefix("Caused by: ") for line in lines
                         if line.startswith("Caused by: ")]
    return {head.split(":", 1)[0].strip().rsplit(".", 1)[-1] for head in heads if head.strip()}

# Server-side filters (HBase filter language; the value is compared as raw bytes).
_VISIBLE = b"ValueFilter(=, 'binaryprefix:\x01')"  # cell value starts with visibility 1
_KEYS_ONLY = b"FirstKeyOnlyFilter() AND KeyOnlyFilter()"
_VISIBLE_KEYS = _VISIBLE + b" AND KeyOnlyFilter()"  # the visible rows' keys alone

_MAX_CACHING = 10000  # rows per scanner RPC: ~1 MB of links, one round trip for a default query
_SCAN_PAGE = 10000
_PUT_BATCH = 1000
_LOST = (TTransportException, socket.error, EOFError)


def _lost(exc: BaseException) -> bool:
    """A connection broken in the Thrift transport (``TSocket read 0 bytes`` after a Thrift
    restart, a broken pipe); not a timeout: the server took the call and hangs."""
    return isinstance(exc, _LOST) and not isinstance(exc, TimeoutError)


def _refused(exc: BaseException) -> bool:
    """An error the server answered with (a Thrift IOError), not a lost transport."""
    return isinstance(exc, TException) and not isinstance(exc, TTransportException)


# A Thrift transport error: the pool has already replaced the broken connection (or failed to:
# then the retry fails the same way and the error names the server); the call again, once.
RETRY_LOST_TRANSPORT = Retrying(retry=retry_if_exception(_lost), stop=stop_after_attempt(2),
                                reraise=True)
# A drop the server refused: another client may be dropping the same table (HBase then says
# TableNotFoundException, TableNotEnabledException or, from Thrift's own check, a bare
# IOException "table does not exist"), so the table is looked at again every 0.5 s, dropped if
# still there, DROP_ATTEMPTS times in all (docs/RELIABILITY.md, "Retries").
RETRY_DROPPED_MEANWHILE = Retrying(retry=retry_if_exception(_refused),
                                   stop=stop_after_attempt(DROP_ATTEMPTS), wait=wait_fixed(0.5),
                                   reraise=True)


class HBaseStore(LinkStore):
    """LinkStore on an HBase table (``config.hbase.table``, or *table*) via Thrift.

    Thread-safe: up to *pool_size* threads run calls at once, others wait for a connection
    (at most *acquire_timeout* seconds, then ServiceError). *timeout_ms* bounds each Thrift
    call. Both default to ``service_timeout``; a call that times out is not retried (the
    server is there but stuck: a retry would only double the wait).
    """

    def __init__(self, config: Config, table: str | None = None, pool_size: int = 32,
                 timeout_ms: int | None = None, acquire_timeout: float | None = None) -> None:
        self.config = config
        # a load's own table (debl.namespace) is longer than the configured base name
        self.table = config.hbase.table if table is None else check_identifier(table, "table")
        self._name = self.table.encode()
        self._pool_size = pool_size
        self._timeout_ms = (round(config.service_timeout * 1000) if timeout_ms is None
                            else timeout_ms)
        self._acquire_timeout = (config.service_timeout if acquire_timeout is None
                                 else acquire_timeout)
        self._pool: happybase.ConnectionPool | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ connections

    @property
    def _where(self) -> str:
        return f"HBase Thrift at {self.config.hbase.thrift_host}:{self.config.hbase.thrift_port}"

    def _get_pool(self) -> happybase.ConnectionPool:
        with self._lock:
            if self._pool is None:
                try:
                    # The pool opens its first connection at once: an unreachable server fails
                    # here, with a clear message, rather than in the middle of a query.
                    self._pool = happybase.ConnectionPool(
                        self._pool_size, host=self.config.hbase.thrift_host,
                        port=self.config.hbase.thrift_port, timeout=self._timeout_ms)
                except (*_LOST, TException) as exc:
                    raise ServiceError(f"{self._where}: cannot connect: {exc} (is it running? "
                                       "see `debl stack status`)") from exc
            return self._pool

    def _run(self, work: Callable[[happybase.Connection], T]) -> T:
        """Run *work* with a pooled connection; retry once on a lost connection. Its time, the
        wait for a connection included, is the calling thread's request's ``hbase`` time
        (``debl.measure.request_cost``)."""
        started = time.perf_counter()
        try:
            return self._run_retried(work)
        finally:
            request_cost.charge(request_cost.HBASE, started)

    def _run_retried(self, work: Callable[[happybase.Connection], T]) -> T:
        try:
            return retried(RETRY_LOST_TRANSPORT, self._run_once, work)
        except happybase.NoConnectionsAvailable as exc:
            raise ServiceError(f"{self._where}: no free connection in the pool of "
                               f"{self._pool_size} after {self._acquire_timeout:.0f} s") from exc
        except TimeoutError as exc:  # socket.timeout: the server took the call and hangs
            raise ServiceError(f"{self._where}: no answer within {self._timeout_ms / 1000:g}"
                               " s (service_timeout); is HBase up? see `debl stack "
                               "status`") from exc
        except _LOST as exc:
            raise ServiceError(f"{self._where}: connection lost: {exc} (is it running? "
                               "see `debl stack status`)") from exc
        except TException as exc:
            message = _thrift_message(exc)
            if "TableNotFoundException" in _remote_classes(exc):
                raise ServiceError(f"{self._where}: table {self.table!r} does not exist "
                                   "(create it with create_table() or reset(), or load "
                                   "data)") from exc
            raise ServiceError(f"{self._where}: {type(exc).__name__}: "
                               f"{message.splitlines()[0] if message else ''} (is HBase "
                               "up? see `debl stack status`)") from exc

    def _run_once(self, work: Callable[[happybase.Connection], T]) -> T:
        with self._get_pool().connection(timeout=self._acquire_timeout) as conn:
            return work(conn)

    def close(self) -> None:
        """Close every pooled connection. Idempotent; a later call opens a new pool.

        happybase's pool has no close(): its connections are taken from its queue here.
        Call it when no other thread is using the store."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is None:
            return
        while True:
            try:
                conn = pool._queue.get_nowait()
            except Exception:  # queue.Empty: all taken
                break
            conn.close()

    # ------------------------------------------------------------------ schema

    def table_exists(self) -> bool:
        return self._run(lambda conn: self._name in conn.tables())

    def create_table(self) -> None:
        """Create the table (family ``l``, one version) if missing, without pre-splits.

        Thrift1 cannot pre-split; the bulk-load side creates the pre-split table via the JVM."""
        def work(conn: happybase.Connection) -> None:
            if self._name not in conn.tables():
                conn.create_table(self._name, {FAMILY.decode(): dict(max_versions=1)})
        self._run(work)

    def drop_table(self) -> None:
        """Drop the table if it exists. Another process may drop it at the same moment (a
        load's cleanup and the gen_HF service's): a table that is gone, or being disabled by
        the other, counts as dropped once it no longer exists."""
        def drop(conn: happybase.Connection) -> None:
            if self._name in conn.tables():
                conn.delete_table(self._name, disable=True)
        self._run(lambda conn: retried(RETRY_DROPPED_MEANWHILE, drop, conn))

    # ------------------------------------------------------------------ LinkStore

    def get_link_list(self, id1: int, link_type: int, min_time: int = 0,
                      max_time: int = MAX_TIME, offset: int = 0,
                      limit: int = DEFAULT_LIMIT) -> list[Link]:
        check_query(id1, link_type, min_time, max_time, offset, limit)
        bounds = scan_bounds(id1, link_type, min_time, max_time)
        if bounds is None or limit == 0:
            return []
        start, stop = bounds
        want = offset + limit

        rows = self._run(lambda conn: self._scan_rows(conn, start, stop, want, _VISIBLE))
        return [link for _, link in rows[offset:]]

    def count_link(self, id1: int, link_type: int) -> int:
        """The visible rows of the list, counted by the region server's scan: the visibility
        filter, keys only (no value crosses Thrift), every row of the list read."""
        check_ids(id1, link_type)
        start, stop = scan_bounds(id1, link_type)

        def work(conn: happybase.Connection) -> int:
            return sum(map(len, self._batches(conn, start, stop, None, _VISIBLE_KEYS)))
        return self._run(work)

    def multiget_link(self, id1: int, link_type: int, id2s: Iterable[int]) -> list[Link]:
        """The list's rows of the id2s, hidden ones included. Pitfall: ``time`` leads ``id2``
        in the row key, so a link cannot be got by its key: the whole list is scanned (a heavy
        id1's multiget costs its whole list)."""
        id2s = check_ids(id1, link_type, id2s)
        if not id2s:
            return []
        start, stop = scan_bounds(id1, link_type)
        rows = self._run(lambda conn: self._scan_rows(conn, start, stop))
        return select_id2s((link for _, link in rows), id2s)

    def scan_newest_first(self, id1: int, link_type: int, min_time: int = 0) -> Iterator[Link]:
        """Pages of 10,000 rows, each page its own scanner, so no connection is held between
        pages and an abandoned iterator leaves nothing open."""
        bounds = scan_bounds(id1, link_type, min_time, MAX_TIME)
        if bounds is None:
            return
        start, stop = bounds
        while True:
            rows = self._scan(start, stop, _SCAN_PAGE)
            yield from (link for _, link in rows)
            if len(rows) < _SCAN_PAGE:
                return
            start = rows[-1][0] + b"\x00"  # the smallest key after the last one read

    def scan_id1_range(self, k_lo: int, k_hi: int) -> Iterator[Link]:
        """Every row with k_lo <= id1 <= k_hi (a bucket's key range), in row key order, paged
        like scan_newest_first."""
        start, stop = id1_boundary(k_lo), id1_boundary(k_hi + 1)
        while True:
            rows = self._scan(start, stop, _SCAN_PAGE)
            yield from (link for _, link in rows)
            if len(rows) < _SCAN_PAGE:
                return
            start = rows[-1][0] + b"\x00"

    def _scan(self, start: bytes, stop: bytes, limit: int) -> list[tuple[bytes, Link]]:
        return self._run(lambda conn: self._scan_rows(conn, start, stop, limit))

    def _scan_rows(self, conn: happybase.Connection, start: bytes, stop: bytes,
                   limit: int | None = None, filter: bytes | None = None,
                   ) -> list[tuple[bytes, Link]]:
        """At most *limit* rows of [start, stop), decoded, in key order."""
        return [(r.row, decode(r.row, r.columns[COLUMN].value))
                for batch in self._batches(conn, start, stop, limit, filter) for r in batch]

    def _batches(self, conn: happybase.Connection, start: bytes, stop: bytes,
                 limit: int | None, filter: bytes | None) -> Iterator[list]:
        """The scanner's batches of Thrift rows of [start, stop), at most *limit* rows in all;
        consume them all (the scanner is closed at the end).

        The Thrift scanner is driven directly rather than through ``Table.scan``: a batch
        shorter than asked means the scanner is exhausted (the server's ``next(n)`` fills the
        batch while rows remain), so a short list costs open + one fetch + close, not a
        further empty fetch: a quarter fewer round trips on the commonest query."""
        client = conn.client
        scan_id = client.scannerOpenWithScan(
            self._name, TScan(startRow=start, stopRow=stop, columns=[COLUMN],
                              caching=min(limit or _MAX_CACHING, _MAX_CACHING),
                              filterString=filter), {})
        got = 0
        try:
            while limit is None or got < limit:
                ask = _MAX_CACHING if limit is None else min(_MAX_CACHING, limit - got)
                batch = client.scannerGetList(scan_id, ask)
                yield batch
                got += len(batch)
                if len(batch) < ask:
                    break
        finally:
            client.scannerClose(scan_id)

    def write_links(self, links: Iterable[tuple[Link, Origin]]) -> int:
        n, winners = merge_batch(links)
        lists: dict[tuple[int, int], list[Link]] = defaultdict(list)
        for link in winners.values():
            lists[(link.id1, link.link_type)].append(link)
        if lists:
            self._run(lambda conn: self._write_lists(conn, lists))
        return n

    def _write_lists(self, conn: happybase.Connection,
                     lists: dict[tuple[int, int], list[Link]]) -> None:
        table = conn.table(self._name)
        with table.batch(batch_size=_PUT_BATCH, timestamp=CELL_TS) as batch:
            for (id1, link_type), new_links in sorted(lists.items()):
                start, stop = scan_bounds(id1, link_type)  # every row of the list
                stored: dict[int, list[tuple[bytes, Link]]] = defaultdict(list)
                for row, old in self._scan_rows(conn, start, stop):
                    stored[old.id2].append((row, old))
                for link in new_links:
                    olds = stored.get(link.id2, [])
                    if olds and (link.time, link.version) < max((o.time, o.version)
                                                                for _, o in olds):
                        continue  # the stored row wins
                    key = row_key(link)
                    batch.put(key, {COLUMN: cell_value(link)})
                    for row, _ in olds:
                        if row != key:  # the same key at an older time: replaced
                            batch.delete(row, columns=[COLUMN])

    def count(self) -> int:
        def work(conn: happybase.Connection) -> int:
            scan = conn.table(self._name).scan(filter=_KEYS_ONLY, batch_size=_MAX_CACHING)
            return sum(1 for _ in scan)
        return self._run(work)

    def reset(self) -> None:
        """Drop the table if it exists and create it empty (unsplit): a few seconds."""
        def work(conn: happybase.Connection) -> None:
            if self._name in conn.tables():
                conn.delete_table(self._name, disable=True)
            conn.create_table(self._name, {FAMILY.decode(): dict(max_versions=1)})
        self._run(work)

