"""``debl ui``'s page in a real browser: Debian's Chromium, headless, driven by Selenium through
Debian's chromedriver (scripts/setup.sh installs both; docs/UI.md).

1. A status given to the page (no service needed): both days, the bucket map with its states,
   demand and ranges, answers by route on the chart, failures and rejects with their messages,
   every text from the server shown as text (a rejected line is raw input), no credential.
2. No MySQL at all: a message naming it, not a blank page.
3. The real stack: a small load from a URL with a password, the page showing the phases
   advance, uptime and MySQL's take-over, the answers by route while a coordinator answers,
   buckets turning loaded run by run until full availability, the next day loading beside the
   current one; the password never on the page. Then MariaDB stopped and started again: the
   page says so, and recovers by itself.
A load that answers before its uptime on the real stack: tests/test_ui_page_early.py; the
browser and what the tests read off the page: tests/ui_browser.py.

Outside CI a missing browser skips these tests; under ``CI=true`` it fails them.
"""

from __future__ import annotations

import socket
import threading
import time
import urllib.request

import pytest

from debl.config import Config
from debl.ui.history import AnswerHistory
from debl.ui.sampler import Snapshot
from debl.ui.server import UIServer
from debl.ui.services import ServiceMark
from loaders.load import reject_path
from loaders.rejects import RejectWriter
from tests.ui_browser import (CHART_PIXELS, EARLY_FUCHSIA, RAW_BLUE, Given, page, screenshot,
                              wait_for)

# ------------------------------------------------------------------- 1. a given status

HOSTILE_NAME = '<img src=x onerror="document.title=\'named\'">.tsv'


def _given_status(now: float) -> dict:
    """A status as read_status returns it: day 1 serving (buckets in every state, demand, a
    failed and a running job, rejects), day 2 loading beside it, a previous day."""
    def brief(load_id, state, started, uptime, source):
        return {"load_id": load_id, "approach": "debl", "source": source, "state": state,
                "started": started, "uptime": uptime,
                "uptime_s": None if uptime is None else uptime - started, "age_s": now - started,
                "hot_rows": 2999, "hot_k_lo": 3000, "hot_k_hi": 3999,
                "hot_state": "mysql" if uptime else "loading",
                "taken_over_s": 30.0 if uptime else None, "wait_for_hot": False, "error": None,
                "stores": {}}

    def phase(name, start, end, items, open_, nbytes):
        return {"phase": name, "items": items, "open": open_, "seconds": (end or now) - start,
                "first_start": start, "last_end": end, "bytes": nbytes, "rows": 0,
                "wall_s": (end or now) - start}

    states = ["loaded", "loaded", "running", "queued", "pending", "failed"]
    buckets = [{"b_index": i, "k_lo": 1000 * i, "k_hi": 1000 * i + 999, "c_lo": 1000 * i + 1,
                "c_hi": 1000 * i + 998, "rows": 5000 + i, "bytes": 1_000_000 * (i + 1),
                "state": s, "demand": [0, 0, 3, 12, 1, 0][i], "asked": 40 + i}
               for i, s in enumerate(states)]
    day1, day2 = now - 600, now - 20
    load = {**brief("L1", "up", day1, day1 + 60, "/data/day1"),
            "input": {"files": 4, "bytes": 60_000_000, "hot_files": 1, "hot_bytes": 9_000_000},
            "rejects": {"total": 2, "files": [{"file": "a.tsv", "rejects": 2}]},
            "bucket_map": {"kind": "width", "width": 1000, "buckets": None}, "chunk_size": 1,
            # it answered before its uptime until a claim of its manifests was found false (the
            # file's name is the source's: shown as text)
            "early": {"state": "stopped", "key_share": 0.375, "answerable_bytes": 24_000_000,
                      "total_bytes": 60_000_000, "bytes_share": 0.4, "demand_bytes": 3_500_000,
                      "keys_waiting": 7, "false_claims_total": 1, "answers_in_false_claims": 31,
                      "false_claims": [{"claim_no": 0, "file": HOSTILE_NAME, "file_seq": 2,
                                        "offset": 262144, "kind": "span", "detail": "id1 4100 "
                                        "found, the piece claims 4500..4700",
                                        "affected": [4000, 5999], "early_answers": 31}]}}
    loading = {**brief("L2", "running", day2, None, "http://reader:s3cret@files.example/day2/"),
               "input": {"files": 4, "bytes": 80_000_000, "hot_files": 1,
                         "hot_bytes": 9_000_000},
               "rejects": {"total": 1, "files": [{"file": "b.tsv", "rejects": 1}]},
               "bucket_map": None,
               "phases": [phase("copy", day2 + 1, None, 3, 1, 20_000_000)],
               "buckets": {"total": 2, "loaded": 0, "by_state": {}, "rows": 10, "bytes": 10,
                           "loaded_bytes": 0, "largest_bytes": 5,
                           "list": [{**b, "state": "pending", "demand": 0} for b in buckets[:2]]}}
    return {
        "now": now, "load": load, "loading": loading,
        "previous": brief("L0", "up", now - 90_000, now - 89_000, "/data/day0"),
        "phases": [phase("copy", day1 + 1, day1 + 50, 8, 0, 60_000_000),
                   phase("dist_ch", day1 + 5, day1 + 59, 8, 0, 60_000_000),
                   phase("hot", day1 + 2, day1 + 31, 1, 0, 9_000_000),
                   phase("hfiles", day1 + 61, None, 2, 1, 3_000_000)],
        "buckets": {"total": 6, "loaded": 2, "by_state": dict.fromkeys(
            ["pending", "queued", "running", "loaded", "failed"], 1) | {"loaded": 2},
            "rows": 30015, "bytes": 21_000_000, "loaded_bytes": 3_000_000,
            "largest_bytes": 6_000_000, "list": buckets},
        "demand": {"total": 16, "buckets": 3, "coordinators": 1,
                   "top": [{"b_index": 3, "waiting": 12}, {"b_index": 2, "waiting": 3}]},
        "answers": {"by_route": {"immediate": 900, "raw": 4000, "buffered": 7, "early": 250},
                    "coordinators": 2, "total": 5157},
        "running_jobs": [{"b_index": 2, "run_id": "R7", "started": now - 4, "attempts": 1,
                          "running_s": 4.0}],
        "failed_jobs": [{"b_index": 5, "attempts": 3,
                         "error": "bulk load of <b>bucket 5</b> failed: pw-given-1234\nat x"}],
        "full_availability": None,
        # kept fresh: its follower lags, 120 transactions behind the source's head
        "fresh": {"source": "S1", "followed": True, "kept": True, "applied_on_demand": 1500,
                  "applied_background": 300, "refreshes_on_demand": 40,
                  "refreshes_background": 6, "buffered": 75, "timed_out": 2},
        "followers": [{"source": "S1", "gtid": "0-1-880", "seq": 880, "state": "catching-up",
                       "error": None, "head_gtid": "0-1-1000", "head_seq": 1000,
                       "head_age_s": 0.4, "behind": 120, "changes": 5400, "kept_from": 10,
                       "lag_s": 2.5, "captured_age_s": 0.2, "heartbeat_age_s": 0.3,
                       "host": "h", "pid": 7}],
    }


