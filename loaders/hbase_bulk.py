"""gen_HF's HBase side, through the Spark driver's JVM: the pre-split link table, its region
boundaries, and the bulk load of HFiles written by loaders.hfile.write_bucket_hfiles.

Everything goes through ``debl.jobs.BulkLoad`` and ``debl.jobs.Tables`` (debl-jobs.jar, called
through ``loaders.jobs``) and the HBase client in hbase-shaded-mapreduce; the connection settings
come from Config only (ZooKeeper quorum and port, ``fs.defaultFS``), never from an hbase-site.xml
on some classpath.

Pitfalls:

- Keep the HFiles on the HDFS of ``hbase.rootdir``: the region server then moves them (a rename)
  and the output directory is left empty, so a redo must rewrite them (write_bucket_hfiles
  always does). From another filesystem (``file:///``) they are copied
  and stay (docs/ONLINE.md, "Decisions").
- A bulk load is atomic per HFile per region, not per run: a crash in the middle leaves some files
  loaded. That is harmless here: reloading the same bucket writes identical cells (hbase_layout's
  constant cell timestamp), so the redo converges to the same table.
- The table must exist (the tool is told not to create it); HFiles spanning region boundaries
  are split by the tool (a slow copy),
  which gen_HF avoids by pre-splitting the table at every bucket boundary.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from debl.format.bucket_map import BucketMap
from debl.config import Config
from debl.store.hbase_layout import FAMILY, id1_boundary
from loaders import jobs


def hbase_settings(config: Config) -> dict[str, str]:
    """The HBase client settings of the configured cluster. An HBase (or its ZooKeeper) that
    does not answer fails a call after about ``service_timeout``: ZooKeeper's session timeout
    (90 s by default, per attempt) and HBase's operation timeout (20 minutes by default) are
    bounded by it."""
    ms = str(round(config.service_timeout * 1000))
    return {
        "hbase.zookeeper.quorum": config.hbase.zookeeper_quorum,
        "hbase.zookeeper.property.clientPort": str(config.hbase.zookeeper_port),
        "fs.defaultFS": config.hdfs.uri,
        "hbase.client.retries.number": "10",
        "zookeeper.recovery.retry": "1",
        "zookeeper.session.timeout": ms,
        "hbase.client.operation.timeout": ms,
        "hbase.client.meta.operation.timeout": ms,
        "hbase.rpc.timeout": ms,
        # A run may bring many buckets' files into one region (bulkLoad-hbase: all of them).
        "hbase.mapreduce.bulkload.max.hfiles.perRegion.perFamily": "1024",
    }


def bucket_split_keys(bucket_map: BucketMap, buckets: Iterable[int]) -> list[bytes]:
    """The region split keys where each of *buckets* starts and ends, so that a bucket's HFiles
    land in its own regions."""
    return [id1_boundary(x) for x in bucket_map.boundaries(buckets)]


def create_table(spark, config: Config, split_keys: Sequence[bytes], table: str) -> bool:
    """Create the link table *table* pre-split at ``split_keys`` (``bucket_split_keys``); False
    if it exists already (left unchanged)."""
    return jobs.create_presplit(spark, table, FAMILY.decode(),
                                [k for k in sorted(set(split_keys)) if k], hbase_settings(config))


def split_keys(spark, config: Config, table: str) -> list[bytes]:
    """The table's region start keys (without the first region's empty one)."""
    return jobs.region_starts(spark, table, hbase_settings(config))


def bulk_load(spark, config: Config, hfile_dir: str, table: str) -> int:
    """Load every HFile under ``hfile_dir`` into *table*, which must exist; returns the number
    of HFiles loaded. HBase's tool would create a missing table (``create.table``): told not to,
    so that a run of a load whose stores were dropped meanwhile fails instead of re-creating its
    table (docs/RELIABILITY.md, "Concurrency")."""
    settings = {**hbase_settings(config), "create.table": "no"}
    return jobs.bulk_load(spark, table, hfile_dir, settings)
