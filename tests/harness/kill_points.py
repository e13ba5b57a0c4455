"""Where a killed command stood (docs/RELIABILITY.md, "Kill campaign"): the kill point is named
from what the catalog (open phases, chunk and job states) and MySQL's process list showed at the
moment of the kill.
"""

from __future__ import annotations

from debl.catalog import Catalog, HotState, JobState, LoadState
from debl.config import Config


def load_point(config: Config, before: str | None) -> list[str]:
    """Where a load stands now: the open phases of the latest load and, for the hot path,
    the statement MySQL runs for it."""
    with Catalog(config) as catalog:
        load = catalog.loads.load()
        if load is None or load.load_id == before:
            return ["start-up (before the load is recorded)"]
        if load.state == LoadState.UP and load.hot_state != HotState.LOADING:
            return ["after uptime"]
        phases = catalog.phases.phases(load.load_id)
        statements = catalog.probes.running_statements()
    points = []
    if load.state == LoadState.UP:  # up, MySQL still taking the hot keys in (docs/LOADING.md)
        points.append("after uptime, before MySQL took over")
    for p in phases:
        if p.ended is not None:
            continue
        if p.phase == "hot":
            kinds = [_statement_kind(s) for s in statements]
            points += [f"hot: {k}" for k in kinds if k] or ["hot: parsing and streaming"]
        else:
            points.append(p.phase)
    if not points:
        points = ["load recorded, no phase open" if not phases else "between phases"]
    return sorted(set(points))


def _statement_kind(statement: str) -> str | None:
    s = statement.lstrip().upper()
    for prefix, kind in (("LOAD DATA", "LOAD DATA"), ("INSERT", "merge (INSERT ... SELECT)"),
                         ("ALTER TABLE", "index build"), ("CREATE", "table"),
                         ("DROP", "table"), ("TRUNCATE", "table")):
        if s.startswith(prefix):
            return kind
    return None


GEN_HF_START = "start-up (Spark, table)"


def gen_hf_point(config: Config, since: float) -> list[str]:
    """Where gen_HF stands now: inside a run's HFile writing or bulk load (open phases), just
    after a bulk load (ended, buckets not yet marked), or outside runs."""
    with Catalog(config) as catalog:
        load = catalog.loads.current()
        assert load is not None, "no current load"
        phases = [p for p in catalog.phases.phases(load.load_id) if p.started >= since
                  and p.phase in ("hfiles", "bulkload")]
        jobs = catalog.jobs.jobs(load.load_id)
    running = {j.run_id for j in jobs if j.state == JobState.RUNNING}
    open_steps = [p for p in phases if p.ended is None]
    if open_steps:
        return sorted({"HFile writing" if p.phase == "hfiles" else "bulk load"
                       for p in open_steps})
    if running:
        ended_loads = {p.item for p in phases if p.phase == "bulkload"}
        if running & ended_loads:
            return ["after a bulk load, before the buckets are marked loaded"]
        return ["run started, before its HFiles"]
    if all(j.state == JobState.LOADED for j in jobs):
        return ["after the last run"]
    return [GEN_HF_START if not phases else "between runs"]
