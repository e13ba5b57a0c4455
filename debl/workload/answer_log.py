"""The answer log of ``debl query --answer-log DIR``: per read the client sent, what the check
of fresh answers needs (docs/FRESHNESS.md, "The checker"): the operation and its arguments, the
client's ``CLOCK_MONOTONIC`` instants just before sending and just after the answer, and a
64-bit digest of the answer, never its rows.

One file per client process, ``answers-pK.bin`` (K its index), in a directory that holds no
other run's logs. Binary, little-endian:

- a header: ``MAGIC``, a 4-byte length, then that many bytes of JSON (the process, its pid,
  its threads, the clock, the format, get_link_list's arguments, which the client always sends
  at their defaults);
- blocks, each ``BLOCK`` (``b"BLK1"``, the number of records, the number of id2s), the records
  (``RECORD``: 56 bytes each) and the id2s of its multiget_links (8 bytes each, in record
  order). A thread writes its block when its buffer is full and at its end; a process killed
  meanwhile leaves a last block cut short, which the reader leaves out and counts.

The digest (``answer_digest``): for get_link_list and multiget_link the first 8 bytes of
BLAKE2b over the rows in the order given, each as its input line (``Link.to_line``), with the
number of rows beside it; for count_link the count itself. The checker computes the same from
the source's rows: an answer that differs from them in one byte, one row or the order differs
in its digest except with probability 2^-64.

Pitfall: ``sent_ns`` is the instant the request was sent, not the open loop's intended instant
(the latency's start): a request sent late was still sent after every write acknowledged before
it, and the checker's lower bound counts from the sending.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from debl.errors import ConfigError
from debl.format.link import DEFAULT_LIMIT, MAX_TIME, Link
from debl.workload.mix import COUNT_LINK, READ_OPS

MAGIC = b"DEBLANS1"
FORMAT = 1
_HEADER_LEN = struct.Struct("<I")
BLOCK = struct.Struct("<4sII")  # b"BLK1", records, id2s
_BLOCK_TAG = b"BLK1"
_RECORD = struct.Struct("<qqqqQIHHBB6x")
RECORD = np.dtype({"names": ["sent_ns", "recv_ns", "id1", "link_type", "digest", "rows",
                             "n_id2", "thread", "op", "ok"],
                   "formats": ["<i8", "<i8", "<i8", "<i8", "<u8", "<u4", "<u2", "<u2", "u1",
                               "u1"],
                   "offsets": [0, 8, 16, 24, 32, 40, 44, 46, 48, 49], "itemsize": _RECORD.size})
_LINE = b"%d\t%d\t%d\t%d\t%s\t%d\t%d\n"  # Link.to_line's, applied to every row at C speed
_FLUSH_BYTES = 64 << 10  # a thread's buffer, written as one block when it is this full
_COUNT = READ_OPS.index(COUNT_LINK)
_MAX_ROWS = (1 << 32) - 1
_FILE = "answers-p{}.bin"
_GLOB = "answers-p*.bin"


def rows_digest(rows: Sequence[Link]) -> int:
    """The 64-bit digest of a list of links in its order (see the module)."""
    lines = b"".join(map(_LINE.__mod__, rows))
    return int.from_bytes(hashlib.blake2b(lines, digest_size=8).digest(), "little")


def answer_digest(op: int, result: Any) -> tuple[int, int]:
    """``(digest, rows)`` of the answer *result* of the read ``READ_OPS[op]``: count_link's
    count and 0; a list's digest and its length."""
    if op == _COUNT:
        return int(result), 0
    rows = result if result is not None else ()
    return rows_digest(rows), min(len(rows), _MAX_ROWS)


def prepare_dir(directory: Path | str) -> Path:
    """The answer logs' directory, made if missing; ConfigError if it is a file or already
    holds answer logs (another run's would mix with this one's)."""
    path = Path(directory)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"--answer-log {path}: not a directory")
    path.mkdir(parents=True, exist_ok=True)
    found = sorted(path.glob(_GLOB))
    if found:
        raise ConfigError(f"--answer-log {path} already holds the answer logs of a run "
                          f"({len(found)} file(s), e.g. {found[0].name}): give an empty "
                          "directory, or move them away")
    return path


class AnswerLog:
    """The answer log of one client process, *process*, in *directory* (made ready by
    ``prepare_dir``); ``thread(t)`` gives each requester thread its buffer. Thread-safe; close
    it after the threads end."""

    def __init__(self, directory: Path | str, process: int, threads: Sequence[int]):
        self.path = Path(directory) / _FILE.format(process)
        self._lock = threading.Lock()
        header = json.dumps({"format": FORMAT, "process": process, "pid": os.getpid(),
                             "threads": list(threads), "clock": "CLOCK_MONOTONIC",
                             "get_link_list": {"min_time": 0, "max_time": MAX_TIME,
                                               "offset": 0, "limit": DEFAULT_LIMIT}}).encode()
        try:
            self._file: BinaryIO = open(self.path, "xb")
        except OSError as exc:
            raise ConfigError(f"cannot write the answer log {self.path}: {exc.strerror}") from exc
        self._file.write(MAGIC + _HEADER_LEN.pack(len(header)) + header)
        self._file.flush()  # a process killed before its first block leaves its header

    def thread(self, thread: int) -> "ThreadLog":
        return ThreadLog(self, thread)

    def write_block(self, records: bytearray, count: int, id2s: list[int]) -> None:
        block = BLOCK.pack(_BLOCK_TAG, count, len(id2s)) + records
        if id2s:
            block += struct.pack(f"<{len(id2s)}q", *id2s)
        with self._lock:
            if self._file.closed:  # a thread stuck past the run's end (a stopped run): lost
                return
            self._file.write(block)
            self._file.flush()  # a killed process loses at most the blocks being filled

    def close(self) -> None:
        with self._lock:
            self._file.close()


