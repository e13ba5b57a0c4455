"""What a bench produces: per approach an ``ApproachRun`` (load summary, phases, uptime, query
result, waits, full availability), the files under ``<state_dir>/bench/<bench_id>/`` that hold
them (``bench.json``; per approach ``<approach>.json`` and ``<approach>.timeline.csv``; its
slowest answers' breakdown, ``<approach>.tail.json``, is ``debl.bench.tail``'s), what the
figures were measured on, and ``BenchProgress``, the callbacks of a progress display.

Times are seconds since the approach's load started (``debl_loads.started``).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import platform
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from debl.bench.spec import BenchSpec
from debl.config import Config
from debl.errors import LoadStateError

BENCH_FILE = "bench.json"


@dataclass(frozen=True)
class PhaseSpan:
    """One recorded phase item, in seconds since its load started."""

    phase: str
    item: str
    start_s: float
    end_s: float | None
    bytes: int | None
    rows: int | None


@dataclass(frozen=True)
class ApproachRun:
    """What one approach did in a bench. Times are seconds since its load started; the
    ``query`` dict is ``ClientResult.to_dict()`` without its timeline (kept in ``timeline``:
    ``(t_s, completed, errors, mean_ms, p95_ms)`` per second, ``t_s`` since the load start).
    ``queries_from``: when its query client started, "uptime" or "load" (None: no query
    phase); ``first_answer_s``: its first successful request (None: none, or a bench recorded
    before the client kept it)."""

    approach: str
    load_id: str
    load_started: float  # epoch seconds
    uptime_s: float
    summary: dict
    phases: tuple[PhaseSpan, ...]
    target: str | None
    query_start_s: float | None = None
    all_served_s: float | None = None
    full_availability_s: float | None = None
    query: dict | None = None
    waits: dict | None = None  # coordinator stats (DeBL approaches)
    gen_hf: dict | None = None  # order, exit code, restarts, log
    timeline: tuple[tuple[float, int, int, float, float], ...] = ()
    taken_over_s: float | None = None  # when MySQL took the hot keys over (DeBL as it ships)
    queries_from: str | None = None
    first_answer_s: float | None = None
    # Where the CPU went (debl.bench.cpu.CpuSample.since): "to_uptime" from the load's start,
    # "after_uptime" from then to the end of its work (full availability, MySQL's take-over).
    cpu: dict | None = None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @staticmethod
    def from_dict(d: dict) -> "ApproachRun":
        d = dict(d)
        d["phases"] = tuple(PhaseSpan(**p) for p in d["phases"])
        d["timeline"] = tuple(tuple(p) for p in d["timeline"])
        return ApproachRun(**d)


@dataclass(frozen=True)
class BenchResult:
    bench_id: str
    directory: Path
    spec: BenchSpec
    runs: tuple[ApproachRun, ...]
    input_bytes: int
    input_files: int
    seconds: float


class BenchProgress:
    """Callbacks for a progress display; the defaults do nothing. ``finished`` is called after
    an approach's query phase (and full availability), before the next approach resets the
    stores: the moment to inspect them."""

    def message(self, text: str) -> None: ...
    def approach(self, name: str, index: int, total: int) -> None: ...
    def phase(self, name: str, phase: str) -> None: ...
    def moved(self, nbytes: int, total: int) -> None: ...
    def queried(self, done: int, total: int | None, elapsed: float) -> None: ...
    def finished(self, run: ApproachRun, config: Config) -> None: ...


class ReportProgress(BenchProgress):
    """A BenchProgress that passes its messages to *report* and ignores the rest."""

    def __init__(self, report: Callable[[str], None]) -> None:
        self._report = report

    def message(self, text: str) -> None:
        self._report(text)


def bench_root(config: Config) -> Path:
    return config.state_dir / "bench"


def new_bench_id() -> str:
    return time.strftime("B%Y%m%d-%H%M%S")


def find_bench(config: Config, bench: str | None = None) -> Path:
    """The directory of bench *bench* (an id or a path), or of the latest bench."""
    if bench:
        for path in (Path(bench), bench_root(config) / bench):
            if (path / BENCH_FILE).is_file():
                return path
        raise LoadStateError(f"no bench {bench!r}: neither {bench} nor "
                             f"{bench_root(config) / bench} holds a {BENCH_FILE}")
    found = sorted(p.parent for p in bench_root(config).glob(f"*/{BENCH_FILE}"))
    if not found:
        raise LoadStateError(f"no bench under {bench_root(config)}: run `debl bench` first")
    return found[-1]


def read_bench(directory: Path) -> tuple[dict, list[ApproachRun]]:
    """bench.json and the runs of the approaches that finished, in the bench's order."""
    meta = json.loads((directory / BENCH_FILE).read_text())
    runs = []
    for name in meta["spec"]["approaches"]:
        path = directory / f"{name}.json"
        if path.is_file():
            runs.append(ApproachRun.from_dict(json.loads(path.read_text())))
    return meta, runs


def machine() -> dict:
    """What the figures were measured on."""
    model = ""
    try:  # the CPU's model name: psutil does not give it, Linux's cpuinfo does
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = psutil.virtual_memory().total
    return {"cpus": os.cpu_count(), "cpu_model": model, "memory_gib": round(memory / 2**30, 1),
            "system": f"{platform.system()} {platform.release()}",
            "python": platform.python_version()}


def code_version() -> str | None:
    """The git commit DeBL runs from, with "+changes" if its work tree differs (None outside a
    git checkout): benches on different code do not compare."""
    root = Path(__file__).resolve().parents[2]  # the repository: debl/bench/results.py
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, check=True,
                              capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=root, check=True, capture_output=True, text=True,
                               timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+changes" if dirty else "")


def write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    tmp.replace(path)


def write_timeline(path: Path, timeline) -> None:
    """One row per second of the query phase (``ApproachRun.timeline``), and ``answered``: the
    requests answered from the load's start to the end of the row's second (``t_s + 1``), the
    curve of answers since the load started (docs/BENCHMARKS.md)."""
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["t_s", "completed", "errors", "mean_ms", "p95_ms", "answered"])
        answered = 0
        for point in timeline:
            answered += int(point[1])
            writer.writerow([*point, answered])
