"""The check of fresh answers (docs/FRESHNESS.md, "The checker"): every answer of a run's answer
logs (``debl.workload.answer_log``) against the contract, from the dump and the run's writes
(``debl.workload.fresh_history``).

For an answer sent at ``s`` and received at ``r`` (the client's ``CLOCK_MONOTONIC``, the writes'
clock too):

- ``lo``: the highest position of a write acknowledged before ``s`` (before ``s - tolerance``
  with a tolerance), at least the dump's: the source's head when the query arrived is at least
  that (the write had committed);
- ``hi``: the highest position of a write sent before ``r``: no write sent later can have
  committed before the answer came;
- the answer is **valid** iff the source's state at some position ``p`` in ``[lo, hi]`` gives
  exactly that answer (the same read, same arguments, its digest). Only the key's versions
  matter: its state changes only at its own writes' positions, so the candidates are the
  versions from ``lo``'s to ``hi``'s.

Violations, by kind: ``wrong at every position`` (no version of the key since the dump gives it,
or only versions newer than ``hi``: a mix of positions, a wrong row); ``older than its arrival``
(only versions older than ``lo`` give it); ``went back`` (see ``_went_back``: a client shown a
key at one version was later shown it at an older one).

Cost: one pass over the dump's files keeping the id1s asked or written; then per key asked, one
walk through its versions (a state's digest computed once per version needed), per answer a
few comparisons.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from debl.catalog import Catalog, Change
from debl.config import Config
from debl.errors import ConfigError, LoadStateError
from debl.format.link import (DEFAULT_LIMIT, MAX_TIME, Link, count_visible, select_id2s,
                              select_links)
from debl.format.overlay import apply_change
from debl.position import DumpPosition
from debl.workload.answer_log import Answers, read_answer_logs, rows_digest
from debl.workload.fresh_history import (History, KeyHistory, Problems, build_history,
                                         read_change_log)
from debl.workload.mix import COUNT_LINK, GET_LINK_LIST, MULTIGET_LINK, READ_OPS
from debl.workload.writers import WriteRecord
from loaders.listing import listing_position
from loaders.source import LocalSource

WRONG, OLDER, WENT_BACK = "wrong at every position", "older than its arrival", "went back"
_LIST, _COUNT, _MULTI = (READ_OPS.index(op) for op in (GET_LINK_LIST, COUNT_LINK, MULTIGET_LINK))


@dataclass
class FreshReport:
    """A check of fresh answers: ``answers`` in the logs, ``checked`` of them (answered),
    ``failed`` (no answer: nothing to check), over ``keys`` (id1, link_type); ``writes`` at a
    position past the dump's (``dump``), up to ``last_seq``; the violations and the history's
    problems by kind with examples; notes; the seconds each stage took."""

    answers: int
    checked: int
    failed: int
    keys: int
    writes: int
    dump: str
    last_seq: int
    tolerance_s: float
    violations: Problems
    history: Problems
    dump_lines: int = 0
    notes: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """No violation and a history without problems."""
        return self.violations.total == 0 and self.history.total == 0

    def to_dict(self) -> dict:
        return {"ok": self.ok, "answers": self.answers, "checked": self.checked,
                "failed": self.failed, "keys": self.keys, "writes": self.writes,
                "dump": self.dump, "last_seq": self.last_seq, "tolerance_s": self.tolerance_s,
                "dump_lines": self.dump_lines, "violations": self.violations.to_dict(),
                "history_problems": self.history.to_dict(), "notes": self.notes,
                "seconds": self.seconds}


def check_fresh(dump_dir: Path | str, writes: Sequence[WriteRecord], answers: Answers, *,
                position: DumpPosition | None = None, tolerance_s: float = 0.0,
                changes: Sequence[Change] | None = None, changes_upto: int | None = None,
                say: Callable[[str], None] = lambda _: None) -> FreshReport:
    """Check every answer of *answers* against the contract (see the module): the source is
    the dump in *dump_dir* (at *position*, default its ``index.json``'s) with *writes* (the
    run's, every write to the source since the dump) applied; *tolerance_s* relaxes the lower
    bound as ``fresh.tolerance`` does; *changes* (the change log past the dump, read up to
    *changes_upto*), if given, is checked to be exactly the writes. *say* gets notes as they
    come."""
    started = time.perf_counter()
    seconds: dict[str, float] = {}
    rec = answers.records
    answered = np.flatnonzero(rec["ok"] == 1)
    id1s, types = rec["id1"][answered], rec["link_type"][answered]
    history = build_history(dump_dir, writes, set(zip(id1s.tolist(), types.tolist())),
                            position, changes, changes_upto, say)
    seconds["history"] = time.perf_counter() - started
    lo, hi = _bounds(history, rec["sent_ns"][answered], rec["recv_ns"][answered],
                     int(tolerance_s * 1e9))
    violations = Problems()
    t0 = int(rec["sent_ns"].min()) if len(rec) else 0
    order = np.lexsort((types, id1s))
    edges = np.flatnonzero((np.diff(id1s[order]) != 0) | (np.diff(types[order]) != 0)) + 1
    started_answers = time.perf_counter()
    groups = np.split(order, edges) if len(order) else []
    for group in groups:
        key = (int(id1s[group[0]]), int(types[group[0]]))
        _check_key(key, history.key(*key), answers, answered[group], lo[group], hi[group],
                   violations, t0)
    seconds["answers"] = time.perf_counter() - started_answers
    seconds["total"] = time.perf_counter() - started
    past = [s for s in history.seqs if s > history.dump_seq]
    return FreshReport(len(rec), len(answered), len(rec) - len(answered), len(groups),
                       len(past), history.dump.gtid, max(past, default=history.dump_seq),
                       tolerance_s, violations, history.problems, history.dump_lines,
                       list(answers.notes), seconds)


def check_run(config: Config, dump_dir: Path | str, writes: Sequence[WriteRecord],
              answers_dir: Path | str | Sequence[Path | str], *, position: str | None = None,
              tolerance_s: float | None = None, change_log: bool = True,
              say: Callable[[str], None] = lambda _: None) -> FreshReport:
    """``check_fresh`` of a run as the bench and ``debl check-fresh`` have it: the answer logs
    in *answers_dir* (a directory, or several: one per client run); the dump's position from
    its ``index.json`` (or the GTID *position*); the tolerance ``fresh.tolerance`` unless given;
    with *change_log*, the catalog's change log of the dump's source, which must be exactly the
    writes. LoadStateError when the change log has no follower of that source, ConfigError
    for logs that are not the client's."""
    answers = read_answer_logs(*([answers_dir] if isinstance(answers_dir, (str, Path))
                                 else answers_dir))
    listed = listing_position(LocalSource(Path(dump_dir)).list())  # the note: build_history
    dump = listed
    if position is not None:
        try:
            dump = DumpPosition(position, listed.source if listed is not None else "unnamed")
        except ValueError as exc:
            raise ConfigError(f"--position: {exc}") from None
    changes = upto = None
    if change_log and dump is not None:
        if listed is None:
            raise ConfigError(f"the dump in {dump_dir} names no source (index.json), so its "
                              "change log is unknown: pass --no-change-log")
        with Catalog(config) as catalog:
            changes, upto = read_change_log(catalog, dump.source, dump.seq)
        if upto is None:
            raise LoadStateError(
                f"the change log holds nothing of source {dump.source}: no follower has run "
                "(`debl follow`); or check without it (--no-change-log)")
    return check_fresh(dump_dir, writes, answers, position=dump,
                       tolerance_s=(config.fresh.tolerance if tolerance_s is None
                                    else tolerance_s),
                       changes=changes, changes_upto=upto, say=say)


def _bounds(history: History, sent: np.ndarray, recv: np.ndarray,
            tolerance_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """Per answer, ``lo`` and ``hi`` (see the module), as positions."""
    dump = history.dump_seq
    seqs = np.array(history.seqs, dtype=np.int64)
    w_acked = np.array([w.acked_ns for w in history.logged], dtype=np.int64)
    w_sent = np.array([w.sent_ns for w in history.logged], dtype=np.int64)

    def highest_before(instants: np.ndarray, at: np.ndarray,
                       side: Literal["left", "right"]) -> np.ndarray:
        if not len(instants):
            return np.full(len(at), dump, dtype=np.int64)
        order = np.argsort(instants, kind="stable")
        highest = np.maximum.accumulate(seqs[order])
        k = np.searchsorted(instants[order], at, side=side)
        return np.maximum(np.where(k > 0, highest[np.maximum(k - 1, 0)], dump), dump)

    # acknowledged strictly before the sending; sent at or before the answer came
    return (highest_before(w_acked, sent - tolerance_ns, "left"),
            highest_before(w_sent, recv, "right"))


class _States:
    """One key's rows at its versions, walked forward from the dump's (back: from the dump
    again), and the digests of its answers at each, kept per version."""

    def __init__(self, history: KeyHistory):
        self.history = history
        self.v, self.rows = 0, dict(history.base)
        self._digests: dict[tuple[int, int], tuple[int, int]] = {}

    def at(self, v: int) -> dict[int, Link]:
        if v < self.v:
            self.v, self.rows = 0, dict(self.history.base)
        while self.v < v:
            apply_change(self.rows, *self.history.changes[self.v])  # the overlay rule
            self.v += 1
        return self.rows

    def digest(self, v: int, op: int, id2s: tuple[int, ...] = ()) -> tuple[int, int]:
        """``(digest, rows)`` of read *op* at version *v*, as the client's log has it."""
        if op == _MULTI:
            found = select_id2s(self.at(v).values(), id2s)
            return rows_digest(found), len(found)
        cached = self._digests.get((v, op))
        if cached is None:
            winners = self.at(v).values()
            if op == _COUNT:
                cached = (count_visible(winners), 0)
            else:
                found = select_links(list(winners), 0, MAX_TIME, 0, DEFAULT_LIMIT)
                cached = (rows_digest(found), len(found))
            self._digests[(v, op)] = cached
        return cached


def _check_key(key: tuple[int, int], history: KeyHistory, answers: Answers, rows: np.ndarray,
               lo: np.ndarray, hi: np.ndarray, violations: Problems, t0: int) -> None:
    """The answers *rows* (indices into *answers*) of one key, with their bounds."""
    rec = answers.records[rows]
    seqs = np.array(history.seqs, dtype=np.int64)
    vlo = np.searchsorted(seqs, lo, side="right").tolist()
    vhi = np.searchsorted(seqs, hi, side="right").tolist()
    ops, digests, counts = rec["op"].tolist(), rec["digest"].tolist(), rec["rows"].tolist()
    states = _States(history)
    # Every version a list or count answer needs, in order (one walk), then multiget_links'
    # (their id2s differ): a state is rebuilt from the dump only when a walk goes back.
    for v, op in sorted({(v, op) for op, a, b in zip(ops, vlo, vhi) if op != _MULTI
                         for v in range(a, b + 1)}):
        states.digest(v, op)
    multi = sorted((v, i) for i, (op, a, b) in enumerate(zip(ops, vlo, vhi)) if op == _MULTI
                   for v in range(a, b + 1))
    multi_found: dict[tuple[int, int], tuple[int, int]] = {
        (v, i): states.digest(v, _MULTI, answers.id2s_of(int(rows[i]))) for v, i in multi}
    valid: list[list[int]] = []
    for i, (op, a, b) in enumerate(zip(ops, vlo, vhi)):
        want = (digests[i], counts[i])
        valid.append([v for v in range(a, b + 1)
                      if (multi_found[(v, i)] if op == _MULTI else states.digest(v, op)) == want])
        if not valid[i]:
            _wrong(key, history, states, answers, int(rows[i]), a, b, int(lo[i]), int(hi[i]),
                   violations, t0)
    _went_back(key, history, answers, rows, valid, violations, t0)


def _wrong(key: tuple[int, int], history: KeyHistory, states: _States, answers: Answers,
           row: int, vlo: int, vhi: int, lo: int, hi: int, violations: Problems,
           t0: int) -> None:
    """An answer that no version in [vlo, vhi] gives: older than its arrival if an older
    version gives it, else wrong (a newer one may: said in the example)."""
    r = answers.records[row]
    op, want = int(r["op"]), (int(r["digest"]), int(r["rows"]))
    id2s = answers.id2s_of(row)
    older = [v for v in range(vlo) if states.digest(v, op, id2s) == want]
    newer = [v for v in range(vhi + 1, len(history.seqs) + 1)
             if states.digest(v, op, id2s) == want]
    text = (f"{_described(key, answers, row, t0)}: lo {lo}, hi {hi}; "
            f"{_answer(op, want)} is the source's at no position in [lo, hi]")
    if older:
        violations.add(OLDER, text + f"; it is the source's {_span(history, older[-1])}")
    else:
        violations.add(WRONG, text + (f"; it is the source's {_span(history, newer[0])}" if newer
                                      else "; nor at any position since the dump"))


def _went_back(key: tuple[int, int], history: KeyHistory, answers: Answers, rows: np.ndarray,
               valid: list[list[int]], violations: Problems, t0: int) -> None:
    """No going back, per client process (one coordinator each) on this key: each answer is
    given the least version it may be at that is not older than the version of any answer the
    process received before sending it; an answer for which none is left went back. Choosing
    the least leaves every later answer the most room, so an answer is flagged only if no
    choice of versions, one per answer within its valid ones, rises along the process's
    real-time order (docs/FRESHNESS.md, "The checker")."""
    rec = answers.records[rows]
    sent, recv = rec["sent_ns"].tolist(), rec["recv_ns"].tolist()
    process = answers.process[rows].tolist()
    by_process: dict[int, list[int]] = {}
    for i in sorted(range(len(rows)), key=lambda i: sent[i]):
        if valid[i]:
            by_process.setdefault(process[i], []).append(i)
    for process_answers in by_process.values():
        done: list[tuple[int, int, int]] = []  # (received, version given, answer): a heap
        floor, floor_of = 0, -1
        for i in process_answers:
            while done and done[0][0] < sent[i]:
                _, v, j = heapq.heappop(done)
                if v > floor:
                    floor, floor_of = v, j
            given = next((v for v in valid[i] if v >= floor), None)
            if given is None:
                given = valid[i][-1]
                violations.add(WENT_BACK, (
                    f"{_described(key, answers, int(rows[i]), t0)} is the source's only "
                    f"{_span(history, valid[i][0])}"
                    + (f" to {_span(history, given)}" if given != valid[i][0] else "")
                    + f", older than {_span(history, floor)} that "
                    f"{_described(key, answers, int(rows[floor_of]), t0)} already showed "
                    "the same process"))
            heapq.heappush(done, (recv[i], given, i))


def _span(history: KeyHistory, v: int) -> str:
    """Where version *v* of a key holds, in positions."""
    start = "the dump's position" if v == 0 else f"position {history.seqs[v - 1]}"
    end = (f" until {history.seqs[v] - 1}" if v < len(history.seqs) else " on")
    return f"from {start}{end}"


def _described(key: tuple[int, int], answers: Answers, row: int, t0: int) -> str:
    r = answers.records[row]
    op = READ_OPS[int(r["op"])]
    args = f"{key[0]}, {key[1]}"
    if op == MULTIGET_LINK:
        id2s = answers.id2s_of(row)
        args += f", [{', '.join(map(str, id2s[:8]))}{', ...' if len(id2s) > 8 else ''}]"
    return (f"{op}({args}) of process {int(answers.process[row])} thread {int(r['thread'])}, "
            f"sent at {(int(r['sent_ns']) - t0) / 1e6:.3f} ms, answered "
            f"{(int(r['recv_ns']) - int(r['sent_ns'])) / 1e6:.3f} ms later")


def _answer(op: int, want: tuple[int, int]) -> str:
    if op == _COUNT:
        return f"its count {want[0]}"
    return f"its {want[1]} row(s) (digest {want[0]:016x})"
