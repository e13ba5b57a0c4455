"""What ``debl status`` reports, read from the catalog as one JSON-ready dict.

The current load (the day every coordinator serves: its state, uptime, hot path and MySQL's
take-over, bucket map, input, per-phase timings and rejected lines), a newer load being loaded
beside it (the same, and its buckets), the previous one while its stores exist and the loads
whose stores are being dropped (docs/LOADING.md, "Days"), the current load's buckets per job
state (and, asked for, every bucket with its demand), the demand summed over coordinators, the
queries the coordinators answered per route, the gen_HF jobs running now, and full availability
once every bucket is loaded, and each source's follower (``followers``: the change log's capture,
docs/FRESHNESS.md) and, for a load kept fresh, what the coordinators applied of it
(``fresh``). A load that answers before its uptime says how far (``early``: the
shares answerable, the bytes fetched on demand, the keys waiting, the claims found false;
docs/LOADING.md, "Answers before the copy ends").
Everything comes from MySQL: the report is the same from any machine and does not need a
coordinator: it is the application's reading of the catalog (docs/ARCHITECTURE.md), and imports
neither the coordinator nor a store. ``debl status --json`` prints it and ``debl ui`` serves it
(docs/UI.md): both read it here, and neither holds a credential (a source URL's password is
dropped before the catalog records it, ``loaders.source``).

Pitfall: ``uptime_s`` and ``full_availability_s`` count from the load's start; docs/DESIGN.md's
uptime is an instant, reported here both as the epoch time and as seconds since the start.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from debl.format.bucket_map import BucketMap
from debl.catalog import (FRESH_COUNTS, Bucket, Catalog, EarlyAnswering, FollowerState, JobState,
                          LoadRecord, LoadState, Phase)

DEMAND_MAX_AGE_S = 60.0  # as ServingCatalog.demand: rows older than this are of dead coordinators
CLAIMS_SHOWN = 20  # false claims listed per load (a load records its first; a resume may add)


def read_status(catalog: Catalog, top: int = 5, every_bucket: bool = False) -> dict:
    """The status of the current load (or, before any is up, of the newest); ``{"load": None,
    ...}`` when there never was one. ``loading``: a newer load being loaded (or failed) beside
    the current one; ``previous``: the load the current one replaced, while its stores exist;
    ``dropping``: the loads whose stores a cleanup began dropping (``dropping_s`` ago) and has
    not finished: never served again, and the next cleanup finishes a drop that was stopped.
    With *every_bucket*, ``buckets["list"]`` holds one entry per bucket of the index: b_index,
    k_lo, k_hi, c_lo and c_hi (the id1 span of its cold rows), rows, bytes, state, demand (as
    gen_HF reads it: summed over live coordinators) and asked (queries that needed it, every
    coordinator's, closed ones included); ``loading["buckets"]`` the same for the new load
    (demand 0: nobody serves it yet); and the load's ``bucket_map`` its split points. A load's
    ``input`` counts its source files and bytes (hot ones apart), ``rejects`` its rejected lines
    per file (the lines themselves are in the load's reject files, ``loaders.rejects``). A load's
    ``early`` is what it answers before its uptime (``_early``; None: it does not), kept after
    its uptime while it is listed."""
    now = time.time()
    current, newest = catalog.loads.current(), catalog.loads.load()
    load = current or newest
    load_id = "" if load is None else load.load_id  # ("": every read below is skipped)
    buckets = catalog.index.buckets(load_id) if load else []
    by_state = Counter(b.state for b in buckets)
    demand = catalog.serving.demand(load_id, DEMAND_MAX_AGE_S) if load else {}
    coordinators = ({row.coordinator for row in catalog.serving.published_demand(load_id,
                                                                                 DEMAND_MAX_AGE_S)}
                    if load else set())
    jobs = catalog.jobs.jobs(load_id) if load else []
    running = [
        {"b_index": j.b_index, "run_id": j.run_id, "started": j.started, "attempts": j.attempts,
         "running_s": None if j.started is None else now - j.started}
        for j in sorted((j for j in jobs if j.state == JobState.RUNNING),
                        key=lambda j: (j.started is not None, j.started or 0.0, j.b_index))]
    failed = [{"b_index": j.b_index, "attempts": j.attempts, "error": (j.error or "")[:300]}
              for j in jobs if j.state == JobState.FAILED]
    answered, answering = catalog.serving.answers(load_id) if load else ({}, 0)
    fresh = {route: answered.pop(route) for route in FRESH_COUNTS.values() if route in answered}
    previous = catalog.loads.previous() if current else None
    prev = catalog.loads.load(previous) if previous else None  # gone meanwhile: None
    status: dict = {
        "now": now,
        "load": None,
        "loading": None,
        "previous": None if prev is None else _brief(prev, now),
        "dropping": [{**_brief(d, now), "dropping_s": now - (d.dropping or now)}
                     for d in catalog.loads.being_dropped()],
        "phases": [],
        "buckets": _bucket_summary(buckets),
        "demand": {
            "total": sum(demand.values()),
            "buckets": len(demand),
            "coordinators": len(coordinators),
            "top": [{"b_index": b, "waiting": n}
                    for b, n in sorted(demand.items(), key=lambda x: (-x[1], x[0]))[:top]],
        },
        "answers": {"by_route": answered, "coordinators": answering,
                    "total": sum(n for route, n in answered.items()
                              if route != "timeouts" and not route.startswith("via_"))},
        "fresh": None if load is None else _fresh(catalog, load, fresh),
        "running_jobs": running,
        "failed_jobs": failed,
        "full_availability": None,
        "followers": [_follower(f, now) for f in catalog.changes.followers()],
    }
    if every_bucket:
        status["buckets"]["list"] = _bucket_list(buckets, demand,
                                                 catalog.serving.asks(load_id) if load else {})
    if load is None:
        return status
    if current is not None and newest is not None and newest.load_id != current.load_id:
        new_buckets = catalog.index.buckets(newest.load_id)
        status["loading"] = {**_brief(newest, now), **_files(catalog, newest.load_id),
                             "early": _early(catalog, newest.load_id),
                             "bucket_map": _map_summary(newest.bucket_map, False),
                             "phases": _phases(catalog.phases.phases(newest.load_id), now),
                             "buckets": _bucket_summary(new_buckets)}
        if every_bucket:
            status["loading"]["buckets"]["list"] = _bucket_list(new_buckets, {}, {})
    status["load"] = {**_brief(load, now), **_files(catalog, load.load_id),
                      "early": _early(catalog, load.load_id),
                      "bucket_map": _map_summary(load.bucket_map, every_bucket),
                      "chunk_size": load.chunk_size}
    status["phases"] = _phases(catalog.phases.phases(load.load_id), now)
    if load.state == LoadState.UP and buckets and by_state.get(JobState.LOADED, 0) == len(buckets):
        ended = max((j.ended for j in jobs if j.ended is not None), default=None)
        if ended is not None:
            at = max(ended, load.uptime or ended)
            status["full_availability"] = {"at": at, "seconds": at - load.started,
                                           "after_uptime_s": at - (load.uptime or at)}
    elif load.state == LoadState.UP and not buckets:  # no cold data: fully available at uptime
        status["full_availability"] = {"at": load.uptime,
                                       "seconds": (load.uptime or load.started) - load.started,
                                       "after_uptime_s": 0.0}
    return status


def _fresh(catalog: Catalog, load: LoadRecord, counts: dict[str, int]) -> dict | None:
    """The fresh answers of a load with a dump's position (None: it has none; docs/FRESHNESS.md,
    "Where changes wait and how they are applied"): its ``source`` (whose follower is among
    ``followers``), whether a follower has captured it (``followed``), whether the change log
    still holds every change since the load's dump (``kept``: the follower's ``kept_from`` is
    not past it), and summed over the coordinators that served it (each publishes its last
    counts; a closed one's buffer is what it held at its close): the changes
    ``applied_on_demand`` and ``applied_background``, the refreshes of each kind that applied
    any, the changes ``buffered`` and the queries that ``timed_out`` waiting for the change
    log."""
    position = load.position
    if position is None:
        return None
    follower = catalog.changes.follower(position.source)
    return {"source": position.source, "followed": follower is not None,
            "kept": follower is None or follower.keeps(position.seq),
            **{name: counts.get(route, 0) for name, route in FRESH_COUNTS.items()}}


def _follower(f: FollowerState, now: float) -> dict:
    """A source's follower (``debl follow``; docs/FRESHNESS.md, "Capture: `debl follow`"): the
    position captured up to (``gtid``, ``seq``), the source's head as it last read it and how
    many transactions it was behind (``behind``), the ``changes`` captured in all, ``lag_s``
    from the last captured commit to its capture (the log's commit times have whole seconds),
    its ``state`` and ``error``, and its last sign of life."""
    return {"source": f.source, "gtid": f.gtid, "seq": f.seq, "state": f.state,
            "error": f.error, "head_gtid": f.head_gtid, "head_seq": f.head_seq,
            "head_age_s": None if f.head_ts is None else now - f.head_ts,
            "behind": None if f.head_seq is None else max(0, f.head_seq - f.seq),
            "changes": f.changes, "kept_from": f.kept_from,
            "lag_s": (None if f.commit_ts is None or f.captured_ts is None
                      else f.captured_ts - f.commit_ts),
            "captured_age_s": None if f.captured_ts is None else now - f.captured_ts,
            "heartbeat_age_s": now - f.heartbeat, "host": f.host, "pid": f.pid}


def _early(catalog: Catalog, load_id: str) -> dict | None:
    """What a load that answers before its uptime has got so far (None: it does not answer
    early), as the load's ``early``: ``state`` (``on``, or ``stopped`` once a claim of its
    manifests was found false), ``key_share`` (of the id1s its manifests claim, the share
    answerable), ``answerable_bytes`` of ``total_bytes`` and their ``bytes_share``,
    ``demand_bytes`` (fetched on demand, ahead of the bulk copy), ``keys_waiting`` (distinct
    id1s queries wait for now), and ``false_claims`` (the first ``CLAIMS_SHOWN`` of
    ``false_claims_total``, each with its file, offset, kind, what was claimed and found, the
    id1s it may have made wrong, and the ``early_answers`` given in them, by every process
    that gave them; ``answers_in_false_claims`` sums them over every claim).

    Pitfall: after the uptime the shares are those last published before it (the load stops
    publishing); a coordinator withdraws its waiting keys once it sees the load up or closes,
    and a killed one's rows stop counting after 30 s. The
    claims are read only once the load stopped: the catalog records a claim and stops the
    load in one transaction, so a load that answers has none, and an open page costs the
    catalog three small reads a second for it (docs/UI.md, "What it costs")."""
    progress = catalog.early.early_progress(load_id)
    if progress is None:
        return None
    claims: list = []
    answered: dict[int, int] = {}
    names: dict[int, str] = {}
    if progress.state == EarlyAnswering.STOPPED:
        claims = catalog.early.false_claims(load_id)
        answered = catalog.early.claim_answers(load_id)
        names = {f.file_seq: f.name for f in catalog.files.files(load_id)}
    total = progress.total_bytes
    return {
        "state": progress.state,
        "key_share": progress.key_share,
        "answerable_bytes": progress.answerable_bytes,
        "total_bytes": total,
        "bytes_share": progress.answerable_bytes / total if total else 0.0,
        "demand_bytes": progress.demand_bytes,
        "keys_waiting": progress.keys_waiting,
        "false_claims_total": len(claims),
        "answers_in_false_claims": sum(answered.values()),
        "false_claims": [{"claim_no": c.claim_no, "file": names.get(c.file_seq, f"#{c.file_seq}"),
                          "file_seq": c.file_seq, "offset": c.offset, "kind": c.kind,
                          "detail": c.detail, "affected": [c.affected_lo, c.affected_hi],
                          "early_answers": answered.get(c.claim_no, 0)}
                         for c in claims[:CLAIMS_SHOWN]],
    }


def _bucket_summary(buckets: list[Bucket]) -> dict:
    """Buckets per job state, their rows and bytes."""
    by_state = Counter(b.state for b in buckets)
    return {
        "total": len(buckets),
        "loaded": by_state.get(JobState.LOADED, 0),
        "by_state": {s: by_state.get(s, 0) for s in JobState},
        "rows": sum(b.rows for b in buckets),
        "bytes": sum(b.bytes for b in buckets),
        "loaded_bytes": sum(b.bytes for b in buckets if b.state == JobState.LOADED),
        "largest_bytes": max((b.bytes for b in buckets), default=0),
    }


def _bucket_list(buckets: list[Bucket], demand: dict[int, int],
                 asked: dict[int, int]) -> list[dict]:
    return [{"b_index": b.b_index, "k_lo": b.k_lo, "k_hi": b.k_hi, "c_lo": b.c_lo,
             "c_hi": b.c_hi, "rows": b.rows, "bytes": b.bytes, "state": b.state,
             "demand": demand.get(b.b_index, 0), "asked": asked.get(b.b_index, 0)}
            for b in buckets]


def _files(catalog: Catalog, load_id: str) -> dict:
    """A load's input (source files and bytes, hot ones apart: the copy's and the hot path's
    totals) and its rejected lines per source file (most first)."""
    files = catalog.files.files(load_id)
    names = {f.file_seq: f.name for f in files}
    rejected: Counter = Counter()
    for count in catalog.files.file_counts(load_id):
        rejected[count.file_seq] += count.rejects
    return {
        "input": {"files": len(files), "bytes": sum(f.size for f in files),
                  "hot_files": sum(1 for f in files if f.hot),
                  "hot_bytes": sum(f.size for f in files if f.hot)},
        "rejects": {"total": sum(rejected.values()),
                    "files": [{"file": names.get(seq, f"#{seq}"), "rejects": n}
                              for seq, n in sorted(rejected.items(), key=lambda x: (-x[1], x[0]))
                              if n]},
    }


def _brief(load: LoadRecord, now: float) -> dict:
    """A load's row as the status shows it: state, times, hot path, namespace, the dump's
    position its listing carried (None: none)."""
    started = load.started
    return {
        "load_id": load.load_id, "approach": load.approach, "source": load.source,
        "state": load.state, "started": started, "uptime": load.uptime,
        "uptime_s": None if load.uptime is None else load.uptime - started,
        "age_s": now - started, "hot_rows": load.hot_rows, "hot_k_lo": load.hot_k_lo,
        "hot_k_hi": load.hot_k_hi, "hot_state": load.hot_state,
        "taken_over_s": None if load.taken_over is None else load.taken_over - started,
        "wait_for_hot": load.wait_for_hot, "error": load.error,
        "stores": {"mysql": load.link_table, "hbase": load.hbase_table, "hdfs": load.hdfs_dir},
        "position": None if load.position is None else load.position.to_json(),
    }


def _map_summary(bucket_map: BucketMap | None, with_splits: bool) -> dict | None:
    """The load's bucket map: its kind, the width or the number of buckets (None: not decided
    yet), and with *with_splits* the split points."""
    if bucket_map is None:
        return None
    if bucket_map.width:
        return {"kind": "width", "width": bucket_map.width, "buckets": None}
    summary: dict[str, Any] = {"kind": "splits", "width": None, "buckets": bucket_map.count}
    if with_splits:
        summary["splits"] = list(bucket_map.splits)
    return summary


def _phases(rows: list[Phase], now: float) -> list[dict]:
    """One line per phase name: how many items, summed duration, wall span, bytes and rows;
    ``open`` counts items started and not ended (still running, or killed)."""
    out: dict[str, dict] = {}
    for row in rows:
        p = out.setdefault(row.phase, {"phase": row.phase, "items": 0, "open": 0,
                                       "seconds": 0.0, "first_start": row.started,
                                       "last_end": None, "bytes": 0, "rows": 0})
        p["items"] += 1
        p["first_start"] = min(p["first_start"], row.started)
        if row.ended is None:
            p["open"] += 1
            p["seconds"] += now - row.started
        else:
            p["seconds"] += row.ended - row.started
            p["last_end"] = max(p["last_end"] or row.ended, row.ended)
        p["bytes"] += row.bytes or 0
        p["rows"] += row.rows or 0
    for p in out.values():
        p["wall_s"] = (p["last_end"] or now) - p["first_start"]
    return list(out.values())
