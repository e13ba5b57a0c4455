"""The campaign's trial point "a file shrinking mid-load" (docs/RELIABILITY.md, "Kill campaign"):
a cold file of the input is truncated while ``debl load`` copies it.

Each trial copies the campaign's input into a directory of its own (the shared input stays
whole), serves it over HTTP at a rate that makes the copy last several seconds, and starts
``debl load`` while a day is current. Once the load has copied its first cold chunk, the file
the copy is in is truncated in the middle of what the copy cannot have read yet (it reads a
file a block at a time, ``loaders.chunker.BLOCK``, and checks the file's end when a block
reaches it), or, when less than ``MARGIN`` of it is left, a later cold file in its middle:
mid-line in even trials, at a line end in odd ones. The load must then fail with a clear
message naming that file (a SourceError: docs/RELIABILITY.md, "Sources that misbehave"), be
recorded ``failed``, and leave the current day current: nothing half-loaded is served as
complete. The file is then restored (its bytes and mtime, as listed), ``debl load URL --resume
LOAD_ID`` must complete, and the usual checks follow (``Campaign.verify_and_compare``: ``debl
verify``, rows lost or doubled, answers).
"""

from __future__ import annotations

import os
import random
import shutil
import time
from pathlib import Path

from debl.catalog import Catalog, LoadState
from debl.commands.common import parse_size
from harness.campaign import CHUNK, HOT_FILES, Campaign
from harness.early_kills import COPY_S, _Served
from harness.kills import MIN_TIMEOUT_S, Target, Window
from harness.trial import MISSED, Step, Trial
from loaders.chunker import BLOCK
from loaders.source import LocalSource

CHUNK_BYTES = parse_size(CHUNK)
MARGIN = 256 << 10  # a file with less than this left unread by the copy is not the one cut
# The source server closes a connection idle this long: a transfer cut short by the truncation
# ends then, and the load sees it (the server's default, 60 s, would only make the trial long).
SERVER_TIMEOUT_S = 5.0