def test_the_page_draws_the_status_it_is_given(browser, tmp_path):
    config = Config(state_dir=tmp_path, mysql_password="pw-given-1234", mysql_port=1)
    now = time.time()
    history, early_history = AnswerHistory(), AnswerHistory()
    for i in range(60):
        history.add(now - 60 + i, "L1", {"raw": 40 * i * i, "immediate": 10 * i,
                                         "early": 300 * i if i < 30 else 9000})
        early_history.add(now - 60 + i, "L1", {"demand_bytes": 100_000 * i},
                          {"keys_waiting": i % 9})
    hostile = b'<img src=x onerror="document.title=\'pwned\'"> 1\t2'
    RejectWriter(reject_path(config, "L1")).write_part(
        "chunk-00000", [("a.tsv", 7, "expected 7 tab-separated fields, found 2", hostile),
                        ("a.tsv", 9, "id1 is not an integer: b'x'", b"x\t1")])
    ui = UIServer(config, port=0)
    ui.sampler = Given(Snapshot(_given_status(now), now, None, None, history.series(), 1,
                                 early_history.series()))
    ui.services = Given([ServiceMark("HDFS", "h:1", True, "answers", now),
                          ServiceMark("HBase", "h:2", False, "does not answer: refused", now)])
    with ui:
        browser.get(ui.url)
        state = wait_for(browser, "the given status", lambda s: s["current"] and s["loading"])
        source = browser.page_source
    assert state["current"]["role"] == "serving" and state["current"]["load"] == "L1"
    assert state["loading"]["role"] == "loading" and state["loading"]["load"] == "L2"
    assert state["loading"]["phases"]["copy"] == {"open": 1, "done": 0.25}  # 20 of 80 MB
    assert state["loading"]["cells"] == 2
    assert state["loading"]["facts"]["uptime"] == "not yet: the serving day answers meanwhile"
    assert state["current"]["phases"]["copy"]["done"] == 1.0
    assert state["current"]["phases"]["hfiles"]["done"] == pytest.approx(3 / 21, abs=1e-3)
    assert state["current"]["facts"]["uptime"].startswith("60.0 s after the start")
    assert "L0" in state["previous"]
    # the bucket map: one cell per bucket, its state, its range on hover, shaded by demand
    assert [c["state"] for c in state["cells"]] == ["loaded", "loaded", "running", "queued",
                                                     "pending", "failed"]
    assert state["cells"][3]["title"].startswith("bucket 3: [3000, 3999]\ncold id1 3001..3998")
    assert "5,003 rows, 4 MB" in state["cells"][3]["title"]
    shades = [c["shade"] for c in state["cells"]]
    assert shades[3] == max(shades) and shades[0] == 0 and 0 < shades[4] < shades[2] < shades[3]
    assert [c["b"] for c in state["cells"] if c["outlined"]] == [2, 3, 4]
    # answers by route: the totals, and the raw route's line drawn on the chart
    assert state["routes"]["raw"]["total"] == 4000 and state["routes"]["raw"]["rate"] > 0
    assert state["routes"]["buffered"]["total"] == 7 and "timeouts" not in state["routes"]
    assert browser.execute_script(CHART_PIXELS, RAW_BLUE) > 100
    # answers before uptime: the early route on the chart, the load's shares as bars, the
    # bytes fetched on demand and the keys waiting with their history, the false claim
    assert state["routes"]["early"]["total"] == 250
    assert browser.execute_script(CHART_PIXELS, EARLY_FUCHSIA) > 50
    early = state["current"]["early"]
    assert (early["state"], early["badge"]) == ("stopped", "stopped")
    assert early["bars"] == {"keys": "38%", "bytes": "40%"}
    assert early["figures"] == {"keys": "37.5%", "bytes": "40.0%: 24 MB of 60 MB",
                                "demand": "3.5 MB in all, 0.10 MB/s now", "waiting": "7 now"}
    assert "stopped at a false claim before the uptime" in early["text"]
    assert early["sparks"][0].startswith("MB/s fetched on demand over the last 58 s")
    assert early["sparks"][1] == "keys waiting over the last 58 s; most 8"
    assert state["loading"]["early"] is None
    assert state["claims"] == [["1", "31", "1 claim(s) of the manifests of load L1 (serving) "
                                "found false: early answers stopped; 31 early answer(s) had been "
                                "given in the id1s they affect"]]
    assert state["claimRows"] == [[HOSTILE_NAME, "262,144", "span",
                                   "id1 4100 found, the piece claims 4500..4700", "4000..5999",
                                   "31"]]
    # fresh answers: the follower lagging behind the source's head, what was applied
    assert state["followers"] == [[
        "catching-up", "follower of source S1: catching-up, captured up to GTID 0-1-880, 120 "
        "transaction(s) behind the source's head 0-1-1000 (read 0.4 s ago); 5,400 changes "
        "captured; its last captured commit was captured 2.5 s after it"]]
    assert state["fresh"] == ("serving load: changes applied on demand 1,500 (40 refreshes), in "
                              "the background 300 (6); buffered 75; 2 queries timed out waiting "
                              "for the change log")
    # failures, rejects and a service down, their messages as text
    assert state["running"] == ["bucket 2, run R7: 4.0 s so far, attempt 1"]
    assert "bulk load of <b>bucket 5</b> failed" in state["failed"][0]
    assert state["rejects"][0] == ["a.tsv:7", "expected 7 tab-separated fields, found 2",
                                   "<img src=x onerror=\"document.title='pwned'\"> 1\t2"]
    assert "1 line(s) rejected by load L2 (next day): b.tsv 1" in state["problems"]
    tags = browser.execute_script("return document.querySelectorAll('main img, main b').length")
    assert tags == 0
    assert browser.title == "DeBL status"  # neither a rejected line nor a file name ran
    assert len(state["banners"]) == 1 and state["banners"][0][0] == "hbase"
    assert state["banners"][0][1].startswith("HBase at h:2 does not answer: refused (checked ")
    assert state["services"] == {"MySQL": "true", "HDFS": "true", "HBase": "false"}
    # no credential: the URL's password and the MySQL password scrubbed on the way out
    assert "http://reader@files.example/day2/" in state["loading"]["text"]
    assert "s3cret" not in source and "pw-given-1234" not in source


