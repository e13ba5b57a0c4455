"""Services dying mid-phase (docs/RELIABILITY.md, "Services dying mid-phase"): MariaDB, the
HBase JVM (master, region server and ZooKeeper in one), the Thrift server or the DataNode is
killed (``debl stack stop SERVICE --crash``) in the middle of a load, a gen_HF run or a query
run.

- A load or gen_HF must fail within a bounded time (``service_timeout`` and the retries it
  bounds; never a hang) with a message that names the service and says what to do; after
  ``debl stack up`` the resumed command finishes, ``debl verify`` agrees and the stores equal
  the reference.
- A query run goes on through one coordinator (in this process, as a client library would
  hold it): during the outage each query gets a clear error (a DeblError naming the service)
  within the bound, one ``debl links`` run as a user would gets a clear message, and after
  ``debl stack up`` the same coordinator answers again, rightly, without a restart.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any
from dataclasses import dataclass, field

from coordinator import Coordinator
from debl.catalog import HotState, LoadState
from debl.errors import DeblError
from harness import procs
from harness.campaign import Campaign
from harness.kill_points import gen_hf_point, load_point
from harness.kills import GenHFTarget, LoadTarget, Target, Window
from harness.trial import MISSED, Step, Trial
from debl.stack.stack import stack_stop

# (daemon that dies, words a message about it must hold: one of them)
SERVICES = {
    "mariadb": ("mariadb", ("MySQL", "MariaDB")),
    "hbase": ("hbase-master", ("HBase",)),
    "thrift": ("thrift", ("Thrift", "HBase")),
    # HBase lives on HDFS: `debl stack up` restarts it once the DataNode is back (its WAL
    # pointed at the dead one), and queries on HBase meanwhile get HBase's own clear error.
    "datanode": ("datanode", ("HDFS", "DataNode", "HBase")),
}
HARD_LIMIT_S = 900.0  # a command still running this long after the fault hung
RECOVERY_S = 180.0  # how long a query run may take to answer again after `debl stack up`


def bound(camp: Campaign) -> float:
    """How long after a service dies a command may take to fail: the service timeout, its
    retries, and gen_HF's own retries of a failed run (2 + 4 + ... capped, docs/ONLINE.md)."""
    return 4 * camp.config.service_timeout + 90.0


def _names_service(text: str, service: str) -> bool:
    return any(word.lower() in text.lower() for word in SERVICES[service][1])


