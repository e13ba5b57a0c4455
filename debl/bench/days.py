"""``debl bench --days-in-a-row N``: the next day's dump loaded while clients keep asking
(docs/BENCHMARKS.md, "Days in a row"; docs/LOADING.md, "Days").

Day 1 is loaded (DeBL as it ships) and served, with the gen_HF service converting in its own
process; client threads (one coordinator, LinkBench's requests) ask without pause; after
``settle_s`` day 2 (a later generation of the same graph: the same ids, another seed) is loaded
beside it, and so on; the clients ask ``after_s`` more after the last day's load ended. What it
reports:

- the longest stretch with no answer, and where it was;
- which day answered each request, per second since the experiment's start;
- answers from the wrong day: a sample of answers (one in ``sample_every``) is compared with the
  answer computed from that day's raw files (the key's lines, by the merge rule);
- the disk the stores hold (MySQL tables, HBase tables, HDFS load directories) before the next
  day and after its cleanup;
- the new day's first minute: the share of its answers that read a bucket raw, with the demand
  carried over from the previous day or without (``gen_hf.carry_demand``).

Pitfall: every load of the namespace is dropped first; never point it at a namespace in use.
"""

from __future__ import annotations

import csv
import json
import threading
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from debl.bench.gen_hf_process import GenHFProcess
from debl.bench.inputs import hot_bytes_for_share
from debl.bench.results import BenchProgress, bench_root, code_version, machine, new_bench_id
from debl.bench.source_server import make_server, manifest_cache_dir
from debl.catalog import Catalog
from debl.config import Config
from debl.hdfs import HdfsClient
from debl.format.link import Origin, parse_line
from debl.store.memory import MemoryStore
from debl.store.mysql import MySQLStore
from debl.workload.generator import generate
from debl.workload.requests import RequestSpec, RequestStream
from debl.workload.spec import GenerateSpec
from loaders.cleanup import drop_every_load
from loaders.load import LoadOptions, LoadProgress, LoadRun
from loaders.source import LocalSource
from loaders.split import split_files


@dataclass(frozen=True)
class DaysSpec:
    """One days-in-a-row experiment; day k's input is ``input`` with seed ``input.seed+k-1``."""

    input: GenerateSpec
    data_dir: Path
    days: int = 2
    threads: int = 50
    source_rate: float | None = None
    seed: int = 1
    recency_share: float = 0.9
    hot_share: float = 0.2
    chunk_size: int | None = None
    settle_s: float = 30.0
    after_s: float = 60.0
    sample_every: int = 50
    carry_demand: bool = True
    query_timeout: float = 600.0


