"""``debl load``: the offline phase, from a source to uptime, and on to MySQL's take-over of the
hot keys (docs/LOADING.md).

1. List the source, split the files into hot and cold (``loaders.split``); record the load in a
   namespace of its own (``debl.namespace``): nothing of the current load changes, it keeps
   serving until this one is up.
2. Decide the bucket map (``debl.format.bucket_map``): a fixed width if configured, else split
   points from a sample of the cold files (``loaders.sampling``), beside the copy and Spark's
   start: only dist_ch needs the map. Recorded with the load; a resumed load keeps it.
3. The copy pipeline (``loaders.pipeline``): the hot files, then the cold ones, copied into HDFS
   chunk by chunk and bucketed by dist_ch, the hot chunks into the load's hot buckets. MySQL's
   hot path reads them back from HDFS (``loaders.hot_phase``, a thread), from the uptime on by
   default (``loading.hot_path_start``).
4. **Uptime** when every chunk is bucketed: every key is answerable exactly, the hot keys from
   the hot buckets by the merge rule. The load becomes the current one in one transaction
   (``catalog.loads.make_current``); every coordinator moves to it at its next poll.
5. The hot path goes on; when MySQL has merged and indexed the hot rows it takes the hot keys
   over (one transaction), the hot bucket files go once no coordinator reads them, and the
   stores of loads nobody serves any more are dropped (``loaders.cleanup``).

With ``wait_for_hot`` (``--wait-for-hot``: the paper's uptime, and bulkLoad-mysql) the hot files
stream from the source into MySQL alone, and the load is up only once MySQL has them.

``run_load`` does it all; ``LoadRun`` returns at uptime (``wait_up``) and finishes later
(``finish``), which is how the bench starts its query phase at uptime. Every phase's start and
end goes to ``debl_phases``. The run, its stages (``Stage``: LISTED to HOT_TAKEN_OVER) and the
one place MySQL's hot path starts are ``loaders.load_run``; the records its steps share (what
the load is, its open ends, the running copy's parts) are ``loaders.load_context``.

Concurrency and resume (docs/RELIABILITY.md, "Concurrency"):

- One load per dataset at a time: a load (new or resumed) holds the MySQL named lock
  ``debl_load.<database>`` until it finishes; a second one is refused with LoadStateError.
  The lock lives on a session the server may close (a restart): the load checks that it still
  holds it before each chunk's copy and dist_ch and before it becomes current, and stops with
  LoadStateError (resumable) once it does not, since a second load may be running then (issue
  38.5; ``make_current`` refuses a superseded or dropped load anyway); a load that is up leaves
  its end's cleanup to a later one.
- A killed or failed load leaves the current day serving; ``resume=LOAD_ID`` continues it
  (``loaders.resume``: only the newest load; chunks bucketed are skipped; a hot path that had
  not handed its keys to MySQL is redone, after uptime too).
"""

from __future__ import annotations

from dataclasses import replace

from debl.catalog import Catalog
from debl.config import Config
from debl.errors import ConfigError, LoadStateError
from loaders.load_context import (DEBL_APPROACHES, LoadOptions, LoadProgress, LoadSummary,
                                  new_load_id, phase_sums, reject_path)
from loaders.load_run import LOAD_LOCK, LoadRun, load_lock
from loaders.source import open_source

# What the commands, the bench and the tests import from here (the records live in
# loaders.load_context, the run in loaders.load_run).
__all__ = ["DEBL_APPROACHES", "LOAD_LOCK", "LoadOptions", "LoadProgress", "LoadRun",
           "LoadSummary", "check_resume_approach", "load_debl", "load_lock", "new_load_id",
           "phase_sums", "reject_path", "run_load", "with_default_hot_share"]

DEFAULT_HOT_SHARE = 0.2  # the paper's "2g mysql" of a 10 GB input


def load_debl(config: Config, source_spec: str, options: LoadOptions = LoadOptions(),
              resume: str | None = None, progress: LoadProgress = LoadProgress()) -> LoadSummary:
    """``debl load``: DeBL's own load (``options.approach`` ``debl`` or ``debl-cold``), by
    ``run_load``. For ``debl`` with no hot split given, the newest ``DEFAULT_HOT_SHARE`` of the
    bytes are hot; ``debl-cold`` has no hot file.

    Raises ConfigError for another approach (the baselines are ``debl.bench.baselines``) or a
    hot split given to ``debl-cold``; LoadStateError for a resume of no load or of a load of
    another approach."""
    if options.approach not in DEBL_APPROACHES:
        raise ConfigError(f"approach {options.approach!r} is not DeBL's own load "
                          f"({', '.join(DEBL_APPROACHES)}): the baselines run through "
                          "debl.bench.baselines.run_approach")
    check_resume_approach(config, resume, options.approach)
    if options.approach == "debl-cold":
        if options.hot_bytes is not None or options.hot_since is not None:
            raise ConfigError("approach debl-cold: every file is cold; drop "
                              "--hot-bytes/--hot-since")
    else:
        options = with_default_hot_share(config, source_spec, options, resume)
    return run_load(config, source_spec, options, resume, progress)


def with_default_hot_share(config: Config, source_spec: str, options: LoadOptions,
                           resume: str | None) -> LoadOptions:
    """*options* with the newest ``DEFAULT_HOT_SHARE`` of the source's bytes hot when they give
    no hot split (a resumed load keeps its own split: unchanged). Lists the source."""
    if options.hot_bytes is not None or options.hot_since is not None or resume:
        return options
    total = sum(f.size for f in open_source(source_spec, config).list())
    return replace(options, hot_bytes=int(total * DEFAULT_HOT_SHARE))


def check_resume_approach(config: Config, resume: str | None, approach: str) -> None:
    """Raise LoadStateError unless *resume* is None or a load of *approach* in the catalog."""
    if not resume:
        return
    with Catalog(config) as catalog:
        row = catalog.loads.load(resume)
    if row is None:
        raise LoadStateError(f"no load {resume!r}; `debl status` lists the latest load")
    if row.approach != approach:
        raise LoadStateError(f"load {resume} is a {row.approach} load: resume it with "
                             f"--approach {row.approach}")


def run_load(config: Config, source_spec: str, options: LoadOptions = LoadOptions(),
             resume: str | None = None, progress: LoadProgress = LoadProgress()) -> LoadSummary:
    """Run (or resume) the offline phase to its end: uptime, then MySQL's take-over of the hot
    keys. Raises LoadStateError while another load of the dataset runs."""
    with LoadRun(config, source_spec, options, resume, progress) as run:
        run.wait_up()
        return run.finish()
