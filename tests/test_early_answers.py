"""Answers before the copy ends (docs/LOADING.md, "Answers before the copy ends", "The copy
follows demand"), on the real stack, against the in-memory reference of the raw files:

- while a load copies from a slow HTTP source, every answer the coordinator gives before the
  load's uptime is exact, on both layouts; a key answered before uptime was answered early
  (route ``early``), and the keys that queries wait for are fetched ahead of the bulk copy;
- a manifest that lies at a spot no sample reads is caught as its bytes are bucketed: early
  answers stop, the false claim is recorded with the file and the offset, and the load reaches
  its uptime with every line once (``debl verify``);
- a load killed the moment it records the chunk that broke a claim resumes with early answers
  stopped (the claim is recorded with its chunk).
"""

from __future__ import annotations

import itertools
import json
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

from coordinator import Coordinator, CountLink, LinkList, MultigetLink
from coordinator.routes import Route
from debl.bench.source_server import make_server
from debl.catalog import Catalog
from debl.errors import QueryTimeout, ServiceError
from debl.keys.keyspace import KeySet
from debl.workload.generator import generate
from debl.workload.spec import GenerateSpec
from loaders.cleanup import drop_every_load
from loaders.load import LoadOptions, LoadRun, run_load
from loaders.verify import verify_load
from tests.awkward import write_awkward_input
from tests.dataset import multiget_id2s, reference_store

pytestmark = [pytest.mark.stack, pytest.mark.long]  # long: scheduled first (tests/conftest.py)
ASKERS = 4  # threads asking through the one coordinator while the load runs


def _serve(directory, rate_mb_s: float):
    server = make_server(directory, port=0, rate_mb_s=rate_mb_s)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def _fresh(stack_config, database: str):
    # Fixed-width buckets: no sample reads compete with the slow copy.
    config = stack_config.replace(mysql_database=database, hbase_table=database,
                                  hdfs_root=f"/{database}", loading_bucket_width=2000)
    Catalog(config, replace_older=True).close()
    drop_every_load(config)
    return config


def _ask_while_loading(config, url: str, options: LoadOptions, reference, keys: list,
                       late: list, timeout: float) -> tuple[list, str, int]:
    """Load from *url* while ASKERS threads ask *keys* through one coordinator (half of the
    asks among *late*, the keys the bulk copy reaches last; get_link_list mostly, count_link
    and multiget_link too) until the load is up: (the answers given before the uptime as
    (id1, link_type, operation, Answer), the load's id, the asks that timed out)."""
    answers, waited = [], 0
    with LoadRun(config, url, options) as run, Coordinator(config,
                                                            default_timeout=timeout) as c:
        up = threading.Event()
        failed: list[BaseException] = []

        def load() -> None:
            try:
                run.wait_up()
            except BaseException as exc:  # noqa: BLE001 -- raised below
                failed.append(exc)
            finally:
                up.set()
        loading = threading.Thread(target=load, daemon=True)
        loading.start()
        lock = threading.Lock()

        def ask(seed: int) -> None:  # several askers: a waited key costs one of them `timeout`
            nonlocal waited
            rng, turns = random.Random(seed), itertools.count()
            while not up.is_set():
                id1, link_type = rng.choice(late if late and rng.random() < 0.5 else keys)
                asked = next(turns)
                operation = (CountLink(id1, link_type) if asked % 5 == 3 else
                             MultigetLink(id1, link_type,
                                          multiget_id2s(reference, (id1, link_type)))
                             if asked % 5 == 4 else LinkList(id1, link_type))
                try:
                    answer = c.ask(operation)
                except QueryTimeout:
                    with lock:
                        waited += 1
                    continue
                except ServiceError:  # until the load is recorded, an earlier one failed
                    time.sleep(0.05)
                    continue
                if not up.is_set():
                    with lock:
                        answers.append((id1, link_type, operation, answer))
        askers = [threading.Thread(target=ask, args=(7 + n,), daemon=True) for n in range(ASKERS)]
        for asker in askers:
            asker.start()
        for asker in askers:
            asker.join()
        loading.join()
        if failed:
            raise failed[0]
        run.finish()
    return answers, run.summary.load_id, waited


