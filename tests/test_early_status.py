"""What ``debl status`` and ``debl ui``'s JSON say of a load that answers before its uptime
(docs/LOADING.md, "Answers before the copy ends", "The copy follows demand"; docs/UI.md), on the
real stack, from the status read to the CLI's text and the page's payload:

- a load that answers early, from a slow HTTP source: while it copies, ``early`` says it
  answers, the shares of the key space and of the bytes answerable grow, the keys queries wait
  for are counted and their bytes fetched on demand, and the coordinators' early answers are
  counted by route; after its uptime it stays listed, everything answerable;
- a load whose manifest lies where the bulk copy reaches late: early answers stop, and the claim
  is named (file, offset, what was claimed and found, the id1s affected) with the early answers
  a coordinator gave in those id1s before it was found;
- the same with the early answers of `debl links` processes that exited before the claim was
  found: each counted with it.

The page's own drawing of these fields is tested in a browser (tests/test_ui_page.py).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from click.testing import CliRunner

from coordinator import Coordinator
from coordinator.routes import Route
from debl.status import read_status
from debl.bench.source_server import make_server
from debl.catalog import Catalog
from debl.commands.status import status as status_command
from debl.errors import QueryTimeout
from debl.keys.keyspace import KeySet
from debl.ui.payload import encode, page_data
from debl.ui.rejects import RejectSample
from debl.ui.sampler import StatusSampler
from debl.workload.generator import generate
from debl.workload.spec import GenerateSpec
from loaders.cleanup import drop_every_load
from loaders.early import EarlyAnswers
from loaders.load import LoadOptions, LoadRun
from tests.dataset import reference_store

pytestmark = [pytest.mark.stack, pytest.mark.long]  # long: scheduled first (tests/conftest.py)

COPY_S = 15.0  # how long the source takes to send the input: the load is watched meanwhile
WAIT_S = 60.0


def _input(directory):
    """``debl generate DIR --max-id 20001 --files 3 --days 3 --layout ranges`` with the
    out-degree capped (a small input: three files of ~0.5 MB, index.json with manifests)."""
    generate(directory, GenerateSpec(max_id=20001, files=3, days=3, seed=5, layout="ranges",
                                     max_degree=30))
    return sorted(p for p in directory.iterdir() if p.name != "index.json")


def _fresh(stack_config, database: str):
    config = stack_config.replace(mysql_database=database, hbase_table=database,
                                  hdfs_root=f"/{database}",
                                  loading_bucket_target_bytes=64 << 10,
                                  loading_bucket_target_covers_heaviest=False)
    Catalog(config, replace_older=True).close()
    drop_every_load(config)
    return config


def _serve(directory, seconds: float):
    total = sum(p.stat().st_size for p in directory.iterdir() if p.name != "index.json")
    server = make_server(directory, port=0, rate_mb_s=total / seconds / 1e6)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def _status(config) -> dict:
    with Catalog(config) as catalog:
        return read_status(catalog)


def _until(config, what: str, check) -> dict:
    """The status once *check(status)* holds; fails naming *what* and the last status."""
    deadline = time.monotonic() + WAIT_S
    while True:
        s = _status(config)
        if check(s):
            return s
        if time.monotonic() > deadline:
            pytest.fail(f"the status never showed {what}: {json.dumps(s['load'])[:2000]}",
                        pytrace=False)
        time.sleep(0.1)


def _cli(config, *args: str) -> str:
    result = CliRunner().invoke(status_command, list(args), obj=config)
    assert result.exit_code == 0, result.output
    return result.output


class _Loading:
    """``run.wait_up()`` in a thread: ``up`` is set when it returns or fails (a failed load
    ends the test's loops; ``done`` raises its error)."""

    def __init__(self, run):
        self.up = threading.Event()
        self.failed: list[BaseException] = []
        self._thread = threading.Thread(target=self._wait, args=(run,), daemon=True)
        self._thread.start()

    def _wait(self, run) -> None:
        try:
            run.wait_up()
        except BaseException as exc:  # noqa: BLE001 -- raised by done()
            self.failed.append(exc)
        finally:
            self.up.set()

    def done(self) -> None:
        self._thread.join()
        if self.failed:
            raise self.failed[0]


def _ids(path, start: float, end: float) -> list[int]:
    """The id1s of the lines between *start* and *end* (shares of the file's bytes)."""
    data = path.read_bytes()
    lo, hi = int(len(data) * start), int(len(data) * end)
    return sorted({int(line.split(b"\t", 1)[0]) for line in data[lo:hi].split(b"\n")[1:-1]})


def test_the_status_follows_a_load_that_answers_early(stack_config, tmp_path):
    directory = tmp_path / "in"
    files = _input(directory)
    total = sum(p.stat().st_size for p in files)
    reference = reference_store(directory, set())
    config = _fresh(stack_config, "debl_early_status")
    late = _ids(files[-1], 0.8, 1.0)[:3]  # the bulk copy's last bytes: fetched on demand
    server, url = _serve(directory, COPY_S)
    seen: list[dict] = []
    sampler = StatusSampler(config)
    try:
        with LoadRun(config, url, LoadOptions(approach="debl-cold", chunk_size=256 << 10)) as run:
            loading = _Loading(run)
            up = loading.up
            first = _until(config, "the load answering early",
                           lambda s: s["load"] and s["load"]["early"] is not None)
            load_id = first["load"]["load_id"]
            sampler.sample()  # nothing fetched on demand yet: nobody waits
            # Queries wait for three keys the bulk copy reaches last (as a coordinator
            # publishes them): counted as waiting, and their bytes fetched ahead of the copy.
            with Catalog(config) as catalog:
                catalog.early.publish_key_demand(load_id, "status-test", dict.fromkeys(late, 2))
            waiting = _status(config)
            sampler.sample()
            text = _cli(config)
            fetched = _until(config, "bytes fetched on demand",
                             lambda s: s["load"]["early"]["demand_bytes"] > 0)
            sampler.sample()
            with Catalog(config) as catalog:
                catalog.early.publish_key_demand(load_id, "status-test", {})
            # A coordinator's answers before the uptime, counted by route.
            early_answers, rng = 0, random.Random(3)
            keys = sorted(reference.keys())
            with Coordinator(config, default_timeout=1.0) as c:
                while not up.is_set():
                    seen.append(_status(config))
                    try:
                        answer = c.query(*rng.choice(keys))
                    except QueryTimeout:
                        continue
                    early_answers += answer.route is Route.EARLY
                loading.done()
                # counted as the coordinator publishes them (while it is open: its polls)
                _until(config, "every early answer", lambda s: s["answers"]["by_route"]
                       .get("early") == early_answers)
            run.finish()
        after = _status(config)
        sampler.sample()
        payload = json.loads(encode(page_data(config, sampler.snapshot(), [],
                                              RejectSample(config), 1.0), []))
        text_after = _cli(config)
        as_json = json.loads(_cli(config, "--json"))
    finally:
        server.shutdown()

    # While it copies: it answers early, nothing is false, the shares only grow.
    e = waiting["load"]["early"]
    assert waiting["load"]["state"] == "running" and e["state"] == "on"
    assert e["keys_waiting"] == len(late) and e["total_bytes"] == total
    assert e["false_claims"] == [] and e["false_claims_total"] == 0
    assert e["bytes_share"] == pytest.approx(e["answerable_bytes"] / total)
    assert "  early      answering before the uptime; " in text
    assert f"{len(late)} key(s) waiting now" in text
    assert fetched["load"]["early"]["demand_bytes"] <= total
    copying = [s["load"]["early"] for s in [first, waiting, fetched, *seen]
               if s["load"]["state"] == "running"]
    shares = [x["key_share"] for x in copying]
    assert shares == sorted(shares) and 0.0 <= shares[0] and shares[-1] <= 1.0
    assert len(set(shares)) >= 2, shares  # answerable key by key as the copy lands
    assert [x["bytes_share"] for x in copying] == sorted(x["bytes_share"] for x in copying)
    # After its uptime: still listed, every key answerable, the early answers counted.
    e = after["load"]["early"]
    assert after["load"]["state"] == "up" and e["state"] == "on"
    assert e["key_share"] == 1.0 and e["answerable_bytes"] == total
    assert e["demand_bytes"] >= fetched["load"]["early"]["demand_bytes"]
    assert early_answers > 0
    assert after["answers"]["by_route"]["early"] == early_answers
    assert "  early      answered before the uptime; 100.0% of the key space and 100.0% of " \
           "the bytes" in text_after
    assert f"answers    {after['answers']['total']:,} by 1 coordinator(s): " \
           f"{early_answers:,} early (before the uptime), " in text_after
    assert as_json["load"]["early"] == e
    # The page's payload: the same status, and the history of bytes fetched on demand and
    # keys waiting (the sampler read four times: before anyone waited, while three keys
    # waited, once their bytes were fetched, after the uptime).
    assert payload["status"]["load"]["early"] == e
    history = payload["early_history"]
    assert history["levels"]["keys_waiting"] == [len(late), len(late), 0]
    assert len(history["t"]) == 3 and any(r > 0 for r in history["rates"]["demand_bytes"])


def _lie(directory, name: str, point: int) -> None:
    """Make point *point* of file *name*'s manifest claim the next point's id1 (as
    tests/test_early_answers.py: a well-formed, sorted manifest whose piece at the point
    claims too little)."""
    index_path = directory / "index.json"
    entries = json.loads(index_path.read_text())
    for entry in entries:
        if entry["name"] == name:
            deltas = entry["manifest"]["id1s"]
            gap = deltas[point + 1]
            assert gap > 0
            deltas[point] += gap
            deltas[point + 1] = 0
    index_path.write_text(json.dumps(entries))


def test_a_false_claim_is_named_with_the_early_answers_given_in_its_ids(stack_config, tmp_path):
    directory = tmp_path / "in"
    files = _input(directory)
    name = files[1].name
    entries = json.loads((directory / "index.json").read_text())
    points = len(next(e for e in entries if e["name"] == name)["manifest"]["offsets"])
    assert points >= 4
    _lie(directory, name, points // 2)
    reference = reference_store(directory, set())
    # Keys of the lying file past its lie: fetched on demand and answered early before the
    # bulk copy reaches the lie (they are within the id1s the claim puts in doubt).
    wanted = set(_ids(files[1], 0.85, 1.0))
    keys = sorted(k for k in reference.keys() if k[0] in wanted)
    config = _fresh(stack_config, "debl_early_status_lie")
    server, url = _serve(directory, 1.5 * COPY_S)  # the lie is reached half way through
    answered: list = []
    try:
        with LoadRun(config, url, LoadOptions(approach="debl-cold", chunk_size=256 << 10)) as run:
            loading = _Loading(run)
            up = loading.up
            _until(config, "the load answering early",
                   lambda s: s["load"] and s["load"]["early"] is not None)
            rng = random.Random(4)
            with Coordinator(config, default_timeout=1.0) as c:
                stopped = None
                while stopped is None and not up.is_set():
                    try:
                        answer = c.query(*rng.choice(keys))
                    except QueryTimeout:
                        continue
                    if answer.route is Route.EARLY:
                        answered.append(answer)
                    s = _status(config)
                    if s["load"]["early"]["state"] == "stopped":
                        stopped = s
                if loading.failed:
                    loading.done()
                assert stopped is not None, "the load was up before its lie was found"
                text = _cli(config)
                # the coordinator publishes its early answers in the claim's id1s at its polls
                _until(config, "the early answers in the claim's id1s", lambda s: s["load"]
                       ["early"]["false_claims"][0]["early_answers"] == len(answered))
            loading.done()
            run.finish()
        with Catalog(config) as catalog:
            claim = catalog.early.false_claims(run.summary.load_id)[0]
        after = _status(config)
        text_after = _cli(config)
    finally:
        server.shutdown()

    assert answered, "no early answer before the lie was found"
    e = stopped["load"]["early"]
    assert e["false_claims_total"] == 1
    c = e["false_claims"][0]
    assert (c["file"], c["offset"], c["kind"], c["detail"]) == (name, claim.offset, claim.kind,
                                                                 claim.detail)
    assert c["kind"] in ("point", "span") and name in c["detail"]
    assert c["affected"] == [claim.affected_lo, claim.affected_hi]
    assert all(claim.affected_lo <= k <= claim.affected_hi for k in wanted)
    assert "  early      stopped at a false claim" in text
    assert f"  false claim #0 in {name} at byte {claim.offset:,} ({claim.kind}): " \
           f"{claim.detail}" in text
    # after its uptime the claim stays listed with the load
    e = after["load"]["early"]
    assert after["load"]["state"] == "up" and e["state"] == "stopped"
    assert e["false_claims"][0]["early_answers"] == len(answered) == e["answers_in_false_claims"]
    assert "  early      stopped at a false claim before the uptime; " in text_after
    assert f"\n             id1 {claim.affected_lo}..{claim.affected_hi} affected: " \
           f"{len(answered):,} early answer(s) given in them\n" in text_after



def _links(config, key: tuple[int, int]) -> dict:
    """``debl links ID1 LINK_TYPE --json``, a process of its own that exits once it printed
    its answer."""
    out = subprocess.run([sys.executable, "-m", "debl", "links", str(key[0]), str(key[1]),
                          "--json", "--timeout", "120"], env=config.child_env(),
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)


def test_early_answers_of_commands_that_exit_count_with_the_claim_found_after_them(
        stack_config, tmp_path, monkeypatch):
    """in small: `debl links` answered early, each in a process that exits
    once it printed its answer, before the load finds that a manifest lies; then the claim is
    found. Every one of those answers is counted with the claim, in `debl status` and in the
    load's summary (before, only coordinators alive when the claim was found counted theirs:
    0 here). A change log: every file holds every id1, so the claim puts every key in doubt.
    The load waits at the lying chunk (before it records it) until the answers are given."""
    directory = tmp_path / "in"
    generate(directory, GenerateSpec(max_id=20001, files=3, days=3, seed=5, max_degree=30))
    entries = json.loads((directory / "index.json").read_text())
    deltas = entries[-1]["manifest"]["id1s"]
    _lie(directory, entries[-1]["name"],
         next(i for i in range(3 * len(deltas) // 4, len(deltas) - 1) if deltas[i + 1] > 0))
    reference = reference_store(directory, set())
    config = _fresh(stack_config, "debl_early_status_links")
    at_lie, go_on = threading.Event(), threading.Event()
    false_claim = EarlyAnswers.false_claim

    def held(self, violations):
        if violations:
            at_lie.set()
            go_on.wait(300)
        return false_claim(self, violations)
    monkeypatch.setattr(EarlyAnswers, "false_claim", held)
    with LoadRun(config, str(directory),
                 LoadOptions(approach="debl-cold", chunk_size=64 << 10)) as run:
        loading = _Loading(run)
        try:
            assert at_lie.wait(300) and not loading.up.is_set(), "the lie was never reached"
            with Catalog(config) as catalog:
                state = catalog.early.early_state(run.summary.load_id)
            answerable = KeySet.from_json(state.answerable)
            keys = [k for k in sorted(reference.keys()) if k[0] in answerable][:3]
            assert state.state == "on" and keys, "nothing answerable before the lie"
            with ThreadPoolExecutor(len(keys)) as pool:
                answers = list(pool.map(lambda k: _links(config, k), keys))
        finally:
            go_on.set()
        loading.done()
        run.finish()
    after = _status(config)
    text_after = _cli(config)

    assert [a["route"] for a in answers] == ["early"] * len(keys)
    e = after["load"]["early"]
    assert after["load"]["state"] == "up" and e["state"] == "stopped"
    assert e["false_claims_total"] == 1
    claim = e["false_claims"][0]
    assert all(claim["affected"][0] <= k[0] <= claim["affected"][1] for k in keys)
    assert claim["early_answers"] == len(keys) == e["answers_in_false_claims"]
    assert run.summary.early["false_claims"][0]["early_answers"] == len(keys)
    assert f"affected: {len(keys):,} early answer(s) given in them\n" in text_after
