"""Manifests from where they are made to where they are read (docs/LOADING.md, "The manifest"):
``debl generate``'s ``index.json``; a local directory's ``index.json`` read by ``LocalSource``
(a file that changed loses its manifest, with a message; a malformed manifest names its file
and field, and the file claims every id1); ``debl source serve`` listing a manifest for every
file, computed and cached (in memory and under the state directory, never in the served
directory) for files that lack one, and computed again for a file that changed; and
``HttpSource`` reading them, from that server and from a plain static one."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner

from debl.bench.source_server import make_server
from debl.cli import main
from debl.keys.manifest import MAX_POINTS, Manifest, pieces
from debl.keys.manifest_build import manifest_of_file
from debl.workload.generator import generate
from debl.workload.spec import GenerateSpec
from loaders.listing import MAX_INDEX_BYTES, MAX_LISTING_POINTS
from loaders.source import HttpSource, LocalSource

SPEC = dict(max_id=3001, files=3, days=3, seed=5, max_degree=40)


def gen(directory: Path, **changes) -> Path:
    generate(directory, GenerateSpec(**{**SPEC, **changes}))
    return directory


def built(directory: Path) -> dict[str, Manifest]:
    return {p.name: manifest_of_file(p) for p in sorted(directory.glob("links-*.tsv"))}


@pytest.mark.parametrize("changes", [dict(), dict(layout="ranges", bad_lines=30),
                                     dict(bad_lines=25, ids="clusters")])
def test_generate_writes_index_json_with_the_manifest_of_every_file(tmp_path, changes):
    out = gen(tmp_path / "out", **changes)
    entries = json.loads((out / "index.json").read_text())
    assert [e["name"] for e in entries] == [f"links-{k:03d}.tsv" for k in range(3)]
    expected = built(out)
    for e in entries:
        st = os.stat(out / e["name"])
        assert (e["size"], e["mtime"]) == (st.st_size, st.st_mtime)
        m = Manifest.from_json(e["manifest"], e["name"], e["size"])
        assert m == expected[e["name"]]
        assert m.sorted and len(m.offsets) == -(-e["size"] // m.step)  # a point every step
    # Deterministic like the files themselves.
    again = gen(tmp_path / "again", **changes)
    assert (again / "index.json").read_bytes().replace(b"again", b"out") == (
        out / "index.json").read_bytes().replace(b"again", b"out")


def test_a_local_source_reads_index_json_and_never_lists_it(tmp_path):
    out = gen(tmp_path)
    files = LocalSource(out).list()
    assert [f.name for f in files] == [f"links-{k:03d}.tsv" for k in range(3)]
    expected = built(out)
    for f in files:
        assert f.manifest == expected[f.name] and f.manifest_error is None
    assert len(pieces(0, files[0].size, files[0].manifest)) == len(files[0].manifest.offsets)


def test_a_directory_without_index_json_loads_as_before(tmp_path):
    out = gen(tmp_path)
    (out / "index.json").unlink()
    for f in LocalSource(out).list():
        assert (f.manifest, f.manifest_error) == (None, None)


def test_a_file_changed_after_index_json_loses_its_manifest_with_a_message(tmp_path):
    out = gen(tmp_path)
    os.utime(out / "links-001.tsv", (1_700_000_000, 1_700_000_000))
    with open(out / "links-002.tsv", "ab") as f:
        f.write(b"1\t2\t3\t1\tx\t4\t5\n")
    (out / "extra.tsv").write_bytes(b"1\t2\t3\t1\tx\t4\t5\n")
    got = {f.name: f for f in LocalSource(out).list()}
    assert got["links-000.tsv"].manifest is not None
    for name in ("links-001.tsv", "links-002.tsv", "extra.tsv"):
        assert got[name].manifest is None
    assert "links-001.tsv: " in got["links-001.tsv"].manifest_error
    assert "now: its manifest is not used" in got["links-001.tsv"].manifest_error
    assert "mtime 2023-11-14" in got["links-001.tsv"].manifest_error
    size = os.stat(out / "links-002.tsv").st_size
    assert f"it has {size} bytes" in got["links-002.tsv"].manifest_error
    assert got["extra.tsv"].manifest_error.startswith("extra.tsv: not in ")


def test_a_malformed_manifest_or_index_names_the_cause_and_the_file_claims_every_id1(tmp_path):
    out = gen(tmp_path)
    entries = json.loads((out / "index.json").read_text())
    entries[1]["manifest"]["sorted"] = "yes"
    entries[2]["manifest"]["version"] = 2
    (out / "index.json").write_text(json.dumps(entries))
    files = LocalSource(out).list()
    assert files[0].manifest is not None
    assert files[1].manifest is None and files[1].manifest_error.startswith(
        "links-001.tsv: manifest field 'sorted': a string, not true or false")
    assert files[2].manifest is None and "field 'version': 2 is not a version" in (
        files[2].manifest_error)
    assert pieces(1, files[1].size, files[1].manifest)[0].hi == 2 ** 63 - 1
    for text in ("{not json", '{"a": 1}', "[1, 2]"):
        (out / "index.json").write_text(text)
        for f in LocalSource(out).list():
            assert f.manifest is None and f.manifest_error.startswith(f"{f.name}: ")


def _bounds_broken(out: Path) -> dict[str, bytes]:
    """index.json of *out* past each bound of a listing (docs/LOADING.md, "The listing's
    bounds"), each otherwise its own: every file would have its manifest but for the bound."""
    entries = json.loads((out / "index.json").read_text())
    text = json.dumps(entries).encode()
    heavy = [dict(e, manifest=dict(e["manifest"], offsets=[0] + [1] * (MAX_POINTS - 1)))
             for e in entries[:1]] * (MAX_LISTING_POINTS // MAX_POINTS + 1)  # no file of out
    return {"over 32 MiB": text + b" " * MAX_INDEX_BYTES,
            "nests deeper than JSON's parser goes": b"[" * 100_000 + text[1:],
            "points in all, more than the 1,048,576 a listing may": json.dumps(
                [dict(e, name=f"gone-{k}") for k, e in enumerate(heavy)] + entries).encode(),
            "is not JSON": b"\x00" + text}


def test_an_index_json_past_its_bounds_gives_no_manifest_and_the_load_goes_on(tmp_path):
    """Defect: a local ``index.json`` was read whole however large, and one nested past the
    parser raised RecursionError out of the listing. Now each is the road of an index that
    cannot be used: every file is listed, without manifest, with a message naming index.json
    and the cause."""
    out = gen(tmp_path)
    for cause, text in _bounds_broken(out).items():
        (out / "index.json").write_bytes(text)
        files = LocalSource(out).list()
        assert [f.name for f in files] == [f"links-{k:03d}.tsv" for k in range(3)]
        for f in files:
            assert f.manifest is None, cause
            assert f.manifest_error.startswith(f"{f.name}: {out / 'index.json'} "), cause
            assert cause in f.manifest_error and "no file has a manifest" in f.manifest_error


def test_the_source_server_says_once_that_index_json_is_not_used(tmp_path):
    """Defect: a served directory's ``index.json`` that is not JSON was ignored without a
    word once the manifests it should have given were cached."""
    out = gen(tmp_path / "dir")
    cache = tmp_path / "state" / "manifests"
    (out / "index.json").write_text("{not json")
    for _ in range(2):  # computed, then every manifest from the cache
        lines: list[str] = []
        stop(*serve(out, manifest_cache=cache, progress=lines.append))
        assert lines[0].startswith(f"{out / 'index.json'} is not a listing DeBL reads: it is "
                                   "not JSON (")
        assert lines[0].endswith(": the manifests are computed from the files")
        assert len(lines) == 4


def test_the_source_server_lists_no_manifest_past_the_listings_bound(tmp_path, monkeypatch):
    """The server never lists more points than its clients take: past the bound it lists its
    files without manifests (a small listing, a load without early answers) and says so once.
    The bound is lowered to the three files' six points: the real one is a 64 GiB dump's."""
    out = gen(tmp_path / "dir")
    (out / "index.json").unlink()
    points = sum(len(m.offsets) for m in built(out).values())
    for bound, used in ((points, True), (points - 1, False)):
        monkeypatch.setattr("loaders.listing.MAX_LISTING_POINTS", bound)
        lines: list[str] = []
        server, source = serve(out, progress=lines.append)
        try:
            files = source.list()
        finally:
            stop(server, source)
        assert all((f.manifest is not None) == used and f.manifest_error is None for f in files)
        assert lines[-1].endswith("its files are listed without manifests") != used, lines


def test_a_rewritten_index_json_is_read_again_even_with_its_size_and_mtime(tmp_path):
    out = gen(tmp_path)
    source = LocalSource(out)  # one source, listed again and again as a load or server does
    assert source.list()[0].manifest is not None
    path, tmp = out / "index.json", out / "new.json.part"
    st = path.stat()
    tmp.write_text(path.read_text().replace('"version":1', '"version":2', 1))
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp, path)
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    first = source.list()[0]
    assert first.manifest is None and "field 'version': 2 is not" in first.manifest_error


def serve(directory: Path, **settings):
    server = make_server(directory, port=0, **settings)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, HttpSource(f"http://127.0.0.1:{server.server_address[1]}")


def stop(server, source) -> None:
    source.close()
    server.shutdown()
    server.server_close()


def test_the_source_server_lists_index_json_manifests_and_computes_and_caches_the_rest(tmp_path):
    out = gen(tmp_path / "dir")
    entries = json.loads((out / "index.json").read_text())
    (out / "index.json").write_text(json.dumps(entries[:1]))  # only the first file's
    before = sorted(os.listdir(out))
    cache, lines = tmp_path / "state" / "manifests", []
    server, source = serve(out, manifest_cache=cache, progress=lines.append)
    try:
        expected = built(out)
        files = source.list()
        assert [(f.name, f.manifest) for f in files] == sorted(expected.items())
        assert all(f.manifest_error is None for f in files)
    finally:
        stop(server, source)
    assert lines[0].startswith("[1/3] links-000.tsv: manifest from index.json")
    assert [line[:20] for line in lines[1:]] == ["[2/3] links-001.tsv:", "[3/3] links-002.tsv:"]
    assert all(": manifest computed from its " in line and "not in" in line for line in lines[1:])
    assert sorted(os.listdir(out)) == before  # nothing written into the served directory
    assert len(list(cache.iterdir())) == 1

    # A new server with the same cache computes nothing; a file touched since is computed.
    with open(out / "links-002.tsv", "ab") as f:
        f.write(b"5000\t1\t2\t1\tx\t4\t5\n")
    lines.clear()
    server, source = serve(out, manifest_cache=cache, progress=lines.append)
    try:
        assert lines[1] == "[2/3] links-001.tsv: manifest from the cache"
        assert lines[2].startswith("[3/3] links-002.tsv: manifest computed")
        files = source.list()
        assert files[2].manifest == manifest_of_file(out / "links-002.tsv")
        assert files[2].manifest.id1_hi == 5000
        # Changed while serving: the next listing computes it again.
        os.utime(out / "links-001.tsv", (1_700_000_000, 1_700_000_000))
        with open(out / "links-001.tsv", "ab") as f:
            f.write(b"1\t1\t2\t1\tx\t4\t5\n")  # id1 1 after larger ones: no longer sorted
        files = {f.name: f for f in source.list()}
        assert files["links-001.tsv"].manifest == manifest_of_file(out / "links-001.tsv")
        assert not files["links-001.tsv"].manifest.sorted
    finally:
        stop(server, source)


def test_a_damaged_cache_is_computed_again(tmp_path):
    out = gen(tmp_path / "dir")
    (out / "index.json").unlink()
    cache, lines = tmp_path / "manifests", []
    stop(*serve(out, manifest_cache=cache))
    (cache_file,) = cache.iterdir()
    doc = json.loads(cache_file.read_text())
    doc["files"]["links-000.tsv"]["manifest"]["id1s"][1] = -10 ** 9
    cache_file.write_text(json.dumps(doc))
    server, source = serve(out, manifest_cache=cache, progress=lines.append)
    try:
        assert "not used" in lines[0] and "computed" in lines[1]
        assert [f.manifest for f in source.list()] == list(built(out).values())
    finally:
        stop(server, source)


def test_the_http_source_reads_a_static_listing_and_names_a_malformed_manifest(tmp_path):
    out = gen(tmp_path / "out")
    web = tmp_path / "web"
    (web / "files").mkdir(parents=True)
    entries = json.loads((out / "index.json").read_text())
    entries[0]["manifest"]["offsets"][1] = 0.5
    entries[1]["manifest"]["id1s"] = entries[1]["manifest"]["id1s"][:-1]
    del entries[2]["manifest"]
    (web / "index.json").write_text(json.dumps(entries).replace(
        '"id1_hi":', '"ignored": %s, "id1_hi":' % ("9" * 5000), 1))
    handler = partial(SimpleHTTPRequestHandler, directory=str(web))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    source = HttpSource(f"http://127.0.0.1:{server.server_address[1]}")
    try:
        files = source.list()
    finally:
        stop(server, source)
    assert [f.manifest for f in files] == [None, None, None]
    assert files[0].manifest_error.startswith(
        "links-000.tsv: manifest field 'offsets': value 1 is the number 0.5, not an integer")
    assert files[1].manifest_error.startswith("links-001.tsv: manifest field 'id1s': ")
    assert files[2].manifest_error is None


def test_debl_source_serve_computes_before_it_serves_and_caches_under_the_state_dir(tmp_path):
    out = gen(tmp_path / "dir")
    (out / "index.json").unlink()
    env = {**os.environ, "DEBL_STATE_DIR": str(tmp_path / "state")}
    env.pop("DEBL_CONFIG", None)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "debl", "source", "serve", str(out),
                             "--port", str(port)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        progress = [proc.stderr.readline() for _ in range(3)]
        assert "serving" in proc.stdout.readline()  # only once every manifest is ready
        source = HttpSource(f"http://127.0.0.1:{port}")
        try:
            assert [f.manifest for f in source.list()] == list(built(out).values())
        finally:
            source.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert all(": manifest computed from its " in line for line in progress)
    assert len(list((tmp_path / "state" / "manifests").iterdir())) == 1
    assert sorted(os.listdir(out)) == [f"links-{k:03d}.tsv" for k in range(3)]


def free_port() -> int:
    """A free port on loopback (closed again before it is used)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_debl_source_serve_on_a_taken_port_says_so(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        result = CliRunner().invoke(main, ["source", "serve", str(tmp_path), "--port",
                                           str(taken.getsockname()[1])],
                                    env={"DEBL_STATE_DIR": str(tmp_path / "state")})
    assert result.exit_code == 1
    assert "cannot serve on 127.0.0.1:" in result.output and "give another --port" in (
        result.output)
