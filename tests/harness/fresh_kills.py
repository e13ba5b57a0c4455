"""The kill campaign's targets under writes (docs/RELIABILITY.md, "Kill campaign";
docs/FRESHNESS.md, "The contract"): ``fresh-follow``, ``fresh-coordinator`` and
``fresh-gen-hf``, each a process of a dataset kept fresh killed with ``kill -9`` while the
source takes writes and reads wait for them.

A trial, as a user runs it: the source's table (``faults_fresh``) filled from the campaign's
input (``debl source db init``), dumped (``debl source dump``) and the dump loaded all cold
(``debl load --no-hot``); then ``debl follow``, ``debl gen-hf --until-complete`` and a client
(``debl query --mix update-heavy``: reads through its coordinators with freshness on, writes
to the source, both logged) run together for ``CLIENT_S`` seconds, and a second client of reads
alone (``--mix reads``) beside it. At a moment uniform over ``KILL_S`` seconds the target's
process is killed:

- ``fresh-follow``: the follower; it is started again (the reads wait for it meanwhile);
- ``fresh-coordinator``: the reads-only client, a worker process (even trials: the client
  must fail clearly) or the client itself (odd: its workers must not outlive it); a new one
  reads for a few seconds;
- ``fresh-gen-hf``: gen_HF; it is started again until every bucket is in HBase.

Then, once the writes stopped, the follower has caught up and gen_HF has ended: ``debl verify
--against-source`` (rows missing from DeBL are lost, rows it has that the source lacks doubled,
rows that differ a problem) and ``debl check-fresh`` over every client's answers (a killed
process's last block is cut short and left out), which must find 0 violations and a history
without problems; the follower is stopped with SIGTERM and must end cleanly.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

from debl.config import Config
from harness import procs
from harness.campaign import CHUNK, Campaign
from harness.kills import Target, Window, _json_tail, _kill_at, _orphans, _workers
from harness.trial import MISSED, Step, Trial
from loaders.cleanup import drop_every_load

SOURCE_TABLE = "faults_fresh"
CLIENT_S = 20.0  # the clients' run
KILL_S = 12.0  # the kill's moment is uniform over [1, KILL_S] s after the clients' start
AGAIN_S = 4.0  # the reads of the client started after a killed one
RATE = "60"  # reads a second of each client, and writes of the update-heavy one


class FreshTarget(Target):
    """One process of a dataset kept fresh killed under writes (see the module)."""

    def __init__(self, name: str, victim: str, fault: str):
        self.name, self.victim, self.fault = name, victim, fault

    def command(self, camp: Campaign) -> str:
        return (f"debl follow, debl gen-hf --until-complete and debl query --mix update-heavy "
                f"--rate {RATE} --write-rate {RATE} (the source's table {SOURCE_TABLE}: the "
                "input, dumped and loaded cold), debl query --mix reads beside them")

    def config(self, camp: Campaign) -> Config:
        return camp.config.replace(source_db_table=SOURCE_TABLE)

    def measure(self, camp: Campaign) -> Window:
        return Window(KILL_S)

    def _run(self, camp: Campaign, argv: list[str], name: str, timeout: float,
             ok: bool = True) -> procs.Outcome:
        outcome = procs.run(argv, self.config(camp).child_env(), camp.log(name), timeout,
                            cwd=camp.work_dir)
        if ok and not outcome.ok:
            raise RuntimeError(f"debl {' '.join(argv)} failed: {outcome.output[-2000:]}")
        return outcome

    def _start(self, camp: Campaign, argv: list[str], name: str) -> procs.Running:
        return procs.start(argv, self.config(camp).child_env(), camp.log(name),
                           cwd=camp.work_dir)

    def trial(self, camp: Campaign, trial: Trial, rng: random.Random, window: Window) -> None:
        work = camp.work_dir / f"{self.name}-{trial.number}"
        dump = work / "dump"
        # Only this trial's load is kept: the follower then starts at its dump, past the
        # init's statements (a kept earlier load would make it read them, and stop: rightly)
        drop_every_load(self.config(camp))
        self._run(camp, ["source", "db", "init", str(camp.input_dir), "--replace"],
                  f"{self.name}-{trial.number}-init", 600.0)
        self._run(camp, ["source", "dump", str(dump), "--files", "4", "--overwrite"],
                  f"{self.name}-{trial.number}-dump", 600.0)
        self._run(camp, ["load", str(dump), "--chunk-size", CHUNK, "--no-hot"],
                  f"{self.name}-{trial.number}-load", 900.0)
        tag = f"{self.name}-{trial.number}"
        follower = self._start(camp, ["follow"], f"{tag}-follow")
        gen_hf = self._start(camp, ["gen-hf", "--until-complete"], f"{tag}-gen-hf")
        answers = [work / "answers-writes", work / "answers-reads"]
        writes = self._start(camp, self._query("update-heavy", trial.seed, answers[0],
                                               work / "writes.csv"), f"{tag}-writes")
        reads = self._start(camp, self._query("reads", trial.seed + 1, answers[1]),
                            f"{tag}-reads")
        at = rng.uniform(1.0, window.seconds)
        again: procs.Running | None = None
        if self.victim == "follow":
            tree = _kill_at(camp, follower, trial, at, "main", lambda: ["the follower"])
            if tree is not None:
                follower.wait(30.0)
                _orphans(trial, tree, follower.pid)
                follower = self._start(camp, ["follow"], f"{tag}-follow-again")
        elif self.victim == "gen-hf":
            tree = _kill_at(camp, gen_hf, trial, at, "main", lambda: ["gen_HF converting"])
            if tree is not None:
                gen_hf.wait(30.0)
                _orphans(trial, tree, gen_hf.pid)
                gen_hf = self._start(camp, ["gen-hf", "--until-complete"], f"{tag}-gen-hf-again")
        else:
            self._kill_reader(camp, trial, reads, at)
            answers.append(work / "answers-again")
            again = self._start(camp, self._query("reads", trial.seed + 2, answers[2],
                                                  duration=AGAIN_S), f"{tag}-reads-again")
        for name, running in (("the update-heavy client", writes), ("the reads' client", reads),
                              ("the client started again", again)):
            if running is None or (running is reads and self.victim == "coordinator"):
                continue
            outcome = running.wait(300.0)
            trial.steps.append(Step.of(outcome))
            if not outcome.ok:
                trial.problems.append(f"{name} failed: {outcome.output[-300:]}")
            elif _json_tail(outcome.output)["errors"]:
                trial.problems.append(f"{name}: {_json_tail(outcome.output)['errors']} reads "
                                      "failed")
        converted = gen_hf.wait(600.0)
        trial.steps.append(Step.of(converted))
        if not converted.ok:
            trial.problems.append("gen_HF did not convert every bucket")
        self._check(camp, trial, dump, work, answers)
        os.kill(follower.pid, signal.SIGTERM)
        stopped = follower.wait(60.0)
        trial.steps.append(Step.of(stopped))
        if not stopped.ok:
            trial.problems.append(f"the follower did not stop cleanly: {stopped.output[-300:]}")

    @staticmethod
    def _query(mix: str, seed: int, answers: Path, write_log: Path | None = None,
               duration: float = CLIENT_S) -> list[str]:
        argv = ["query", "--target", "debl", "--mix", mix, "--rate", RATE, "--duration",
                str(duration), "--threads", "4", "--processes", "2", "--seed", str(seed),
                "--answer-log", str(answers), "--json"]
        if write_log is not None:
            argv += ["--write-rate", RATE, "--writers", "2", "--write-log", str(write_log)]
        return argv

    @staticmethod
    def _kill_reader(camp: Campaign, trial: Trial, reads: procs.Running, at: float) -> None:
        """Kill -9 a worker of the reads' client (even trials; the client must then fail
        clearly) or the client itself (odd; none of its workers may outlive it)."""
        victim = "worker" if trial.number % 2 == 0 else "client"
        while not reads.done() and (reads.elapsed() < at or not _workers(reads, reads.tree())):
            if reads.elapsed() > at + 60.0:
                break
            time.sleep(0.02)
        if reads.done():
            trial.landed = [MISSED]
            trial.steps.append(Step.of(reads.wait(0)))
            return
        tree = reads.tree()
        workers = _workers(reads, tree)
        target = workers[0] if victim == "worker" and workers else tree[0]
        trial.landed = [f"{victim} killed, its reads waiting on fresh ranges"]
        trial.kill_at_s = round(reads.elapsed(), 2)
        procs.kill([target])
        trial.victim = target.describe()
        outcome = reads.wait(60.0)
        if target is not tree[0]:
            trial.steps.append(Step.of(outcome))
            if outcome.ok:
                trial.problems.append("the client succeeded although a worker was killed")
        _orphans(trial, tree, target.pid)

    def _check(self, camp: Campaign, trial: Trial, dump: Path, work: Path,
               answers: list[Path]) -> None:
        tag = f"{self.name}-{trial.number}"
        verified = self._run(camp, ["verify", "--against-source", "--json", "--wait", "120"],
                             f"{tag}-verify", 600.0, ok=False)
        trial.steps.append(Step.of(verified))
        try:
            against = _json_tail(verified.output)["against_source"]
        except (ValueError, KeyError):
            trial.problems.append(f"debl verify --against-source: {verified.output[-300:]}")
        else:
            trial.lost, trial.doubled = against["missing"], against["extra"]
            trial.verify_ok = against["different"] == 0 and verified.ok
            if against["different"]:
                trial.problems.append(f"{against['different']} rows differ from the source")
            for texts in against["examples"].values():
                trial.examples += texts[:2]
        argv = ["check-fresh", "--dump", str(dump), "--writes", str(work / "writes.csv"),
                "--json"]
        for directory in answers:  # a client killed before its first answer left none
            if any(directory.glob("answers-p*.bin")):
                argv += ["--answers", str(directory)]
        checked = self._run(camp, argv, f"{tag}-check", 600.0, ok=False)
        try:
            report = _json_tail(checked.output)
        except ValueError:
            trial.problems.append(f"debl check-fresh: {checked.output[-300:]}")
            return
        trial.answers = report["checked"]
        trial.wrong_answers = sum(v["count"] for v in report["violations"].values())
        for found in report["violations"].values():
            trial.examples += found["examples"][:2]
        for kind, found in report["history_problems"].items():
            trial.problems.append(f"history problem: {kind}: {found['count']}")


FRESH_KILLS: dict[str, Target] = {t.name: t for t in [
    FreshTarget("fresh-follow", "follow",
                "kill -9 debl follow while reads wait for it and the source takes writes"),
    FreshTarget("fresh-coordinator", "coordinator",
                "kill -9 a coordinator (a query client or its worker) whose reads wait on "
                "fresh ranges while the source takes writes"),
    FreshTarget("fresh-gen-hf", "gen-hf",
                "kill -9 debl gen-hf converting buckets that take changes under writes"),
]}
