"""``debl bench``: one experiment, every approach on the same input, load then query phase.

For one ``BenchSpec`` (reproducible from it alone):

1. the input: ``debl generate`` of the spec into ``data_dir``, reused when it already holds that
   exact spec (``inputs``);
2. the source: the input served over HTTP on loopback at ``source_rate`` MB/s for the whole
   experiment (``experiment``);
3. for each approach in turn: empty the stores of the namespace; load up to the approach's
   uptime; from its uptime the query phase, the same LinkBench requests for every approach
   (with ``queries_from`` "load", for the DeBL approaches, from their load's start);
   for the DeBL approaches gen_HF as a subprocess to full availability (``approach``,
   ``gen_hf_process``);
4. results under ``<state_dir>/bench/<bench_id>/`` (``results``), which ``debl report`` reads.

The package, by role:

- ``spec``: ``BenchSpec``: what one experiment is, and the command line that repeats it
- ``inputs``: the generated input, its size model, and each approach's load options (hot share,
  chunk size, bucket target)
- ``approach``: one approach: reset the stores, load, query phase, full availability
- ``gen_hf_process``: ``debl gen-hf --until-complete`` as a restarted subprocess
- ``results``: ``ApproachRun`` and the bench's files; ``BenchProgress``, the progress callbacks
- ``experiment``: ``run_bench``: the source server, Spark once, every approach in turn
- ``answers``: the answers since each load started: the first one, the share by a plain copy's end,
  the curve and its plot
- ``tail``: each approach's slowest 1% by route and by cause: ``<approach>.tail.json``, and its rows
  in the report
- ``baselines``: the approaches of the comparison: how each one loads, up to its uptime (DeBL's own
  load is ``loaders.load.load_debl``)
- ``source_server``: ``debl source serve``: the experiment's HTTP source, a directory on loopback
  with a bandwidth cap
- ``manifest_cache``: the manifests the source server lists: the directory's ``index.json``'s, or
  computed and cached under the state directory

No SQL here: what the bench reads of a load comes from ``debl.catalog``, and emptying the stores
goes through the stores' own methods. The names below are the package's public interface.
"""

from debl.bench.approach import coordinator_config, query_client_spec, reset_stores
from debl.bench.experiment import run_bench
from debl.bench.inputs import (bucket_target_bytes, ensure_input, hot_bytes_for_share,
                               load_options, max_id_for_size)
from debl.bench.results import (ApproachRun, BenchProgress, BenchResult, bench_root, find_bench,
                                read_bench)
from debl.bench.spec import (DEFAULT_APPROACHES, DEFAULT_LAYOUT, DEFAULT_RECENCY_SHARE,
                             QUERIES_FROM, BenchSpec)

__all__ = ["ApproachRun", "BenchProgress", "BenchResult", "BenchSpec", "DEFAULT_APPROACHES",
           "DEFAULT_LAYOUT", "DEFAULT_RECENCY_SHARE", "QUERIES_FROM", "bench_root",
           "bucket_target_bytes", "coordinator_config", "ensure_input", "find_bench",
           "hot_bytes_for_share", "load_options", "max_id_for_size", "query_client_spec",
           "read_bench", "reset_stores", "run_bench"]
