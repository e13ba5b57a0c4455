"""The catalog's side of answering before uptime (docs/LOADING.md, "Answers before the copy
ends"): a load's manifests, its answerable keys as the copy lands, the keys queries wait for
(the demand the copy follows), the early answers given per id1, and the claims found false with
the early answers they touched.

The loader writes the answerable keys after each chunk it records as bucketed, so a coordinator
that reads them (``early_state``) and then the buckets' rows sees every chunk those keys stand
on: rows only grow while a load copies.
"""

from __future__ import annotations

import time

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from debl.catalog.base import CatalogEngine
from debl.catalog.index import read_buckets, write_false_claim
from debl.catalog.loads import load_record
from debl.catalog.records import EarlyProgress, EarlyState, FalseClaim
from debl.catalog.schema import (EarlyAnswering, LoadState, early_answers_table, early_table,
                                 false_claims_table, key_demand_table, loads_table,
                                 manifests_table, phases_table)


class EarlyCatalog:
    """Manifests, answerable keys, key demand and false claims of loads: ``Catalog.early``."""

    def __init__(self, engine: CatalogEngine):
        self._transaction = engine.transaction

    # -- the loader's side

    def add_manifests(self, load_id: str, manifests: dict[int, dict]) -> None:
        """Record each file's manifest (``file_seq`` -> its JSON form) with the load."""
        if manifests:
            with self._transaction() as conn:
                conn.execute(manifests_table.insert(), [
                    {"load_id": load_id, "file_seq": seq, "manifest": m}
                    for seq, m in manifests.items()])

    def manifests(self, load_id: str) -> dict[int, dict]:
        t = manifests_table
        with self._transaction() as conn:
            return {seq: m for seq, m in conn.execute(
                sa.select(t.c.file_seq, t.c.manifest).where(t.c.load_id == load_id))}

    def begin_early(self, load_id: str, total_bytes: int,
                    ids: tuple[int, int] | None) -> None:
        """The load answers before its uptime: nothing answerable yet. *ids*: the lowest and
        highest id1 its manifests claim (None: some file claims every id1)."""
        id_lo, id_hi = ids if ids is not None else (None, None)
        with self._transaction() as conn:
            conn.execute(early_table.insert().values(
                load_id=load_id, state=EarlyAnswering.ON, gen=0, answerable=[],
                total_bytes=total_bytes, id_lo=id_lo, id_hi=id_hi, updated=time.time()))

    def publish_answerable(self, load_id: str, answerable: list, key_share: float,
                           answerable_bytes: int) -> None:
        """The keys answerable now (a KeySet's JSON), a new generation."""
        t = early_table
        with self._transaction() as conn:
            conn.execute(t.update().where(t.c.load_id == load_id).values(
                gen=t.c.gen + 1, answerable=answerable, key_share=key_share,
                answerable_bytes=answerable_bytes, updated=time.time()))

    def record_false_claim(self, load_id: str, claim: FalseClaim) -> FalseClaim:
        """A claim found false outside a chunk's check (a fetch on demand's bytes): recorded
        under the next number, and the load's early answers stopped, in one transaction (one
        a chunk's check found is recorded with the chunk: ``IndexCatalog.chunk_bucketed``).
        Returns it with its number."""
        with self._transaction() as conn:
            return write_false_claim(conn, load_id, claim)

    def false_claims(self, load_id: str) -> list[FalseClaim]:
        t = false_claims_table
        cols = [t.c[name] for name in FalseClaim.__dataclass_fields__]
        with self._transaction() as conn:
            return [FalseClaim(*row) for row in conn.execute(
                sa.select(*cols).where(t.c.load_id == load_id).order_by(t.c.claim_no))]

    def key_demand(self, load_id: str, max_age: float = 30.0) -> dict[int, int]:
        """Queries waiting per id1 of *load_id*, summed over the coordinators that published
        in the last *max_age* seconds."""
        t = key_demand_table
        query = (sa.select(t.c.id1, sa.func.sum(t.c.waiting))
                 .where(t.c.load_id == load_id, t.c.updated >= time.time() - max_age)
                 .group_by(t.c.id1))
        with self._transaction() as conn:
            return {int(k): int(n) for k, n in conn.execute(query)}

    # -- the coordinators' side

    def early_load(self) -> tuple[str, str] | None:
        """The newest load, if it answers before its uptime and no load is current: (load id,
        state)."""
        t, e = loads_table, early_table
        with self._transaction() as conn:
            newest = conn.execute(sa.select(t.c.load_id, t.c.state)
                                  .order_by(t.c.started.desc()).limit(1)).first()
            if newest is None or newest.state == LoadState.UP:
                return None
            state = conn.execute(sa.select(e.c.state).where(e.c.load_id == newest.load_id)
                                 ).scalar()
        return None if state is None else (newest.load_id, state)

    def early_state(self, load_id: str, known_gen: int = -1) -> EarlyState | None:
        """What a coordinator answers from before *load_id*'s uptime, in one transaction, the
        answerable keys read first (see the module); None if the load does not answer early."""
        t, e = loads_table, early_table
        with self._transaction() as conn:
            row = conn.execute(sa.select(e.c.state, e.c.gen, e.c.id_lo, e.c.id_hi)
                               .where(e.c.load_id == load_id)).first()
            if row is None:
                return None
            answerable = None if row.gen == known_gen else conn.execute(
                sa.select(e.c.answerable).where(e.c.load_id == load_id)).scalar()
            load = conn.execute(sa.select(t).where(t.c.load_id == load_id)).mappings().first()
            return EarlyState(load_record(load), row.state, row.gen, answerable,
                              read_buckets(conn, load_id, False), read_buckets(conn, load_id, True),
                              None if row.id_lo is None else (row.id_lo, row.id_hi))

    def publish_key_demand(self, load_id: str, coordinator: str, waiting: dict[int, int]) -> None:
        """Replace this coordinator's published key demand with *waiting* (id1 -> queries), in
        one transaction."""
        t = key_demand_table
        now = time.time()
        rows = [{"load_id": load_id, "coordinator": coordinator, "id1": k, "waiting": n,
                 "updated": now} for k, n in waiting.items() if n > 0]
        with self._transaction() as conn:
            conn.execute(t.delete().where(t.c.coordinator == coordinator))
            if rows:
                conn.execute(t.insert(), rows)

    def add_early_answers(self, answered: dict[tuple[str, int], int]) -> None:
        """Add early answers given, per (load id, id1), to the catalog's counts, in one
        transaction (a caller whose call raised still holds them: none were added)."""
        if not answered:
            return
        t = early_answers_table
        now = time.time()
        upsert = mysql.insert(t)
        with self._transaction() as conn:
            conn.execute(upsert.on_duplicate_key_update(answered=t.c.answered
                                                        + upsert.inserted.answered,
                                                        updated=upsert.inserted.updated),
                         [{"load_id": load_id, "id1": id1, "answered": n, "updated": now}
                          for (load_id, id1), n in answered.items()])

    # -- status

    def early_progress(self, load_id: str) -> EarlyProgress | None:
        """How far a load that answers early has got (None: it does not)."""
        e, k, p = early_table, key_demand_table, phases_table
        with self._transaction() as conn:
            row = conn.execute(sa.select(e.c.state, e.c.key_share, e.c.answerable_bytes,
                                         e.c.total_bytes).where(e.c.load_id == load_id)).first()
            if row is None:
                return None
            demand = conn.execute(sa.select(sa.func.coalesce(sa.func.sum(p.c.bytes), 0)).where(
                p.c.load_id == load_id, p.c.phase == "demand")).scalar()
            waiting = conn.execute(sa.select(sa.func.count(sa.distinct(k.c.id1))).where(
                k.c.load_id == load_id, k.c.waiting > 0,
                k.c.updated >= time.time() - 30.0)).scalar()
        return EarlyProgress(row.state, float(row.key_share), int(row.answerable_bytes),
                             int(row.total_bytes), int(demand or 0), int(waiting or 0))

    def claim_answers(self, load_id: str) -> dict[int, int]:
        """Early answers per false claim of *load_id*: those given in the id1s it affects,
        by every process that gave them (a claim without any is left out)."""
        c, a = false_claims_table, early_answers_table
        query = (sa.select(c.c.claim_no, sa.func.sum(a.c.answered))
                 .join_from(c, a, sa.and_(a.c.load_id == c.c.load_id,
                                          a.c.id1.between(c.c.affected_lo, c.c.affected_hi)))
                 .where(c.c.load_id == load_id).group_by(c.c.claim_no))
        with self._transaction() as conn:
            return {int(k): int(n) for k, n in conn.execute(query)}