class OutageTarget(Target):
    """One service killed during one phase."""

    def __init__(self, phase: str, service: str):
        self.phase, self.service = phase, service
        self.name = f"{phase}+{service}"
        self.fault = f"{SERVICES[service][0]} killed during {phase}"
        self._load = LoadTarget(f"{self.name}-load", hot=True, victim="main")
        self._gen_hf = GenHFTarget(f"{self.name}-gen-hf", victim="main")

    def command(self, camp: Campaign) -> str:
        if self.phase == "load":
            return self._load.command(camp)
        if self.phase == "gen-hf":
            return self._gen_hf.command(camp)
        return "coordinator.query (a client holding one coordinator) and debl links"

    def measure(self, camp: Campaign) -> Window:
        if self.phase == "load":
            return self._load.measure(camp)
        if self.phase == "gen-hf":
            return self._gen_hf.measure(camp)
        return Window(3.0)  # queries answered before the outage

    # -- helpers

    def _kill_service(self, camp: Campaign, trial: Trial) -> float:
        stack_stop(camp.config, SERVICES[self.service][0], crash=True)
        trial.victim = SERVICES[self.service][0]
        return time.monotonic()

    def _stack_up(self, camp: Campaign, trial: Trial) -> None:
        up = camp.run(["stack", "up"], f"{self.name}-{trial.number}-stack-up", 600.0)
        trial.steps.append(Step.of(up))
        if not up.ok:
            trial.problems.append("`debl stack up` did not bring the stack back")

    def _judge_failure(self, camp: Campaign, trial: Trial, outcome: procs.Outcome,
                       died_at: float) -> None:
        """The command that met the outage: it failed in time, clearly, naming the service (or
        it did not need the service any more and finished)."""
        step = Step.of(outcome)
        trial.steps.append(step)
        trial.failed_after_s = round(time.monotonic() - died_at, 1)
        if outcome.ok:
            trial.landed.append("finished without the service")
            return
        if trial.failed_after_s > bound(camp):
            trial.problems.append(f"failed only {trial.failed_after_s:.0f} s after the "
                                  f"outage (bound {bound(camp):.0f} s)")
        if step.clear and not _names_service(outcome.output, self.service):
            step.clear = False
            trial.problems.append(f"the message does not name {self.service}: "
                                  f"{step.message.splitlines()[-1][:200]}")

    # -- the trial

    def trial(self, camp: Campaign, trial: Trial, rng: random.Random, window: Window) -> None:
        if self.phase == "query":
            self._query_trial(camp, trial, rng, window)
            return
        if self.phase == "gen-hf":
            camp.ensure_dataset()
            argv = self._gen_hf.argv
            since = time.time()
            probe = lambda: gen_hf_point(camp.config, since)  # noqa: E731
        else:
            argv = camp.load_argv()
            before = getattr(camp.latest_load(), "load_id", None)
            probe = lambda: load_point(camp.config, before)  # noqa: E731
        at = rng.uniform(0.0, window.seconds)
        running = camp.start(argv, f"{self.name}-{trial.number}")
        while running.elapsed() < at and not running.done():
            time.sleep(0.02)
        if running.done():
            trial.landed = [MISSED]
            trial.ran_s = running.elapsed()
            trial.steps.append(Step.of(running.wait(0)))
        else:
            trial.landed = probe()
            trial.kill_at_s = round(running.elapsed(), 2)
            died_at = self._kill_service(camp, trial)
            tree = running.tree()
            outcome = running.wait(HARD_LIMIT_S)
            self._judge_failure(camp, trial, outcome, died_at)
            left = procs.survivors(tree[1:], 15.0)
            trial.orphans = [p.describe() for p in left]
            procs.kill(left)
        self._stack_up(camp, trial)
        if self.phase == "gen-hf":
            again = camp.run(argv, f"{self.name}-{trial.number}-again", HARD_LIMIT_S)
            trial.steps.append(Step.of(again))
            if not again.ok:
                trial.problems.append("gen-hf after `debl stack up` failed")
            camp.verify_and_compare(trial, hbase=True)
            return
        load = camp.latest_load()
        if load is not None and load.load_id != before and (
                load.state != LoadState.UP
                or load.hot_state in (HotState.LOADING, HotState.FAILED)):
            again = camp.run(argv + ["--resume", load.load_id],
                             f"{self.name}-{trial.number}-resume", HARD_LIMIT_S)
        elif load is None or load.load_id == before:
            again = camp.run(argv, f"{self.name}-{trial.number}-again", HARD_LIMIT_S)
        else:
            again = None
        if again is not None:
            trial.steps.append(Step.of(again))
            if not again.ok:
                trial.problems.append("the load after `debl stack up` failed")
        camp.verify_and_compare(trial, hbase=False)

    def _query_trial(self, camp: Campaign, trial: Trial, rng: random.Random,
                     window: Window) -> None:
        half = camp.ensure_half_converted()
        trial.landed = [f"queries over MySQL, HBase ({half[0]} buckets loaded) and HDFS "
                        f"({half[1]} raw)"]
        ref = camp.reference()
        keys = sorted(ref.all_store.keys())
        rng.shuffle(keys)
        client = _Client(keys, ref, camp.config.service_timeout)
        with Coordinator(camp.config.replace(coordinator_raw_after=0.0)) as coordinator:
            thread = threading.Thread(target=client.run, args=(coordinator,), daemon=True)
            thread.start()
            started = time.monotonic()
            time.sleep(window.seconds)
            died_at = self._kill_service(camp, trial)
            trial.kill_at_s = round(died_at - started, 2)
            client.mark("outage")
            # One query as a user asks it, during the outage: a clear message or an answer.
            key = keys[0]
            links = camp.run(["links", str(key[0]), str(key[1]), "--timeout", "30"],
                             f"{self.name}-{trial.number}-links", HARD_LIMIT_S)
            self._judge_failure(camp, trial, links, died_at)
            deadline = time.monotonic() + 30.0
            while not client.failed_since("outage") and time.monotonic() < deadline:
                time.sleep(0.2)
            self._stack_up(camp, trial)
            client.mark("up")
            deadline = time.monotonic() + RECOVERY_S
            while client.answered_since("up") < 20 and time.monotonic() < deadline:
                time.sleep(0.2)
            client.stop.set()
            thread.join(camp.config.service_timeout + 30.0)
        outage = [r for r in client.results if r.phase == "outage"]
        errors = [r for r in outage if not r.ok]
        trial.examples += list(dict.fromkeys(r.message for r in errors))[:3]
        trial.landed.append(f"{len(outage)} queries in the outage, {len(errors)} errors; "
                            f"{client.answered_since('up')} answered after `debl stack up`")
        if client.wrong:
            trial.problems.append(f"{client.wrong} of {len(client.results)} answers of the "
                                  "running client were wrong")
        unclear = [r for r in client.results if not r.ok and
                   (not r.deebl_error or not _names_service(r.message, self.service))]
        if unclear:
            trial.problems.append(f"{len(unclear)} query errors without a clear message, e.g. "
                                  f"{unclear[0].message[:200]}")
        slow = [r for r in errors if r.seconds > bound(camp)]
        if slow:
            trial.problems.append(f"{len(slow)} failing queries took over {bound(camp):.0f} s")
        trial.failed_after_s = round(max((r.seconds for r in errors), default=0.0), 1)
        if client.answered_since("up") < 20:
            trial.problems.append("queries did not work again after `debl stack up`")
        camp.verify_and_compare(trial, hbase=False)


