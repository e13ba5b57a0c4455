"""Ranged reads of HDFS files over HDFS's own protocols (the ``hdfs-native`` client): the raw
route's reads (docs/COORDINATOR.md, "The raw route").

WebHDFS (``debl.webhdfs``) costs every read an HTTP request to the DataNode, which then opens the
file through the NameNode for it. Here a file is opened once (the NameNode's block locations,
``open``) and each read is one request of HDFS's data-transfer protocol to the DataNode, on a
pooled connection: a small fraction of the CPU over client, NameNode and DataNode per 64 KiB
read (docs/COORDINATOR.md, "The raw route", row "How it reaches HDFS", has the measurement). The
rest of DeBL keeps WebHDFS (writes, listings, status); this module only reads.

Pitfalls:

- hdfs-native has no timeouts: it retries a NameNode that is down for ever, and a DataNode that
  hangs holds a read for ever. So every call runs on one of this client's threads, and the caller
  waits at most *timeout* seconds for it: then ServiceError, and the thread stays stuck until the
  server answers (the threads are daemons: a stuck one never holds the process's exit).
- ``close`` waits for the calls in flight (at most *timeout*): a daemon thread still inside the
  native client when the interpreter shuts down is ended by a forced unwind through the Rust
  frames, which aborts the whole process (``FATAL: exception not rethrown``, exit 134) after it
  has done its work (issue 38.10). Only a call stuck past the timeout is left to that.
- An open file reads by block: it gives the bytes it had when it was opened even after its path
  is renamed or rewritten, until its blocks are deleted (then the read fails). Exact bytes, never
  a mix; but a caller that must notice a file gone checks the listing itself (``RawReader`` does).
- Reading past a file's end panics in the Rust client (a BaseException): ``read`` checks first.
- With ``hdfs.local_reads`` (the default) a file whose blocks are all on this host's DataNode is
  opened through its block files (``debl.hdfs_local``) and read by ``os.pread``, on the calling
  thread (a local disk read does not hang); the rest as above. A file opened so keeps its bytes
  even after its blocks are deleted (then the read over the network fails): the listing tells.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from hdfs_native import Client

from debl import request_cost
from debl.config import Config
from debl.errors import ServiceError
from debl.hadoop_rpc import RpcError
from debl.hdfs_local import Listed, LocalBlocks, LocalFile


class FileGone(ServiceError):
    """The NameNode says the path does not exist (anymore)."""


class HdfsTimeout(ServiceError):
    """HDFS did not answer a call within the timeout (the call's thread may still be stuck)."""


@dataclass(frozen=True)
class OpenFile:
    """A file opened for ranged reads: its block locations, as the NameNode gave them
    (``handle``), or its block files on this host (``local``)."""

    path: str
    length: int
    handle: Any  # hdfs_native.FileReader; None when local
    local: LocalFile | None = None


class _Call:
    """One call handed to a read thread; ``wait`` returns its result or raises its error."""

    __slots__ = ("fn", "args", "done", "result", "error")

    def __init__(self, fn: Callable, args: tuple) -> None:
        self.fn, self.args = fn, args
        self.done = threading.Lock()
        self.done.acquire()  # released by the thread that ran the call: cheaper than a Future
        self.result: Any = None
        self.error: BaseException | None = None

    def wait(self, timeout: float) -> bool:
        return self.done.acquire(timeout=timeout)


class NativeHDFS:
    """HDFS reads through hdfs-native, for the configured NameNode; thread-safe. *timeout*
    (default ``service_timeout``) bounds every wait for the NameNode or a DataNode; *threads*
    calls run at once (more wait their turn)."""

    def __init__(self, config: Config, timeout: float | None = None, threads: int = 16) -> None:
        self.uri = config.hdfs.uri
        self.timeout = config.service_timeout if timeout is None else timeout
        self.local = LocalBlocks(config, self.timeout) if config.hdfs.local_reads else None
        self._client = None
        self._client_lock = threading.Lock()
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._serve, daemon=True,
                                          name=f"debl-hdfs-read-{i}") for i in range(threads)]
        for thread in self._threads:
            thread.start()

    def close(self) -> None:
        """Stop the threads once the calls queued before are done, and wait for them (at most
        *timeout* in all; see the module's pitfalls). Idempotent."""
        for _ in self._threads:
            self._calls.put(None)
        deadline = time.monotonic() + self.timeout
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(max(deadline - time.monotonic(), 0.0))
        if self.local is not None:
            self.local.close()

    # ------------------------------------------------------------------ calls

    def open(self, path: str) -> OpenFile:
        """*path* opened for reads: FileGone if it does not exist."""
        return self.run([(self.open_file, (path,))], f"open {path}")[0]

    def modified_ms(self, paths: Sequence[str]) -> list[int | None]:
        """Each path's modification time (epoch ms), None for a path that does not exist: one
        NameNode call each, in parallel. A directory's changes when an entry is created,
        deleted or renamed in it."""
        return self.run([(self._modified_ms, (path,)) for path in paths],
                        "status of " + ", ".join(paths))

    def read(self, f: OpenFile, offset: int, length: int) -> bytes:
        """Exactly *length* bytes of *f* from *offset*."""
        return self.read_many([(f, offset, length)])[0]

    def read_many(self, ranges: Sequence[tuple[OpenFile, int, int]]) -> list[bytes]:
        """The bytes of each ``(file, offset, length)``, read in parallel; the wait is the
        calling thread's request's ``hdfs`` time (``debl.request_cost``), with the ranges."""
        started, datas = time.perf_counter(), []
        try:
            if all(f.local is not None for f, _, _ in ranges):
                datas = [read_file(*r) for r in ranges]
            else:
                datas = self._run([(read_file, r) for r in ranges],
                                  "read " + ", ".join(sorted({f.path for f, _, _ in ranges})))
            return datas
        finally:
            request_cost.charge_reads(started, len(ranges), sum(map(len, datas)))

    def run(self, calls: Sequence[tuple[Callable, tuple]], what: str) -> list:
        """Each ``fn(*args)`` on the threads; their results in order. The first error of a
        call is raised once every call has ended or the timeout has passed. The wait is the
        calling thread's request's ``hdfs_meta`` time (a file opened, a status asked)."""
        with request_cost.Timed(request_cost.HDFS_META):
            return self._run(calls, what)

    def _run(self, calls: Sequence[tuple[Callable, tuple]], what: str) -> list:
        pending = [_Call(fn, args) for fn, args in calls]
        if len(pending) == 1:
            self._calls.put(pending[0])
        else:
            for call in pending:
                self._calls.put(call)
        deadline = time.monotonic() + self.timeout
        for call in pending:
            if not call.wait(max(deadline - time.monotonic(), 0.0)):
                host = urlparse(self.uri).netloc
                raise HdfsTimeout(f"HDFS at {host} (NameNode or DataNode) did not answer within "
                                   f"{self.timeout:g} s ({what}); is the stack up "
                                   "(`debl stack status`)?")
        for call in pending:
            if call.error is not None:
                raise call.error
        return [call.result for call in pending]

    # ------------------------------------------------------------------ on the threads

    def _serve(self) -> None:
        while (call := self._calls.get()) is not None:
            try:
                call.result = call.fn(*call.args)
            except BaseException as exc:  # noqa: BLE001 -- handed to the caller, who raises it
                call.error = exc
            call.done.release()

    def _native(self):
        with self._client_lock:
            if self._client is None:
                self._client = Client(self.uri)  # its Rust runtime starts here, on first use
            return self._client

    def list_located(self, directory: str) -> list[Listed] | None:
        """With local reads, *directory*'s entries and their blocks in one NameNode call, on
        the calling thread (bounded by the timeout), for ``open_file``; None without local
        reads, for a directory that does not exist, or when the NameNode's answer cannot be had:
        the caller then lists over WebHDFS, whose errors name the cause."""
        if self.local is None:
            return None
        try:
            return self.local.list(directory)
        except (RpcError, ValueError, KeyError, IndexError):
            return None

    def open_file(self, path: str, located: bytes | None = None) -> OpenFile:
        """``open`` on the calling thread, unbounded: only inside a call given to ``run``;
        *located*: the file's blocks from ``list_located`` (else the NameNode is asked)."""
        if self.local is not None:
            try:
                local = self.local.open(path, located)
            except RpcError as exc:
                if "FileNotFoundException" in str(exc):
                    raise FileGone(f"HDFS: {path} does not exist") from exc
                local = None  # the network read below says what is wrong, in its words
            except (ValueError, KeyError, IndexError):
                local = None  # an answer this client does not read: the network read instead
            if local is not None:
                return OpenFile(path, local.length, None, local)
        try:
            handle = self._native().read(path)
        except FileNotFoundError as exc:
            raise FileGone(f"HDFS: {path} does not exist") from exc
        except Exception as exc:  # noqa: BLE001 -- the client's IOError, RuntimeError...
            raise ServiceError(f"HDFS could not open {path}: {_reason(exc)}; is the stack up "
                               "(`debl stack status`)?") from exc
        return OpenFile(path, len(handle), handle)


    def _modified_ms(self, path: str) -> int | None:
        try:
            return int(self._native().get_file_info(path).modification_time)
        except FileNotFoundError:
            return None
        except Exception as exc:  # noqa: BLE001 -- the client's IOError, RuntimeError...
            raise ServiceError(f"HDFS could not give the status of {path}: {_reason(exc)}; is "
                               "the stack up (`debl stack status`)?") from exc