class ThreadLog:
    """One requester thread's buffer of records; ``add`` per answer, ``flush`` at its end."""

    def __init__(self, log: AnswerLog, thread: int):
        self.log, self.thread = log, thread
        self._records = bytearray()
        self._count = 0
        self._id2s: list[int] = []

    def add(self, op: int, id1: int, link_type: int, id2s: Sequence[int], sent_ns: int,
            recv_ns: int, result: Any, ok: bool) -> None:
        """One read: ``READ_OPS[op]`` on (id1, link_type) (and multiget_link's *id2s*), sent at
        *sent_ns*, answered at *recv_ns* with *result* (or failed: *ok* False)."""
        digest, rows = answer_digest(op, result) if ok else (0, 0)
        self._records += _RECORD.pack(sent_ns, recv_ns, id1, link_type, digest, rows,
                                      len(id2s), self.thread, op, ok)
        self._id2s.extend(id2s)
        self._count += 1
        if len(self._records) >= _FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        if self._count:
            self.log.write_block(self._records, self._count, self._id2s)
            self._records, self._count, self._id2s = bytearray(), 0, []


@dataclass
class Answers:
    """The answer logs of a run, read back: ``records`` (``RECORD`` fields, every process's in
    file order), ``process`` per record, the multiget_links' id2s (``id2s``, a record's
    starting at ``id2_at``), the files read and what was left out (a block cut short)."""

    records: np.ndarray
    process: np.ndarray
    id2s: np.ndarray
    id2_at: np.ndarray
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.records)

    def id2s_of(self, i: int) -> tuple[int, ...]:
        at = int(self.id2_at[i])
        return tuple(self.id2s[at:at + int(self.records["n_id2"][i])].tolist())


def read_answer_log(path: Path | str
                    ) -> tuple[dict | None, np.ndarray, np.ndarray, str | None]:
    """One process's log: its header, its records, its id2s, and a note if its last block was
    cut short (left out). A file cut inside its header (a process killed as it opened it) has
    no header (None), no record and a note. ConfigError if it is not an answer log."""
    path = Path(path)
    data = path.read_bytes()
    if not MAGIC.startswith(data[:len(MAGIC)]):
        raise ConfigError(f"{path} is not an answer log of `debl query --answer-log`")
    at = len(MAGIC) + _HEADER_LEN.size
    length = _HEADER_LEN.unpack_from(data, len(MAGIC))[0] if len(data) >= at else None
    if length is None or len(data) < at + length:
        return (None, np.zeros(0, RECORD), np.zeros(0, "<i8"),
                f"{path.name}: cut inside its header ({len(data)} bytes: the process was "
                "stopped before it logged an answer), left out")
    try:
        header = json.loads(data[at:at + length])
    except ValueError:
        raise ConfigError(f"{path}: its header is not JSON: the file is damaged") from None
    if not isinstance(header, dict) or not isinstance(header.get("process"), int):
        raise ConfigError(f"{path}: its header names no process: the file is damaged")
    if header.get("format") != FORMAT:
        raise ConfigError(f"{path}: answer log format {header.get('format')!r}, this debl "
                          f"reads {FORMAT}")
    at += length
    records, id2s, note = [], [], None
    while at < len(data):
        if len(data) - at < BLOCK.size:
            note = f"{path.name}: its last block is cut short ({len(data) - at} bytes), left out"
            break
        tag, n, m = BLOCK.unpack_from(data, at)
        end = at + BLOCK.size + n * RECORD.itemsize + m * 8
        if tag != _BLOCK_TAG:
            raise ConfigError(f"{path}: no block at byte {at}: the file is damaged")
        if end > len(data):
            note = (f"{path.name}: its last block ({n} answers) is cut short (the process "
                    "was stopped while writing it), left out")
            break
        start = at + BLOCK.size
        records.append(np.frombuffer(data, RECORD, n, start))
        id2s.append(np.frombuffer(data, "<i8", m, start + n * RECORD.itemsize))
        at = end
    return (header, np.concatenate(records) if records else np.zeros(0, RECORD),
            np.concatenate(id2s) if id2s else np.zeros(0, "<i8"), note)


def read_answer_logs(*directories: Path | str) -> Answers:
    """Every process's answer log in *directories* (one a client run); ConfigError if one
    holds none. The processes are numbered on over the directories: the first run's 0..P-1,
    the next run's from P (each a client of its own: no going back is checked per process)."""
    parts, processes, id2s, notes, files = [], [], [], [], []
    base = 0
    for directory in map(Path, directories):
        paths = sorted(directory.glob(_GLOB))
        if not paths:
            raise ConfigError(f"{directory} holds no answer log (answers-p*.bin): give the "
                              "directory of `debl query --answer-log`")
        top = base
        for path in paths:
            header, records, ids, note = read_answer_log(path)
            # a log without its header is numbered by its name (_FILE): it holds no answer
            number = (int(header["process"]) if header is not None
                      else int(path.stem.removeprefix("answers-p")))
            process = base + number
            top = max(top, process + 1)
            parts.append(records)
            processes.append(np.full(len(records), process, dtype=np.int32))
            id2s.append(ids)
            files.append(path.name if len(directories) == 1 else str(path))
            if note:
                notes.append(note)
        base = top
    if not parts:
        raise ConfigError("no answer log given: the directory of `debl query --answer-log`")
    records = np.concatenate(parts)
    counts = records["n_id2"].astype(np.int64)
    return Answers(records, np.concatenate(processes), np.concatenate(id2s),
                   np.cumsum(counts) - counts, files, notes)
