"""The door to DeBL's JVM tasks (``debl.jobs``, loaders/jvm): every call from Python into Spark's
JVM goes through this module, with typed requests and results, and no other module touches
py4j or the JVM's handles.

- ``dist_ch``: one chunk bucketed, a ``DistChRequest`` out (slices, segments, bucket map, line
  limit) and a ``DistChReport`` back (per slice: the bucket files written, the lines refused,
  the lines too long, the per-file counts).
- ``bucket_hfiles`` (gen_HF's HFiles), ``create_presplit``, ``region_starts``, ``bulk_load``
  (HBase's client on the driver), ``job_group``.
- ``call`` turns what the JVM raised into DeBL's exceptions, chosen by the Java exceptions'
  classes (the exception, its causes, their superclasses), never by reading stack-trace text:
  ``JvmGone`` for a JVM that is gone, otherwise ``ServiceError`` worded by the innermost cause,
  with the next step when a service does not answer or a task ran out of heap.

A request goes out as one JSON document and a job's report comes back as one, read here only.
Why so much of each job is a JVM task rather than PySpark (a DataFrame of the slices calling a
JVM SQL function measured much slower for dist_ch): docs/ARCHITECTURE.md, "The JVM tasks".

Pitfalls:

- A report's checksums are sums mod 2^64 that the JVM holds as signed longs: read them here
  (``CHECKSUM_MOD``), nowhere else.
- Looking a JVM class up (``_jvm.debl.jobs.X``) is itself a call into the JVM: it goes inside
  ``call`` too, so that a JVM that is gone fails the same way.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TypeVar

from debl.format.bucket_map import BucketMap
from debl.errors import JvmGone, ServiceError
from debl.format.link import CHECKSUM_MOD

T = TypeVar("T")

# ---------------------------------------------------------------------------- dist_ch


@dataclass(frozen=True)
class DistChRequest:
    """One chunk for dist_ch: where it is, its slices (one task each: the byte offset of the
    slice's first line and that line's index in the chunk, 0-based), its segments (in chunk
    order: ``(file_seq, first line of the file, lines, first chunk line, first byte in the
    file, first byte in the chunk)``), what each segment's manifest claims (``claims``: None, or
    per segment None or the check's terms: ``loaders.early.segment_claims``), the bucket map,
    where the bucket files go (a URI), the chunk's number (their names) and the longest line
    held (``max_line_bytes``)."""

    chunk_uri: str
    slices: tuple[tuple[int, int], ...]
    segments: tuple[tuple[int, int | None, int, int, int, int], ...]
    bucket_map: BucketMap
    bucket_dir: str
    chunk_no: int
    max_line_bytes: int
    claims: tuple[dict | None, ...] | None = None

    def to_json(self) -> str:
        """The JVM's plan (``DistCh.Plan``)."""
        doc = {**asdict(self), "bucket_map": self.bucket_map.to_dict()}
        return json.dumps(doc, separators=(",", ":"))


@dataclass(frozen=True)
class BucketPart:
    """A bucket file a slice wrote: its bucket's rows, bytes (of the lines, without the index
    footer), checksum and the lowest and highest id1 of its rows."""

    slice: int
    bucket: int
    rows: int
    bytes: int
    checksum: int
    lo: int
    hi: int


@dataclass(frozen=True)
class RefusedLine:
    """A line that ``parse_line`` must refuse, whole, without its line end."""

    slice: int
    file_seq: int
    line_no: int
    line: bytes


@dataclass(frozen=True)
class LongLine:
    """A line over ``max_line_bytes``: its length and first bytes only."""

    slice: int
    file_seq: int
    line_no: int
    length: int
    prefix: bytes


@dataclass(frozen=True)
class FileCount:
    """Of one segment's lines in one slice: those bucketed, those refused (either kind)."""

    slice: int
    file_seq: int
    rows: int
    rejects: int


@dataclass(frozen=True)
class Violation:
    """The first line (or point) of a segment's bytes in one slice that breaks its manifest's
    claims (``DistCh.Claims``): its offset in the file, its id1 (None: a point without its
    line), the kind (``KINDS``) and the range claimed there."""

    slice: int
    segment: int
    offset: int
    id1: int | None
    kind: str
    lo: int
    hi: int


