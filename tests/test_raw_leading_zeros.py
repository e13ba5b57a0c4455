"""The raw route on numbers written with leading zeros (valid input, docs/LOADING.md row
"Integers in the input"), on the real stack: a cold input whose ids, link types, times and versions
carry leading zeros, 19-digit ids among them, loaded ``--no-hot``, answers from the bucket files
before any gen_HF run equal to the in-memory reference built from the raw files.

Defect: the reader found a key's lines by the text ``b"%d\\t%d\\t"``; a line ``05\\t1``
sorted among key 5's lines ended the key's run there, and answers were stale or empty.
"""

from __future__ import annotations

import os
import random
from dataclasses import replace
from pathlib import Path

import pytest

from coordinator import Coordinator
from debl.bench.baselines import run_approach
from debl.format.link import Link
from loaders.load import LoadOptions
from tests.dataset import reference_store

pytestmark = pytest.mark.stack

U63 = (1 << 63) - 1
LT = 123456789
WIDTH = 100
T0 = 1_700_000_000_000
IDS = list(range(1, 400)) + [U63 - 1, U63]


def _written(value: int, rnd: random.Random) -> bytes:
    """*value* with no, a few or many leading zeros."""
    return b"0" * rnd.choice((0, 0, 1, 2, 3, 25)) + b"%d" % value


def _line(link: Link, rnd: random.Random) -> bytes:
    return b"\t".join([_written(link.id1, rnd), _written(link.link_type, rnd),
                       _written(link.id2, rnd), b"%d" % link.visibility, link.data,
                       _written(link.time, rnd), _written(link.version, rnd)]) + b"\n"


@pytest.fixture(scope="module")
def zeros(stack_config, spark, tmp_path_factory):
    """A --no-hot load of four files with updates, hidden rows and ties across them, every
    number written with random leading zeros: (config, reference)."""
    config = replace(stack_config, mysql_database="debl_rawzeros",
                     mysql_link_table="rawzeros_links",
                     hbase_table="rawzeros_links", hdfs_root="/debl-rawzeros",
                     coordinator_poll_interval=0.2, coordinator_raw_after=0.0)
    directory: Path = tmp_path_factory.mktemp("zeros")
    rnd = random.Random(24)
    for n in range(4):
        lines = [_line(Link(rnd.choice(IDS), LT + rnd.randrange(2), rnd.randrange(8),
                            int(rnd.random() > 0.25), b"f%d" % n, T0 + rnd.randrange(30),
                            rnd.randrange(3)), rnd) for _ in range(1500)]
        path = directory / f"zeros-{n}.tsv"
        path.write_bytes(b"".join(lines))
        os.utime(path, (1_700_000_000 + 60 * n,) * 2)
    summary = run_approach(config, str(directory),  # what `debl load --no-hot` runs
                           LoadOptions(chunk_size=48 * 1024, bucket_width=WIDTH,
                                       approach="debl-cold"))
    assert summary.hot_rows == 0 and summary.rejects == 0 and summary.chunks >= 3
    return config, reference_store(directory, hot_names=set())


def test_raw_answers_on_leading_zeros_equal_the_reference(zeros):
    config, reference = zeros
    keys = sorted(reference.keys()) + [(5, LT + 7), (U63, LT + 7)]
    assert {id1 for id1, _ in keys} >= {5, U63 - 1, U63}
    with Coordinator(config) as c:
        assert {b.j_stat for b in c.buckets()} == {"pending"}  # no gen_HF: every answer raw
        for key in keys:
            for kw in ({}, {"min_time": T0 + 15}, {"offset": 1, "limit": 2}):
                answer = c.query(*key, **kw)
                assert answer.route == "raw", (key, kw)
                assert answer.links == reference.get_link_list(*key, **kw), (key, kw)
