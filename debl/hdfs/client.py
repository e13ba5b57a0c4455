"""DeBL's one HDFS client (docs/RUNTIME.md, "HDFS from Python"): writes, listings, status,
content summaries, renames, deletes and reads, over HDFS's own protocols through ``hdfs-native``
(a Rust client from PyPI: the NameNode's RPC, the DataNodes' data-transfer protocol), and the
raw route's reads of this host's block files (``debl.hdfs.local_reads``, Hadoop's RPC for what
hdfs-native cannot ask).

Pitfalls:

- Every call of hdfs-native runs on the client's threads and waits at most *timeout*
  (``debl.hdfs.calls``): the library has no timeout for a server that hangs. ``close()`` (or
  ``with``) waits for the calls in flight; a client made for one call costs one thread.
- A write is not atomic: ``write_atomic`` writes to a temporary name and renames it over the
  final one, so that a killed copy never leaves a half file under the final name. A write that
  fails leaves no file: it is closed (its lease released) and deleted.
- A file is closed by asking the NameNode to complete it until it says yes: hdfs-native asks
  again after 500 ms, and on the stack's one DataNode about half the closes wait so
  (docs/RUNTIME.md, "HDFS from Python"): ``start_write_atomic`` lets a copy send its next file
  meanwhile.
- An open file reads by block: it gives the bytes it had when it was opened even after its path
  is renamed or rewritten, until its blocks are deleted (then the read fails). Exact bytes, never
  a mix; but a caller that must notice a file gone checks the listing itself (the raw route
  does). One opened through its local block files keeps its bytes even then.
- Reading past a file's end panics in the Rust client (a BaseException): every read checks its
  range first.
"""

from __future__ import annotations

import builtins
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from hdfs_native import Client, WriteOptions

from debl.measure import request_cost
from debl.config import Config
from debl.errors import DeblError, ServiceError
from debl.hdfs import messages
from debl.hdfs.calls import CallThreads
from debl.hdfs.errors import (FileChanged, FileGone, HdfsTimeout, RpcError, native_error,
                               reason)
from debl.hdfs.files import HdfsFile
from debl.hdfs.local_reads import LocalBlocks, LocalFile
from debl.hdfs.rpc import NAMENODE, RpcConnection

# hdfs-native's settings (Hadoop's names): a NameNode that refuses the connection is an error
# within a second, as it was over WebHDFS, not after the library's default retries (minutes).
NATIVE_SETTINGS = {
    "dfs.client.failover.max.attempts": "2",
    "dfs.client.failover.sleep.base.millis": "100",
    "dfs.client.failover.sleep.max.millis": "400",
}
_SAFE_MODE = ("; the NameNode is in safe mode (it leaves it once its DataNodes have reported "
              "their blocks): retry in a few seconds")


@dataclass(frozen=True)
class OpenFile:
    """A file opened for ranged reads: the file as it was listed (``file``, its length checked
    at the opening), and either hdfs-native's reader of its blocks (``reader``) or its block
    files on this host (``local``)."""

    file: HdfsFile
    reader: Any = None
    local: LocalFile | None = None

    @property
    def path(self) -> str:
        return self.file.path

    @property
    def length(self) -> int:
        return self.file.length