VIOLATION_KINDS = {1: "outside the file's id1_lo..id1_hi", 2: "outside its piece's claim",
                   3: "out of order in a file said to be sorted",
                   4: "not the id1 its point says", 5: "a point that is not a valid line's start"}


@dataclass(frozen=True)
class DistChReport:
    parts: list[BucketPart]
    rejects: list[RefusedLine]
    too_long: list[LongLine]
    per_file: list[FileCount]
    violations: list[Violation] = field(default_factory=list)


def dist_ch(spark, request: DistChRequest) -> DistChReport:
    """``debl.jobs.DistCh.bucket``: one chunk bucketed, one Spark task per slice; the slices'
    reports, in slice order."""
    sc = spark.sparkContext
    found = call(spark, "dist_ch", lambda: sc._jvm.debl.jobs.DistCh.bucket(
        sc._jsc, request.to_json()))
    report = DistChReport([], [], [], [])
    for s in json.loads(found):
        i = s["slice"]
        report.parts.extend(BucketPart(i, b, rows, size, checksum % CHECKSUM_MOD, lo, hi)
                            for b, rows, size, checksum, lo, hi in s["parts"])
        report.rejects.extend(RefusedLine(i, seq, line_no, base64.b64decode(line))
                              for seq, line_no, line in s["rejects"])
        report.too_long.extend(LongLine(i, seq, line_no, length, base64.b64decode(prefix))
                               for seq, line_no, length, prefix in s["too_long"])
        report.per_file.extend(FileCount(i, seq, rows, bad) for seq, rows, bad in s["per_file"])
        report.violations.extend(
            Violation(i, seg, offset, None if id1 < 0 else id1, VIOLATION_KINDS[kind], lo, hi)
            for seg, offset, id1, kind, lo, hi in s.get("violations", ()))
    return report


# ---------------------------------------------------------------------------- gen_HF, HBase


@dataclass(frozen=True)
class BucketHFiles:
    """What one bucket became: rows read, winners written (one cell each), and the winners'
    checksum (sum of ``row_checksum`` mod 2**64, for ``debl verify``)."""

    rows: int
    winners: int
    checksum: int


def bucket_hfiles(spark, buckets: Sequence[Sequence[str]], out_dir: str, table: str,
                  family: bytes, qualifier: bytes, cell_ts: int) -> list[BucketHFiles]:
    """``debl.jobs.BucketHFiles.write``: one Spark task per bucket (its path prefixes, URIs)
    writes its merged rows as HFiles under ``out_dir/<family>/``; one BucketHFiles per bucket,
    in order."""
    sc = spark.sparkContext
    written = call(spark, "gen_HF's HFile writing", lambda: sc._jvm.debl.jobs.BucketHFiles.write(
        sc._jsc, json.dumps([list(b) for b in buckets]), out_dir, table, bytearray(family),
        bytearray(qualifier), cell_ts))
    return [BucketHFiles(w["rows"], w["winners"], w["checksum"] % CHECKSUM_MOD)
            for w in json.loads(written)]


def create_presplit(spark, table: str, family: str, split_keys: Sequence[bytes],
                    settings: dict[str, str]) -> bool:
    """``debl.jobs.Tables.createPresplit``: False if the table exists (left unchanged)."""
    keys = [bytearray(k) for k in split_keys]  # py4j: bytearray -> byte[]
    return bool(call(spark, "HBase table creation", lambda: spark.sparkContext._jvm.debl.jobs
                     .Tables.createPresplit(table, family, keys, settings)))


def region_starts(spark, table: str, settings: dict[str, str]) -> list[bytes]:
    """``debl.jobs.BulkLoad.splitKeys``: the table's region start keys but the first (empty)."""
    return [bytes(k) for k in call(spark, "HBase region lookup", lambda: spark.sparkContext._jvm
                                   .debl.jobs.BulkLoad.splitKeys(table, settings))]


def bulk_load(spark, table: str, hfile_dir: str, settings: dict[str, str]) -> int:
    """``debl.jobs.BulkLoad.load``: the number of HFiles loaded."""
    return int(call(spark, "HBase bulk load", lambda: spark.sparkContext._jvm.debl.jobs
                    .BulkLoad.load(table, hfile_dir, settings)))


