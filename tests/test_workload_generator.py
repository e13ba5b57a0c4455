"""``debl generate``: determinism, parseable lines, injected bad lines, updates, mtimes."""

from __future__ import annotations

import hashlib
import math
import json
import os
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from debl.cli import main
from debl.errors import ConfigError
from debl.model import Link, Origin, ParseError, merge_rank, parse_line
from debl.store.memory import MemoryStore
from debl.workload.generator import generate
from debl.workload.spec import DAY_MS, REFERENCE_END_MS, GenerateSpec
from debl.workload.synth import CHUNK_IDS

SPEC = GenerateSpec(max_id=3001, files=4, days=4, seed=7, update_share=0.3, hidden_share=0.3,
                    bad_lines=12, max_degree=60)


def _digest(out: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(out.iterdir()):
        h.update(path.name.encode())
        h.update(path.read_bytes())
        h.update(str(path.stat().st_mtime_ns).encode())
    return h.hexdigest()


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("gen") / "data"
    return out, generate(out, SPEC)


def _parsed(out: Path, summary):
    """file index -> list of (line_no, Link or ParseError)."""
    result = {}
    for k, f in enumerate(summary.files):
        rows = []
        with open(out / f.name, "rb") as fh:
            for line_no, line in enumerate(fh, 1):
                try:
                    rows.append((line_no, parse_line(line)))
                except ParseError as exc:
                    rows.append((line_no, exc))
        result[k] = rows
    return result


def test_same_seed_same_bytes_other_seed_differs(generated, tmp_path):
    out, _ = generated
    generate(tmp_path / "again", SPEC)
    assert _digest(tmp_path / "again") == _digest(out)
    other = GenerateSpec(**{**SPEC.__dict__, "seed": 8})
    generate(tmp_path / "other", other)
    assert _digest(tmp_path / "other") != _digest(out)


def test_every_line_parses_except_the_reported_bad_ones(generated):
    out, summary = generated
    bad_reported = {(b.file, b.line_no): b.reason for b in summary.bad_lines}
    assert len(bad_reported) == SPEC.bad_lines == 12
    assert len({b.kind for b in summary.bad_lines}) == 10  # every kind at least once
    found = {}
    for k, rows in _parsed(out, summary).items():
        for line_no, row in rows:
            if isinstance(row, ParseError):
                found[(summary.files[k].name, line_no)] = str(row)
    assert found == bad_reported


def test_summary_counts_match_the_files(generated):
    out, summary = generated
    parsed = _parsed(out, summary)
    total_links = total_updates = total_hidden = 0
    for k, f in enumerate(summary.files):
        good = [row for _, row in parsed[k] if isinstance(row, Link)]
        assert f.lines == len(parsed[k])
        assert f.bytes == (out / f.name).stat().st_size
        assert f.links == sum(1 for r in good if r.version == 0)
        assert f.updates == sum(1 for r in good if r.version > 0)
        assert f.hidden == sum(1 for r in good if r.visibility == 0)
        total_links += f.links
        total_updates += f.updates
        total_hidden += f.hidden
    assert (summary.links, summary.updates, summary.hidden) == (total_links, total_updates,
                                                                total_hidden)
    assert summary.lines == summary.links + summary.updates + len(summary.bad_lines)
    assert summary.bytes == sum(f.bytes for f in summary.files)


def test_links_follow_linkbench_shape(generated):
    out, summary = generated
    keys, per_type = set(), defaultdict(int)
    for rows in _parsed(out, summary).values():
        for _, row in rows:
            if isinstance(row, Link) and row.version == 0:
                assert row.key not in keys  # a key's first version appears once
                keys.add(row.key)
                assert SPEC.start_id <= row.id1 < SPEC.max_id
                assert row.id2 >= row.id1 and row.visibility == 1
                assert all(32 <= b <= 100 for b in row.data) and len(row.data) <= 254
                per_type[row.link_type] += 1
    assert set(per_type) == {123456789, 123456790}
    assert abs(per_type[123456789] - per_type[123456790]) <= len(keys) * 0.2
    assert len(keys) == summary.links


def test_updates_supersede_earlier_links(generated):
    out, summary = generated
    parsed = _parsed(out, summary)
    store = MemoryStore()
    winners: dict[tuple, tuple] = {}
    created_in: dict[tuple, int] = {}
    for k, rows in parsed.items():
        good = [(row, Origin(0, k, line_no)) for line_no, row in rows if isinstance(row, Link)]
        store.write_links(good)
        for row, origin in good:
            if row.version == 0:
                created_in[row.key] = k
            else:
                assert created_in[row.key] < k  # an update comes after its link, in a later file
            best = winners.get(row.key)
            if best is None or merge_rank(row, origin) > merge_rank(*best):
                winners[row.key] = (row, origin)
    updated_visible = [w for w, _ in winners.values() if w.version > 0 and w.visibility == 1]
    updated_hidden = [w for w, _ in winners.values() if w.version > 0 and w.visibility == 0]
    assert len(updated_visible) > 50 and len(updated_hidden) > 10
    for w in updated_visible[:200]:
        listed = {l.id2: l for l in store.get_link_list(w.id1, w.link_type)}
        assert listed[w.id2] == w  # the update's data, time and version, not the original's
    for w in updated_hidden[:200]:
        listed = {l.id2 for l in store.get_link_list(w.id1, w.link_type)}
        assert w.id2 not in listed  # a newer hidden row hides the older visible one
    versions = [w.version for w, _ in winners.values()]
    assert max(versions) >= 2  # some keys are updated more than once


def test_update_share_per_later_file(generated):
    _, summary = generated
    assert summary.files[0].updates == 0
    for f in summary.files[1:]:
        share = f.updates / (f.links + f.updates)
        assert share == pytest.approx(SPEC.update_share, abs=0.05)
        assert f.hidden / f.updates == pytest.approx(SPEC.hidden_share, abs=0.08)


def test_times_and_mtimes(generated):
    out, summary = generated
    ends = []
    for k, f in enumerate(summary.files):
        assert f.name == f"links-{k:03d}.tsv"
        mtime_ms = (out / f.name).stat().st_mtime_ns // 1_000_000
        assert mtime_ms == f.end_ms
        ends.append(f.end_ms)
        assert f.end_ms - f.start_ms == DAY_MS  # files == days: a file is a day
    assert ends == sorted(ends) and len(set(ends)) == len(ends)
    assert ends[-1] == REFERENCE_END_MS
    for k, rows in _parsed(out, summary).items():
        times = [row.time for _, row in rows if isinstance(row, Link)]
        assert min(times) >= summary.files[k].start_ms and max(times) < summary.files[k].end_ms
    assert not list(out.glob(".*.part"))


def test_files_need_not_equal_days(tmp_path):
    spec = GenerateSpec(max_id=501, files=3, days=2, max_degree=20)
    summary = generate(tmp_path, spec)
    spans = [f.end_ms - f.start_ms for f in summary.files]
    assert sum(spans) == 2 * DAY_MS and max(spans) - min(spans) <= 1
    assert summary.files[0].start_ms == REFERENCE_END_MS - 2 * DAY_MS


def test_refuses_to_mix_with_existing_files(generated, tmp_path):
    (tmp_path / "links-000.tsv").write_bytes(b"old\n")
    (tmp_path / "notes.txt").write_text("keep")
    spec = GenerateSpec(max_id=101, files=2, days=2, max_degree=5)
    with pytest.raises(ConfigError, match="--overwrite"):
        generate(tmp_path, spec)
    generate(tmp_path, spec, overwrite=True)
    assert (tmp_path / "notes.txt").read_text() == "keep"
    assert (tmp_path / "links-000.tsv").read_bytes() != b"old\n"


def test_progress_reaches_the_total(tmp_path):
    calls = []
    generate(tmp_path, GenerateSpec(max_id=300_001, files=1, days=1, max_degree=1,
                                    update_share=0.0), progress=lambda d, t: calls.append((d, t)))
    assert calls[-1] == (300_000, 300_000)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    assert len(calls) == math.ceil(300_000 / CHUNK_IDS)


@pytest.mark.parametrize("changes, message", [
    ({"max_id": 1}, "--max-id"),
    ({"update_share": 0.6}, "--update-share"),
    ({"hidden_share": -0.1}, "--hidden-share"),
    ({"files": 0}, "--files"),
    ({"link_types": 0}, "--link-types"),
])
def test_spec_validation(changes, message):
    with pytest.raises(ConfigError, match=message):
        GenerateSpec(**{"max_id": 100, **changes})


def test_command_json_summary(tmp_path):
    result = CliRunner().invoke(main, ["generate", str(tmp_path / "d"), "--max-id", "201",
                                       "--files", "2", "--days", "2", "--seed", "3",
                                       "--max-degree", "10", "--bad-lines", "2", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["spec"]["max_id"] == 201 and len(doc["files"]) == 2
    assert len(doc["bad_lines"]) == 2
    assert sorted(os.listdir(tmp_path / "d")) == ["links-000.tsv", "links-001.tsv"]


def test_command_reports_bad_options_without_traceback(tmp_path):
    result = CliRunner().invoke(main, ["generate", str(tmp_path), "--max-id", "0"])
    assert result.exit_code == 1
    assert "Error: --max-id" in result.output and "Traceback" not in result.output


def test_link_types_beyond_two(tmp_path):
    summary = generate(tmp_path, GenerateSpec(max_id=201, files=1, days=1, link_types=3,
                                              max_degree=9, update_share=0.0))
    types = {parse_line(l).link_type for l in open(tmp_path / summary.files[0].name, "rb")}
    assert types == {123456789, 123456790, 123456791}
    assert np.all(np.diff(sorted(types)) == 1)


def test_many_files_are_written_without_holding_them_open(tmp_path):
    spec = GenerateSpec(max_id=2001, files=300, days=3, max_degree=30, bad_lines=3)
    summary = generate(tmp_path, spec)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [spec.file_name(k) for k in range(300)] and names[0] == "links-000.tsv"
    assert sum((tmp_path / n).stat().st_size for n in names) == summary.bytes
    assert sum(1 for n in names for _ in open(tmp_path / n, "rb")) == summary.lines
