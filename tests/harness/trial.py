"""What one trial of a fault campaign records (docs/RELIABILITY.md, "Kill campaign"): each
command it ran (``Step``) and what was found after the recovery (``Trial``), whose ``problems``
say in words why it is not clean.

A trial is clean when nothing was lost, doubled, left running or unclear: a command that fails
must say why (``procs.clear_failure``), and one that runs past its time limit hung.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from harness import procs

MISSED = "after the command ended"  # the kill moment fell after the run: no kill


@dataclass
class Step:
    """One command of a trial: what ran, how it ended."""

    command: str
    returncode: int | None
    seconds: float
    hung: bool = False
    clear: bool | None = None  # a failure with a clear message (None: it did not fail)
    message: str = ""  # its last lines when it failed

    @staticmethod
    def of(outcome: procs.Outcome, expect_failure: bool = False) -> "Step":
        failed = not outcome.ok
        tail = "\n".join(outcome.output.strip().splitlines()[-3:]) if failed else ""
        return Step(outcome.command(), outcome.returncode, round(outcome.seconds, 1),
                    outcome.hung, procs.clear_failure(outcome) if failed else None, tail)


@dataclass
class Trial:
    """One trial of one target; ``problems`` says in words why it is not clean."""

    target: str
    fault: str
    number: int
    seed: int
    window_s: float = 0.0
    kill_at_s: float | None = None  # seconds after the command started
    victim: str = ""
    landed: list[str] = field(default_factory=list)  # the kill point(s)
    steps: list[Step] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    verify_ok: bool | None = None
    verify_failures: list[str] = field(default_factory=list)
    lost: int = 0
    doubled: int = 0
    answers: int = 0
    wrong_answers: int = 0
    left_unread: list[str] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)
    hung: bool = False
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)
    ran_s: float | None = None  # the command's whole run, when it ended before the kill
    # A recovery that redid the whole command (the kill came before any of its work): a fresh
    # measure of the command's duration on the machine as loaded now.
    rerun_s: float | None = None
    failed_after_s: float | None = None  # a service outage: from the kill to the failure

    @property
    def clear(self) -> bool | None:
        """Every failure a user met said what happened (None: nothing failed but the kill)."""
        judged = [s.clear for s in self.steps if s.clear is not None]
        return all(judged) if judged else None

    @property
    def clean(self) -> bool:
        return not self.problems

    def finish(self) -> None:
        """Fill ``problems`` from the results."""
        p = self.problems
        if self.hung or any(s.hung for s in self.steps):
            p.append("a command hung")
        if self.clear is False:
            p.append("a failure without a clear message")
        if self.orphans:
            p.append(f"orphans: {', '.join(self.orphans)}")
        if self.verify_ok is False:
            p.append(f"verify: {'; '.join(self.verify_failures[:3])}")
        if self.lost:
            p.append(f"{self.lost} rows lost")
        if self.doubled:
            p.append(f"{self.doubled} rows doubled")
        if self.wrong_answers:
            p.append(f"{self.wrong_answers} of {self.answers} answers wrong")

    def as_dict(self) -> dict:
        d = asdict(self)
        d["clear"], d["clean"] = self.clear, self.clean
        return d
