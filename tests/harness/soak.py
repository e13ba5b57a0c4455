"""The soak (docs/RELIABILITY.md, "Soak"): many client threads over several processes query
through the coordinator for minutes while gen_HF converts, and the run shows whether anything
drifts: errors, queries past their deadline, answers, memory, MySQL sessions.

One run:

1. generate the soak's input (kept across runs) and ``debl load`` it, its newest files hot;
2. start ``debl gen-hf --until-complete`` (gen_HF run of ``gen_hf.run_buckets = 1``, so conversion
   goes on for a good part of the run) and ``debl query --target debl`` for ``duration_s``,
   with the raw route on and ``coordinator.query_timeout`` short enough to be a real deadline;
3. every ``sample_every_s`` seconds, record the resident memory of the query's processes (each
   worker holds a coordinator) and the number of MySQL sessions on the database;
4. once the query ends, ask a sample of keys through a fresh coordinator and compare the
   answers with the in-memory reference built from the raw files.

Pitfalls: a query that outlives ``coordinator.query_timeout`` must come back as an error naming the
timeout, so "no query over the deadline without a clear answer" is: every successful request's
latency is under the deadline, and every error is a timeout or names its cause. RSS and sessions
are compared between the second minute and the last one: the first minute holds start-up (the
pool fills, the raw route's cache warms).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from debl.bench.inputs import ensure_input
from debl.bench.results import ReportProgress
from debl.catalog import Catalog
from debl.config import Config
from debl.errors import DeblError
from harness import procs
from harness.checks import Reference, check_answers
from debl.stack.daemon import rss_kib
from debl.workload.spec import GenerateSpec
from loaders.source import LocalSource

# 8 files, the newest 2 hot: a short load, and a cold part that gen_HF, at one bucket per run,
# converts for minutes while the queries run (docs/RELIABILITY.md, "Soak": the figures).
INPUT = GenerateSpec(max_id=800_001, files=8, days=8, seed=11, update_share=0.2,
                     hidden_share=0.2, max_degree=200)


@dataclass(frozen=True)
class SoakSpec:
    threads: int = 200
    processes: int = 4
    duration_s: float = 600.0
    query_timeout_s: float = 30.0  # the deadline a query gets (coordinator.query_timeout)
    buckets: int = 24
    hot_files: int = 2
    answers: int = 500  # keys compared with the reference after the run
    sample_every_s: float = 5.0
    seed: int = 1


@dataclass
class Sample:
    t_s: float
    rss_mib: float  # all processes of the query client (its workers hold the coordinators)
    worker_rss_mib: float  # the largest one
    processes: int
    mysql_sessions: int
    converting: bool  # gen-hf still running


@dataclass
class SoakResult:
    spec: SoakSpec
    requests: int
    errors: int
    timeouts: int  # errors that are the query deadline
    unexplained_errors: list[str]
    p99_ms: float
    max_ms: float
    throughput: float
    gen_hf_s: float | None  # when gen-hf ended, seconds after the query started
    answers_asked: int
    answers_wrong: int
    answer_examples: list[str]
    samples: list[Sample] = field(default_factory=list)

    def minute(self, m: int) -> dict[str, float]:
        """Mean RSS (MiB, all client processes) and MySQL sessions over minute *m* (1-based);
        the last minute if the run was shorter."""
        last = max(s.t_s for s in self.samples)
        lo = min((m - 1) * 60.0, max(last - 60.0, 0.0))
        window = [s for s in self.samples if lo <= s.t_s < lo + 60.0] or self.samples[-1:]
        return {"rss_mib": round(sum(s.rss_mib for s in window) / len(window), 1),
                "mysql_sessions": round(sum(s.mysql_sessions for s in window) / len(window), 1)}

    def last_minute(self) -> int:
        return max(2, int(self.spec.duration_s // 60))

    @property
    def flat(self) -> bool:
        """Last minute within 20% of the second, for RSS and sessions alike."""
        a, b = self.minute(2), self.minute(self.last_minute())
        return all(b[k] <= 1.2 * a[k] and b[k] >= 0.8 * a[k] for k in a if a[k] > 0)

    @property
    def clean(self) -> bool:
        return (not self.unexplained_errors and self.answers_wrong == 0
                and self.max_ms <= self.spec.query_timeout_s * 1000 and self.flat)

    def markdown(self) -> str:
        m2, mn = self.minute(2), self.minute(self.last_minute())
        s = self.spec
        return "\n".join([
            "| figure | value |", "|---|---:|",
            f"| client | {s.threads} threads in {s.processes} processes, "
            f"{s.duration_s:.0f} s, closed loop |",
            f"| requests answered | {self.requests:,} ({self.throughput:,.0f}/s) |",
            f"| errors | {self.errors} ({self.timeouts} deadline of {s.query_timeout_s:g} s, "
            f"{len(self.unexplained_errors)} other) |",
            f"| p99 / max latency | {self.p99_ms:,.0f} ms / {self.max_ms:,.0f} ms |",
            f"| gen_HF converting | first {self.gen_hf_s:.0f} s |" if self.gen_hf_s is not None
            else "| gen_HF converting | the whole run |",
            f"| answers equal to the reference | {self.answers_asked - self.answers_wrong} of "
            f"{self.answers_asked} |",
            f"| client RSS, minute 2 / minute {self.last_minute()} | {m2['rss_mib']:,.0f} MiB / "
            f"{mn['rss_mib']:,.0f} MiB |",
            f"| MySQL sessions, minute 2 / minute {self.last_minute()} | "
            f"{m2['mysql_sessions']:g} / {mn['mysql_sessions']:g} |",
            f"| clean | {'yes' if self.clean else 'no'} |",
        ]) + "\n"


def _sampler(config: Config, query: procs.Running, gen_hf: procs.Running, every: float,
             samples: list[Sample], stop: threading.Event) -> None:
    with Catalog(config) as catalog:
        while not stop.wait(every):
            tree = query.tree()
            rss = [(rss_kib(p.pid) or 0) / 1024 for p in tree]
            try:
                sessions = catalog.probes.session_count()
            except DeblError:
                sessions = -1
            samples.append(Sample(round(query.elapsed(), 1), round(sum(rss), 1),
                                  round(max(rss, default=0.0), 1), len(tree), sessions,
                                  not gen_hf.done()))


def _is_timeout(message: str) -> bool:
    return "QueryTimeout" in message or "timed out" in message or "deadline" in message


def run_soak(config: Config, work_dir: Path, spec: SoakSpec = SoakSpec(),
             report: Callable[[str], None] = print) -> SoakResult:
    """Run the soak in *work_dir* (logs, ``results.json``, ``table.md``) on the stack of
    *config*, which must be up, in a namespace of its own (database ``<mysql_database>_soak``,
    HBase table and HDFS root apart): the dataset loaded there is left alone. The input is
    generated once under ``<state_dir>/soak/input``."""
    root = config.hdfs.root.rstrip("/") or "/debl"
    config = config.replace(mysql_database=f"{config.mysql.database}_soak",
                            mysql_link_table="soak_links", hbase_table="soak_links",
                            hdfs_root=f"{root}-soak")
    input_dir = (config.state_dir / "soak" / "input").absolute()
    work_dir = Path(work_dir).absolute()
    ensure_input(INPUT, input_dir, ReportProgress(report))
    files = LocalSource(input_dir).list()
    hot_bytes = sum(f.size for f in files[-spec.hot_files:])
    cold_bytes = sum(f.size for f in files[:-spec.hot_files])
    config = config.replace(loading_bucket_target_bytes=max(1, cold_bytes // spec.buckets),
                            loading_bucket_target_covers_heaviest=False, gen_hf_run_buckets=1,
                            coordinator_query_timeout=spec.query_timeout_s,
                            coordinator_raw_after=0.0)
    env = config.child_env()
    logs = work_dir / "logs"

    report(f"loading {len(files)} files ({(hot_bytes + cold_bytes) / 2**20:.0f} MiB, "
           f"{hot_bytes / 2**20:.0f} MiB hot)")
    loaded = procs.run(["load", str(input_dir), "--hot-bytes", str(hot_bytes)], env,
                       logs / "load.log", timeout=1800)
    if not loaded.ok:
        raise RuntimeError(f"the soak's load failed (exit {loaded.returncode}); see "
                           f"{logs / 'load.log'}")
    query_out = work_dir / "query.json"
    report(f"querying: {spec.threads} threads in {spec.processes} processes for "
           f"{spec.duration_s:.0f} s while gen-hf converts")
    gen_hf = procs.start(["gen-hf", "--until-complete"], env, logs / "gen-hf.log")
    query = procs.start(["query", "--target", "debl", "--threads", str(spec.threads),
                         "--processes", str(spec.processes), "--duration", str(spec.duration_s),
                         "--seed", str(spec.seed), "--out", str(query_out)], env,
                        logs / "query.log")
    samples: list[Sample] = []
    stop = threading.Event()
    sampler = threading.Thread(target=_sampler, daemon=True,
                               args=(config, query, gen_hf, spec.sample_every_s, samples, stop))
    sampler.start()
    gen_hf_s = None
    minutes_shown = 0
    try:
        while not query.done():
            if gen_hf_s is None and gen_hf.done():
                gen_hf_s = round(query.elapsed(), 1)
                report(f"gen-hf ended after {gen_hf_s:.0f} s of the query")
            time.sleep(1.0)
            if samples and samples[-1].t_s >= 60 * (minutes_shown + 1):
                minutes_shown += 1
                s = samples[-1]
                report(f"{s.t_s:.0f} s: client RSS {s.rss_mib:,.0f} MiB in {s.processes} "
                       f"processes, {s.mysql_sessions} MySQL sessions")
        outcome = query.wait(spec.query_timeout_s + 120)
    finally:
        stop.set()
        sampler.join()
    converted = gen_hf.wait(1800)
    if not outcome.ok or not converted.ok:
        failed = "query" if not outcome.ok else "gen-hf"
        raise RuntimeError(f"the soak's {failed} failed; see {logs / (failed + '.log')}")
    result = json.loads(query_out.read_text())
    messages = result.get("error_samples", [])
    report(f"comparing {spec.answers} keys with the reference")
    answers = check_answers(config, Reference.of(input_dir, hot_bytes), spec.answers, spec.seed)
    latency = result["latency"]
    errors = result["errors"]
    timeouts = errors if messages and all(_is_timeout(m) for m in messages) else 0
    soak = SoakResult(spec, result["completed"], errors, timeouts,
                      [m for m in messages if not _is_timeout(m)], latency["p99"],
                      latency["max"], result["throughput"], gen_hf_s, answers.asked,
                      answers.wrong + answers.errors, answers.examples, samples)
    (work_dir / "results.json").write_text(json.dumps(asdict(soak), indent=2) + "\n")
    (work_dir / "table.md").write_text(soak.markdown())
    return soak
