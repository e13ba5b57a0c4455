"""The mixes of ``debl query --mix``, the readers' choice among the reads, the writes' ids and
rows (debl.workload.mix, link_ids, writes): proportions from a fixed seed, the id2s against a
generated data set, determinism, and the client's spec. Pure unit tests: no service."""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter

import numpy as np
import pytest

from debl.errors import ConfigError
from debl.format.link import parse_line
from debl.store.linkbench_writes import WriteAck
from debl.workload.client import ClientSpec, run_client
from debl.workload.generator import generate
from debl.workload.link_ids import P_ADD_EXIST, P_GET_EXIST, P_UPDATE_EXIST, LinkIds
from debl.workload.mix import (COUNT_LINK, DELETE_LINK, GET_LINK_LIST, MIXES, MULTIGET_LINK,
                               READ_OPS, WRITE_OPS, ReadDraws, mix_named, multiget_count)
from debl.workload.pacing import PoissonSchedule
from debl.workload.requests import RequestSpec, RequestStream
from debl.workload.spec import GenerateSpec
from debl.workload.writers import WriterPool
from debl.workload.writes import WRITE_SHAPE, WRITER_STREAMS, WriteStream, write_requests

REQ = RequestSpec(max_id=5001, seed=3)
N = 200_000


def test_the_linkbench_mix_is_fbworkloads_link_operations_normalized():
    mix = MIXES["linkbench"]
    assert sum(mix.shares) == pytest.approx(1.0)
    total = 50.7119145 + 4.8863567 + 0.5261142 + 8.9886601 + 8.0122125 + 2.9907664
    assert mix.share(GET_LINK_LIST) == pytest.approx(50.7119145 / total)
    assert mix.share(DELETE_LINK) == pytest.approx(2.9907664 / total)
    assert mix.write_share == pytest.approx(0.2627, abs=1e-4)  # about a quarter writes
    heavy = MIXES["update-heavy"]
    assert heavy.write_share == pytest.approx(0.5)
    assert heavy.read_shares() == pytest.approx(mix.read_shares())
    assert heavy.write_shares() == pytest.approx(mix.write_shares())
    reads = MIXES["reads"]
    assert reads.only_get_link_list and reads.write_share == 0
    with pytest.raises(ConfigError, match="unknown --mix 'writes': choose one of reads, "
                                          "linkbench, update-heavy"):
        mix_named("writes")


@pytest.mark.parametrize("name", ["linkbench", "update-heavy"])
def test_a_readers_operations_come_in_the_mixs_proportions(name):
    mix = MIXES[name]
    draws = ReadDraws(mix, REQ, stream=0)
    stream = RequestStream(REQ, stream=0)
    ops = Counter(READ_OPS[draws.draw(*next(stream))[0]] for _ in range(N))
    for op, share in zip(READ_OPS, mix.read_shares()):
        assert ops[op] / N == pytest.approx(share, abs=0.004), op
    assert _draws(mix, 0, 2000) == _draws(mix, 0, 2000)  # replayed
    assert _draws(mix, 1, 2000) != _draws(mix, 0, 2000)  # streams apart


def _draws(mix, stream: int, n: int) -> list:
    draws, requests = ReadDraws(mix, REQ, stream), RequestStream(REQ, stream)
    return [draws.draw(*next(requests)) for _ in range(n)]


def test_a_writers_operations_come_in_the_mixs_proportions_and_replay():
    mix = MIXES["linkbench"]
    writes = WriteStream(mix, REQ, writer=0, clock_ms=lambda: 7)
    drawn = [writes.next_write() for _ in range(50_000)]
    ops = Counter(w.op for w in drawn)
    for op, share in zip(WRITE_OPS, mix.write_shares()):
        assert ops[op] / len(drawn) == pytest.approx(share, abs=0.01), op
    again = WriteStream(mix, REQ, writer=0, clock_ms=lambda: 7)
    assert [again.next_write() for _ in range(1000)] == drawn[:1000]
    assert WriteStream(mix, REQ, writer=1, clock_ms=lambda: 7).next_write() != drawn[0]
    for w in drawn:
        assert REQ.start_id <= w.id1 < REQ.max_id and w.link_type in (123456789, 123456790)
        if w.op == DELETE_LINK:
            assert w.link is None
        else:  # a valid LinkBench row: visible, version 0, the clock's time, data's bytes
            assert w.link.key == (w.id1, w.link_type, w.id2)
            assert (w.link.visibility, w.link.version, w.link.time) == (1, 0, 7)
            assert parse_line(w.link.to_line()) == w.link
            assert set(w.link.data) <= set(range(32, 101))
    sizes = np.array([len(w.link.data) for w in drawn if w.link is not None])
    assert np.median(sizes) == pytest.approx(8, abs=1) and sizes.max() <= 254


