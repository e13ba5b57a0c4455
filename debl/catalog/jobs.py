"""The catalog's job status: one row per cold bucket of a load, moved by gen_HF through
``pending``, ``queued``, ``running``, ``loaded`` or ``failed``. Keyed by load, so a run of one
load never moves another load's buckets (docs/RELIABILITY.md, "Concurrency")."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa

from debl.catalog.base import CatalogEngine
from debl.catalog.records import Job
from debl.catalog.schema import JobState, jobs_table

# The job states that stamp a time column when a bucket enters them (see set_job_state).
_STAMPED = {JobState.QUEUED: "queued", JobState.RUNNING: "started", JobState.LOADED: "ended",
            JobState.FAILED: "ended"}


class JobsCatalog:
    """The job status of each load's buckets: ``Catalog.jobs``."""

    def __init__(self, engine: CatalogEngine):
        self._transaction = engine.transaction

    def job_states(self, load_id: str) -> dict[int, str]:
        t = jobs_table
        with self._transaction() as conn:
            return dict(conn.execute(sa.select(t.c.b_index, t.c.state)
                                     .where(t.c.load_id == load_id)).all())

    def jobs(self, load_id: str) -> list[Job]:
        """Every bucket's job status of the load, by b_index."""
        t = jobs_table
        query = (sa.select(*[c for c in t.columns if c.name != "load_id"])
                 .where(t.c.load_id == load_id).order_by(t.c.b_index))
        with self._transaction() as conn:
            return [Job(**row) for row in conn.execute(query).mappings()]

    def set_job_state(self, load_id: str, buckets: Iterable[int], state: JobState,
                      run_id: str | None = None, error: str | None = None, *,
                      of_run: str | None = None) -> list[int]:
        """Move buckets of *load_id* to *state*; returns those moved. Entering ``queued``,
        ``running``, ``loaded`` or ``failed`` stamps the matching time; entering ``running``
        counts an attempt. With *of_run*, only buckets that run *of_run* still holds
        (``running`` under that run id) move."""
        if state not in tuple(JobState):
            raise ValueError(f"unknown job state {state!r}: one of {', '.join(JobState)}")
        ids = list(buckets)
        if not ids:
            return []
        t = jobs_table
        values: dict[str, Any] = {"state": state, "run_id": run_id, "error": error}
        if state in _STAMPED:
            values[_STAMPED[state]] = time.time()
        if state == JobState.RUNNING:
            values["attempts"] = t.c.attempts + 1
        where = [t.c.load_id == load_id, t.c.b_index.in_(ids)]
        if of_run is not None:
            where += [t.c.run_id == of_run, t.c.state == JobState.RUNNING]
        with self._transaction() as conn:
            moved = list(conn.execute(sa.select(t.c.b_index).where(*where).with_for_update())
                         .scalars())
            if moved:
                conn.execute(t.update().where(t.c.load_id == load_id, t.c.b_index.in_(moved))
                             .values(values))
            return moved

    def finish_run(self, load_id: str, run_id: str,
                   loaded: dict[int, tuple[int, int, int]]) -> list[int]:
        """Mark the buckets of run *run_id* ``loaded`` with their (rows, superseded, checksum),
        in one transaction; returns the buckets marked. Only buckets the run still holds are
        marked (see ``set_job_state``'s *of_run*): after its load was dropped, none."""
        t = jobs_table
        with self._transaction() as conn:
            held = set(conn.execute(
                sa.select(t.c.b_index).where(t.c.load_id == load_id,
                                             t.c.b_index.in_(list(loaded)),
                                             t.c.run_id == run_id,
                                             t.c.state == JobState.RUNNING)
                .with_for_update()).scalars())
            now = time.time()
            for b in sorted(held):
                rows, superseded, checksum = loaded[b]
                conn.execute(t.update().where(t.c.load_id == load_id, t.c.b_index == b).values(
                    state=JobState.LOADED, ended=now, error=None, rows_loaded=rows,
                    superseded=superseded, checksum_loaded=checksum))
        return sorted(held)