class HdfsClient:
    """The client of the configured HDFS; thread-safe. *timeout* (default ``service_timeout``)
    bounds every wait for the NameNode or a DataNode; *threads* calls run at once (more wait
    their turn)."""

    def __init__(self, config: Config, timeout: float | None = None, threads: int = 4) -> None:
        self.uri = config.hdfs.uri
        self.server = urlparse(self.uri).netloc
        self.timeout = config.service_timeout if timeout is None else timeout
        self._config = config
        self._calls = CallThreads(self.server, self.timeout, threads)
        self._native_client: Client | None = None
        self._local: LocalBlocks | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        """Stop the threads once the calls in flight are done (at most *timeout*) and close the
        local reads' connections. Idempotent."""
        self._calls.close()
        if self._local is not None:
            self._local.close()

    def __enter__(self) -> HdfsClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def local(self) -> LocalBlocks | None:
        """The local block reads (``hdfs.local_reads``), or None when they are off."""
        if not self._config.hdfs.local_reads:
            return None
        with self._lock:
            if self._local is None:
                self._local = LocalBlocks(self._config, self.timeout)
            return self._local

    # ------------------------------------------------------------------ files and directories

    def status(self, path: str) -> HdfsFile | None:
        """*path*'s record, None when it does not exist."""
        try:
            return self.run([(self._status, (path,))], f"status of {path}")[0]
        except FileGone:
            return None

    def list(self, path: str) -> list[HdfsFile]:
        """The entries of the directory *path*; FileGone when it does not exist."""
        return self.run([(self._list, (path,))], f"list {path}")[0]

    def modified_ms(self, paths: Sequence[str]) -> builtins.list[int | None]:
        """Each path's modification time (epoch ms), None for a path that does not exist: one
        NameNode call each, in parallel. A directory's changes when an entry is created,
        deleted or renamed in it."""
        return self.run([(self._modified_ms, (path,)) for path in paths],
                        "status of " + ", ".join(paths))

    def size(self, path: str) -> int:
        """The bytes of every file under *path* (one replica's; 0 when it does not exist)."""
        try:
            return self._call(f"sum the bytes under {path}", path,
                              lambda: self._native().get_content_summary(path).length)
        except FileGone:
            return 0

    def mkdirs(self, path: str) -> None:
        """*path* and its missing parents made directories."""
        self._call(f"make the directory {path}", path,
                   lambda: self._native().mkdirs(path, 0o755, True), mutates=True)

    def delete(self, path: str, recursive: bool = False) -> bool:
        """Delete *path* (a directory's entries too when *recursive*); False when there was
        nothing to delete."""
        return self._call(f"delete {path}", path,
                          lambda: self._native().delete(path, recursive), mutates=True)

    def rename(self, src: str, dst: str, overwrite: bool = False) -> None:
        """Move *src* to *dst*, replacing a file at *dst* only when *overwrite* (in one step)."""
        self._call(f"rename {src} to {dst}", src,
                   lambda: self._native().rename(src, dst, overwrite), mutates=True)

    def in_safe_mode(self) -> bool:
        """Whether the NameNode is in safe mode (it refuses every change): asked over Hadoop's
        RPC, which hdfs-native does not offer. RpcError: it did not answer."""
        host, _, port = self.server.rpartition(":")
        connection = RpcConnection(host, int(port), NAMENODE, self.timeout)
        try:
            return connection.call("setSafeMode", messages.SetSafeModeRequestProto(
                action="SAFEMODE_GET", checked=False), messages.SetSafeModeResponseProto).result
        finally:
            connection.close()

    # ------------------------------------------------------------------ writes

    def write(self, path: str, data: bytes | Iterable[bytes], overwrite: bool = False) -> None:
        """Create *path* with *data* (bytes, or an iterable of byte blocks, each sent as it
        comes: the caller's iteration runs between the writes)."""
        self._closing(self._send(path, data, overwrite), path)()

    def write_atomic(self, path: str, data: bytes | Iterable[bytes]) -> None:
        """Write to ``path + '._COPYING_'`` then rename over *path*: never a half file."""
        self.start_write_atomic(path, data)()

    def start_write_atomic(self, path: str,
                           data: bytes | Iterable[bytes]) -> Callable[[], None]:
        """``write_atomic`` in two steps: returns once *data* is sent, the file's close and
        rename under way on the client's threads, with a function that waits for them (and
        raises their error). A close may wait 0.5 s for the NameNode (the module's pitfalls):
        a copy sends its next file meanwhile."""
        tmp = path + "._COPYING_"
        return self._closing(self._send(tmp, data, overwrite=True), tmp, path)

    def _send(self, path: str, data: bytes | Iterable[bytes], overwrite: bool) -> Any:
        """*path* created and *data* sent: hdfs-native's writer, to close. A write that fails
        leaves no file (the module's pitfalls)."""
        what = f"write {path}"
        writer = self._call(what, path, lambda: self._native().create(
            path, WriteOptions(overwrite=overwrite, create_parent=True)), mutates=True)
        try:
            for block in (data,) if isinstance(data, (bytes, bytearray)) else data:
                if block:
                    self._call(what, path, writer.write, block)
        except HdfsTimeout:
            raise  # a server that hangs: cleaning up would wait as long again
        except BaseException:
            try:
                self._calls.run([(self._abandon, (writer, path))], f"clean up {path}")
            except Exception:  # noqa: BLE001 -- the write's own error is the one to raise
                pass
            raise
        return writer

    def _closing(self, writer: Any, path: str, rename_to: str | None = None) -> Callable[[], None]:
        """*writer*'s close started (then *path* renamed over *rename_to*), with the function
        that waits for it."""
        def close() -> None:
            try:
                writer.close()
            except BaseException:
                self._abandon(writer, path)
                raise
            if rename_to is not None:
                self._native().rename(path, rename_to, True)

        what = f"write {rename_to or path}"
        results = self._calls.start([(close, ())], what)

        def finished() -> None:
            try:
                results()
            except DeblError:
                raise
            except Exception as exc:  # noqa: BLE001 -- by its class: debl.hdfs.errors
                raise native_error(exc, what, path, self.server) from exc
        return finished

    def _abandon(self, writer: Any, path: str) -> None:
        """After a failed write: the file closed (its lease released: a later write of the
        path would be refused) and deleted, as far as HDFS lets."""
        for fn, args in ((writer.close, ()), (self._native().delete, (path, False))):
            try:
                fn(*args)
            except Exception:  # noqa: BLE001 -- the write's own error is the one to raise
                pass

    # ------------------------------------------------------------------ reads by path

    def read(self, path: str) -> bytes:
        """The whole of *path*."""
        reader = self._reader(path)
        return self._call(f"read {path}", path, _read_range, reader, path, 0, len(reader))

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        """Exactly *length* bytes of *path* from *offset*; ServiceError if the file ends
        first."""
        reader = self._reader(path)
        return self._call(f"read {path}", path, _read_range, reader, path, offset, length)

    def stream(self, path: str, block: int = 1 << 20, offset: int = 0,
               length: int | None = None) -> Iterator[bytes]:
        """The bytes of *path* (from *offset*, at most *length*), *block* at a time."""
        reader = self._reader(path)
        stop = len(reader) if length is None else min(len(reader), offset + length)
        for at in range(offset, stop, block):
            yield self._call(f"read {path}", path, _read_range, reader, path, at,
                             min(block, stop - at))

    def _reader(self, path: str) -> Any:
        return self._call(f"open {path}", path, lambda: self._native().read(path))

    # ------------------------------------------------------------------ opened files

    def open(self, path: str) -> OpenFile:
        """*path* opened for reads: FileGone if it does not exist."""
        return self.run([(self._open_path, (path,))], f"open {path}")[0]

    def read_many(self, ranges: Sequence[tuple[OpenFile, int, int]]) -> builtins.list[bytes]:
        """The bytes of each ``(file, offset, length)``, read in parallel (a local file's on
        the calling thread: a local disk read does not hang); the wait is the calling thread's
        request's ``hdfs`` time (``debl.measure.request_cost``), with the ranges."""
        started, datas = time.perf_counter(), []
        try:
            if all(f.local is not None for f, _, _ in ranges):
                datas = [read_file(*r) for r in ranges]
            else:
                datas = self._calls.run([(read_file, r) for r in ranges], "read " + ", ".join(
                    sorted({f.path for f, _, _ in ranges})))
            return datas
        finally:
            request_cost.charge_reads(started, len(ranges), sum(map(len, datas)))

    def run(self, calls: Sequence[tuple[Callable, tuple]], what: str) -> builtins.list:
        """Each ``fn(*args)`` on the client's threads (``CallThreads.run``); the wait is the
        calling thread's request's ``hdfs_meta`` time (a file opened, a status asked)."""
        with request_cost.Timed(request_cost.HDFS_META):
            return self._calls.run(calls, what)

    def list_located(self, directory: str) -> builtins.list[tuple[HdfsFile, Any]] | None:
        """With local reads, *directory*'s entries and their blocks in one NameNode call, on
        the calling thread (bounded by the timeout), for ``open_file``; None without local
        reads, for a directory that does not exist, or when the NameNode's answer cannot be had:
        the caller then lists with ``list``, whose errors name the cause."""
        local = self.local
        if local is None:
            return None
        try:
            return local.list(directory)
        except RpcError:
            return None

    def open_file(self, file: HdfsFile, located: Any = None) -> OpenFile:
        """*file* opened on the calling thread, unbounded: only inside a call given to ``run``;
        *located*: its blocks from ``list_located`` (else the NameNode is asked). FileGone: it
        does not exist; FileChanged: its length is not its listing's."""
        local = self.local
        if local is not None:
            try:
                opened = local.open(file, located)
            except RpcError:
                opened = None  # the network read below says what is wrong, in its words
            if opened is not None:
                return OpenFile(file, local=opened)
        try:
            reader = self._native().read(file.path)
        except DeblError:
            raise
        except Exception as exc:  # noqa: BLE001 -- by its class: debl.hdfs.errors
            raise native_error(exc, f"open {file.path}", file.path, self.server) from exc
        if len(reader) != file.length:
            raise FileChanged(f"HDFS: {file.path} changed while it was opened ({file.length} "
                              f"bytes listed, {len(reader)} opened)")
        return OpenFile(file, reader=reader)

    # ------------------------------------------------------------------ on the threads

    def _native(self) -> Client:
        with self._lock:
            if self._native_client is None:  # its Rust runtime starts here, on first use
                self._native_client = Client(self.uri, config=NATIVE_SETTINGS)
            return self._native_client

    def _call(self, what: str, path: str, fn: Callable, *args: Any, mutates: bool = False):
        """``fn(*args)`` on a thread, hdfs-native's error as DeBL's (a change refused while the
        NameNode is in safe mode says so)."""
        try:
            return self._calls.run([(fn, args)], what)[0]
        except DeblError:
            raise
        except Exception as exc:  # noqa: BLE001 -- by its class: debl.hdfs.errors
            error = native_error(exc, what, path, self.server)
            if mutates and type(exc) is RuntimeError and self._safe_mode_known():
                error = ServiceError(f"{error}{_SAFE_MODE}")
            raise error from exc

    def _safe_mode_known(self) -> bool:
        try:
            return self.in_safe_mode()
        except ServiceError:
            return False

    def _status(self, path: str) -> HdfsFile:
        try:
            return _record(self._native().get_file_info(path))
        except Exception as exc:  # noqa: BLE001 -- by its class: debl.hdfs.errors
            raise native_error(exc, f"give the status of {path}", path, self.server) from exc

    def _list(self, path: str) -> builtins.list[HdfsFile]:
        try:
            return [_record(s) for s in self._native().list_status(path)]
        except Exception as exc:  # noqa: BLE001 -- by its class: debl.hdfs.errors
            raise native_error(exc, f"list {path}", path, self.server) from exc

    def _modified_ms(self, path: str) -> int | None:
        try:
            return self._status(path).modification_time_ms
        except FileGone:
            return None

    def _open_path(self, path: str) -> OpenFile:
        return self.open_file(self._status(path))


