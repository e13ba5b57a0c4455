"""What ``debl generate`` makes: the spec, the time line, the layouts, the file names.

Time line. All link times fall in ``[REFERENCE_END_MS - days * 1 day, REFERENCE_END_MS)``, in
milliseconds since the epoch (LinkBench's unit). ``REFERENCE_END_MS`` is a constant,
2026-01-01T00:00:00Z, independent of the seed and of ``days``: the newest data always ends at the
same instant, so "hot since 2025-12-31" means the same files for every data set, and regenerating
gives the same bytes and the same mtimes.

Layouts (docs/WORKLOAD.md, "Layouts"). The span is cut into ``files`` equal periods (integer
millisecond boundaries), one per file, in both layouts:

- ``days``, a change log: file ``k`` holds the links created in period ``k`` over the whole id
  range, and every later version of earlier links made in period ``k``; its mtime is the end of
  its period. With ``files == days`` a file is a day.
- ``ranges``, a table dump by key range: ids are created in id order over the span, and file
  ``k`` holds the ids ``[id_bounds()[k], id_bounds()[k+1])`` (an equal share of the ids) with
  every link and every later version of them. A node's links and their updates fall between
  the node's creation and the end of its file's period (activity follows recency), so each
  file's mtime, its newest line's time, lies in its own period: the newest ids are in the newest
  files.

Names are ``links-000.tsv``, ``links-001.tsv``, ... (at least three digits, zero-padded so that
name order is time order, in both layouts).

Updates. About ``update_share`` of a file's lines are updates (in ``days`` every file but the
first, of links created in earlier files, at a time inside the update's own period; in ``ranges``
every file, of its own links, after the version they replace): same key, a newer time,
``version`` = 1 + the number of earlier updates of that key, new data; ``hidden_share`` of the
updates carry ``visibility`` 0 (a delete, in LinkBench terms). Updates come on top of the links:
the distinct keys still follow the out-degree distribution exactly, and are the same keys in both
layouts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from debl.errors import ConfigError
from debl.format.link import LINK_TYPES
from debl.workload.idspace import ID_SPACES

DAY_MS = 86_400_000
REFERENCE_END_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
FIRST_LINK_TYPE = LINK_TYPES[0]  # LinkBench's DEFAULT_LINK_TYPE; further types count up from it
MAX_FILES = 100_000
MAX_UPDATE_SHARE = 0.5  # above it the second file would need more updates than earlier links
LAYOUTS = ("days", "ranges")  # docs/WORKLOAD.md, "Layouts"


@dataclass(frozen=True)
class GenerateSpec:
    """The parameters of one generated data set. Ids are ``[start_id, max_id)``, like
    LinkBench's ``startid1``/``maxid1`` (``max_id`` is exclusive)."""

    max_id: int
    files: int = 10
    days: int = 10
    seed: int = 1
    start_id: int = 1
    update_share: float = 0.1
    hidden_share: float = 0.1
    link_types: int = 2
    bad_lines: int = 0
    layout: str = "days"  # LAYOUTS: a change log by day, or a table dump by key range
    # Not LinkBench: caps every out-degree (None: no cap). LinkBench's rank rule always gives
    # rank 0 the CDF's maximum, 961,963 links, whatever the number of ids -- a small data set
    # (tests, demos) is then dominated by that one id1. The cap keeps small sets small.
    max_degree: int | None = None
    # Where the ids sit: "dense" ([start_id, max_id)) or "clusters" (debl.workload.idspace).
    ids: str = "dense"

    def __post_init__(self) -> None:
        if self.ids not in ID_SPACES:
            raise ConfigError(f"--ids must be one of {', '.join(ID_SPACES)}, not {self.ids!r}")
        if self.start_id < 0:
            raise ConfigError(f"--start-id must be >= 0, not {self.start_id}")
        if self.max_id <= self.start_id:
            raise ConfigError(f"--max-id ({self.max_id}) must be greater than --start-id "
                              f"({self.start_id}): ids are [start_id, max_id)")
        if self.max_id >= 1 << 62:
            raise ConfigError("--max-id must be below 2^62 (id2 = id1 + j must stay 64-bit)")
        if self.files < 1 or self.days < 1:
            raise ConfigError("--files and --days must be at least 1")
        if self.files > MAX_FILES:
            raise ConfigError(f"--files must be at most {MAX_FILES}, not {self.files}")
        if self.days > REFERENCE_END_MS // DAY_MS:
            raise ConfigError(f"--days must be at most {REFERENCE_END_MS // DAY_MS} "
                              "(times may not go before 1970)")
        if not 0.0 <= self.update_share <= MAX_UPDATE_SHARE:
            raise ConfigError(f"--update-share must be in [0, {MAX_UPDATE_SHARE}], "
                              f"not {self.update_share}")
        if not 0.0 <= self.hidden_share <= 1.0:
            raise ConfigError(f"--hidden-share must be in [0, 1], not {self.hidden_share}")
        if not 1 <= self.link_types <= 1000:
            raise ConfigError(f"--link-types must be in [1, 1000], not {self.link_types}")
        if self.bad_lines < 0:
            raise ConfigError(f"--bad-lines must be >= 0, not {self.bad_lines}")
        if self.max_degree is not None and self.max_degree < 0:
            raise ConfigError(f"--max-degree must be >= 0, not {self.max_degree}")
        if self.seed < 0:
            raise ConfigError(f"--seed must be >= 0, not {self.seed}")
        if self.layout not in LAYOUTS:
            raise ConfigError(f"--layout must be one of {', '.join(LAYOUTS)}, not {self.layout!r}")

    @property
    def n_ids(self) -> int:
        return self.max_id - self.start_id

    @property
    def start_ms(self) -> int:
        return REFERENCE_END_MS - self.days * DAY_MS

    def type_values(self) -> np.ndarray:
        """The link types, LinkBench's: 123456789, 123456790, ..."""
        return FIRST_LINK_TYPE + np.arange(self.link_types, dtype=np.int64)

    def bounds(self) -> np.ndarray:
        """``files + 1`` period boundaries in ms; file k covers ``[bounds[k], bounds[k+1])``."""
        span = self.days * DAY_MS
        k = np.arange(self.files + 1, dtype=np.int64)
        return self.start_ms + (k * span) // self.files

    def id_bounds(self) -> np.ndarray:
        """``files + 1`` id boundaries of the ``ranges`` layout: file k holds the ids
        ``[b[k], b[k+1])``, an equal share of them (Python ints: ``k * n`` may pass 2^63)."""
        return np.array([self.start_id + (k * self.n_ids) // self.files
                         for k in range(self.files + 1)], dtype=np.int64)

    def file_ids(self, k: int) -> tuple[int, int]:
        """The ids ``[lo, hi)`` whose lines file ``k`` may hold."""
        if self.layout == "ranges":
            b = self.id_bounds()
            return int(b[k]), int(b[k + 1])
        return self.start_id, self.max_id

    def file_name(self, k: int) -> str:
        width = max(3, len(str(self.files - 1)))
        return f"links-{k:0{width}d}.tsv"
