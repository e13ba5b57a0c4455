"""The kill campaign's targets for a load that answers before its uptime (docs/RELIABILITY.md,
"Kill campaign"; docs/LOADING.md, "Answers before the copy ends", "The copy follows demand").

Each trial starts from no load up (so the load answers early), serves the campaign's input over
HTTP at a rate that makes the copy last several seconds, and asks keys through a coordinator all
along, from before the load starts to its uptime: queries wait, their keys are fetched on
demand, answered early. The load kills itself at an aimed point (a fetch on demand's chunk in
HDFS but not recorded; a chunk's bucket files written, its rows not recorded; a chunk recorded,
its answerable keys not published), and is resumed as the docs say, the client still asking.
Then the usual checks (``Campaign.verify_and_compare``: ``debl verify``, rows lost or doubled in
MySQL and HDFS, answers), and every answer the client got before the uptime is compared with the
reference: a wrong early answer is a problem of the trial.

``early-lie`` does the same from a copy of the input whose manifest lies, killed the moment the
chunk that breaks the claim is recorded (``false-claim``): after the resume the claim must be
on record, early answers stopped, and the client answered early no more.
"""

from __future__ import annotations

import json
import random
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from debl.bench.source_server import make_server
from debl.catalog import Catalog, EarlyAnswering
from debl.errors import DeblError, QueryTimeout
from harness.campaign import CHUNK, Campaign
from harness.kill_points import load_point
from harness.kills import LoadTarget, Window, _Aimed, _watch
from harness.trial import Step, Trial
from loaders.cleanup import drop_every_load

EARLY_AIMS = [("hook", "demand-copied"), ("hook", "dist_ch-done"), ("hook", "answerable")]
COPY_S = 12.0  # the copy's length at the source's rate: time for demand before uptime
LIE_FILE = -3  # the lying file of ``early-lie``: the last cold one (the newest two are hot)


@contextmanager
def _demand_on(camp: Campaign) -> Iterator[None]:
    """The target's loads fetch on demand (``loading.demand_fetch``, on by default) even when
    the campaign's config turns it off, so that the aimed point ``demand-copied`` is reached."""
    config = camp.config
    camp.config = config.replace(loading_demand_fetch=True)
    try:
        yield
    finally:
        camp.config = config


