"""The hot phase of a load: the hot files into the load's MySQL link table
(``loaders.mysql_bulk``), then MySQL takes the hot keys over (``catalog.loads.take_over_hot``), and,
once no coordinator can still read them, the hot files' bucket files go (docs/LOADING.md,
"Uptime without MySQL").

Two ways in:

- **from the hot chunks** (DeBL as it ships): the hot files were copied into HDFS and bucketed
  by dist_ch, which counted their lines and wrote their rejects; the hot path reads the chunks
  back from HDFS (``loaders.hot_chunks``) and drops the bad lines without recording them again;
- **from the source** (the paper's uptime, ``wait_for_hot``, and bulkLoad-mysql): the hot path
  streams the files from the source and records their counts and rejects itself.

Pitfalls:

- The take-over is one transaction with the end of the phase, the hot range and the key filter:
  a resumed load skips the hot path once its phase has ended, and coordinators read MySQL for
  hot keys from then on.
- The hot bucket files are deleted only after every live coordinator has said (its heartbeat)
  that it reads the load's hot keys from MySQL with no query reading those files; a
  coordinator that says nothing within ``loading.coordinator_ack_timeout`` is taken for dead.
"""

from __future__ import annotations

import time

from debl.catalog import Catalog, HotState
from debl.faultpoints import reached
from debl.hdfs import HdfsClient
from loaders.chunker import Chunk
from loaders.hot_chunks import HotChunkSource
from loaders.load_context import LoadContext, LoadIO, LoadProgress
from loaders.mysql_bulk import HotResult, load_hot
from loaders.rejects import HOT_PART


class _Recorded:
    """The reject part of a hot path whose bad lines dist_ch has recorded already."""

    path = "the load's reject files (written by dist_ch)"

    def write(self, file: str, line_no: int, reason: str, line: bytes) -> None:
        """Dropped: the line's reject was recorded when its hot chunk was bucketed."""


def load_hot_files(load: LoadContext, io: LoadIO, chunks: list[Chunk] | None) -> HotResult:
    """Load the hot files into the load's link table and hand the hot keys to MySQL. *chunks*:
    read them back from these hot chunks in HDFS (see the module), or from the source when None.
    Raises what the hot path raised; the load's hot state then says ``failed`` with it."""
    config, load_id, namespace, hot = load.config, load.load_id, load.namespace, load.hot
    source, rejects, progress = io.source, io.rejects, io.progress
    with Catalog(config) as catalog:
        catalog.phases.phase_start(load_id, "hot", "all")
        try:
            if chunks is not None:
                hdfs = HdfsClient(config, threads=2)
                try:
                    # the hot chunks read back as a source, their rejects recorded already
                    result = load_hot(config, HotChunkSource(hdfs, chunks),  # type: ignore[arg-type]
                                      hot, _Recorded(), -1,  # type: ignore[arg-type]
                                      progress=progress.hot,
                                      table=namespace.link_table)
                finally:
                    hdfs.close()
            else:
                with rejects.open_part(HOT_PART) as part:
                    try:
                        result = load_hot(config, source, hot, part, load.max_bad,
                                          progress=progress.hot, table=namespace.link_table)
                    finally:  # before the phase counts as done; a failed one's rejects stay
                        part.commit()
        except BaseException as exc:
            catalog.loads.update_load(load_id, hot_state=HotState.FAILED, error=_first_line(exc))
            raise
        reached(config, "hot-loaded")
        for phase, t0, t1 in result.phases:
            catalog.phases.record_phase(load_id, phase, "all", t0, t1, result.bytes, result.lines)
        catalog.loads.take_over_hot(load_id, result.bytes, result.rows, result.k_lo, result.k_hi,
                                    result.per_file if chunks is None else None, result.hot_keys)
    progress.message(f"MySQL took the hot keys over: {result.rows} rows")
    return result


def drop_hot_buckets(load: LoadContext, progress: LoadProgress) -> bool:
    """Delete the load's hot bucket files once every live coordinator reads its hot keys from
    MySQL alone (at most ``loading.coordinator_ack_timeout`` s of waiting); False if some
    coordinator did not say so in time (the files are kept: cleanup drops them with the load)."""
    config, load_id = load.config, load.load_id
    deadline = time.monotonic() + config.loading.coordinator_ack_timeout
    with Catalog(config) as catalog:
        behind = catalog.serving.coordinators_behind(load_id, hot_mysql=True)
        while behind and time.monotonic() < deadline:
            time.sleep(0.05)
            behind = catalog.serving.coordinators_behind(load_id, hot_mysql=True)
        if behind:
            progress.message(f"coordinator(s) {', '.join(behind)} did not say within "
                             f"{config.loading.coordinator_ack_timeout:.0f} s "
                             "(loading.coordinator_ack_timeout) that they read the hot keys from "
                             "MySQL: the hot bucket files are kept until the load is cleaned up")
            return False
        t0 = time.time()
        HdfsClient(config).delete(load.namespace.hot_dir, recursive=True)
        catalog.phases.record_phase(load_id, "hot_files_removed", "all", t0, time.time())
    return True


def _first_line(exc: BaseException) -> str:
    return (str(exc) or type(exc).__name__).strip().splitlines()[0][:2000]
