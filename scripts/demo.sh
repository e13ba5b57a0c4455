#!/usr/bin/env bash
# The main job, end to end on the local stack: set up, start the stack, then one small bench.
# Five approaches (fileCopy, bulkLoad-mysql, bulkLoad-hbase, the paper's DeBL with hot files in
# MySQL and buffering, and DeBL as it ships, with the raw route: debl-raw) load the same generated
# LinkBench input (~200 MB) from a local HTTP source;
# the input is the paper's setting: a table dump by id1 range, the newest ids in the newest
# files, and 90% of the queries' id1s follow recency (docs/WORKLOAD.md). From each approach's
# uptime the same queries run against it (DeBL: its gen_HF converts the buckets meanwhile, those
# the waiting queries need first; debl-raw answers a query on an unconverted bucket from the
# bucket's HDFS files at once). The report (phase table, latencies, service from uptime, the
# ratios of docs/DESIGN.md section 11, a throughput-over-time plot) is written at the end and its path
# printed. About 2 minutes on 2 cores once set up.
#
# Knobs (environment): DEMO_SIZE (default 200MB), DEMO_RATE (source MB/s; default uncapped,
# 12.5 is the paper's 100 Mbit/s), DEMO_APPROACHES (comma-separated; add batchPut-hbase,
# debl-cold and debl-fifo for the whole comparison: batchPut alone takes several times longer), DEMO_LAYOUT
# (ranges; days: a daily change log over all ids, where every id1 has cold rows).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source .venv/bin/activate
debl stack up

# A namespace of its own: every approach empties the stores of its namespace before it loads.
export DEBL_MYSQL_DATABASE=${DEBL_MYSQL_DATABASE:-debl_demo}
export DEBL_MYSQL_LINK_TABLE=${DEBL_MYSQL_LINK_TABLE:-demo_links}
export DEBL_HBASE_TABLE=${DEBL_HBASE_TABLE:-demo_links}
export DEBL_HDFS_ROOT=${DEBL_HDFS_ROOT:-/debl-demo}

args=(--size "${DEMO_SIZE:-200MB}" --layout "${DEMO_LAYOUT:-ranges}" --threads 16 --requests 2000
      --approaches "${DEMO_APPROACHES:-fileCopy,bulkLoad-mysql,bulkLoad-hbase,debl,debl-raw}")
[ -n "${DEMO_RATE:-}" ] && args+=(--source-rate "$DEMO_RATE")
debl bench "${args[@]}"   # the input is generated once under .debl/bench/inputs and reused

