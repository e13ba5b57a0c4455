"""The MySQL and HBase stores of one load, opened on first use: a load without hot rows never
opens its MySQL table; HBase is connected only once a bucket is loaded."""

from __future__ import annotations

import threading

from debl.catalog import LoadRecord
from debl.config import Config
from debl.store.hbase import HBaseStore
from debl.store.mysql import MySQLStore


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
