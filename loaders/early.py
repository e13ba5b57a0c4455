"""A load's answers before its copy ends: which keys are answerable as its chunks land, the
manifests' claims checked on the way, and what a fetch on demand must get for a key
(docs/LOADING.md, "Answers before the copy ends").

A key is answerable once every piece whose claim can hold it is bucketed (``debl.keys.keyspace``,
over the pieces of ``debl.keys.manifest``); after every chunk the load records as bucketed it
publishes the answerable keys (``Catalog.publish_answerable``), and coordinators answer them
from the running load by the raw route's reader. Each bucketed segment's lines are checked
against its file's manifest as dist_ch buckets them (``segment_claims``: on the JVM,
``debl.jobs.DistCh.Claims``; in this process, ``debl.keys.manifest.claim_violations``); the first
claim found false stops early answers for the load at once, recorded in the transaction that
records its chunk bucketed (``IndexCatalog.chunk_bucketed``: a resumed load never answers
early from a chunk shown to break a claim): the load goes on to its uptime as any other, and
loses or doubles nothing, since what is copied and bucketed is decided by bytes, never by
claims.

Thread-safe: the bucketer calls ``bucketed`` under its recording lock, fetches on demand ask
``missing`` from their own thread.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Sequence

from debl.catalog import Catalog, EarlyCatalog, FalseClaim
from debl.config import Config
from debl.faultpoints import reached
from debl.keys.keyspace import Answerability, KeySet
from debl.keys.manifest import ClaimViolation, Manifest, Piece, pieces
from loaders.chunker import Chunk, Segment
from loaders.source import SourceFile


def segment_claims(manifest: Manifest | None, seg: Segment) -> dict | None:
    """What *manifest* claims of the lines of *seg*, as dist_ch's JVM check takes it (see
    ``debl.jobs.DistCh.Claims``): None for a file without manifest (it claims every id1)."""
    if manifest is None:
        return None
    if manifest.id1_lo is None:  # no valid line: any id1 breaks the claim
        return {"lo": 1, "hi": 0, "sorted": False, "cuts": [], "after": 0}
    lo, hi = manifest.id1_lo, manifest.id1_hi
    if not manifest.sorted or not manifest.offsets:
        return {"lo": lo, "hi": hi, "sorted": False, "cuts": [], "after": hi}
    offsets = manifest.offsets
    first = max(bisect.bisect_right(offsets, seg.start) - 1, 0)
    past = bisect.bisect_left(offsets, seg.end)
    return {"lo": lo, "hi": hi, "sorted": True,
            "cuts": [[offsets[i], manifest.id1s[i]] for i in range(first, past)],
            "after": manifest.id1s[past] if past < len(offsets) else hi}


class EarlyAnswers:
    """The answerable keys of one load as its chunks are bucketed (see the module)."""

    def __init__(self, config: Config, catalog: EarlyCatalog, load_id: str,
                 files: list[tuple[int, SourceFile]], manifests: dict[int, Manifest | None],
                 done: Sequence[Chunk] = ()):
        self.config, self.catalog, self.load_id = config, catalog, load_id
        self.manifests = manifests
        self.names = {seq: f.name for seq, f in files}
        self.sizes = {seq: f.size for seq, f in files}
        self._answerability = Answerability(
            p for seq, f in files for p in pieces(seq, f.size, manifests.get(seq)))
        claimed = [(m.id1_lo, m.id1_hi) for m in manifests.values()
                   if m is not None and m.id1_lo is not None and m.id1_hi is not None]
        self._space = KeySet(claimed) if len(claimed) == len(files) else KeySet.every()
        self._lock = threading.Lock()
        self.stopped = False
        for chunk in done:
            self._add(chunk)
        self._publish()

    def claims(self, chunk: Chunk) -> tuple[dict | None, ...]:
        """The claims of each of *chunk*'s segments, for dist_ch's check."""
        return tuple(segment_claims(self.manifests.get(s.file_seq), s) for s in chunk.segments)

    def false_claim(self, violations: list[ClaimViolation]) -> FalseClaim | None:
        """What to record with a chunk whose check found *violations* (the first claim found
        false stops early answers): None when there is none, or early answers stopped before."""
        with self._lock:
            if not violations or self.stopped:
                return None
            return self._false_claim(min(violations, key=lambda v: (v.file_seq, v.offset)))

    def bucketed(self, chunk: Chunk, claim: FalseClaim | None) -> None:
        """*chunk* is recorded as bucketed, with *claim* if its check found one false (which
        stopped early answers in that same transaction): publish the keys answerable now,
        unless early answers stopped."""
        with self._lock:
            self._add(chunk)
            self.stopped = self.stopped or claim is not None
            reached(self.config, "answerable")
            if not self.stopped:
                self._publish()

    def missing(self, id1: int) -> list[Piece]:
        """The pieces not yet bucketed that the answer for *id1* waits for."""
        with self._lock:
            return self._answerability.missing(id1)

    def _add(self, chunk: Chunk) -> None:
        for s in chunk.segments:
            self._answerability.add(s.file_seq, s.start, min(s.end, self.sizes[s.file_seq]))

    def _publish(self) -> None:
        answerable = self._answerability.answerable()
        space = self._space.size()
        share = answerable.intersection(self._space).size() / space if space else 0.0
        self.catalog.publish_answerable(self.load_id, answerable.to_json(), share,
                                        self._answerability.answerable_bytes())

    def _false_claim(self, v: ClaimViolation) -> FalseClaim:
        """The record of a violation: the id1s whose early answers it may have made wrong are
        the file's claimed range and the id1 found (a false point or order puts every claim of
        the file in doubt)."""
        m = self.manifests.get(v.file_seq)
        los = [x for x in (v.lo, v.id1, m.id1_lo if m else None) if x is not None]
        his = [x for x in (v.hi, v.id1, m.id1_hi if m else None) if x is not None]
        kind = ("point" if v.id1 is None or "point" in v.reason else
                "order" if "sorted" in v.reason else "span")
        return FalseClaim(-1, v.file_seq, kind, v.offset,
                          v.describe(self.names.get(v.file_seq, str(v.file_seq))),
                          max(min(los), 0), max(his))


def note_manifests(config: Config, catalog: Catalog, load_id: str,
                   files: list[tuple[int, SourceFile]], message: Callable[[str], None],
                   eligible: bool) -> None:
    """Record a new load's manifests, say which could not be used, and let the load answer
    before its uptime when it can: it has manifests, no day is current (that day serves until
    this one is up), the setting allows it and the load is *eligible* (DeBL's own, not waiting
    for MySQL)."""
    manifests = {seq: f.manifest.to_json() for seq, f in files if f.manifest is not None}
    catalog.early.add_manifests(load_id, manifests)
    for _, f in files:
        if f.manifest_error:
            message(f"{f.manifest_error}; that file claims every id1")
    if (manifests and eligible and config.loading.early_answers
            and catalog.loads.current() is None):
        claimed = [(f.manifest.id1_lo, f.manifest.id1_hi) for _, f in files
                   if f.manifest is not None and f.manifest.id1_lo is not None
                   and f.manifest.id1_hi is not None]
        every = len(manifests) < len([f for _, f in files if f.size])
        catalog.early.begin_early(load_id, sum(f.size for _, f in files), None if every else (
            min(lo for lo, _ in claimed), max(hi for _, hi in claimed)) if claimed else None)


def open_early(config: Config, load_id: str, files: list[tuple[int, SourceFile]],
               done: list[Chunk]) -> EarlyAnswers | None:
    """The early answers of a load that gives them (None otherwise), from its recorded
    manifests and its chunks bucketed so far (a resumed load)."""
    catalog = Catalog(config)
    if catalog.early.early_progress(load_id) is None:
        return None
    names = dict(files)
    manifests: dict[int, Manifest | None] = {
        seq: Manifest.from_json(m, names[seq].name, names[seq].size)
        for seq, m in catalog.early.manifests(load_id).items()}
    return EarlyAnswers(config, catalog.early, load_id, files, manifests, done)


def early_summary(catalog: Catalog, load_id: str, files: dict[int, SourceFile]) -> dict:
    """What a load that answered before its uptime did, for its summary (empty for any
    other load)."""
    progress = catalog.early.early_progress(load_id)
    if progress is None:
        return {}
    answers = catalog.early.claim_answers(load_id)
    return {"state": progress.state, "demand_bytes": progress.demand_bytes,
            "false_claims": [{"file": files[c.file_seq].name if c.file_seq in files else "",
                              "offset": c.offset, "kind": c.kind, "detail": c.detail,
                              "affected": [c.affected_lo, c.affected_hi],
                              "early_answers": answers.get(c.claim_no, 0)}
                             for c in catalog.early.false_claims(load_id)]}
