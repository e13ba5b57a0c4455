"""gen_HF's core: the merge rule over a bucket's cold rows, and real HBase HFiles written from
buckets.

- ``write_bucket_hfiles(spark, buckets, out_dir, table_name)``: each bucket's files (dist_ch's
  output) -> its rows merged by the merge rule, sorted by row key, written by HBase's own
  ``HFileOutputFormat2`` under ``out_dir/<family>/`` (the real format, what the bulk-load tool
  expects). One Spark task per bucket, on the JVM (``debl.jobs.BucketHFiles``, through
  ``loaders.jobs``): no row crosses into Python, which made the conversion several times
  faster than merging and pickling the cells in Python (docs/BENCHMARKS.md and docs/ONLINE.md,
  "Decisions", have the measurements). No HBase cluster is contacted: the table name only goes
  into the files' metadata.
- ``merge_links(rows)`` / ``merge_bucket(rows)``: the same merge rule in Spark over Python rows
  (the batchPut baseline) and in memory (the reference the JVM side is tested against).

Pitfalls:

- One task per bucket, and a bucket must lie within one region of the table (gen_HF pre-splits
  at bucket boundaries), so that no HFile spans two regions and the bulk load never splits one.
- A bucket is merged in the task's memory: buckets are sized by ``loading.bucket_target_bytes`` for
  this.
- ``out_dir`` is replaced: a redo of a crashed run writes the same files again.
- The JVM side needs ``.debl/lib/debl-jobs.jar`` (scripts/build_jobs_jar.sh) and the
  hbase-shaded-mapreduce jars on the classpath: debl.spark.session.spark_session puts them there.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from debl.format.link import Link, Origin, merge_rank
from debl.store.hbase_layout import CELL_TS, FAMILY, QUALIFIER, row_key
from loaders import jobs
from loaders.jobs import BucketHFiles


def cold_origin(file_seq: int, line_no: int) -> Origin:
    """The Origin of a row from a cold file (hot=0)."""
    return Origin(0, file_seq, line_no)


def ranked(link: Link, origin: Origin) -> tuple[tuple, tuple]:
    """A row as the value merge_rows reduces: (merge rank, the link as a plain tuple).

    Plain tuples, not the namedtuples: they pickle through the shuffle faster (docs/ONLINE.md,
    "Decisions").
    """
    return merge_rank(link, origin), tuple(link)


def merge_rows(a: tuple[tuple, tuple], b: tuple[tuple, tuple]) -> tuple[tuple, tuple]:
    """The reduceByKey function of the merge rule over ``ranked`` values: the greater rank
    (greatest time, then version, then hot, later file, later line) wins.

    Associative and commutative (a max under a total order), as reduceByKey requires. Equal
    ranks mean the same line read twice, so either is right.
    """
    return a if a[0] >= b[0] else b


def merge_links(rows, num_partitions: int | None = None):
    """RDD of (Link, Origin) -> RDD of Link: one winner per (id1, link_type, id2).

    Rows must be Link and Origin namedtuples (merge_rank reads their fields by name); for cold
    rows ``cold_origin(file_seq, line_no)``. A hidden winner (visibility 0) is kept: it must
    hide older rows in other stores too.
    """
    return (rows.map(lambda row: (row[0].key, ranked(*row)))
            .reduceByKey(merge_rows, num_partitions)
            .map(lambda kv: Link._make(kv[1][1])))


def merge_bucket(rows: Iterable[tuple[Link, Origin]]) -> list[Link]:
    """The same rule without Spark, for one bucket in memory: winners in row-key order."""
    best: dict[tuple[int, int, int], tuple[tuple, tuple]] = {}
    for link, origin in rows:
        new = ranked(link, origin)
        old = best.get(link.key)
        best[link.key] = new if old is None else merge_rows(old, new)
    return sorted((Link._make(link) for _, link in best.values()), key=row_key)


def write_bucket_hfiles(spark, buckets: Sequence[Sequence[str]], out_dir: str,
                        table_name: str) -> list[BucketHFiles]:
    """Write the HFiles of *buckets* under ``out_dir/<family>/`` (replacing ``out_dir``);
    returns one BucketHFiles per bucket, in order.

    A bucket is its list of path prefixes, Hadoop URIs whose files are ``<prefix>.<n>``
    (``catalog.index.bucket_paths`` with the HDFS URI in front). Raises ServiceError naming the file
    and line when a bucket file is not dist_ch's output.
    """
    if not buckets:
        return []
    for prefixes in buckets:
        if not prefixes:
            raise ValueError(f"a bucket needs at least one path prefix: {prefixes!r}")
    return jobs.bucket_hfiles(spark, buckets, out_dir, table_name, FAMILY, QUALIFIER, CELL_TS)
