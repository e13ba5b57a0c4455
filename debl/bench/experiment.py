"""``run_bench``: one experiment, every approach on the same input, load then query phase.

For one ``BenchSpec``: the input (``debl.bench.inputs``); the source, that input served over
HTTP on loopback (``debl.bench.source_server``) at ``source_rate`` MB/s for the whole experiment
(12.5 = the paper's 100 Mbit/s; None: uncapped); each approach in turn (``debl.bench.approach``);
the results under ``<state_dir>/bench/<bench_id>/`` (``debl.bench.results``), ``bench.json``
first written when the experiment starts and rewritten with its end, state and the answers
since each load started (``debl.bench.answers``).

Pitfall: Spark is started once, before the first approach that needs it, so that no approach
pays the JVM start inside its load (as with a running cluster).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from debl.bench.answers import answers_summary
from debl.bench.approach import reset_stores, run_one
from debl.bench.baselines import APPROACHES
from debl.bench.inputs import effective_chunk_size, ensure_input, load_options
from debl.bench.results import (BENCH_FILE, BenchProgress, BenchResult, bench_root,
                                code_version, machine, new_bench_id, write_json)
from debl.bench.source_server import make_server, manifest_cache_dir
from debl.bench.spec import BenchSpec
from debl.config import Config
from debl.errors import ConfigError
from debl.spark.session import spark_session
from loaders.source import LocalSource


def run_bench(config: Config, spec: BenchSpec, progress: BenchProgress = BenchProgress(),
              bench_id: str | None = None, directory: Path | None = None) -> BenchResult:
    """Run the experiment of *spec* in *config*'s namespace; see the module docstring.

    Results go to *directory* (default ``<state_dir>/bench/<bench_id>``), which must not exist.
    """
    t0 = time.time()
    bench_id = bench_id or new_bench_id()
    directory = Path(directory) if directory else bench_root(config) / bench_id
    directory.mkdir(parents=True, exist_ok=False)
    input_bytes, input_files = ensure_input(spec.input, spec.data_dir, progress)
    chunk_size = effective_chunk_size(config, spec, input_bytes)
    listed = LocalSource(spec.data_dir).list()
    plans = {name: load_options(spec, name, listed, chunk_size) for name in spec.approaches}
    meta = {"bench_id": bench_id, "spec": spec.to_dict(), "command": spec.command_line()
            if _cli_expressible(spec) else None,
            "namespace": {"mysql_database": config.mysql.database,
                          "hbase_table": config.hbase.table, "link_table": config.mysql.link_table,
                          "hdfs_root": config.hdfs.root},
            "machine": machine(), "code": code_version(),
            "spark": {"master": config.spark.url, "workers": config.spark.workers,
                      "cores_max": config.spark.app_cores},
            "input": {"bytes": input_bytes, "files": input_files},
            "effective": {"chunk_size": chunk_size, "bucket_width": spec.bucket_width,
                          "buckets": None if spec.bucket_width else spec.buckets,
                          "hot_bytes": {n: o.hot_bytes for n, (o, _) in plans.items()
                                        if o.hot_bytes is not None},
                          "bucket_target_bytes": {n: t for n, (_, t) in plans.items()
                                                  if t is not None}},
            "started": t0, "ended": None, "state": "running"}
    write_json(directory / BENCH_FILE, meta)

    server = make_server(spec.data_dir, port=0, rate_mb_s=spec.source_rate,
                         manifest_cache=manifest_cache_dir(config), progress=progress.message)
    serving = threading.Thread(target=server.serve_forever, name="bench-source", daemon=True)
    serving.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    runs = []
    try:
        if any(APPROACHES[a].uses_spark for a in spec.approaches):
            progress.message("starting Spark (once, before the first load)")
            spark_session(config, "debl-bench")
        for index, name in enumerate(spec.approaches):
            progress.approach(name, index, len(spec.approaches))
            progress.phase(name, "reset")
            reset_stores(config)
            run = run_one(config, spec, name, url, input_bytes, plans[name], directory,
                           progress)
            runs.append(run)
            progress.finished(run, config)
        meta["state"] = "done"
    except BaseException as exc:
        meta["state"] = "failed"
        meta["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        raise
    finally:
        server.shutdown()
        server.server_close()
        meta["answers"] = answers_summary(runs, input_bytes, spec.source_rate, spec.requests)
        meta["ended"] = time.time()
        write_json(directory / BENCH_FILE, meta)
    return BenchResult(bench_id, directory, spec, tuple(runs), input_bytes, input_files,
                       time.time() - t0)


def _cli_expressible(spec: BenchSpec) -> bool:
    try:
        spec.command_line()
        return True
    except ConfigError:
        return False
