#!/usr/bin/env bash
# The main job, end to end on the local stack: set up, start the stack, generate a small LinkBench
# data set, load it (hot files into MySQL, cold into HDFS buckets), then query it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source .venv/bin/activate
debl stack up
data=.debl/demo/input
[ -d "$data" ] || debl generate "$data" --max-id 200001 --files 10 --days 10 --seed 1
debl load "$data" --hot-bytes 20MB --chunk-size 32MiB
