"""``debl ui``'s page in a real browser on the real stack, while a load answers before its
uptime (its source lists manifests, no day is current; docs/LOADING.md, "Answers before the copy
ends"): the card says so, its shares answerable grow as bars, the keys queries wait for and the
bytes fetched for them on demand are shown with their history, the early answers are a line of
their own on the chart; after the uptime the card still says what the load did. The drawing of
a false claim: tests/test_ui_page.py (a given status); the status read behind it:
tests/test_early_status.py.

Outside CI a missing browser skips this test; under ``CI=true`` it fails it.
"""

from __future__ import annotations

import os
import threading
import time

import pytest

from debl.ui.server import UIServer
from tests.ui_browser import CHART_PIXELS, EARLY_FUCHSIA, page, screenshot, wait_for

@pytest.fixture()
def early_stack(stack_config, tmp_path):
    """A database of its own, emptied (no day current: the load answers early), and a small
    input by id1 range with manifests (docs/LOADING.md, "The manifest")."""
    from debl.catalog import Catalog
    from debl.workload.generator import generate
    from debl.workload.spec import GenerateSpec
    from loaders.cleanup import drop_every_load

    config = stack_config.replace(mysql_database="debl_uitest_early",
                                  hdfs_root="/debl_uitest_early", hbase_table="uitest_early",
                                  loading_bucket_target_bytes=64 << 10,
                                  loading_bucket_target_covers_heaviest=False)
    Catalog(config, replace_older=True).close()
    drop_every_load(config)
    directory = tmp_path / "in"
    generate(directory, GenerateSpec(max_id=20001, files=3, days=3, seed=5, layout="ranges",
                                     max_degree=30))
    yield config, directory
    drop_every_load(config)


@pytest.mark.stack
def test_the_page_shows_a_load_answering_before_its_uptime(early_stack, browser, tmp_path):
    import random

    from coordinator import Coordinator
    from coordinator.routes import Route
    from debl.bench.source_server import make_server
    from debl.catalog import Catalog
    from debl.errors import QueryTimeout
    from loaders.load import LoadOptions, LoadRun
    from tests.dataset import reference_store

    config, directory = early_stack
    files = sorted(p for p in directory.iterdir() if p.name != "index.json")
    total = sum(p.stat().st_size for p in files)
    keys = sorted(reference_store(directory, set()).keys())
    tail = files[-1].read_bytes()  # three id1s of the input's end: the bulk copy's last bytes
    late = sorted({int(line.split(b"\t", 1)[0]) for line in
                   tail[int(len(tail) * 0.8):].split(b"\n")[1:-1]})[:3]
    server = make_server(directory, port=0, rate_mb_s=total / 25 / 1e6)  # a 25 s copy
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    up, failed, answered = threading.Event(), [], []
    try:
        with UIServer(config, port=0, interval=0.5) as ui, \
                LoadRun(config, url, LoadOptions(approach="debl-cold",
                                                 chunk_size=256 << 10)) as run:
            def load() -> None:
                try:
                    run.wait_up()
                except BaseException as exc:  # noqa: BLE001 -- failed below
                    failed.append(exc)
                finally:
                    up.set()

            threading.Thread(target=load, daemon=True).start()
            browser.get(ui.url)
            first = wait_for(browser, "the load answering early", lambda s: s["current"] and
                             s["current"]["early"] and s["current"]["early"]["state"] == "on")
            assert first["current"]["role"] == "first"
            assert "loading, answering early" in first["current"]["text"]
            # queries wait for three keys (as a coordinator publishes them): counted, and their
            # bytes fetched ahead of the bulk copy
            with Catalog(config) as catalog:
                catalog.early.publish_key_demand(first["current"]["load"], "page-test",
                                                 dict.fromkeys(late, 1))
            waiting = wait_for(browser, "the keys waiting", lambda s: s["current"]["early"]
                               ["keysWaiting"] == len(late))
            assert waiting["current"]["early"]["figures"]["waiting"] == f"{len(late)} now"
            fetched = wait_for(browser, "bytes fetched on demand", lambda s: s["current"]
                               ["early"]["demandBytes"] > 0)
            assert fetched["current"]["early"]["figures"]["demand"].endswith(" MB/s now")
            with Catalog(config) as catalog:
                catalog.early.publish_key_demand(first["current"]["load"], "page-test", {})
            # a coordinator's answers before the uptime: a line of their own
            # a screenshot once early answers are on the chart; for the docs one every 5 s, so
            # that the last is taken as late in the copy as can be
            rng, seen, shot = random.Random(5), [], None
            every = 5.0 if os.environ.get("UI_EARLY_SCREENSHOT") else float("inf")
            with Coordinator(config, default_timeout=1.0) as c:
                while not up.is_set():
                    try:
                        answer = c.query(*rng.choice(keys))
                    except QueryTimeout:
                        continue
                    if answer.route is Route.EARLY:
                        answered.append(answer)
                    state = page(browser)
                    seen.append(state)
                    if ((shot is None or time.monotonic() - shot > every) and
                            state["current"]["state"] == "running" and
                            state["routes"].get("early", {}).get("total", 0) >= 10 and
                            state["current"]["early"]["keyShare"] < 1):
                        screenshot(browser, tmp_path / "ui-early.png", "UI_EARLY_SCREENSHOT")
                        shot = time.monotonic()
                assert not failed, failed
                # counted as the coordinator publishes them (while it is open: its polls)
                drawn = wait_for(browser, "every early answer", lambda s: s["routes"].get(
                    "early", {}).get("total") == len(answered))
            assert answered, "no early answer before the uptime"
            copying = [s["current"]["early"] for s in seen if s["current"]["state"] == "running"]
            shares = [e["keyShare"] for e in copying]
            assert shares == sorted(shares) and len(set(shares)) >= 2, shares
            assert all(abs(float(e["bars"]["keys"][:-1]) - 100 * e["keyShare"]) <= 0.5
                       for e in copying)
            assert any(e["sparks"][0].startswith("MB/s fetched on demand over the last ")
                       for e in copying)
            assert browser.execute_script(CHART_PIXELS, EARLY_FUCHSIA) > 20
            run.finish()
            after = wait_for(browser, "the load up", lambda s: s["current"]["state"] == "up")
            early = after["current"]["early"]
            assert (early["state"], early["badge"], early["keyShare"]) == ("on", "done", 1.0)
            assert "answered key by key before the uptime" in early["text"]
            # every byte bucketed: by dist_ch, or in the load's process as it was fetched
            assert after["current"]["phases"]["demand"]["done"] == 1.0
            assert after["current"]["phases"]["dist_ch"]["done"] == 1.0
            assert after["current"]["role"] == "serving" and after["claims"] == []
            assert drawn["routes"]["early"]["total"] == len(answered)
    finally:
        server.shutdown()
        server.server_close()