def job_group(spark, group: str, description: str) -> None:
    """The Spark job group of the jobs this thread starts next (Spark's UI and logs)."""
    call(spark, "Spark", lambda: spark.sparkContext.setJobGroup(group, description))


# ---------------------------------------------------------------------------- errors


@dataclass(frozen=True)
class JavaError:
    """One Java exception of a chain: its class and superclasses' names (the class first),
    the class a Hadoop ``RemoteException`` stands for (the server's), and its ``toString()``."""

    classes: tuple[str, ...]
    text: str
    server_class: str | None = None

    def is_a(self, names: frozenset[str]) -> bool:
        return bool(names.intersection(self.classes)) or self.server_class in names


@dataclass(frozen=True)
class JavaFailure:
    """What the JVM raised: the exception, then its causes, in order; and whether Spark's
    context had stopped when it came back (what a task out of heap leads to)."""

    chain: tuple[JavaError, ...]
    context_stopped: bool = False


# The classes (or superclasses) of what the Hadoop, HDFS, HBase and ZooKeeper clients raise
# when a service does not answer.
UNREACHABLE = frozenset({
    "java.net.ConnectException", "java.net.NoRouteToHostException",
    "java.net.SocketTimeoutException", "java.util.concurrent.TimeoutException",
    "org.apache.hadoop.hdfs.BlockMissingException",
    "org.apache.hadoop.hbase.shaded.org.apache.zookeeper.KeeperException$ConnectionLossException",
    "org.apache.hadoop.hbase.shaded.org.apache.zookeeper.KeeperException$SessionExpiredException",
    "org.apache.hadoop.hbase.ipc.FailedServerException",
    "org.apache.hadoop.hbase.ipc.CallTimeoutException",
    "org.apache.hadoop.hbase.exceptions.TimeoutIOException",
    "org.apache.hadoop.hbase.MasterNotRunningException",
    "org.apache.hadoop.hbase.ZooKeeperConnectionException",
})
# A NameNode with no DataNode to write to: the one case the HDFS client has no class for (its
# RemoteException stands for a plain IOException), so its own words are what tells.
_NO_DATANODE = re.compile(r"could only be written to 0 of the \d+ minReplication nodes")
OUT_OF_HEAP = frozenset({"java.lang.OutOfMemoryError"})
UNREACHABLE_HINT = " (a service does not answer: is the stack up? `debl stack status`)"
HEAP_HINT = (" (if the log above shows java.lang.OutOfMemoryError, a task ran out of heap: "
             "raise spark.driver_memory under local[N], spark.executor_memory on a cluster "
             "(DEBL_SPARK_DRIVER_MEMORY, DEBL_SPARK_EXECUTOR_MEMORY), or make buckets or chunks "
             "smaller)")
OLD_JAR_HINT = (" (is .debl/lib/debl-jobs.jar built from this checkout? "
                "bash scripts/build_jobs_jar.sh)")
# Spark words a task that failed without an exception it could send back (an executor lost)
# in the job's message only: "... most recent failure: Lost task 0.0 in stage 1.0 (...): why".
_LOST_TASK = re.compile(r"^.*most recent failure: Lost task .*?\): ")


def service_error(what: str, failure: JavaFailure) -> ServiceError:
    """The ServiceError of a JVM failure: "<what> failed: <the innermost cause>", without
    Spark's job-abort wording around a task's error, and the next step when the classes say
    that a service does not answer or that a task ran out of heap."""
    innermost = failure.chain[-1] if failure.chain else JavaError((), "an unknown Java error")
    cause = _LOST_TASK.sub("", innermost.text.strip().splitlines()[0] if innermost.text else "")
    if any(e.is_a(UNREACHABLE) or (e.server_class and _NO_DATANODE.search(e.text))
           for e in failure.chain):
        cause += UNREACHABLE_HINT
    elif failure.context_stopped or any(e.is_a(OUT_OF_HEAP) for e in failure.chain):
        cause += HEAP_HINT
    return ServiceError(f"{what} failed: {cause}")


