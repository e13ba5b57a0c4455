"""Dropping an HBase table that another process drops at the same moment (a load's cleanup and
the gen_HF service's cleanup of the same old day) succeeds in both, on the real HBase."""

from __future__ import annotations

import threading

import pytest

from debl.store.hbase import HBaseStore

pytestmark = pytest.mark.stack


def test_two_cleanups_dropping_one_table_at_once_both_succeed(stack_config):
    for round_no in range(3):
        name = f"drop_race_{round_no}"
        with HBaseStore(stack_config, name) as store:
            store.create_table()
        start, errors = threading.Barrier(2), []

        def drop(name: str, start: threading.Barrier, errors: list[Exception]) -> None:
            try:
                with HBaseStore(stack_config, name) as store:
                    start.wait()
                    store.drop_table()
            except Exception as exc:  # noqa: BLE001 -- the assertion below shows it
                errors.append(exc)

        threads = [threading.Thread(target=drop, args=(name, start, errors)) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert errors == []
        with HBaseStore(stack_config, name) as store:
            assert not store.table_exists()
