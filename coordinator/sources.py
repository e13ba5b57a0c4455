"""The sources a query of one load reads: that load's MySQL and HBase stores (opened on first
use: a load without hot rows never opens its MySQL table; HBase is connected only once a bucket
is loaded), and buckets' raw files in HDFS as one source of the merge (``NewestFirst``)."""

from __future__ import annotations

import threading

from debl.catalog import LoadRecord
from debl.config import Config
from debl.store.hbase import HBaseStore
from debl.store.mysql import MySQLStore
from coordinator.raw import RawBucket, RawReader


class LoadStores:
    """The stores of one load, opened on first use. Thread-safe."""

    def __init__(self, config: Config, load: LoadRecord):
        self.config, self.load = config, load
        self._mysql: MySQLStore | None = None
        self._hbase: HBaseStore | None = None
        self._lock = threading.Lock()

    @property
    def mysql(self) -> MySQLStore:
        with self._lock:
            if self._mysql is None:
                self._mysql = MySQLStore(self.config, self.load.namespace.link_table)
            return self._mysql

    @property
    def hbase(self) -> HBaseStore:
        with self._lock:
            if self._hbase is None:
                self._hbase = HBaseStore(self.config, self.load.namespace.hbase_table)
            return self._hbase

    def close(self) -> None:
        with self._lock:
            for store in (self._mysql, self._hbase):
                if store is not None:
                    store.close()


class RawFiles:
    """The files of one or more buckets of a load in HDFS as one source of the merge
    (``NewestFirst``): a hot bucket's rows rank as hot (``RawReader.scan_newest_first``)."""

    def __init__(self, reader: RawReader, buckets: list[RawBucket]):
        self.reader, self.buckets = reader, buckets

    def scan_newest_first(self, id1: int, link_type: int, min_time: int = 0):
        return self.reader.scan_newest_first(self.buckets, id1, link_type, min_time)

    def local(self) -> bool:
        """Whether reading them waits on no server (``RawReader.reads_locally``)."""
        return self.reader.reads_locally(self.buckets)
