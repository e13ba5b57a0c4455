"""Resuming a load (``debl load SOURCE --resume LOAD_ID``): what it may continue, and the one
consistent state it continues from (docs/LOADING.md, "Decisions where DESIGN is silent", row
"Resume").

- Only the newest load can be resumed: resuming an older one, superseded by a newer load, is
  refused naming the newer one (it once deleted the files of the load being served).
- A load that is up with its hot keys in MySQL (or without hot files) has nothing to resume; one
  that is up while MySQL was still taking its hot files in continues with the hot path only.
- A source whose files changed (size or mtime) since the listing is refused: the recorded byte
  offsets would be read in another file.
- The chunks recorded as bucketed count as done (in any order: chunks fetched on demand land
  out of the files' order); the copy takes only the bytes they do not hold. The rows and files
  of every other chunk (copied, or bucketed by a killed dist_ch that never recorded it) are
  deleted first: a chunk redone may be cut differently, and its old slice files must never be
  read beside the new ones.
"""

from __future__ import annotations

from dataclasses import dataclass

from debl.format.bucket_map import BucketMap
from debl.catalog import Catalog, ChunkState, HotState, LoadRecord, LoadState
from debl.errors import LoadStateError
from debl.hdfs import HdfsClient, HdfsFile
from loaders.chunker import Chunk, chunk_no_of
from loaders.rejects import unescape_name
from loaders.source import Source, SourceFile, changed_files


@dataclass(frozen=True)
class ResumeState:
    """Where a resumed load goes on from."""

    load: LoadRecord
    files: list[tuple[int, SourceFile]]  # (file_seq, file) in listing order
    hot_seqs: set[int]
    bucket_map: BucketMap | None  # None: killed before the sample decided it
    done: list[Chunk]  # bucketed chunks, by number
    hot_done: bool  # MySQL holds the hot rows (or there are none)


def resume_state(catalog: Catalog, source: Source, load_id: str) -> ResumeState:
    """The state *load_id* continues from, after the checks above (LoadStateError if it may
    not be resumed). Marks it ``running`` again if it had failed before its uptime."""
    load = catalog.loads.load(load_id)
    if load is None:
        raise LoadStateError(f"no load {load_id!r}; `debl status` lists the loads")
    newest = catalog.loads.load()
    if newest is not None and newest.load_id != load_id:
        raise LoadStateError(f"load {load_id} cannot be resumed: load {newest.load_id} started "
                             "after it (only the newest load can be resumed; the current day "
                             "keeps serving whatever happens to a newer one)")
    if load.dropped is not None or load.dropping is not None:
        raise LoadStateError(f"load {load_id} cannot be resumed: its stores were dropped (or "
                             "are being dropped) by cleanup; run `debl load` anew")
    hot_done = load.hot_state in (HotState.MYSQL, HotState.NONE)
    if load.state == LoadState.UP and hot_done:
        raise LoadStateError(f"load {load_id} is already up; nothing to resume")
    _check_unchanged(catalog, source, load_id)
    recorded = catalog.files.files(load_id)
    files = [(f.file_seq, SourceFile(unescape_name(f.name), f.size, f.mtime)) for f in recorded]
    chunks = catalog.index.chunks(load_id)
    done = [Chunk.of(c) for c in chunks if c.state == ChunkState.BUCKETED]
    catalog.index.forget_chunks(load_id,
                                [c.chunk_no for c in chunks if c.state != ChunkState.BUCKETED])
    if load.state != LoadState.UP:
        catalog.loads.update_load(load_id, state=LoadState.RUNNING, error=None)
    return ResumeState(load, files, {f.file_seq for f in recorded if f.hot}, load.bucket_map,
                       done, hot_done)


def _check_unchanged(catalog: Catalog, source: Source, load_id: str) -> None:
    """Refuse to resume from a source whose files changed since the load listed them: the
    recorded byte offsets would be read in another file (a fragment can parse as a valid line
    with another id1)."""
    recorded = [SourceFile(unescape_name(f.name), f.size, f.mtime)
                for f in catalog.files.files(load_id)]
    changed = changed_files(source, recorded)
    if changed:
        shown = "; ".join(changed[:5]) + (f"; and {len(changed) - 5} more"
                                          if len(changed) > 5 else "")
        raise LoadStateError(f"load {load_id} cannot be resumed: its source changed since it "
                             f"was listed ({shown}); start a new load (`debl load SOURCE`)")


def drop_stale_files(hdfs: HdfsClient, chunk_dir: str, bucket_dirs: list[str],
                     done: set[int]) -> None:
    """Delete the chunk files and bucket files of every chunk not in *done* (not recorded as
    bucketed: redone, maybe cut differently) that a killed copy or dist_ch may have left."""
    def stale(file: HdfsFile) -> bool:
        chunk_no = chunk_no_of(file.name)
        return chunk_no is not None and chunk_no not in done

    if hdfs.status(chunk_dir) is not None:
        for file in hdfs.list(chunk_dir):
            if not file.is_dir and stale(file):
                hdfs.delete(file.path)
    for bucket_dir in bucket_dirs:
        if hdfs.status(bucket_dir) is None:
            continue
        for directory in hdfs.list(bucket_dir):
            if directory.is_dir:
                for file in hdfs.list(directory.path):
                    if stale(file):
                        hdfs.delete(file.path)