@dataclass
class _Answers:
    """What the client threads saw: per answer (seconds since the start, load, route, hot
    side), and a sample of (key, load, links)."""

    started: float = field(default_factory=time.monotonic)
    done: list[tuple[float, str, str, str]] = field(default_factory=list)
    sample: list[tuple[tuple[int, int], str, list]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _ask(coordinator, requests: RequestStream, answers: _Answers,
         stop: threading.Event, spec: DaysSpec) -> None:
    n = 0
    for key in requests:
        if stop.is_set():
            return
        try:
            answer = coordinator.query(*key, timeout=spec.query_timeout)
        except Exception as exc:  # noqa: BLE001 -- an error is a result: counted, shown
            with answers.lock:
                answers.errors.append(f"{type(exc).__name__}: {exc}"[:300])
            continue
        t = time.monotonic() - answers.started
        n += 1
        with answers.lock:
            answers.done.append((t, answer.load_id, answer.route.value, answer.hot.value))
            if n % spec.sample_every == 0:
                answers.sample.append((key, answer.load_id, answer.links))


def disk_use(config: Config) -> dict[str, int]:
    """Bytes the stores hold for every load whose stores exist: MySQL (data and indexes), HBase
    (its tables' directories in HDFS) and the loads' HDFS directories."""
    hdfs = HdfsClient(config)
    use: Counter[str] = Counter()
    with Catalog(config) as catalog:
        loads = [load for load in catalog.loads.loads() if load.dropped is None]
    for load in loads:
        ns = load.namespace
        with MySQLStore(config, ns.link_table) as mysql:
            use["mysql"] += mysql.size_bytes()
        use["hbase"] += hdfs.size(f"{config.hbase.root_dir}/data/default/{ns.hbase_table}")
        use["hdfs"] += hdfs.size(ns.hdfs_dir)
    use["loads"] = len(loads)
    return dict(use)


def _reference(directory: Path, keys: set[tuple[int, int]], hot_share: float) -> MemoryStore:
    """The merge rule over the raw files' lines of *keys* only (one streaming pass)."""
    ids = {id1 for id1, _ in keys}
    files = LocalSource(directory).list()
    hot = {f.name for f in split_files(files, hot_bytes_for_share(files, hot_share)).hot}
    store = MemoryStore()
    rows = []
    for seq, f in enumerate(files):
        with open(directory / f.name, "rb") as stream:
            for line_no, line in enumerate(stream, 1):
                head = line.split(b"\t", 2)
                try:
                    if int(head[0]) not in ids:
                        continue
                    link = parse_line(line)
                except ValueError:
                    continue
                if (link.id1, link.link_type) in keys:
                    rows.append((link, Origin(int(f.name in hot), seq, line_no)))
    store.write_links(rows)
    return store


class _Progress(LoadProgress):
    def __init__(self, report) -> None:
        self.report = report

    def up(self, summary) -> None:
        self.report(f"load {summary.load_id} up after {summary.uptime_s:.1f} s")

    def message(self, text: str) -> None:
        self.report(text)


def run_days(config: Config, spec: DaysSpec, progress: BenchProgress = BenchProgress(),
             directory: Path | None = None) -> dict:
    """Run the experiment (see the module); returns its result, also written as ``days.json``
    (with ``days.timeline.csv`` and ``days.md``) under ``<state_dir>/bench/<id>/``."""
    # lazy import: the coordinator brings the HBase client, which would cost every `debl`
    # command's start-up (docs/ARCHITECTURE.md, "Lazy imports")
    from coordinator import Coordinator

    bench_id = new_bench_id()
    directory = Path(directory) if directory else bench_root(config) / bench_id
    directory.mkdir(parents=True, exist_ok=False)
    config = config.replace(loading_keep_previous_load=0.0, gen_hf_carry_demand=spec.carry_demand)
    inputs = []
    for day in range(1, spec.days + 1):
        day_dir = spec.data_dir / f"day-{day}"
        if not (day_dir / ".complete").exists():
            progress.message(f"generating day {day} into {day_dir}")
            generate(day_dir, replace(spec.input, seed=spec.input.seed + day - 1), overwrite=True)
            (day_dir / ".complete").write_text("")
        inputs.append(day_dir)
    drop_every_load(config)
    servers = [make_server(d, port=0, rate_mb_s=spec.source_rate,
                           manifest_cache=manifest_cache_dir(config), progress=progress.message)
               for d in inputs]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    urls = [f"http://127.0.0.1:{s.server_address[1]}" for s in servers]
    gen_hf = GenHFProcess(config, "demand", directory / "gen_hf.log", progress.message,
                          until_complete=False)
    answers, stop = _Answers(), threading.Event()
    loads: list[dict] = []
    disk: list[dict] = []
    try:
        gen_hf.start()
        loads.append(_load(config, spec, urls[0], inputs[0], progress, answers))
        with Coordinator(config, default_timeout=spec.query_timeout) as coordinator:
            request = RequestSpec(max_id=spec.input.max_id, start_id=spec.input.start_id,
                                  link_types=spec.input.link_types, seed=spec.seed,
                                  recency_share=spec.recency_share)
            streams = [RequestStream(request, n) for n in range(spec.threads)]
            threads = [threading.Thread(target=_ask, args=(coordinator, s, answers, stop, spec),
                                        daemon=True) for s in streams]
            for t in threads:
                t.start()
            for url, day_dir in zip(urls[1:], inputs[1:]):
                time.sleep(spec.settle_s)
                disk.append({"when": "before the next day", **disk_use(config)})
                loads.append(_load(config, spec, url, day_dir, progress, answers))
                disk.append({"when": "after its cleanup", **disk_use(config)})
            time.sleep(spec.after_s)
            stop.set()
            for t in threads:
                t.join(spec.query_timeout)
    finally:
        stop.set()
        gen_hf.stop()
        for server in servers:
            server.shutdown()
            server.server_close()
    result = summarize(spec, loads, answers, inputs, disk)
    result.update({"bench_id": bench_id, "spec": _spec_dict(spec), "machine": machine(),
                   "code": code_version()})
    (directory / "days.json").write_text(json.dumps(result, indent=2, default=str))
    _write_timeline(directory / "days.timeline.csv", answers, loads)
    (directory / "days.md").write_text(render(result))
    result["directory"] = str(directory)
    return result


def _load(config: Config, spec: DaysSpec, url: str, directory: Path,
          progress: BenchProgress, answers: _Answers) -> dict:
    """One day's load (its newest files nearest ``hot_share`` of the bytes hot), its moments in
    seconds since the experiment's start."""
    hot_bytes = hot_bytes_for_share(LocalSource(directory).list(), spec.hot_share)
    started = time.monotonic() - answers.started
    with LoadRun(config, url, LoadOptions(hot_bytes=hot_bytes, chunk_size=spec.chunk_size),
                 progress=_Progress(progress.message)) as run:
        up = run.wait_up()
        up_at = time.monotonic() - answers.started
        final = run.finish()
    return {"load_id": final.load_id, "started_s": started, "uptime_s": up_at,
            "finished_s": time.monotonic() - answers.started, "load_uptime_s": up.uptime_s,
            "taken_over_s": None if final.taken_over_s is None
            else started + final.taken_over_s}


def summarize(spec: DaysSpec, loads: list[dict], answers: _Answers, inputs: list[Path],
              disk: list[dict]) -> dict:
    """The figures of the module's list from what the clients saw."""
    done = sorted(answers.done)
    times = [t for t, *_ in done]
    gaps = [(b - a, a) for a, b in zip(times, times[1:])]
    longest, at = max(gaps) if gaps else (0.0, 0.0)
    day_of = {load["load_id"]: day for day, load in enumerate(loads, 1)}
    per_second: dict[int, Counter] = defaultdict(Counter)
    for t, load_id, _, _ in done:
        per_second[int(t)][day_of.get(load_id, 0)] += 1
    wrong = 0
    by_day: dict[int, list] = defaultdict(list)
    for key, load_id, links in answers.sample:
        by_day[day_of.get(load_id, 0)].append((key, links))
    for day, sampled in by_day.items():
        if day == 0:
            wrong += len(sampled)
            continue
        reference = _reference(inputs[day - 1], {key for key, _ in sampled}, spec.hot_share)
        wrong += sum(links != reference.get_link_list(*key) for key, links in sampled)
    first_minute = []
    for day, load in enumerate(loads[1:], 2):
        window = [(route, hot) for t, load_id, route, hot in done
                  if load_id == load["load_id"] and load["uptime_s"] <= t < load["uptime_s"] + 60]
        raw = sum(route == "raw" for route, _ in window)
        first_minute.append({"day": day, "answers": len(window), "raw": raw,
                             "raw_share": raw / len(window) if window else None,
                             "hot_raw": sum(hot == "raw" for _, hot in window)})
    return {"loads": loads, "answers": len(done), "errors": len(answers.errors),
            "error_samples": answers.errors[:5], "longest_gap_s": longest,
            "longest_gap_at_s": at, "sampled": len(answers.sample), "wrong_day": wrong,
            "disk": disk, "first_minute": first_minute,
            "per_second": {s: dict(c) for s, c in sorted(per_second.items())}}


def _write_timeline(path: Path, answers: _Answers, loads: list[dict]) -> None:
    day_of = {load["load_id"]: day for day, load in enumerate(loads, 1)}
    counts: dict[int, Counter] = defaultdict(Counter)
    for t, load_id, _, _ in answers.done:
        counts[int(t)][day_of.get(load_id, 0)] += 1
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["t_s"] + [f"day{d}" for d in range(1, len(loads) + 1)])
        for s in range(max(counts, default=-1) + 1):
            writer.writerow([s] + [counts[s][d] for d in range(1, len(loads) + 1)])


