"""Valid but awkward LinkBench input, for the differential check of every route
(tests/test_routes_exact.py): everything docs/LOADING.md says a valid line may be, at once.

- numbers written with leading zeros (every number but the visibility digit, any count of
  zeros), ids and link types of 18
  and 19 digits, 0 and 2^63-1 for ids, link types, times and versions;
- the same key in several files and twice in one file, with ties in time and version across
  files, within a file, and across hot and cold files;
- hidden rows (visibility 0) newer than visible ones, and visible ones newer than hidden;
- CRLF lines and a last line without its newline;
- data with every byte but TAB, LF and CR (NUL, quotes, backslashes, invalid UTF-8), empty data
  and 255 bytes;
- a heavy id1 with thousands of links of one type spread over every file, so that its rows
  cross many 64 KiB blocks and several chunks;
- ids only in the hot files (past every cold id, as in a range dump): MySQL alone answers them.

The files are written oldest first with increasing modification times; ``hot_names`` are the
newest ``hot_files`` of them.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path

BIG = (1 << 63) - 1
HEAVY_ID1 = 7
HEAVY_TYPE = 123456789
TYPES = (0, 1, 123456789, 10**17 + 3, BIG)
# Ids of every size: small, 18 and 19 digits, the largest.
COLD_IDS = ([0, 1, 2, 5, 9, 10, 11, 99, 100, 101, 1000, 4242, 65535, 65536]
            + [10**17 + i for i in range(6)] + [10**18 + 7 * i for i in range(6)]
            + [BIG - 12, BIG - 10])
# Between cold ids, at several places, and past the last (2^63-1 among them): some outside
# every bucket's cold span (MySQL alone answers them), some inside one (their bucket is read
# too, and holds nothing of them).
HOT_ONLY_IDS = [3, 4, 10**12, 10**12 + 1, 10**15, BIG // 2, BIG - 11, BIG - 2, BIG]
DATA_BYTES = bytes(b for b in range(256) if b not in (9, 10, 13))


@dataclass(frozen=True)
class AwkwardInput:
    directory: Path
    names: list[str]  # oldest first
    hot_names: set[str]
    keys: list[tuple[int, int]]  # every (id1, link_type) the files hold
    hot_only: list[tuple[int, int]]  # keys only hot files hold, with no cold row of their id1


def _number(rng: random.Random, value: int) -> bytes:
    """*value* in decimal, with 0 to 3 leading zeros one time in three."""
    zeros = rng.choice((0, 0, 1, 2, 3)) if rng.random() < 0.33 else 0
    return b"0" * zeros + b"%d" % value


def _data(rng: random.Random) -> bytes:
    size = rng.choice((0, 1, 5, 20, 60, 255))
    return bytes(rng.choice(DATA_BYTES) for _ in range(size))


def _line(rng: random.Random, id1: int, link_type: int, id2: int, visibility: int, time: int,
          version: int) -> bytes:
    # visibility is the digit 0 or 1 (docs/LOADING.md): the one number never padded
    fields = [_number(rng, id1), _number(rng, link_type), _number(rng, id2),
              b"%d" % visibility, _data(rng), _number(rng, time), _number(rng, version)]
    return b"\t".join(fields) + (b"\r\n" if rng.random() < 0.1 else b"\n")


def write_awkward_input(directory: Path, seed: int = 11, files: int = 6, hot_files: int = 2,
                        heavy_links: int = 6000) -> AwkwardInput:
    """Write the input under *directory* (see the module); returns what the checks need."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    per_file: list[list[bytes]] = [[] for _ in range(files)]
    keys: set[tuple[int, int]] = set()

    def versions_of(id1: int, link_type: int, id2: int, where: list[int]) -> None:
        """Rows of one key in the files *where* (a file may repeat: two rows in one file),
        with times and versions that tie often."""
        keys.add((id1, link_type))
        base = rng.choice((0, 1, 1_700_000_000_000, BIG - 5))
        for f in where:
            time = base + rng.choice((0, 0, 1, 2, 5)) if base < BIG - 5 else BIG - rng.randint(0, 2)
            version = rng.choice((0, 0, 1, 2, BIG))
            per_file[f].append(_line(rng, id1, link_type, id2, rng.choice((0, 1, 1, 1)), time,
                                     version))

    for id1 in COLD_IDS:
        for link_type in rng.sample(TYPES, rng.randint(1, 3)):
            for _ in range(rng.randint(1, 12)):
                id2 = rng.choice((0, 1, 2, 3, rng.randint(0, BIG), BIG))
                copies = rng.choice((1, 1, 2, 3, 4))
                versions_of(id1, link_type, id2, sorted(rng.randrange(files)
                                                        for _ in range(copies)))
    hot_start = files - hot_files
    for id1 in HOT_ONLY_IDS:
        for id2 in range(rng.randint(1, 6)):
            versions_of(id1, 1, id2, sorted(rng.randrange(hot_start, files)
                                            for _ in range(rng.choice((1, 2)))))
    # The heavy id1: thousands of links of one type, each key in one to three files.
    for id2 in range(heavy_links):
        versions_of(HEAVY_ID1, HEAVY_TYPE, id2 * 3 + 1,
                    sorted(rng.randrange(files) for _ in range(rng.choice((1, 1, 2, 3)))))

    names = []
    for f, lines in enumerate(per_file):
        rng.shuffle(lines)
        name = f"links-{f:02d}.tsv"
        body = b"".join(lines)
        if f == 1:
            body = body.rstrip(b"\r\n")  # a last line without its newline
        (directory / name).write_bytes(body)
        when = 1_750_000_000 + f * 86_400
        os.utime(directory / name, (when, when))
        names.append(name)
    hot_only = sorted(k for k in keys if k[0] in HOT_ONLY_IDS)
    return AwkwardInput(directory, names, set(names[hot_start:]), sorted(keys), hot_only)
