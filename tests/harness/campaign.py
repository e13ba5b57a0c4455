"""The kill campaign's shared set-up (docs/RELIABILITY.md, "Kill campaign"): the namespace, the
input, the reference, the logs, the dataset a trial starts from, and the checks every target ends
with.

A campaign works in a namespace of its own (``<mysql_database>_faults``, HBase table and MySQL
link table ``faults_links``, HDFS root ``<hdfs_root>-faults``), on an input it generates once
(``debl generate``: a change log with updates, hidden rows and a few bad lines, a few MB, the
newest files hot), with small chunks and buckets so that a few MB still make several of each.
The checks after a recovery: ``debl verify``, then ``harness.checks``: rows lost and
doubled in MySQL, HDFS and HBase, answers through the coordinator.

Pitfall: the campaign replaces its namespace's dataset on every load; never point it at a
namespace in use.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from debl.bench.inputs import ensure_input
from debl.bench.results import ReportProgress
from debl.catalog import Catalog, JobState
from debl.config import Config
from debl.errors import CatalogVersionError
from harness import procs
from harness.checks import (Reference, all_loaded, check_answers, check_hbase, check_hdfs,
                                check_mysql)
from harness.trial import Step, Trial
from debl.hdfs import HdfsClient
from debl.store.hbase import HBaseStore
from debl.workload.spec import GenerateSpec
from loaders.source import LocalSource

# The campaign's input: a few MB in 6 daily files, updates across files, hidden rows, bad lines;
# its size, chunks and buckets: docs/RELIABILITY.md, "Kill campaign".
INPUT = GenerateSpec(max_id=40001, files=6, days=6, seed=7, update_share=0.2, hidden_share=0.3,
                     bad_lines=5, max_degree=60)
HOT_FILES = 2  # the newest files are hot
CHUNK = "512KiB"  # several cold chunks
BUCKETS = 6  # cold bytes / loading.bucket_target_bytes
ANSWER_SAMPLE = 200  # keys asked through the coordinator per trial


class Campaign:
    """Shared by the targets: the namespace's config, the input, the reference, the logs.
    *namespace* names the database (``<mysql_database>_<namespace>``), the tables
    (``<namespace>_links``) and the HDFS root (``<hdfs_root>-<namespace>``): the day
    operations' campaign (``harness.days_runner``) works in its own."""

    def __init__(self, config: Config, work_dir: Path, report: Callable[[str], None] = print,
                 answers: int = ANSWER_SAMPLE, namespace: str = "faults"):
        root = config.hdfs.root.rstrip("/") or "/debl"
        self.config = config.replace(
            mysql_database=f"{config.mysql.database}_{namespace}",
            mysql_link_table=f"{namespace}_links", hbase_table=f"{namespace}_links",
            hdfs_root=f"{root}-{namespace}", coordinator_poll_interval=0.2,
            gen_hf_run_buckets=2, service_timeout=min(config.service_timeout, 20.0))
        self.work_dir = Path(work_dir).absolute()
        self.report = report
        self.answer_sample = answers
        # Kept across campaigns: generated once per input spec.
        self.input_dir = (config.state_dir / "faults" / "input").absolute()
        self.log_dir = self.work_dir / "logs"
        self._references: dict[tuple[Path, int | None], Reference] = {}
        self._runs = 0
        self.hot_bytes: int | None = None

    # -- input and environment

    def prepare(self) -> None:
        """Generate the input once (kept across campaigns) and size chunks and buckets to it."""
        ensure_input(INPUT, self.input_dir, ReportProgress(self.report))
        files = LocalSource(self.input_dir).list()
        self.hot_bytes = sum(f.size for f in files[-HOT_FILES:])
        cold = sum(f.size for f in files[:-HOT_FILES])
        self.config = self.config.replace(loading_bucket_target_bytes=max(1, cold // BUCKETS),
                                          loading_bucket_target_covers_heaviest=False)

    def env(self, **extra: str) -> dict[str, str]:
        return self.config.child_env(**extra)

    def reference(self, directory: Path | None = None, hot_bytes: int | None = -1) -> Reference:
        directory = directory or self.input_dir
        hot = self.hot_bytes if hot_bytes == -1 else hot_bytes
        key = (directory, hot)
        if key not in self._references:
            self._references[key] = Reference.of(directory, hot)
        return self._references[key]

    def log(self, name: str) -> Path:
        self._runs += 1
        return self.log_dir / f"{self._runs:04d}-{name}.log"

    def start(self, argv: list[str], name: str, **env: str) -> procs.Running:
        return procs.start(argv, self.env(**env), self.log(name), cwd=self.work_dir)

    def run(self, argv: list[str], name: str, timeout: float, **env: str) -> procs.Outcome:
        return procs.run(argv, self.env(**env), self.log(name), timeout, cwd=self.work_dir)

    # -- the standard commands

    def load_argv(self, hot: bool = True, source: str | None = None) -> list[str]:
        """``debl load``'s arguments for the input (or *source*, the input served elsewhere)."""
        argv = ["load", source or str(self.input_dir), "--chunk-size", CHUNK]
        return argv + (["--hot-bytes", str(self.hot_bytes)] if hot else ["--no-hot"])

    def latest_load(self):
        """The namespace's newest load (maybe killed before its uptime); None also when its
        catalog is another DeBL version's (the next load replaces it)."""
        try:
            with Catalog(self.config) as catalog:
                return catalog.loads.load()
        except CatalogVersionError:
            return None

    def current_load(self):
        """The load the namespace serves (None before any is up)."""
        with Catalog(self.config) as catalog:
            return catalog.loads.current()

    def ensure_dataset(self, timeout: float = 600.0, reset: bool = True) -> None:
        """An up load of the campaign's input with its hot files; with *reset*, nothing of it
        in HBase."""
        load = self.current_load() if self.latest_load() is not None else None
        want_source = str(self.input_dir)
        if not (load and load.hot_in_mysql and load.source == want_source
                and load.approach == "debl"):
            outcome = self.run(self.load_argv(), "setup-load", timeout)
            if not outcome.ok:
                raise RuntimeError(f"the campaign's setup load failed: {outcome.output[-2000:]}")
        if reset:
            self.reset_conversion()

    def ensure_half_converted(self) -> tuple[int, int]:
        """An up load whose lower buckets are loaded into HBase and whose upper ones are left
        to the raw route (marked pending again): a dataset gen_HF is half-way through, where a
        query may need MySQL, HBase or HDFS. Returns (loaded, raw) bucket counts."""
        self.ensure_dataset(reset=False)
        load = self.current_load()
        with Catalog(self.config) as catalog:
            buckets = catalog.index.buckets(load.load_id)
        lower, upper = buckets[:len(buckets) // 2], buckets[len(buckets) // 2:]
        with HBaseStore(self.config, load.namespace.hbase_table) as hbase:
            converted = hbase.table_exists() and all(b.state == JobState.LOADED for b in lower)
        if not converted:
            self.reset_conversion()
            outcome = self.run(["gen-hf", "--until-complete"], "setup-gen-hf", 900.0)
            if not outcome.ok:
                raise RuntimeError(f"the campaign's setup gen-hf failed: "
                                   f"{outcome.output[-2000:]}")
        with Catalog(self.config) as catalog:
            catalog.jobs.set_job_state(load.load_id, [b.b_index for b in upper],
                                       JobState.PENDING)
        return len(lower), len(upper)

    def reset_conversion(self) -> None:
        """Undo gen_HF's work on the current load (every bucket pending, the HBase table and
        HFile directories gone): the state right after a load, without loading again."""
        load = self.current_load()
        with Catalog(self.config) as catalog:
            catalog.jobs.set_job_state(load.load_id, [b.b_index for b in
                                                      catalog.index.buckets(load.load_id)],
                                       JobState.PENDING)
        with HBaseStore(self.config, load.namespace.hbase_table) as hbase:
            hbase.drop_table()
        HdfsClient(self.config).delete(f"{load.namespace.hdfs_dir}/hfiles", recursive=True)

    # -- checks shared by every target

    def verify_and_compare(self, trial: Trial, hbase: bool, directory: Path | None = None,
                           hot_bytes: int | None = -1, source: bool = True) -> None:
        """``debl verify`` (without re-reading the source if not *source*), then the stores
        and answers against the reference."""
        outcome = self.run(["verify"] + ([] if source else ["--no-source"]), "verify", 300.0)
        trial.steps.append(Step.of(outcome))
        trial.verify_ok = outcome.ok
        if not outcome.ok:
            trial.verify_failures = [line for line in outcome.output.splitlines()
                                     if line.startswith("MISMATCH") or line.startswith("Error")]
        ref = self.reference(directory, hot_bytes)
        checks = [check_mysql(self.config, ref), check_hdfs(self.config, ref)]
        if hbase:
            if all_loaded(self.config):
                checks.append(check_hbase(self.config, ref))
            else:
                trial.problems.append("not every bucket was loaded into HBase")
        for c in checks:
            trial.lost += c.lost
            trial.doubled += c.doubled
            trial.examples += c.examples
        trial.left_unread = checks[1].unread_leftovers
        answers = check_answers(self.config, ref, self.answer_sample, trial.seed)
        trial.answers = answers.asked
        trial.wrong_answers = answers.wrong + answers.errors
        trial.examples += answers.examples
