"""``debl generate``: determinism, parseable lines, injected bad lines, updates, mtimes, in both
layouts: ``days`` (a change log per period) and ``ranges`` (a dump by contiguous id1 range)."""

from __future__ import annotations

import dataclasses
import hashlib
import math
import json
import os
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from debl.cli import main
from debl.errors import ConfigError
from debl.format.link import Link, Origin, ParseError, merge_rank, parse_line
from debl.store.memory import MemoryStore
from debl.workload.generator import generate
from debl.workload.spec import DAY_MS, REFERENCE_END_MS, GenerateSpec
from debl.workload.synth import CHUNK_IDS

SPEC = GenerateSpec(max_id=3001, files=4, days=4, seed=7, update_share=0.3, hidden_share=0.3,
                    bad_lines=12, max_degree=60)
LAYOUT_SPECS = {"days": SPEC, "ranges": dataclasses.replace(SPEC, layout="ranges")}


def _digest(out: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(out.iterdir()):
        h.update(path.name.encode())
        h.update(path.read_bytes())
        h.update(str(path.stat().st_mtime_ns).encode())
    return h.hexdigest()


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """layout -> (directory, summary) of SPEC in that layout."""
    made = {}
    for layout, spec in LAYOUT_SPECS.items():
        out = tmp_path_factory.mktemp(f"gen-{layout}") / "data"
        made[layout] = (out, generate(out, spec))
    return made


@pytest.fixture(params=sorted(LAYOUT_SPECS))
def generated(request, outputs):
    return outputs[request.param]


def _parsed(out: Path, summary):
    """file index -> list of (line_no, Link or ParseError)."""
    result = {}
    for k, f in enumerate(summary.files):
        rows: list = []
        with open(out / f.name, "rb") as fh:
            for line_no, line in enumerate(fh, 1):
                try:
                    rows.append((line_no, parse_line(line)))
                except ParseError as exc:
                    rows.append((line_no, exc))
        result[k] = rows
    return result


def test_same_seed_same_bytes_other_seed_differs(generated, tmp_path):
    out, summary = generated
    generate(tmp_path / "again", summary.spec)
    assert _digest(tmp_path / "again") == _digest(out)
    other = GenerateSpec(**{**summary.spec.__dict__, "seed": 8})
    generate(tmp_path / "other", other)
    assert _digest(tmp_path / "other") != _digest(out)


def test_layouts_differ(tmp_path):
    generate(tmp_path / "days", LAYOUT_SPECS["days"])
    generate(tmp_path / "ranges", LAYOUT_SPECS["ranges"])
    assert _digest(tmp_path / "days") != _digest(tmp_path / "ranges")


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
    ranges = summary.spec.layout == "ranges"
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
            elif ranges:  # every version of a key in the key's own file, after its link
                assert created_in[row.key] == k
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


def test_update_share_per_file(generated):
    _, summary = generated
    if summary.spec.layout == "days":  # updates of earlier files: none in the first
        assert summary.files[0].updates == 0
    updated = summary.files[1:] if summary.spec.layout == "days" else summary.files
    for f in updated:
        share = f.updates / (f.links + f.updates)
        assert share == pytest.approx(SPEC.update_share, abs=0.05)
        assert f.hidden / f.updates == pytest.approx(SPEC.hidden_share, abs=0.08)


def test_every_version_of_a_key_is_newer_than_the_one_before(generated):
    """The merge rule's premise in both layouts: version v+1 of a key ranks above version v
    (a greater time, or in ranges at worst an equal time and a greater version), so the
    highest version wins; a key's lines appear in version order."""
    out, summary = generated
    by_key: dict[tuple, list] = defaultdict(list)
    for k, rows in _parsed(out, summary).items():
        for line_no, row in rows:
            if isinstance(row, Link):
                by_key[row.key].append((k, line_no, row))
    updated = 0
    for versions in by_key.values():
        assert [r.version for _, _, r in versions] == list(range(len(versions)))
        for (k0, l0, a), (k1, l1, b) in zip(versions, versions[1:]):
            assert (k0, l0) < (k1, l1)
            if summary.spec.layout == "days":
                assert b.time > a.time
            else:
                assert (b.time, b.version) > (a.time, a.version) and b.time >= a.time
            updated += 1
    assert updated == summary.updates


def test_days_times_and_mtimes(outputs):
    out, summary = outputs["days"]
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


def test_ranges_files_are_key_ranges_in_mtime_order(outputs):
    """ranges: each file one contiguous id1 range, the ranges disjoint and in file order
    (creation order), together the whole id range; each file's mtime is its newest line's time,
    and the mtimes rise with the ids, so the newest files hold the newest ids."""
    out, summary = outputs["ranges"]
    spec = summary.spec
    assert summary.files[0].id_lo == spec.start_id and summary.files[-1].id_hi == spec.max_id
    mtimes, last_id = [], spec.start_id - 1
    for k, rows in _parsed(out, summary).items():
        f = summary.files[k]
        good = [row for _, row in rows if isinstance(row, Link)]
        ids = [row.id1 for row in good]
        assert ids == sorted(ids) and ids[0] > last_id  # in id order, after the earlier files
        assert f.id_lo <= ids[0] and ids[-1] < f.id_hi
        assert k == 0 or f.id_lo == summary.files[k - 1].id_hi  # contiguous, disjoint
        last_id = ids[-1]
        times = [row.time for row in good]
        mtime_ms = (out / f.name).stat().st_mtime_ns // 1_000_000
        assert mtime_ms == f.end_ms == max(times)  # the mtime is the newest line's time
        assert min(times) >= f.start_ms
        mtimes.append(mtime_ms)
    assert mtimes == sorted(mtimes) and len(set(mtimes)) == len(mtimes)
    for k in range(1, len(summary.files)):  # every line of a file is newer than the file before
        assert summary.files[k].start_ms > mtimes[k - 1]
    assert mtimes[-1] < REFERENCE_END_MS


def test_ranges_with_more_files_than_ids_keeps_mtime_order(tmp_path):
    spec = GenerateSpec(max_id=9, files=12, days=3, max_degree=4, layout="ranges", seed=2)
    summary = generate(tmp_path, spec)
    mtimes = [(tmp_path / f.name).stat().st_mtime_ns for f in summary.files]
    assert mtimes == sorted(mtimes) and len(set(mtimes)) == len(mtimes)
    assert sum(f.id_hi - f.id_lo for f in summary.files) == 8
    for f in summary.files:
        for line in open(tmp_path / f.name, "rb"):
            assert f.id_lo <= parse_line(line).id1 < f.id_hi


def _version0_keys(out: Path) -> list[tuple]:
    keys = []
    for path in sorted(out.glob("links-*.tsv")):
        for line in open(path, "rb"):
            link = parse_line(line)
            if link.version == 0:
                keys.append(link.key)
    return keys


def test_layouts_hold_the_same_links_and_degrees(tmp_path):
    """The layout moves links between files and changes their times, never which links exist:
    the same keys (so the same out-degree of every id, LinkBench's) and about the same data
    sizes and update counts."""
    base = GenerateSpec(max_id=40_001, files=5, days=5, seed=4, max_degree=200)
    days = generate(tmp_path / "days", base)
    ranges = generate(tmp_path / "ranges", dataclasses.replace(base, layout="ranges"))
    keys_days, keys_ranges = _version0_keys(tmp_path / "days"), _version0_keys(tmp_path / "ranges")
    assert len(keys_ranges) == len(set(keys_ranges)) == ranges.links
    assert Counter(keys_days) == Counter(keys_ranges)
    degree = Counter(id1 for id1, _, _ in keys_ranges)
    assert degree == Counter(id1 for id1, _, _ in keys_days)
    # P(degree 0) of LinkBench's nlinks CDF, as in days: 45.3%
    assert 1 - len(degree) / 40_000 == pytest.approx(0.453, abs=0.01)
    assert ranges.updates / (ranges.links + ranges.updates) == pytest.approx(0.1, abs=0.01)
    assert ranges.hidden / ranges.updates == pytest.approx(0.1, abs=0.02)
    # LinkBench's data sizes: the same bytes per line (days has fewer updates in all: none in
    # its first file)
    assert ranges.bytes / ranges.lines == pytest.approx(days.bytes / days.lines, rel=0.01)


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
    ({"layout": "hours"}, "--layout"),
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
    assert sorted(os.listdir(tmp_path / "d")) == ["index.json", "links-000.tsv", "links-001.tsv"]


def test_command_writes_the_ranges_layout(tmp_path):
    result = CliRunner().invoke(main, ["generate", str(tmp_path / "d"), "--max-id", "401",
                                       "--files", "4", "--days", "2", "--max-degree", "10",
                                       "--layout", "ranges", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["spec"]["layout"] == "ranges"
    assert [(f["id_lo"], f["id_hi"]) for f in doc["files"]] == [(1, 101), (101, 201),
                                                                (201, 301), (301, 401)]


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
    names = sorted(p.name for p in tmp_path.iterdir() if p.name != "index.json")
    assert names == [spec.file_name(k) for k in range(300)] and names[0] == "links-000.tsv"
    assert sum((tmp_path / n).stat().st_size for n in names) == summary.bytes
    assert sum(1 for n in names for _ in open(tmp_path / n, "rb")) == summary.lines
    assert [e["name"] for e in json.loads((tmp_path / "index.json").read_text())] == names