def _checked(config, url: str, load_id: str, answers: list, reference) -> list:
    """The early answers, each checked against the reference; the load verified whole."""
    early = [(i, t, operation, a) for i, t, operation, a in answers if a.route is Route.EARLY]
    for _, _, operation, a in early:
        assert (a.links if a.count is None else a.count) == operation.on(reference), operation
    with Catalog(config) as catalog:
        assert catalog.early.false_claims(load_id) == []
    report = verify_load(config, load_id, source_spec=url)
    assert report.ok, report.failures
    return early


@pytest.mark.parametrize("layout", ["ranges", "days"])
def test_every_answer_before_uptime_is_exact_and_waited_keys_are_fetched_first(
        stack_config, tmp_path, layout):
    directory = tmp_path / "in"
    # A key of the change log has a piece in every file: fewer files, so that its pieces come
    # within the queries' timeout at the slow rate.
    files_n = 5 if layout == "ranges" else 3
    generate(directory, GenerateSpec(max_id=30001, files=files_n, days=files_n, seed=3,
                                     layout=layout, max_degree=30, update_share=0.2,
                                     hidden_share=0.2, bad_lines=3))
    files = sorted(p for p in directory.iterdir() if p.name != "index.json")
    total = sum(p.stat().st_size for p in files)
    hot = {files[-1].name} if layout == "ranges" else set()  # mtime order: the last is newest
    reference = reference_store(directory, hot)
    keys = sorted(reference.keys())
    # The keys the bulk copy reaches last: the end of the last cold file.
    lo, hi = (18000, 24000) if layout == "ranges" else (25000, 30001)
    late = [k for k in keys if lo <= k[0] < hi]
    config = _fresh(stack_config, f"debl_early_{layout}")
    # About 20 s of copy: the bulk copy is the slow part, as over a thin wire.
    server, url = _serve(directory, total / 20e6)
    try:
        options = (LoadOptions(approach="debl", hot_bytes=files[-1].stat().st_size) if hot
                   else LoadOptions(approach="debl-cold"))
        answers, load_id, waited = _ask_while_loading(config, url, options, reference, keys,
                                                      late, 5.0)
        with Catalog(config) as catalog:
            demand_bytes = catalog.early.early_progress(load_id).demand_bytes
        early = _checked(config, url, load_id, answers, reference)
    finally:
        server.shutdown()
    assert len(early) >= 10, f"only {len(early)} early answers ({waited} waited)"
    assert [1 for i, *_ in early if lo <= i < hi], "no late key was answered before uptime"
    assert {type(operation) for _, _, operation, _ in early} == \
        {LinkList, CountLink, MultigetLink}  # each read answered early, exact
    assert demand_bytes > 0  # they came ahead of the bulk copy


@pytest.mark.parametrize("kind", ["awkward", "clusters"])
def test_early_answers_on_awkward_input_and_sparse_ids_are_exact(stack_config, tmp_path, kind):
    """The awkward input (tests/awkward.py: unsorted files, so each claims its whole id range,
    fetched on demand whole) with manifests computed by the source server, and sparse ids in
    clusters: every answer given before the uptime is exact."""
    directory = tmp_path / "in"
    if kind == "awkward":
        data = write_awkward_input(directory)
        hot, keys = data.hot_names, list(data.keys)
    else:
        generate(directory, GenerateSpec(max_id=20001, files=4, days=4, seed=5,
                                         layout="ranges", ids="clusters", max_degree=30,
                                         update_share=0.2, hidden_share=0.2))
        newest = max((p for p in directory.iterdir() if p.name != "index.json"),
                     key=lambda p: p.stat().st_mtime)
        hot, keys = {newest.name}, None
    reference = reference_store(directory, hot)
    keys = keys or sorted(reference.keys())
    total = sum(p.stat().st_size for p in directory.iterdir() if p.name != "index.json")
    # Sampled split points (the default): a fixed width makes no sense over ids up to 2^63.
    config = _fresh(stack_config, f"debl_early_{kind}").replace(loading_bucket_width=0)
    server, url = _serve(directory, total / 15e6)
    try:
        hot_bytes = sum((directory / n).stat().st_size for n in hot)
        answers, load_id, _ = _ask_while_loading(
            config, url, LoadOptions(approach="debl", hot_bytes=hot_bytes), reference, keys,
            [], 3.0)
        _checked(config, url, load_id, answers, reference)
    finally:
        server.shutdown()


