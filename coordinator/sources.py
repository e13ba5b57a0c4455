"""The sources a query of one load reads: its stores (``coordinator.load_stores``) and buckets'
raw files in HDFS as one source of the merge (``NewestFirst``); and ``fetch``, which runs a
routed query (any of the three reads: ``coordinator.operations``) on the sources its route
names."""

from __future__ import annotations

from typing import Any

from coordinator.admission import FifoGate
from coordinator.merge import answer
from coordinator.operations import Operation
from coordinator.raw import RawBucket, RawReader
from coordinator.routes import HotSide, Route, RoutePlan


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


def fetch(route: RoutePlan, reader: RawReader, gate: FifoGate | None,
          operation: Operation) -> Any:
    """Run *operation* (get_link_list, count_link or multiget_link: ``coordinator.operations``)
    on the sources *route* names (no lock held): the one store that can hold the key's rows
    answers it whole; otherwise the hot and cold sides go through the one merge. The buckets
    whose files it reads (the hot one, the cold one) are one source: their files are read
    together. A raw answer from local files alone takes its turn at *gate*."""
    load, stores = route.dataset.load, route.stores
    raw = []
    if route.hot is HotSide.RAW and route.hot_bucket is not None:
        raw.append(RawBucket(load.load_id, route.hot_bucket.b_index, route.hot_bucket.rows,
                             hot=True, growing=route.dataset.early is not None))
    if route.bucket is not None and route.route in (Route.RAW, Route.EARLY):
        # early: the load's files so far, every byte of id1 is here
        raw.append(RawBucket(load.load_id, route.bucket.b_index, route.bucket.rows,
                             growing=route.route is Route.EARLY))
    files = RawFiles(reader, raw) if raw else None
    mysql = stores.mysql if route.hot is HotSide.MYSQL else None
    if route.route is Route.MERGED:
        hot = files or mysql
        if hot is None:  # no hot row: push the whole query down to HBase
            return operation.on(stores.hbase)
        return answer(hot, stores.hbase, operation)
    if files is not None:
        if mysql is None and gate is not None and files.local():
            with gate:  # CPU alone: queued in arrival order (coordinator.admission)
                return answer(None, files, operation)
        return answer(mysql, files, operation)
    # the hot rows alone, from MySQL (one statement), or none
    return answer(None, None, operation) if mysql is None else operation.on(mysql)