class _Served:
    """The campaign's input over HTTP, capped so that its copy lasts about COPY_S; *timeout*:
    how long the server keeps a connection that sends no request (``make_server``)."""

    def __init__(self, directory: Path, timeout: float = 60.0):
        total = sum(p.stat().st_size for p in directory.iterdir() if not p.name.startswith("."))
        self.rate = total / COPY_S  # bytes a second
        self.server = make_server(directory, port=0, rate_mb_s=self.rate / 1e6, timeout=timeout)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _lying_copy(camp: Campaign) -> Path:
    """The campaign's input with one manifest that lies (kept across trials): the middle point
    of the last cold file claims the next point's id1, so that the piece it opens claims too
    little (a well-formed, sorted manifest; the bytes, names and mtimes are the input's)."""
    directory = camp.work_dir / "lying-input"
    if not (directory / "index.json").exists():
        directory.mkdir(parents=True, exist_ok=True)
        entries = json.loads((camp.input_dir / "index.json").read_text())
        for entry in entries:
            shutil.copy2(camp.input_dir / entry["name"], directory / entry["name"])
        deltas = entries[LIE_FILE]["manifest"]["id1s"]  # delta-encoded
        point = next(i for i in range(len(deltas) // 2, len(deltas) - 1) if deltas[i + 1] > 0)
        deltas[point], deltas[point + 1] = deltas[point] + deltas[point + 1], 0
        (directory / "index.json").write_text(json.dumps(entries))
    return directory


class _Asking:
    """A coordinator asking the input's keys without pause until stopped, each answer given
    before the uptime (route ``early``) checked against the reference, and when it came
    (``early_at``, ``time.monotonic()``)."""

    def __init__(self, camp: Campaign, seed: int):
        # lazy import: the coordinator brings the HBase client (docs/ARCHITECTURE.md, "Lazy
        # imports")
        from coordinator import Coordinator

        self.reference = camp.reference().all_store
        self.keys = sorted(self.reference.keys())
        self.rng = random.Random(seed)
        self.early = self.wrong = 0
        self.early_at: list[float] = []
        self.examples: list[str] = []
        self._stop = threading.Event()
        self._coordinator = Coordinator(camp.config, default_timeout=1.0)
        self._thread = threading.Thread(target=self._run, daemon=True, name="early-asking")
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            key = self.rng.choice(self.keys)
            try:
                answer = self._coordinator.query(*key)
            except (QueryTimeout, DeblError):
                continue
            if answer.route != "early":
                continue
            self.early += 1
            self.early_at.append(time.monotonic())
            if answer.links != self.reference.get_link_list(*key):
                self.wrong += 1
                if len(self.examples) < 5:
                    self.examples.append(f"{key}: answered early with {len(answer.links)} links, "
                                         f"expected {len(self.reference.get_link_list(*key))}")

    def close(self) -> None:
        """Stop asking (idempotent)."""
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join(30.0)
            self._coordinator.close()


class EarlyAimedTarget(_Aimed, LoadTarget):
    """``debl load`` of a load that answers early, killed at an aimed point, then resumed."""

    aims = EARLY_AIMS

    def __init__(self, name: str = "early-aimed"):
        super().__init__(name, hot=True, victim="main")
        self.fault = "kill -9 debl load while it answers before its uptime, aimed at a point"

    def command(self, camp: Campaign) -> str:
        return f"debl load URL --chunk-size {CHUNK} --hot-bytes {camp.hot_bytes} (URL: the " \
               f"input over HTTP, {COPY_S:g} s of copy), a client asking throughout"

    def measure(self, camp: Campaign) -> Window:
        with _demand_on(camp):
            return self._measure(camp)

    def trial(self, camp: Campaign, trial: Trial, rng: random.Random, window: Window) -> None:
        with _demand_on(camp):
            self._trial(camp, trial, rng, window)

    def _input(self, camp: Campaign) -> Path:
        """The directory the target's loads read (over HTTP)."""
        return camp.input_dir

    def _measure(self, camp: Campaign) -> Window:
        drop_every_load(camp.config)
        served = _Served(self._input(camp))
        try:
            running = camp.start(camp.load_argv(source=served.url), f"{self.name}-measure")
            outcome, window = _watch(running, 1800.0)
        finally:
            served.close()
        if not outcome.ok:
            raise RuntimeError(f"{self.command(camp)} failed without a kill:\n"
                               f"{outcome.output[-2000:]}")
        return window

    def _trial(self, camp: Campaign, trial: Trial, rng: random.Random, window: Window) -> None:
        drop_every_load(camp.config)
        served = _Served(self._input(camp))
        asking = _Asking(camp, trial.seed)
        try:
            argv = camp.load_argv(source=served.url)
            self.strike(camp, trial, rng, window, argv, lambda: load_point(camp.config, None))
            load = camp.latest_load()
            resumed_at = time.monotonic()
            if load is None:
                step = camp.run(argv, f"{self.name}-{trial.number}-again", 4 * window.seconds)
            else:
                step = camp.run(argv + ["--resume", load.load_id],
                                f"{self.name}-{trial.number}-resume", 4 * window.seconds + 60)
            trial.steps.append(Step.of(step))
            if not step.ok:
                trial.problems.append("the resumed load failed")
            asking.close()
            # `debl verify` reads the source again: still served.
            camp.verify_and_compare(trial, hbase=False, hot_bytes=camp.hot_bytes)
        finally:
            asking.close()
            served.close()
        self._judge(camp, trial, asking, resumed_at)

    def _judge(self, camp: Campaign, trial: Trial, asking: _Asking, resumed_at: float) -> None:
        """The client's early answers: each one exact, and at least one."""
        trial.answers += asking.early
        trial.wrong_answers += asking.wrong
        trial.examples += asking.examples
        if asking.early == 0:
            trial.problems.append("no answer was given before the uptime")


class EarlyLieTarget(EarlyAimedTarget):
    """``early-aimed`` from an input whose manifest lies (``_lying_copy``), killed the moment
    the chunk that breaks the claim is recorded as bucketed (``false-claim``), then resumed: the
    claim is recorded with its chunk, so early answers stay stopped through the resume (issue
    47, item 5: recorded in a transaction after the chunk's, the kill lost it, and the resumed
    load answered early again from a manifest shown to lie)."""

    aims = [("hook", "false-claim")]

    def __init__(self) -> None:
        super().__init__("early-lie")
        self.fault = ("kill -9 debl load, answering before its uptime from a lying manifest, "
                      "as the chunk that breaks the claim is recorded")

    def _input(self, camp: Campaign) -> Path:
        return _lying_copy(camp)

    def _judge(self, camp: Campaign, trial: Trial, asking: _Asking, resumed_at: float) -> None:
        """The claim recorded and early answers stopped, and none given from the resume on.
        Answers before the claim was found may be wrong (the manifest lies): counted, not
        judged (DeBL counts them with the claim: docs/LOADING.md, "Answers before the copy
        ends")."""
        trial.answers += asking.early
        load = camp.latest_load()
        with Catalog(camp.config) as catalog:
            progress = catalog.early.early_progress(load.load_id)
            claims = catalog.early.false_claims(load.load_id)
        if progress is None or progress.state != EarlyAnswering.STOPPED or not claims:
            trial.problems.append("the lie was not on record after the resume (early answers "
                                  f"{progress and progress.state}, {len(claims)} false claims)")
        after = sum(1 for t in asking.early_at if t >= resumed_at)
        if after:
            trial.problems.append(f"{after} early answers from the resume on, from a manifest "
                                  "shown to lie")


EARLY_KILLS = {t.name: t for t in [EarlyAimedTarget(), EarlyLieTarget()]}  # scripts/faults.py