class ShrinkingFileTarget(Target):
    """``debl load`` from a source whose file shrinks while it is copied (see the module)."""

    name = "load-shrink"
    fault = "a cold file truncated while debl load copies it"

    def command(self, camp: Campaign) -> str:
        return f"debl load URL --chunk-size {CHUNK} --hot-bytes {camp.hot_bytes} (URL: a copy " \
               f"of the input over HTTP, {COPY_S:g} s of copy), a day current"

    def measure(self, camp: Campaign) -> Window:
        # The truncation follows the copy's progress, not a moment: nothing to measure.
        return Window(COPY_S)

    def trial(self, camp: Campaign, trial: Trial, rng: random.Random, window: Window) -> None:
        if camp.latest_load() is None or camp.current_load() is None:
            camp.ensure_dataset(reset=False)  # a day that must stay current
        current = camp.current_load().load_id
        directory = camp.work_dir / f"{self.name}-{trial.number}"
        shutil.rmtree(directory, ignore_errors=True)
        shutil.copytree(camp.input_dir, directory)  # mtimes kept: the same listing's order
        served = _Served(directory, timeout=SERVER_TIMEOUT_S)
        try:
            argv = camp.load_argv(source=served.url)
            load_id = self._shrink_under(camp, trial, argv, directory, current, served.rate)
            if load_id is None:
                return
            step = camp.run(argv + ["--resume", load_id], f"{self.name}-{trial.number}-resume",
                            2 * MIN_TIMEOUT_S)
            trial.steps.append(Step.of(step))
            if not step.ok:
                trial.problems.append("the resumed load failed")
            # `debl verify` reads the source again: still served. The copy's files are the
            # input's, byte for byte: the input's reference is theirs.
            camp.verify_and_compare(trial, hbase=False, hot_bytes=camp.hot_bytes)
        finally:
            served.close()
            shutil.rmtree(directory, ignore_errors=True)

    def _shrink_under(self, camp: Campaign, trial: Trial, argv: list[str], directory: Path,
                      current: str, rate: float) -> str | None:
        """Start the load, truncate a file under it, judge its failure and restore the file;
        the failed load's id, or None when the trial ends here. *rate*: the source's bytes a
        second."""
        before = getattr(camp.latest_load(), "load_id", None)
        running = camp.start(argv, f"{self.name}-{trial.number}")
        cut = None
        while cut is None and not running.done():
            time.sleep(0.1)
            cut = _cut_point(camp, directory, before, trial.number % 2 == 0)
        if cut is None:  # the load ended before its first cold chunk was recorded
            outcome = running.wait(0)
            trial.steps.append(Step.of(outcome))
            trial.landed, trial.ran_s = [MISSED], outcome.seconds
            if not outcome.ok:
                trial.problems.append("the load failed before any file was truncated")
            return None
        path, start, at, where = cut
        # Half the time the copy takes from the first byte it cannot have read to the cut: it
        # is then reading the file, short of the cut (or, slowed, still before the file).
        time.sleep(max(0.0, at - start) / rate / 2)
        original, stat = path.read_bytes(), path.stat()
        os.truncate(path, at)
        trial.kill_at_s = round(running.elapsed(), 2)
        trial.victim = f"{path.name!r} truncated at byte {at} of {len(original)}"
        trial.landed = [where]
        outcome = running.wait(MIN_TIMEOUT_S)
        step = Step.of(outcome)
        trial.steps.append(step)
        path.write_bytes(original)  # restored as listed: the resume checks the listing
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        load = camp.latest_load()
        if outcome.ok:
            # The copy may have read the file whole before it shrank: its last recorded chunk
            # lags the copy when chunks are bucketed slowly (a busy machine). The load is then
            # right and the trial missed; had it loaded the shrunk file, rows would be lost,
            # which the checks say.
            camp.verify_and_compare(trial, hbase=False, hot_bytes=camp.hot_bytes)
            if trial.verify_ok and not (trial.lost or trial.doubled or trial.wrong_answers):
                trial.landed, trial.ran_s = [MISSED], outcome.seconds
            else:
                trial.problems.append("the load succeeded although a file shrank under it")
            return None
        # Which check caught it: the file's state when opened, or its bytes as read.
        trial.landed.append("caught as the file was opened" if "changed after it was listed"
                            in outcome.output else "caught while it was read")
        if step.clear and f"'{path.name}'" not in outcome.output:
            step.clear = False
            trial.problems.append(f"the message does not name {path.name}: {step.message}")
        if load is None or load.load_id == before:
            trial.problems.append("the load was never recorded")
            return None
        if load.state != LoadState.FAILED:
            trial.problems.append(f"the load is {load.state}, not failed")
        if camp.current_load().load_id != current:
            trial.problems.append("the current day is no longer current")
        return load.load_id


def _cut_point(camp: Campaign, directory: Path, before: str | None,
               mid_line: bool) -> tuple[Path, int, int, str] | None:
    """Where to truncate, once the load (the first recorded after *before*) has copied a cold
    chunk: (the file, its first byte the copy cannot have read, the byte to cut at, which file
    it is); None before."""
    load = camp.latest_load()
    if load is None or load.load_id == before:
        return None
    with Catalog(camp.config) as catalog:
        cold = [c for c in catalog.index.chunks(load.load_id) if not c.hot]
    if not cold:
        return None
    copied = max(cold, key=lambda c: c.chunk_no).layout["segments"][-1]
    files = LocalSource(directory).list()[:-HOT_FILES]
    k = next(i for i, f in enumerate(files) if f.name == copied["name"])
    # How far the copy may be past its last recorded chunk's end: the chunk after it whole (the
    # copy sends chunk i+1 while chunk i is closed and bucketed: docs/LOADING.md, "Closing many
    # small files"), and a block of the file it then reads (it reads a file a block at a time,
    # and checks the file's end when a block reaches it).
    start = copied["end"] + CHUNK_BYTES + BLOCK
    where = "the file being copied"
    while files[k].size - start < MARGIN and k + 1 < len(files):
        start -= files[k].size
        k, where = k + 1, "a file the copy has not reached"
    start = max(0, min(start, files[k].size))
    path = directory / files[k].name
    data = path.read_bytes()
    at = data.rfind(b"\n", 0, start + (len(data) - start) // 2) + 1  # a line start
    return path, start, at + (3 if mid_line else 0), where + (", mid-line" if mid_line else
                                                              ", at a line end")


SHRINKING = {t.name: t for t in [ShrinkingFileTarget()]}  # for scripts/faults.py
