"""Every route exact on every valid input: the differential check.

One awkward input (tests/awkward.py: leading zeros, 18- and 19-digit numbers, 0 and 2^63-1, ties
in time and version across files and across hot and cold, hidden rows, CRLF lines, a heavy id1
over many blocks and chunks) is loaded on the real stack, and sampled queries (with min_time,
max_time, offset and limit) are asked through the coordinator on each route in turn, every
answer compared with the in-memory reference built from the raw files
(``tests.dataset.reference_store``):

1. at uptime, before MySQL has taken the hot files in: every row from the raw files, the hot
   ones from the hot files' buckets; then, with queries running all along, MySQL takes the hot
   keys over (docs/LOADING.md, "Uptime without MySQL");
2. before any conversion: MySQL alone (ids with no cold row) and the raw route (the bucket's
   files in HDFS, merged with MySQL's rows);
3. the paper's buffering: queries wait on their buckets and are released as gen_HF loads them;
4. after full conversion: MySQL and HBase merged.

MySQL's hot path is held (its ``load_hot`` waits for the test) so that the first phase lasts.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator import Coordinator, CountLink, MultigetLink
from debl.format.bucket_map import MAX_ID
from debl.catalog import Catalog
from debl.hdfs import HdfsClient
from loaders import hot_phase
from loaders.cleanup import drop_every_load
from loaders.gen_hf import GenHF
from loaders.load import LoadOptions, LoadRun
from loaders.mysql_bulk import load_hot
from tests.awkward import BIG, HEAVY_ID1, HEAVY_TYPE, write_awkward_input
from tests.dataset import check_count_and_multiget, multiget_id2s, reference_store

pytestmark = pytest.mark.stack

QUERIES = settings(max_examples=150, deadline=None, database=None,
                   suppress_health_check=[HealthCheck.function_scoped_fixture,
                                          HealthCheck.too_slow])
TIMES = st.sampled_from([0, 1, 2, 3, 1_700_000_000_000, 1_700_000_000_003, BIG - 5, BIG - 1, BIG])


@pytest.fixture(scope="module")
def loading(stack_config, tmp_path_factory):
    """The awkward input loading (two hot files, four cold ones, 64 KiB chunks, small buckets
    with the heavy id alone in its own), up, with MySQL's hot path held: (config, data,
    reference, the load, the event that lets the hot path go)."""
    data = write_awkward_input(tmp_path_factory.mktemp("awkward"))
    config = stack_config.replace(loading_bucket_target_bytes=32 << 10,
                                  loading_bucket_target_covers_heaviest=False,
                                  mysql_database="debl_routes")
    Catalog(config, replace_older=True).close()
    drop_every_load(config)
    hot_bytes = sum((data.directory / n).stat().st_size for n in data.hot_names)
    go = threading.Event()

    def held(*args, **kwargs):
        assert go.wait(600), "the test never let the hot path go"
        return load_hot(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hot_phase, "load_hot", held)
        run = LoadRun(config, str(data.directory),
                      LoadOptions(hot_bytes=hot_bytes, chunk_size=64 << 10))
        try:
            summary = run.wait_up()
            yield config, data, reference_store(data.directory, data.hot_names), run, go
        finally:
            go.set()
            run.close()
    assert summary.hot_files == 2 and summary.chunks >= 3


@pytest.fixture(scope="module")
def awkward(loading):
    """The awkward input loaded, MySQL holding its hot keys; nothing converted yet."""
    config, data, reference, run, go = loading
    go.set()
    summary = run.finish()
    assert summary.buckets >= 4 and summary.taken_over_s is not None
    assert summary.rejects == 0  # every line is valid, however it is written
    return config, data, reference


def _check(c: Coordinator, reference, key, min_time=0, max_time=BIG, offset=0,
           limit=10000) -> str:
    id1, link_type = key
    answer = c.query(id1, link_type, min_time, max_time, offset, limit, timeout=300)
    assert answer.complete
    assert answer.links == reference.get_link_list(*key, min_time, max_time, offset, limit), \
        (key, min_time, max_time, offset, limit, answer.route)
    return answer.route


def _windows():
    return st.tuples(TIMES, TIMES, st.sampled_from([0, 1, 2, 5, 100, 4000]),
                     st.sampled_from([0, 1, 3, 10, 10000]))


def test_at_uptime_every_answer_comes_exact_from_the_raw_files_and_then_from_mysql(loading):
    """Uptime before MySQL has the hot rows: hot keys answered from the hot files' buckets by
    the merge rule (ties with cold rows included); then queries run without pause across the
    moment MySQL takes the hot keys over, every answer equal to the reference."""
    config, data, reference, run, go = loading
    with Catalog(config) as catalog:
        load = catalog.loads.current()
        assert load.load_id == run.summary.load_id and load.hot_state == "loading"
        hot = catalog.index.buckets(load.load_id, hot=True)  # the hot files', read raw
        assert [(b.b_index, b.k_lo, b.k_hi) for b in hot] == [(0, 0, MAX_ID)]  # one bucket
    with Coordinator(config.replace(coordinator_raw_after=0.0, coordinator_poll_interval=0.1)) as c:
        sides = Counter()
        for key in data.keys:
            answer = c.query(*key, timeout=300)
            assert answer.links == reference.get_link_list(*key), (key, answer.route)
            sides[answer.hot.value] += 1
            # count_link and multiget_link, the same route: the hot rows from their bucket
            assert check_count_and_multiget(c, reference, key, timeout=300) == {answer.route.value}
        assert sides["raw"] > 0 and sides["mysql"] == 0, sides  # MySQL is not read yet

        @QUERIES
        @given(st.sampled_from(data.keys + [(HEAVY_ID1, HEAVY_TYPE)] * 20), _windows())
        def windows(key, window):
            _check(c, reference, key, *window)

        windows()
        # MySQL takes over while a client asks without pause.
        wrong, seen = [], Counter()
        stop = threading.Event()

        def ask():
            i = 0
            while not stop.is_set():
                key = data.keys[i % len(data.keys)]
                i += 1
                answer = c.query(*key, timeout=300)
                seen[answer.hot.value] += 1
                if answer.links != reference.get_link_list(*key):
                    wrong.append((key, answer.route, answer.hot))

        asker = threading.Thread(target=ask)
        asker.start()
        try:
            go.set()
            summary = run.finish()
            time.sleep(0.5)  # a few polls after the take-over
        finally:
            stop.set()
            asker.join(120)
        assert wrong == []
        assert seen["raw"] > 0 and seen["mysql"] > 0, seen  # both sides were answered from
    assert summary.taken_over_s is not None
    with Catalog(config) as catalog:
        assert catalog.loads.load(summary.load_id).hot_in_mysql
    assert HdfsClient(config).status(load.namespace.hot_dir) is None  # removed after the readers


def test_before_any_conversion_mysql_alone_and_the_raw_route_are_exact(awkward):
    config, data, reference = awkward
    with Catalog(config) as catalog:
        current = catalog.loads.current().load_id
        assert {b.state for b in catalog.index.buckets(current)} == {"pending"}
    with Coordinator(config.replace(coordinator_raw_after=0.0)) as c:
        routes = Counter(_check(c, reference, key) for key in data.keys)
        assert set(routes) == {"mysql", "raw"}, routes
        assert {_check(c, reference, key) for key in data.hot_only} <= {"mysql", "raw"}
        others = set().union(*(check_count_and_multiget(c, reference, key, timeout=300)
                               for key in data.keys))
        assert others == {"mysql", "raw"}, others

        @QUERIES
        @given(st.sampled_from(data.keys + [(HEAVY_ID1, HEAVY_TYPE)] * 20), _windows())
        def windows(key, window):
            assert _check(c, reference, key, *window) in ("mysql", "raw")

        windows()


def test_buffered_queries_are_released_with_the_exact_answer(awkward):
    """The paper's buffering: every cold key's query waits on its bucket; gen_HF converts
    run by run (demand first) and each query is released with the reference's answer."""
    config, data, reference = awkward
    cold = [k for k in data.keys if k not in data.hot_only]
    released: list[str] = []
    failures: list[BaseException] = []
    others: list[tuple[str, bool]] = []
    with Coordinator(config.replace(coordinator_raw_after=None)) as c:
        def ask(key):
            try:
                answer = c.query(*key, timeout=300)
                assert answer.links == reference.get_link_list(*key), key
                released.append(answer.route)
            except BaseException as exc:  # noqa: BLE001 -- reported by the main thread
                failures.append(exc)

        def ask_others(operation, want):  # count_link or multiget_link, buffered as well
            try:
                answer = c.ask(operation, timeout=300)
                got = answer.count if isinstance(operation, CountLink) else answer.links
                assert got == want, operation
                others.append((answer.route, answer.waited))
            except BaseException as exc:  # noqa: BLE001 -- reported by the main thread
                failures.append(exc)

        threads = [threading.Thread(target=ask, args=(key,)) for key in cold]
        for key in cold[::3]:
            id2s = multiget_id2s(reference, key)
            threads += [threading.Thread(target=ask_others, args=(
                            CountLink(*key), reference.count_link(*key))),
                        threading.Thread(target=ask_others, args=(
                            MultigetLink(*key, id2s), reference.multiget_link(*key, id2s)))]
        for t in threads:
            t.start()
        with GenHF(config) as gen_hf:
            gen_hf.serve(until_complete=True)
        for t in threads:
            t.join(300)
        assert not failures, failures[0]
        assert len(released) == len(cold) and set(released) <= {"merged", "mysql"}
        assert len(others) == 2 * len(cold[::3])
        assert ("merged", True) in others  # count_link and multiget_link waited, released
        assert c.stats().buffered > 0


def test_after_full_conversion_every_answer_is_exact(awkward):
    config, data, reference = awkward
    with Catalog(config) as catalog:
        current = catalog.loads.current().load_id
        assert {b.state for b in catalog.index.buckets(current)} == {"loaded"}
    with Coordinator(config) as c:
        routes = Counter(_check(c, reference, key) for key in data.keys)
        assert set(routes) == {"mysql", "merged"}, routes
        others = set().union(*(check_count_and_multiget(c, reference, key, timeout=300)
                               for key in data.keys))
        assert others == {"mysql", "merged"}, others

        @QUERIES
        @given(st.sampled_from(data.keys + [(HEAVY_ID1, HEAVY_TYPE)] * 20), _windows())
        def windows(key, window):
            assert _check(c, reference, key, *window) in ("mysql", "merged")

        windows()