def read_file(f: OpenFile, offset: int, length: int) -> bytes:
    """Exactly *length* bytes of the opened *f* from *offset*, on the calling thread, unbounded
    for a file read over the network: only inside a call given to ``HdfsClient.run``."""
    if f.local is None:
        try:
            return _read_range(f.reader, f.path, offset, length)
        except DeblError:
            raise
        except FileNotFoundError as exc:
            raise FileGone(f"HDFS: a block of {f.path} is gone") from exc
        except Exception as exc:  # noqa: BLE001 -- by its class: debl.hdfs.errors
            raise ServiceError(f"HDFS DataNode could not read {f.path} at {offset}: "
                               f"{reason(exc)}; is the stack up (`debl stack status`)?") from exc
    _check_range(f.path, f.length, offset, length)
    try:
        return f.local.read(offset, length)
    except OSError as exc:
        raise ServiceError(f"HDFS: the local block file of {f.path} could not be read at "
                           f"{offset}: {exc}") from exc


def _read_range(reader: Any, path: str, offset: int, length: int) -> bytes:
    """Exactly *length* bytes from hdfs-native's *reader* of *path* (checked first: a read past
    the end panics)."""
    _check_range(path, len(reader), offset, length)
    data = reader.read_range(offset, length) if length else b""
    if len(data) != length:
        raise ServiceError(f"HDFS read of {path} at {offset}: {len(data)} bytes instead of "
                           f"{length}: the file is shorter than expected (did it change?)")
    return data


def _check_range(path: str, size: int, offset: int, length: int) -> None:
    if offset < 0 or length < 0 or offset + length > size:
        raise ServiceError(f"HDFS read of {path} at {offset} for {length} bytes: the file has "
                           f"{size} bytes (did it change?)")


def _record(status: Any) -> HdfsFile:
    """hdfs-native's ``FileStatus`` as DeBL's record."""
    return HdfsFile(status.path, status.length, status.isdir, status.modification_time)