def test_write_ids_follow_linkbenchs_write_distribution():
    """Zipf(0.741), not the reads' 0.8: the hottest write id gets its share, and a writer's ids
    are those of the write spec's own stream."""
    spec = write_requests(REQ)
    assert spec.shape == WRITE_SHAPE and spec.uncorrelated_share == 0.95
    assert (spec.max_id, spec.seed, spec.recency_share) == (REQ.max_id, REQ.seed, 0.0)
    writes = WriteStream(MIXES["linkbench"], REQ, writer=2)
    ids = Counter(writes.next_write().id1 for _ in range(N // 4))
    top = ids.most_common(1)[0][1] / (N // 4)
    n = REQ.max_id - REQ.start_id
    zipf = 1 / sum(k ** -WRITE_SHAPE for k in range(1, n + 1))  # rank 0's share
    assert top == pytest.approx(zipf, rel=0.15)


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """A small data set as `debl generate` makes it: its keys per (id1, link_type)."""
    directory = tmp_path_factory.mktemp("mixdata")
    generate(directory, GenerateSpec(max_id=REQ.max_id, files=1, days=1, seed=2,
                                     update_share=0.0))
    lists: dict[tuple[int, int], set[int]] = {}
    for path in directory.glob("links-*.tsv"):
        for line in path.read_bytes().splitlines():
            link = parse_line(line)
            lists.setdefault((link.id1, link.link_type), set()).add(link.id2)
    return lists


def test_the_loaded_links_of_a_list_are_those_the_ids_are_drawn_over(generated):
    links = LinkIds(REQ)
    for id1 in range(REQ.start_id, REQ.max_id):
        for link_type in (123456789, 123456790):
            first, count = links.links_of_type(id1, link_type)
            want = {id1 + first + k * 2 for k in range(count)}
            assert generated.get((id1, link_type), set()) == want, (id1, link_type)


@pytest.mark.parametrize("p", [P_ADD_EXIST, P_UPDATE_EXIST, P_GET_EXIST])
def test_an_id2_names_a_loaded_link_with_linkbenchs_probability(generated, p):
    """On lists of 20 links or more (on a list without links every id2 is a new link, on a
    short one the range's rounding moves the share: as LinkBench's)."""
    rng = np.random.default_rng(5)
    links = LinkIds(REQ)
    keys = [k for k in generated if len(generated[k]) >= 20]
    hits = [links.choose(rng, *keys[i % len(keys)], p) in generated[keys[i % len(keys)]]
            for i in range(20_000)]
    assert np.mean(hits) == pytest.approx(p, abs=0.02)


def test_multiget_asks_linkbenchs_geometric_count_of_distinct_id2s(generated):
    rng = np.random.default_rng(1)
    counts = np.array([multiget_count(rng) for _ in range(N)])
    assert counts.min() == 2 and counts.max() <= 127  # min + ceil(...) >= 2, at most max - 1
    assert counts.mean() == pytest.approx(1 + 1 / 0.382, abs=0.03)
    links = LinkIds(REQ)
    heavy = max(generated, key=lambda k: len(generated[k]))
    found = []
    for _ in range(2000):
        id2s = links.choose_many(rng, *heavy, 5, 0.5)
        assert len(set(id2s)) == 5
        found += [id2 in generated[heavy] for id2 in id2s]
    assert np.mean(found) == pytest.approx(0.5, abs=0.03)
    assert links.choose_many(rng, 3, 123456789, 4, 0.5) == tuple(
        3 + links.links_of_type(3, 123456789)[0] + 2 * k for k in range(4))  # a short list


def test_the_reads_of_a_mix_keep_the_reads_requests():
    """Reader t sends the (id1, link_type) of the reads mix whatever the mix: the operations
    are drawn apart; under the reads mix only get_link_list is called."""
    class Recorder:
        def __init__(self):
            self.seen, self.lock = [], threading.Lock()

        def _seen(self, op, id1, link_type):
            with self.lock:
                self.seen.append((threading.current_thread().name, op, id1, link_type))

        def get_link_list(self, id1, link_type):
            self._seen(GET_LINK_LIST, id1, link_type)
            return []

        def count_link(self, id1, link_type):
            self._seen(COUNT_LINK, id1, link_type)
            return 0

        def multiget_link(self, id1, link_type, id2s):
            assert 2 <= len(id2s) <= 127
            self._seen(MULTIGET_LINK, id1, link_type)
            return []

    plain, mixed = Recorder(), Recorder()
    run_client(plain, ClientSpec(REQ, threads=2, total=4000))
    with pytest.raises(ConfigError, match="name the source database"):
        run_client(mixed, ClientSpec(REQ, threads=2, total=4000, mix="linkbench",
                                     write_rate=10))
    result = run_client(mixed, ClientSpec(REQ, threads=2, total=4000, mix="update-heavy",
                                          write_rate=10), writes_to=_Source(0.0))
    assert result.completed == 4000 and result.writes is not None
    for t in range(2):
        stream = RequestStream(REQ, stream=t)
        keys = [next(stream) for _ in range(2000)]
        mine = [(op, i, lt) for name, op, i, lt in plain.seen if name == f"debl-client-{t}"]
        assert mine == [(GET_LINK_LIST, *key) for key in keys]
        mine = [(op, i, lt) for name, op, i, lt in mixed.seen if name == f"debl-client-{t}"]
        assert [(i, lt) for _, i, lt in mine] == keys  # the same requests, other reads
        assert [op for op, _, _ in mine] == [READ_OPS[op] for op, _ in _draws(
            MIXES["update-heavy"], t, 2000)]
        assert set(op for op, _, _ in mine) == set(READ_OPS)


def test_the_client_spec_asks_for_a_write_rate_where_writes_are():
    with pytest.raises(ConfigError, match="--write-rate sends writes, which --mix reads"):
        ClientSpec(REQ, mix="reads", write_rate=5)
    with pytest.raises(ConfigError, match="--mix linkbench sends writes: give their rate"):
        ClientSpec(REQ, mix="linkbench")
    with pytest.raises(ConfigError, match="--writers must be at least 1"):
        ClientSpec(REQ, mix="linkbench", write_rate=5, writers=0)
    with pytest.raises(ConfigError, match="unknown --mix"):
        ClientSpec(REQ, mix="nope")
    assert ClientSpec(REQ, mix="linkbench", write_rate=5).writes_per_s == 5
    share = MIXES["linkbench"].write_share
    assert ClientSpec(REQ, mix="linkbench", rate=300).writes_per_s == \
        pytest.approx(300 * share / (1 - share))
    assert ClientSpec(REQ, mix="update-heavy", rate=300).writes_per_s == pytest.approx(300)
    assert ClientSpec(REQ).writes_per_s is None


class _Source:
    """Pure tests' stand-in for the source database (the real one: tests/test_linkbench_writes.py):
    every write takes *seconds* and changes a row."""

    where = "a stand-in source"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def session(self):
        return self

    def add_link(self, link):
        sent = time.monotonic_ns()
        time.sleep(self.seconds)
        return WriteAck(False, True, None, sent, time.monotonic_ns())

    update_link = add_link

    def delete_link(self, id1, link_type, id2):
        return self.add_link(None)

    def close(self):
        pass


def test_a_writer_pool_that_falls_behind_says_how_far():
    """A source whose every write takes 20 ms cannot take 500 writes a second from one writer:
    the writes its schedule had due and never sent are counted, the rate is not held."""
    with WriterPool(_Source(0.02), MIXES["linkbench"], REQ, rate=500, writers=1) as pool:
        t0 = time.perf_counter_ns()
        pool.start(t0, t0 + 1_000_000_000)
        time.sleep(1.2)
        result = pool.stop()
    schedule = PoissonSchedule(500, REQ.seed, WRITER_STREAMS + 0)  # the writer's own
    due = sum(1 for _ in itertools.takewhile(lambda t: t < 1_000_000_000, schedule))
    assert result.completed + result.behind == due  # every write due by the deadline
    assert result.completed > 0 and result.errors == 0 and len(result.records) == result.completed
    assert result.held == result.completed / due < 0.2  # 20 ms each: 60 in 1.2 s at most
    # the rate over the span the writes were due in, not to the stop 0.2 s later
    assert result.elapsed_s == 1.0 and result.per_s == result.completed
