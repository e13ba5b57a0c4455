"""An HTTP source keeps its connections open between requests (HTTP/1.1 keep-alive): the
split-point sample's ranged reads cost a round trip each, not a TCP handshake and a server
thread (docs/LOADING.md, "Bucket boundaries"). A kept-alive connection the server has closed
meanwhile is replaced without an error; one whose response was not read to its end is never
reused. Real sockets, against ``tests.hostile_http`` and ``debl source serve``."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from debl.bench.source_server import make_server
from loaders.http_client import IDLE_CONNECTIONS
from loaders.source import HttpSource
from tests.hostile_http import HostileSource

BODY = bytes(range(256)) * 400  # 102,400 bytes


@pytest.fixture()
def hostile(tmp_path):
    (tmp_path / "f.tsv").write_bytes(BODY)
    with HostileSource(tmp_path) as server:
        yield server


def test_serial_reads_share_one_connection(hostile):
    source = HttpSource(hostile.url)
    files = source.list()
    assert source.stat("f.tsv").size == files[0].size == len(BODY)
    for offset in range(0, len(BODY), 997):
        assert source.read_range("f.tsv", offset, 300) == BODY[offset:offset + 300]
    with source.open("f.tsv") as stream:  # a read gives what has arrived: read to the end
        assert b"".join(iter(lambda: stream.read(len(BODY) + 1), b"")) == BODY
    assert len(hostile.peers) == 1


def test_reads_in_threads_use_at_most_a_connection_each(hostile):
    source = HttpSource(hostile.url)
    offsets = list(range(0, len(BODY) - 4096, 311))
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda o: source.read_range("f.tsv", o, 4096), offsets))
    assert got == [BODY[o:o + 4096] for o in offsets]
    assert len(hostile.peers) <= 8 <= IDLE_CONNECTIONS


def test_a_transfer_dropped_early_is_not_reused_and_loses_nothing(hostile):
    hostile.drop("f.tsv", at=50_000, times=1)
    source = HttpSource(hostile.url)
    with source.open("f.tsv") as stream:
        assert b"".join(iter(lambda: stream.read(8192), b"")) == BODY
    assert source.read_range("f.tsv", 10, 10) == BODY[10:20]
    assert len(hostile.peers) == 2  # the dropped one, then its resume, reused after


def test_a_stream_left_before_its_end_closes_its_connection(hostile):
    source = HttpSource(hostile.url)
    with source.open("f.tsv") as stream:
        stream.read(100)  # the rest of the body is never read: that connection is spoilt
    assert source.read_range("f.tsv", 0, 10) == BODY[:10]
    assert len(hostile.peers) == 2


def test_a_connection_the_server_closed_while_idle_is_replaced(tmp_path):
    (tmp_path / "f.tsv").write_bytes(BODY)
    server = make_server(tmp_path, port=0, timeout=0.3)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        source = HttpSource(f"http://127.0.0.1:{server.server_address[1]}")
        for _ in range(3):
            assert source.read_range("f.tsv", 5, 5) == BODY[5:10]
            time.sleep(0.6)  # the server lets the idle connection go meanwhile
        source.close()
    finally:
        server.shutdown()
        server.server_close()