def call(spark, what: str, fn: Callable[[], T]) -> T:
    """``fn()``, which calls into *spark*'s JVM; what it raises becomes DeBL's exception
    (module docstring). *what* names the step for the message ("dist_ch", "HBase bulk load").

    PySpark turns a few Java exceptions (``IllegalArgumentException``, ...: an argument the JVM
    refused, never a service down) into its own classes before they get here: they are worded
    by their message, as PySpark gives it."""
    # lazy import: pyspark's py4j would cost every `debl` command's start-up
    # (docs/ARCHITECTURE.md, "Lazy imports"); only a JVM call gets here
    from py4j.protocol import Py4JError, Py4JJavaError

    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - py4j's and PySpark's errors are DeBL's here
        if _jvm_gone(exc):
            raise _gone(what) from exc
        if not isinstance(exc, Py4JJavaError):
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            # py4j's own: a class or method the JVM does not have: a jar older than the code
            hint = OLD_JAR_HINT if isinstance(exc, Py4JError) else ""
            raise ServiceError(f"{what} failed: {first}{hint}") from exc
        try:
            failure = JavaFailure(_chain(exc.java_exception),
                                  bool(spark.sparkContext._jsc.sc().isStopped()))
        except Py4JError as lost:  # the JVM ended while it was being asked
            raise _gone(what, HEAP_HINT) from lost
        raise service_error(what, failure) from exc


def _chain(throwable) -> tuple[JavaError, ...]:
    """The Java exception and its causes (at most 16), each with its class's ancestry."""
    chain: list[JavaError] = []
    while throwable is not None and len(chain) < 16:
        classes, cls = [], throwable.getClass()
        while cls is not None and cls.getName() != "java.lang.Throwable":
            classes.append(cls.getName())
            cls = cls.getSuperclass()
        server = (throwable.getClassName()
                  if "org.apache.hadoop.ipc.RemoteException" in classes else None)
        chain.append(JavaError(tuple(classes), throwable.toString() or "", server))
        throwable = throwable.getCause()
    return tuple(chain)


def _gone(what: str, hint: str = "") -> JvmGone:
    return JvmGone(f"{what} failed: the Spark driver JVM of this process is gone (killed or "
                   f"crashed){hint}; start the command again: what it left half done is redone")


def ensure_driver_alive(what: str) -> None:
    """JvmGone if this process's Spark driver JVM has ended (nothing if it never started
    one): a service idle between its jobs learns of it at once, not at its next job, which
    may be a day away."""
    from pyspark import SparkContext  # lazy import: as call's; only a Spark process gets here

    proc = getattr(SparkContext._gateway, "proc", None)
    if proc is not None and proc.poll() is not None:
        raise _gone(what)


JVM_END_GRACE_S = 3.0


def _jvm_gone(exc: BaseException) -> bool:
    """Whether py4j lost its JVM rather than the JVM throwing: the gateway's process has ended,
    or *exc* (or what it was raised from) is a closed or refused gateway connection. (py4j turns
    a connection lost in a call into a plain Py4JError "An error occurred while calling ...":
    the process is what tells.)"""
    # lazy import: as call's; only a failed JVM call gets here
    from py4j.protocol import Py4JJavaError, Py4JNetworkError
    from pyspark import SparkContext  # lazy import: as the line above

    proc = getattr(SparkContext._gateway, "proc", None)
    if proc is not None:
        # A py4j error that is not a Java exception may come from a JVM in its last moments
        # (a killed JVM answered "debl does not exist in the JVM" before it ended, on a loaded
        # CI machine): give it a moment to end before taking the error for the JVM's own.
        try:
            proc.wait(timeout=0 if isinstance(exc, Py4JJavaError) else JVM_END_GRACE_S)
            return True
        except subprocess.TimeoutExpired:
            pass
    seen, link = 0, exc  # type: int, BaseException | None
    while link is not None and seen < 10:
        if isinstance(link, (Py4JNetworkError, ConnectionError)):
            return True
        link, seen = link.__cause__ or link.__context__, seen + 1
    return False


class _LostGatewayTrace(logging.Filter):
    """Drops py4j's "Exception while sending command." records: py4j logs a lost JVM
    connection with its whole traceback on the root logger, which a user takes for a crash;
    ``call`` reports the JVM's death itself (JvmGone)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.getMessage().startswith("Exception while sending command")
                    and "py4j" in record.pathname)


logging.getLogger().addFilter(_LostGatewayTrace())
