"""A bench's input and how each approach cuts it.

- ``ensure_input``: ``debl generate`` of the spec into ``data_dir``, reused when the directory
  already holds that exact spec (a hidden ``.bench-input.json`` marker records it);
  ``max_id_for_size`` turns ``--size`` into ``--max-id``.
- ``load_options``: per approach its load options. debl's hot files are the newest files whose
  bytes come closest to ``hot_share`` of the input (``hot_bytes_for_share``: whole files, at
  least one hot and one cold), the paper's "2g mysql" of 10 GB.

Scale: the configured chunk size and bucket target are sized for inputs of many GB. Unless the
spec gives them, a bench cuts its input into about 16 chunks (``effective_chunk_size``) and each
approach's cold bytes into ``buckets`` (16) buckets (``loading.bucket_target_bytes`` = cold bytes /
``buckets``, and ``loading.bucket_target_covers_heaviest`` off, so that LinkBench's heaviest id does
not merge them into fewer), so a small bench keeps the shape of a large load: copy and dist_ch
pipelined, and enough buckets for the order of gen_HF to matter.
"""

from __future__ import annotations

import dataclasses
import fcntl
import itertools
import json
from pathlib import Path

from debl.bench.baselines import APPROACHES
from debl.bench.results import BenchProgress
from debl.bench.spec import BenchSpec
from debl.config import Config
from debl.errors import ConfigError
from debl.workload.generator import generate
from debl.workload.spec import GenerateSpec
from loaders.load import LoadOptions
from loaders.source import SourceFile
from loaders.split import split_files

INPUT_MARKER = ".bench-input.json"
# Size model of `debl generate` (10 files, default shares): the bytes of the 961,963-link id of
# LinkBench's rank rule, and of every further id (docs/WORKLOAD.md, "Input size": measured).
_HEAVY_ID_BYTES = 53_000_000
_BYTES_PER_ID = 255
# The approaches that load hot files into MySQL (the others: every file cold, or every file hot).
_HOT_APPROACHES = ("debl", "debl-fifo", "debl-raw")


def ensure_input(gen: GenerateSpec, data_dir: Path, progress: BenchProgress) -> tuple[int, int]:
    """Generate the input into *data_dir* unless it already holds exactly *gen*; returns
    (bytes, files)."""
    marker = data_dir / INPUT_MARKER
    want = dataclasses.asdict(gen)
    data_dir.mkdir(parents=True, exist_ok=True)
    # Two benches (or campaigns) asking for one input at once: one generates, the other waits
    # and reuses it, never reading files half written.
    with open(data_dir.with_name(data_dir.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        have = json.loads(marker.read_text()) if marker.is_file() else None
        if have != want:
            progress.message(f"generating the input into {data_dir} (max-id {gen.max_id})")
            marker.unlink(missing_ok=True)
            generate(data_dir, gen, overwrite=True)
            marker.write_text(json.dumps(want, indent=2) + "\n")
        else:
            progress.message(f"reusing the input in {data_dir}")
    names = [gen.file_name(k) for k in range(gen.files)]
    return sum((data_dir / n).stat().st_size for n in names), len(names)


def effective_chunk_size(config: Config, spec: BenchSpec, input_bytes: int) -> int:
    """The cold chunk size of the bench: ``spec.chunk_size``, else the input cut into about
    16 chunks (whole MiB, at least 4 MiB, at most ``config.loading.chunk_size``), so that a
    small bench pipelines copy and dist_ch as a 10 GB load does with the default 256 MiB
    chunks."""
    if spec.chunk_size:
        return spec.chunk_size
    mib = 1 << 20
    return max(4 * mib, min(config.loading.chunk_size, input_bytes // 16 // mib * mib))


def hot_bytes_for_share(files: list[SourceFile], share: float) -> int:
    """The bytes of the newest files that come closest to *share* of all bytes: the ``hot_bytes``
    that makes ``split_files`` take exactly those files. At least one file is hot and one cold.

    Whole files, so the hot share is only about *share*: the newest files of a ``ranges`` dump
    differ in size (LinkBench's heavy-tailed degrees), and "at most share" could leave one
    file of ten hot instead of the paper's 2 GB of 10."""
    newest = sorted(files, key=lambda f: (f.mtime, f.name), reverse=True)
    if len(newest) < 2:
        raise ConfigError("debl needs at least two input files: one hot, one cold")
    target = share * sum(f.size for f in newest)
    totals = itertools.accumulate(f.size for f in newest[:-1])
    return min(totals, key=lambda total: abs(total - target))  # the first of the nearest


def cold_bytes(files: list[SourceFile], hot_bytes: int | None) -> int:
    """The bytes that a load with *hot_bytes* (None: every file cold) leaves cold."""
    return sum(f.size for f in split_files(files, hot_bytes).cold)


def bucket_target_bytes(spec: BenchSpec, cold: int) -> int:
    """``loading.bucket_target_bytes`` for a load with *cold* cold bytes: ``spec.buckets`` buckets
    of about equal bytes (the loader sizes buckets by this target, docs/DESIGN.md section 4)."""
    return max(1, -(-cold // spec.buckets))


def load_options(spec: BenchSpec, name: str, files: list[SourceFile],
                 chunk_size: int) -> tuple[LoadOptions, int | None]:
    """The load options of approach *name* in the bench, and the bucket target of its cold
    bytes (None with a fixed ``loading.bucket_width``)."""
    hot = hot_bytes_for_share(files, spec.hot_share) if name in _HOT_APPROACHES else None
    options = LoadOptions(chunk_size=chunk_size, bucket_width=spec.bucket_width or 0,
                          approach=name, hot_bytes=hot)
    if spec.bucket_width:
        return options, None
    if APPROACHES[name].target in (None, "mysql"):  # no cold bytes to bucket
        return options, None
    return options, bucket_target_bytes(spec, cold_bytes(files, hot))


def max_id_for_size(size: int, max_degree: int | None = None) -> int:
    """The ``--max-id`` whose input is about *size* bytes (10 files, default shares).

    Without a degree cap LinkBench's heaviest id alone is ``_HEAVY_ID_BYTES``, so smaller
    inputs are mostly that one id: give ``max_degree`` for those."""
    rest = size if max_degree is not None else size - _HEAVY_ID_BYTES
    return max(1001, int(rest / _BYTES_PER_ID)) + 1