def read_file(f: OpenFile, offset: int, length: int) -> bytes:
    """``read`` on the calling thread, unbounded: only inside a call given to ``run``."""
    if offset < 0 or length < 0 or offset + length > f.length:
        raise ServiceError(f"HDFS read of {f.path} at {offset} for {length} bytes: the file has "
                           f"{f.length} bytes (did it change?)")
    if f.local is not None:
        try:
            return f.local.read(offset, length)
        except OSError as exc:
            raise ServiceError(f"HDFS: the local block file of {f.path} could not be read at "
                               f"{offset}: {exc}") from exc
    try:
        data = f.handle.read_range(offset, length)
    except FileNotFoundError as exc:
        raise FileGone(f"HDFS: a block of {f.path} is gone") from exc
    except Exception as exc:  # noqa: BLE001 -- the client's IOError, RuntimeError...
        raise ServiceError(f"HDFS DataNode could not read {f.path} at {offset}: "
                           f"{_reason(exc)}; is the stack up (`debl stack status`)?") from exc
    if len(data) != length:
        raise ServiceError(f"HDFS read of {f.path} at {offset}: {len(data)} bytes instead of "
                           f"{length}: the file is shorter than expected (did it change?)")
    return data


def _reason(exc: BaseException) -> str:
    """The client's error in a line: its Rust debug dumps name every replica's protobuf."""
    text = (str(exc) or type(exc).__name__).splitlines()[0]
    if "All DataNodes failed" in text:
        return "no DataNode holding the block answered"
    return text[:200]
