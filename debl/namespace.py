"""A load's namespace: the stores one load writes and nobody else (docs/LOADING.md, "Days").

Each load (one day's dump) gets its own MySQL link table, HBase table and HDFS directory, named
after the load id, so that a new load never clears, drops or writes what the current one serves:
``<link_table>_<load>``, ``<hbase_table>_<load>`` and ``<hdfs_root>/loads/<load id>`` (with its
chunks, its cold buckets and its hot files' buckets under it). The names are recorded with the
load (``debl_loads``), so a reader finds a load's stores whatever its own configuration says.

Pitfall: the suffix takes 22 characters of MySQL's 64 for a table name: ``mysql.link_table`` is
limited accordingly (``debl.config``).
"""

from __future__ import annotations

from dataclasses import dataclass

from debl.config import Config

SUFFIX_LENGTH = len("_L20261125_172208_ab12")  # "_" + a load id (loaders.load.new_load_id)


@dataclass(frozen=True)
class Namespace:
    """The store names of one load."""

    link_table: str  # MySQL: the load's hot rows (staging table: ``<link_table>_staging``)
    hbase_table: str  # HBase: the buckets gen_HF converted
    hdfs_dir: str  # HDFS: chunks/, buckets/ (cold), hot/ (the hot files' buckets)

    @staticmethod
    def of(config: Config, load_id: str) -> "Namespace":
        suffix = "_" + load_id.replace("-", "_")
        return Namespace(f"{config.mysql.link_table}{suffix}", f"{config.hbase.table}{suffix}",
                         f"{config.hdfs.root.rstrip('/')}/loads/{load_id}")

    @property
    def chunk_dir(self) -> str:
        return f"{self.hdfs_dir}/chunks"

    @property
    def bucket_dir(self) -> str:
        """The cold buckets' files: ``<bucket_dir>/<b>/chunk-NNNNN.<slice>``."""
        return f"{self.hdfs_dir}/buckets"

    @property
    def hot_dir(self) -> str:
        """The hot files' buckets, laid out as the cold ones; removed once MySQL has taken the
        hot keys over and no reader needs them."""
        return f"{self.hdfs_dir}/hot"