# ------------------------------------------------------------------- 2. no MySQL at all

def test_the_page_says_so_when_mysql_does_not_answer(browser, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    config = Config(state_dir=tmp_path, mysql_port=port, mysql_password="x" * 12,
                    hdfs_uri=f"hdfs://127.0.0.1:{port}", hbase_thrift_port=port)
    with UIServer(config, port=0, interval=0.5) as ui:
        browser.get(ui.url)
        state = wait_for(browser, "a message about MySQL",
                         lambda s: any(kind == "mysql" for kind, _ in s["banners"]))
    text = dict(state["banners"])["mysql"]
    assert f"MySQL at 127.0.0.1:{port} is not reachable" in text and "debl stack" in text
    assert state["empty"] == "No status read yet: see the message above."
    assert state["services"]["MySQL"] == "false"


# ------------------------------------------------------------------- 3. the real stack

@pytest.fixture(scope="module")
def ui_stack(stack_config, tmp_path_factory):
    """A dataset of the module's own, emptied: (config, input directory, its hot file)."""
    from debl.catalog import METADATA, Catalog, engine_for
    from loaders.cleanup import drop_every_load
    from tests.dataset import make_dataset

    config = stack_config.replace(mysql_database="debl_uitest", hdfs_root="/debl_uitest",
                                  hbase_table="uitest", coordinator_poll_interval=0.25,
                                  gen_hf_run_buckets=3)
    Catalog(config, replace_older=True).close()
    drop_every_load(config)
    METADATA.drop_all(engine_for(config))  # no load at all: the page starts from nothing
    directory = tmp_path_factory.mktemp("ui-input")
    make_dataset(directory, max_id=10001, files=5, bad_lines=3, seed=7)
    newest = max(directory.iterdir(), key=lambda p: p.stat().st_mtime)
    yield config, directory, newest
    drop_every_load(config)


def _watch_while(driver, thread: threading.Thread) -> list[dict]:
    """The page's states, read every 0.2 s while *thread* runs, and once after."""
    seen = []
    while thread.is_alive():
        seen.append(page(driver))
        time.sleep(0.2)
    return seen + [page(driver)]


@pytest.mark.stack
def test_the_page_follows_a_load_its_queries_gen_hf_and_the_next_day(ui_stack, browser, spark,
                                                                     tmp_path):
    from coordinator import Coordinator
    from debl.bench.source_server import make_server
    from debl.catalog import Catalog
    from loaders.gen_hf import GenHF
    from loaders.load import LoadOptions, run_load
    from tests.dataset import reference_store

    config, directory, hot = ui_stack
    config = config.replace(source_password="s3cret-ui")  # a source's password: never shown
    server = make_server(directory, port=0, rate_mb_s=0.15)  # the copy lasts ~6 s
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://reader@127.0.0.1:{server.server_address[1]}"
    options = LoadOptions(hot_bytes=hot.stat().st_size, chunk_size=64 << 10, bucket_width=2500)
    done: dict = {}
    try:
        with UIServer(config, port=0, interval=0.5) as ui:
            browser.get(ui.url)
            wait_for(browser, "that there is no load", lambda s: s["empty"] and
                     s["empty"].startswith("No load yet"))
            # the load: phases advancing, then uptime and MySQL's take-over
            load = threading.Thread(target=lambda: done.update(
                day1=run_load(config, url, options)))
            load.start()
            seen = _watch_while(browser, load)
            assert "day1" in done, "the load failed"
            # the copy records each chunk once copied: its share of the input grows
            copying = [s for s in seen if s["current"] and "copy" in s["current"]["phases"]
                       and s["current"]["phases"]["copy"]["done"] < 1]
            shares = [s["current"]["phases"]["copy"]["done"] for s in copying]
            assert len(set(shares)) >= 3 and shares == sorted(shares), shares
            # its source lists manifests and no day is current: it answers early
            assert all(s["current"]["facts"]["uptime"] == "not yet: the keys answerable so "
                       "far are answered, the others wait" and s["current"]["state"] ==
                       "running" and s["current"]["early"]["state"] == "on" for s in copying)
            final = wait_for(browser, "the load up", lambda s: s["current"] and s["current"]
                             ["state"] == "up" and s["current"]["facts"]["hot rows"]
                             .startswith("in MySQL"))
            assert final["current"]["phases"]["copy"]["done"] == 1.0
            assert final["current"]["phases"]["dist_ch"]["done"] == 1.0
            assert "after the start" in final["current"]["facts"]["uptime"]
            with Catalog(config) as catalog:
                buckets = catalog.index.buckets(done["day1"].load_id)
            assert [c["state"] for c in final["cells"]] == ["pending"] * len(buckets)
            assert [c["b"] for c in final["cells"]] == [b.b_index for b in buckets]
            assert "[2500, 4999]" in final["cells"][1]["title"]
            # the source as the catalog records it: without the URL's password
            assert final["current"]["facts"]["source"] == url
            assert "3 line(s) rejected" in final["problems"] and len(final["rejects"]) == 3
            # queries before any bucket is in HBase: the raw route
            reference = reference_store(directory, {hot.name})
            keys = sorted(reference.keys())[::20]
            with Coordinator(config) as c:
                for key in keys:
                    c.query(*key, timeout=60)
            state = wait_for(browser, "every answer", lambda s: s["routes"]["raw"]["total"]
                             + s["routes"]["immediate"]["total"] == len(keys))
            assert state["routes"]["raw"]["total"] > len(keys) / 2  # most keys have cold rows
            assert browser.execute_script(CHART_PIXELS, RAW_BLUE) > 20
            # gen_HF run by run: the buckets turn loaded as each run lands
            with GenHF(config) as gen_hf, Catalog(config) as catalog:
                while gen_hf.run_once() is not None:
                    loaded = sum(b.state == "loaded" for b in catalog.index.buckets(
                        done["day1"].load_id))
                    # (wait_for calls the lambda at once: no late binding, whatever B023 says)
                    wait_for(browser, f"{loaded} bucket(s) loaded", lambda s: sum(
                        c["state"] == "loaded" for c in s["cells"]) == loaded)  # noqa: B023
            state = wait_for(browser, "full availability", lambda s: s["current"]["facts"]
                             ["full availability"] != "not yet")
            assert [c["state"] for c in state["cells"]] == ["loaded"] * len(buckets)
            with Coordinator(config) as c:  # now from MySQL and HBase at once
                for key in keys:
                    c.query(*key, timeout=60)
            state = wait_for(browser, "answers at once", lambda s: s["routes"]["immediate"]
                             ["total"] >= len(keys))
            # ... and the legend says which store they came from
            by_store = {r: state["routes"].get(r, {"total": 0})["total"]
                        for r in ("via_hbase", "via_mysql")}
            assert sum(by_store.values()) >= len(keys) and by_store["via_hbase"] > 0
            # the next day loads beside the current one, from the capped source: its copy
            # lasts long enough for the page's second-by-second reads to see it
            day2 = threading.Thread(target=lambda: done.update(
                day2=run_load(config, url, options)))
            day2.start()
            both = wait_for(browser, "the next day beside the current one",
                            lambda s: s["loading"] and s["loading"]["phases"].get("copy")
                            and s["current"])
            assert both["current"]["load"] == done["day1"].load_id
            assert both["current"]["role"] == "serving"
            screenshot(browser, tmp_path / "ui.png")
            day2.join(300)
            assert "day2" in done, "day 2's load failed"
            state = wait_for(browser, "the next day serving", lambda s: s["current"] and
                             s["current"]["load"] == done["day2"].load_id and not s["loading"])
            assert done["day1"].load_id in state["previous"]
            assert "s3cret-ui" not in browser.page_source
            with urllib.request.urlopen(ui.url + "status.json", timeout=10) as resp:
                assert b"s3cret-ui" not in resp.read()
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.exclusive
@pytest.mark.stack
def test_a_stopped_mariadb_is_a_message_and_the_page_recovers(ui_stack, browser):
    from debl.stack.stack import stack_start, stack_stop

    config = ui_stack[0]
    with UIServer(config, port=0, interval=0.5) as ui:
        browser.get(ui.url)
        before = wait_for(browser, "MySQL answering", lambda s: s["services"].get("MySQL")
                          == "true")
        stack_stop(config, "mariadb")
        try:
            down = wait_for(browser, "a message about MySQL", lambda s: any(
                kind == "mysql" for kind, _ in s["banners"]))
        finally:
            stack_start(config, "mariadb")
        text = dict(down["banners"])["mysql"]
        assert f"MySQL at {config.mysql.host}:{config.mysql.port} is not reachable" in text
        assert down["services"]["MySQL"] == "false"
        assert down["current"] == before["current"] or down["current"]["load"] == \
            before["current"]["load"]  # the last status stays on the page
        wait_for(browser, "MySQL back", lambda s: s["services"]["MySQL"] == "true"
                 and not s["banners"], timeout=120)