def _lie(directory, name: str, point: int) -> None:
    """Make point *point* of file *name*'s manifest claim the next point's id1 (still a
    well-formed, sorted manifest; a claim about the middle of the file, where no sample
    reads): the piece before it then claims too much, which is harmless, and its own piece
    too little, which is false."""
    index_path = directory / "index.json"
    entries = json.loads(index_path.read_text())
    for entry in entries:
        if entry["name"] == name:
            deltas = entry["manifest"]["id1s"]  # delta-encoded: the point's own is its jump
            gap = deltas[point + 1]
            assert gap > 0
            deltas[point] += gap
            deltas[point + 1] = 0
    index_path.write_text(json.dumps(entries))


def test_a_manifest_that_lies_where_no_sample_reads_is_caught_and_loses_nothing(
        stack_config, tmp_path):
    directory = tmp_path / "in"
    generate(directory, GenerateSpec(max_id=30001, files=3, days=3, seed=4, layout="ranges",
                                     max_degree=30))
    name = sorted(p.name for p in directory.iterdir() if p.name != "index.json")[1]
    entries = json.loads((directory / "index.json").read_text())
    points = len(next(e for e in entries if e["name"] == name)["manifest"]["offsets"])
    assert points >= 4
    _lie(directory, name, points // 2)
    config = _fresh(stack_config, "debl_early_lie")
    with LoadRun(config, str(directory), LoadOptions(approach="debl-cold")) as run:
        run.wait_up()
        run.finish()
        load_id = run.summary.load_id
    with Catalog(config) as catalog:
        claims = catalog.early.false_claims(load_id)
        progress = catalog.early.early_progress(load_id)
    assert progress.state == "stopped"
    assert len(claims) == 1
    claim = claims[0]
    assert name in claim.detail and claim.kind in ("point", "span")
    assert claim.affected_lo <= claim.affected_hi
    report = verify_load(config, load_id)
    assert report.ok, report.failures


def test_a_load_killed_as_a_chunk_breaks_a_claim_resumes_with_early_answers_stopped(
        stack_config, tmp_path):
    """A real `debl load` killed (its own fault point ``false-claim``) the
    moment the chunk whose check found a claim false is recorded as bucketed. The claim was
    recorded in a transaction of its own after the chunk's, and the kill lost it: the resume
    counted the chunk done, checked it no more, and early answers went on for a manifest shown
    to lie. Now the claim is recorded with its chunk: at the kill early answers are stopped, a
    coordinator answers no key early, and the resumed load keeps them stopped."""
    directory = tmp_path / "in"
    generate(directory, GenerateSpec(max_id=30001, files=3, days=3, seed=4, layout="ranges",
                                     max_degree=30))
    name = sorted(p.name for p in directory.iterdir() if p.name != "index.json")[1]
    entries = json.loads((directory / "index.json").read_text())
    _lie(directory, name, len(next(e for e in entries if e["name"] == name)["manifest"]
                              ["offsets"]) // 2)
    config = _fresh(stack_config, "debl_early_lie_kill")
    argv = [sys.executable, "-m", "debl", "load", str(directory), "--approach", "debl-cold",
            "--chunk-size", "256KiB"]
    killed = subprocess.run(argv, env=config.child_env(DEBL_FAULT_POINT="false-claim"),
                            capture_output=True, text=True, timeout=600)
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    with Catalog(config) as catalog:
        load_id = catalog.loads.load().load_id
        state = catalog.early.early_state(load_id)
        claims = catalog.early.false_claims(load_id)
    assert (state.state, len(claims)) == ("stopped", 1)
    # Keys answerable before the lying chunk: a coordinator answers none of them early now.
    answerable = KeySet.from_json(state.answerable)
    keys = [k for k in sorted(reference_store(directory, set()).keys()) if k[0] in answerable]
    assert keys, "no key was answerable before the lying chunk: the check would be vacuous"
    with Coordinator(config, default_timeout=0.5) as c:
        assert c.wait_until_up(10)
        for key in keys[:5]:
            with pytest.raises(QueryTimeout, match="not up yet"):
                c.query(*key)
    summary = run_load(config, str(directory), LoadOptions(approach="debl-cold",
                                                           chunk_size=256 << 10),
                       resume=load_id)
    with Catalog(config) as catalog:
        assert catalog.early.early_progress(load_id).state == "stopped"
        assert catalog.early.false_claims(load_id) == claims
    assert summary.early["state"] == "stopped" and len(summary.early["false_claims"]) == 1
    report = verify_load(config, load_id)
    assert report.ok, report.failures
