"""The stages of a load's run and the hot path's one start (docs/LOADING.md, "How a load
runs"), and the load's context as Spark would see it: pure logic, no stack."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import pytest

from debl.config import Config
from debl.keys.manifest_build import build_manifest
from debl.namespace import Namespace
from loaders.load_context import LoadContext
from loaders.load_run import NEXT, Stage, hot_path_start
from loaders.source import SourceFile

LOADING = Path(__file__).resolve().parents[1] / "docs" / "LOADING.md"


def _documented_stages() -> dict[Stage, set[Stage]]:
    """The stage table of "How a load runs": each stage and the stages its "next" column
    names."""
    text = LOADING.read_text()
    section = text[text.index("**The stages of a run.**"):text.index("## Uptime without MySQL")]
    table: dict[Stage, set[Stage]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if len(cells) == 3 and cells[0].strip("`") in Stage.__members__:
            table[Stage[cells[0].strip("`")]] = {
                Stage[n] for n in re.findall(r"`([A-Z_]+)`", cells[2]) if n in Stage.__members__}
    return table


def test_the_documented_stages_and_transitions_are_the_runs():
    assert _documented_stages() == {stage: set(nxt) for stage, nxt in NEXT.items()
                                    if stage is not None}


def test_every_stage_is_reached_from_the_start_and_up_is_reached_without_failing():
    reached, todo = set(), [None]
    while todo:
        for stage in NEXT[todo.pop()] - reached:
            reached.add(stage)
            todo.append(stage)
    assert reached == set(Stage)
    assert Stage.FAILED not in NEXT[Stage.UP]  # a load that is up is never recorded failed


@pytest.mark.parametrize("has_hot, wait_for_hot, early, setting, start", [
    (False, False, False, "copied", None),
    (False, True, False, "uptime", None),
    (True, True, False, "copied", Stage.COPYING),
    (True, False, False, "copied", Stage.HOT_COPIED),
    (True, False, True, "copied", Stage.UP),  # a hot piece may still come from a fetch
    (True, False, False, "uptime", Stage.UP),
])
def test_the_hot_path_starts_at_one_stage(has_hot, wait_for_hot, early, setting, start):
    assert hot_path_start(has_hot, wait_for_hot, early, setting) is start


def test_the_load_context_pickles_whole():
    """What a load is holds settings and names only (a connection would not pickle)."""
    config = Config()
    data = b"".join(b"%d\t7\t%d\t1\tx\t1000\t1\n" % (k, k) for k in range(1, 10))
    manifest = build_manifest([data])
    files = ((0, SourceFile("a.tsv", 10, 1.0)),
             (1, SourceFile("b.tsv", len(data), 2.0, manifest)))
    load = LoadContext(config, "L1", Namespace.of(config, "L1"), files, frozenset({1}), -1,
                       False)
    again = pickle.loads(pickle.dumps(load))
    assert again == load and again.files[1][1].manifest.id1_hi == manifest.id1_hi == 9
    assert (again.hot, again.cold) == ([files[1]], [files[0]])