def _spec_dict(spec: DaysSpec) -> dict:
    d = asdict(spec)
    d["data_dir"] = str(spec.data_dir)
    return d


def render(result: dict) -> str:
    """The experiment as Markdown."""
    spec = result["spec"]
    rate = "uncapped" if spec["source_rate"] is None else f"{spec['source_rate']} MB/s"
    lines = [f"# Days in a row: {result['bench_id']}", "",
             f"{spec['days']} days of {spec['input']['max_id']:,} ids (layout "
             f"{spec['input']['layout']}), {spec['threads']} client threads asking throughout, "
             f"source {rate}, "
             f"demand carried over: {'yes' if spec['carry_demand'] else 'no'}.", "",
             "| day | load | started s | up s | MySQL took over s | finished s |",
             "|---:|---|---:|---:|---:|---:|"]
    for day, load in enumerate(result["loads"], 1):
        taken = "-" if load["taken_over_s"] is None else f"{load['taken_over_s']:.1f}"
        lines.append(f"| {day} | {load['load_id']} | {load['started_s']:.1f} | "
                     f"{load['uptime_s']:.1f} | {taken} | {load['finished_s']:.1f} |")
    lines += ["", f"- answers: {result['answers']:,}, errors: {result['errors']}",
              f"- longest stretch with no answer: **{result['longest_gap_s']:.3f} s** (at "
              f"{result['longest_gap_at_s']:.1f} s)",
              f"- answers from the wrong day: **{result['wrong_day']}** of {result['sampled']:,} "
              "sampled (each compared with its day's raw files)"]
    for m in result["first_minute"]:
        share = "-" if m["raw_share"] is None else f"{m['raw_share']:.1%}"
        lines.append(f"- day {m['day']}'s first minute after its uptime: {m['answers']:,} "
                     f"answers, {share} read a cold bucket raw, {m['hot_raw']:,} read its hot "
                     "files raw")
    lines += ["", "| disk | loads | MySQL MB | HBase MB | HDFS MB |", "|---|---:|---:|---:|---:|"]
    for d in result["disk"]:
        lines.append(f"| {d['when']} | {d.get('loads', 0)} | {d.get('mysql', 0) / 1e6:,.1f} | "
                     f"{d.get('hbase', 0) / 1e6:,.1f} | {d.get('hdfs', 0) / 1e6:,.1f} |")
    return "\n".join(lines) + "\n"