@dataclass
class _Result:
    phase: str
    ok: bool
    seconds: float
    message: str = ""
    deebl_error: bool = True


@dataclass
class _Client:
    """One client thread asking the keys in turn through a coordinator, each query bounded by
    *timeout*; answers compared with the reference."""

    keys: list
    ref: Any  # the campaign's harness.checks.Reference
    timeout: float
    results: list[_Result] = field(default_factory=list)
    phase: str = "before"
    wrong: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def mark(self, phase: str) -> None:
        self.phase = phase

    def failed_since(self, phase: str) -> bool:
        return any(not r.ok for r in self.results if r.phase == phase)

    def answered_since(self, phase: str) -> int:
        return sum(r.ok for r in self.results if r.phase == phase)

    def run(self, coordinator) -> None:
        i = 0
        while not self.stop.is_set():
            key = self.keys[i % len(self.keys)]
            i += 1
            phase, t0 = self.phase, time.monotonic()
            try:
                got = coordinator.get_link_list(*key, timeout=self.timeout)
            except DeblError as exc:
                self.results.append(_Result(phase, False, time.monotonic() - t0, str(exc)))
                time.sleep(0.2)
                continue
            except Exception as exc:  # noqa: BLE001 -- a raw error is a finding
                self.results.append(_Result(phase, False, time.monotonic() - t0,
                                            f"{type(exc).__name__}: {exc}", False))
                time.sleep(0.2)
                continue
            self.results.append(_Result(phase, True, time.monotonic() - t0))
            if got != self.ref.all_store.get_link_list(*key):
                self.wrong += 1
            time.sleep(0.02)


OUTAGES: dict[str, Target] = {t.name: t for t in [
    OutageTarget(phase, service) for phase in ("load", "gen-hf", "query")
    for service in SERVICES]}
