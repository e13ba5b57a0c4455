"""The catalog's side of serving: what a coordinator reads in one transaction (the current load
and its buckets), what coordinators publish (demand, answers per route, queries asked per
bucket) and their heartbeats, which say the load each serves (a load's stores are dropped, and
its hot files removed, only once no live coordinator reads them: docs/COORDINATOR.md)."""

from __future__ import annotations

import time

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from debl.catalog.base import CatalogEngine
from debl.catalog.index import read_buckets
from debl.catalog.loads import load_record, read_current
from debl.catalog.records import DemandRow, LoadRecord, ServingState
from debl.catalog.schema import (answers_table, asks_table, coordinators_table, demand_table,
                                 hot_keys_table, jobs_table, loads_table)
from debl.keys.key_filter import KeyFilter


class ServingCatalog:
    """The current dataset as coordinators see it, and what they publish: ``Catalog.serving``."""

    def __init__(self, engine: CatalogEngine):
        self._transaction = engine.transaction

    def serving_state(self) -> ServingState | None:
        """The current load, its buckets with their job states, its hot buckets and (once
        MySQL has taken the hot keys over) its key filter, in one transaction: a load that
        becomes current between two reads can never pair one load's row with another's buckets
        (which once sent every query to MySQL alone for a poll interval). None before the
        first load is up."""
        hk = hot_keys_table
        with self._transaction() as conn:
            load = read_current(conn)
            if load is None:
                return None
            bits = (conn.execute(sa.select(hk.c.bits).where(hk.c.load_id == load.load_id))
                    .scalar() if load.hot_in_mysql else None)
            return ServingState(load, read_buckets(conn, load.load_id, False),
                                [] if load.hot_in_mysql else read_buckets(conn, load.load_id, True),
                                None if bits is None else KeyFilter(bits))

    def poll(self) -> tuple[LoadRecord | None, LoadRecord | None, dict[int, str]]:
        """A coordinator's poll, in one transaction: the current load, the newest load (which
        may be a new day being loaded, or one that failed), and the current load's job
        states."""
        j, t = jobs_table, loads_table
        with self._transaction() as conn:
            current = read_current(conn)
            newest = conn.execute(sa.select(t).order_by(t.c.started.desc()).limit(1)
                                  ).mappings().first()
            states: dict[int, str] = {} if current is None else dict(conn.execute(
                sa.select(j.c.b_index, j.c.state).where(j.c.load_id == current.load_id)).all())
        return current, None if newest is None else load_record(newest), states

    # -- demand

    def publish_demand(self, load_id: str, coordinator: str, waiting: dict[int, int]) -> None:
        """Replace this coordinator's published demand for *load_id*'s buckets with *waiting*
        (bucket -> queries), in one transaction: a reader sees the old demand or the new one,
        never none. Its demand for other loads goes."""
        t = demand_table
        now = time.time()
        rows = [{"load_id": load_id, "coordinator": coordinator, "b_index": b, "waiting": n,
                 "updated": now} for b, n in waiting.items() if n > 0]
        with self._transaction() as conn:
            conn.execute(t.delete().where(t.c.coordinator == coordinator))
            if rows:
                conn.execute(t.insert(), rows)

    def demand(self, load_id: str, max_age: float = 60.0) -> dict[int, int]:
        """Demand per bucket of *load_id* summed over every coordinator that published in the
        last *max_age* seconds (older rows belong to coordinators that died)."""
        t = demand_table
        query = (sa.select(t.c.b_index, sa.func.sum(t.c.waiting))
                 .where(t.c.load_id == load_id, t.c.updated >= time.time() - max_age)
                 .group_by(t.c.b_index))
        with self._transaction() as conn:
            return {int(b): int(n) for b, n in conn.execute(query)}

    def published_demand(self, load_id: str, max_age: float | None = None) -> list[DemandRow]:
        """Each coordinator's published rows for *load_id* (only those of the last *max_age*
        s, if given)."""
        t = demand_table
        query = (sa.select(t.c.coordinator, t.c.b_index, t.c.waiting, t.c.updated)
                 .where(t.c.load_id == load_id))
        if max_age is not None:
            query = query.where(t.c.updated >= time.time() - max_age)
        with self._transaction() as conn:
            return [DemandRow(*row)
                    for row in conn.execute(query.order_by(t.c.coordinator, t.c.b_index))]

    def publish_asks(self, load_id: str, coordinator: str, asked: dict[int, int]) -> None:
        """Record this coordinator's count of queries asked per bucket of *load_id* since it
        began serving it (cumulative; loaded buckets too)."""
        self._publish_counts(asks_table, "b_index", "asked", load_id, coordinator, asked)

    def asks(self, load_id: str) -> dict[int, int]:
        """Queries asked per bucket of *load_id*, summed over every coordinator that served
        it (closed ones included)."""
        t = asks_table
        query = (sa.select(t.c.b_index, sa.func.sum(t.c.asked)).where(t.c.load_id == load_id)
                 .group_by(t.c.b_index))
        with self._transaction() as conn:
            return {int(b): int(n) for b, n in conn.execute(query)}

    # -- answers

    def publish_answers(self, load_id: str, coordinator: str, answered: dict[str, int]) -> None:
        """Record this coordinator's count of queries of *load_id* answered per route (or
        outcome)."""
        self._publish_counts(answers_table, "route", "answered", load_id, coordinator, answered)

    def _publish_counts(self, table: sa.Table, key: str, value: str, load_id: str,
                        coordinator: str, counts: dict) -> None:
        """Upsert a coordinator's cumulative *counts* (``key`` -> ``value``) of *load_id*."""
        if not counts:
            return
        now = time.time()
        upsert = mysql.insert(table)
        with self._transaction() as conn:
            conn.execute(upsert.on_duplicate_key_update({value: upsert.inserted[value],
                                                         "updated": upsert.inserted.updated}),
                         [{"load_id": load_id, "coordinator": coordinator, key: k, value: n,
                           "updated": now} for k, n in counts.items()])

    def answers(self, load_id: str) -> tuple[dict[str, int], int]:
        """Queries of *load_id* answered per route, summed over every coordinator (closed ones
        included), and how many coordinators published."""
        t = answers_table
        with self._transaction() as conn:
            by_route = {route: int(n) for route, n in conn.execute(
                sa.select(t.c.route, sa.func.sum(t.c.answered)).where(t.c.load_id == load_id)
                .group_by(t.c.route))}
            coordinators = conn.execute(
                sa.select(sa.func.count(sa.distinct(t.c.coordinator)))
                .where(t.c.load_id == load_id)).scalar()
        return by_route, int(coordinators or 0)

    # -- coordinators' heartbeats

    def heartbeat(self, coordinator: str, load_id: str | None, hot_mysql: bool,
                  interval_s: float) -> None:
        """A running coordinator says it is alive, which load it serves with no query of
        another load in flight (None: none yet), and whether it reads that load's hot keys
        from MySQL with no query reading its hot files (*hot_mysql*)."""
        values = {"load_id": load_id, "hot_mysql": hot_mysql, "interval_s": interval_s,
                  "updated": time.time()}
        statement = (mysql.insert(coordinators_table).values(coordinator=coordinator, **values)
                     .on_duplicate_key_update(**values))
        with self._transaction() as conn:
            conn.execute(statement)

    def forget_coordinator(self, coordinator: str) -> None:
        t = coordinators_table
        with self._transaction() as conn:
            conn.execute(t.delete().where(t.c.coordinator == coordinator))

    def coordinators_behind(self, load_id: str, hot_mysql: bool = False) -> list[str]:
        """Live coordinators (a heartbeat within three of their poll intervals, and 2 s) that
        do not serve *load_id* alone yet; with *hot_mysql*, also those that may still read its
        hot files."""
        t = coordinators_table
        now = time.time()
        with self._transaction() as conn:
            rows = conn.execute(sa.select(t.c.coordinator, t.c.load_id, t.c.hot_mysql,
                                          t.c.interval_s, t.c.updated)).all()
        return sorted(c for c, seen, in_mysql, interval, updated in rows
                      if updated >= now - (3 * interval + 2.0)
                      and (seen != load_id or (hot_mysql and not in_mysql)))

    def coordinators_serving(self) -> dict[str, str | None]:
        """Live coordinators and the load each serves (None: none yet, or between two)."""
        t = coordinators_table
        now = time.time()
        with self._transaction() as conn:
            rows = conn.execute(sa.select(t.c.coordinator, t.c.load_id, t.c.interval_s,
                                          t.c.updated)).all()
        return {c: seen for c, seen, interval, updated in rows
                if updated >= now - (3 * interval + 2.0)}
