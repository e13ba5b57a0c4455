"""The HBase client anchor (scripts/hbase_anchor.py, ``debl.jobs.GetLinkListBench``) reads what
the Thrift path reads: the same requests as the query client, and per request the visible rows
of ``HBaseStore.get_link_list`` (docs/BENCHMARKS.md, "HBase's own client: the anchor").
"""

from __future__ import annotations

import importlib.util
import secrets
from pathlib import Path

import pytest

from debl.format.link import Link, Origin
from debl.store.hbase_layout import scan_bounds
from debl.workload.client_spec import ClientSpec
from debl.workload.requests import RequestSpec, RequestStream

ROOT = Path(__file__).resolve().parents[1]


def _anchor():
    spec = importlib.util.spec_from_file_location("hbase_anchor", ROOT / "scripts/hbase_anchor.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_requests_are_the_query_clients_thread_by_thread(tmp_path: Path) -> None:
    spec = ClientSpec(RequestSpec(max_id=5000, seed=7, recency_share=0.5), threads=3, total=20,
                      processes=1)
    path = tmp_path / "requests.tsv"
    assert _anchor().write_requests(path, spec) == 20
    lines = [line.split("\t") for line in path.read_text().splitlines()]
    expected = []
    for thread in range(3):
        stream = RequestStream(spec.requests, stream=thread)
        for _ in range(spec.quota(thread) or 0):  # (a spec of total requests)
            start, stop = scan_bounds(*next(stream))  # every time
            expected.append([str(thread), start.hex(), stop.hex()])
    assert lines == expected


@pytest.mark.stack
def test_the_java_client_reads_the_rows_the_thrift_path_reads(stack_config, tmp_path) -> None:
    from debl.store.hbase import HBaseStore

    table = f"anchor_{secrets.token_hex(3)}"
    store = HBaseStore(stack_config, table=table, pool_size=2)
    store.reset()
    try:
        links = [Link(id1, 123456789, id2, int(id2 % 3 != 0), b"d", 1000 + id2, 0)
                 for id1 in (5, 6, 7) for id2 in range(1, 4 * id1)]
        store.write_links((link, Origin(0, 0, i)) for i, link in enumerate(links))
        keys = [(5, 123456789), (6, 123456789), (7, 123456789), (8, 123456789),
                (6, 123456790)]
        path = tmp_path / "requests.tsv"
        path.write_text("".join(f"{i % 2}\t{a.hex()}\t{b.hex()}\n" for i, (a, b) in enumerate(
            scan_bounds(id1, lt) for id1, lt in keys)))
        result = _anchor().run_anchor(stack_config, table, path, threads=2, limit=7)
        assert result["requests"] == len(keys)
        assert result["rows"] == sum(len(store.get_link_list(id1, lt, limit=7))
                                     for id1, lt in keys)
        assert result["rows"] > 0
    finally:
        store.drop_table()
        store.close()
