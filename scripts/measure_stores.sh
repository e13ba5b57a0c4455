#!/usr/bin/env bash
# The stores' read latency (docs/STORES.md, "Measured: get_link_list latency"): LinkBench
# get_link_list against MySQL and against HBase holding the same 10 million links, with 8 and
# with 50 client threads. Each store gets its own namespace (database / HBase table / HDFS
# root), so loading one does not reset the other.
#   MySQL: every file hot (the bulk path: LOAD DATA, merge, index)
#   HBase: every file cold, then gen_HF until every bucket is in (real HFiles, bulk load)
# Usage: scripts/measure_stores.sh [OUT_DIR] [REQUESTS]   (run from the repository, stack up)
set -euo pipefail
out=${1:-.debl/measure-stores}
requests=${2:-100000}
data=$out/links
max_id=2250001   # about 10 million links (LinkBench mean out-degree 4.1, two link types)
mkdir -p "$out"
[ -d "$data" ] || debl generate "$data" --max-id $max_id --files 10 --days 10 --seed 1 --json \
  > "$out/generate.json"

mysql_ns=(env DEBL_MYSQL_DATABASE=debl_m3 DEBL_MYSQL_LINK_TABLE=m3_links DEBL_HBASE_TABLE=m3_links
          DEBL_HDFS_ROOT=/debl-m3)
hbase_ns=(env DEBL_MYSQL_DATABASE=debl_h3 DEBL_MYSQL_LINK_TABLE=h3_links DEBL_HBASE_TABLE=h3_links
          DEBL_HDFS_ROOT=/debl-h3 DEBL_GEN_HF_RUN_BUCKETS=4)
"${mysql_ns[@]}" debl load "$data" --hot-bytes 100GB --json > "$out/load-mysql.json"
"${hbase_ns[@]}" debl load "$data" --no-hot --chunk-size 128MiB --json > "$out/load-hbase.json"
"${hbase_ns[@]}" debl gen-hf --until-complete > "$out/gen-hf.log" 2>&1

for threads in 8 50; do
  "${mysql_ns[@]}" debl query --target mysql --threads $threads --requests "$requests" \
    --max-id $max_id --out "$out/mysql-$threads.csv" --json > "$out/query-mysql-$threads.json"
  "${hbase_ns[@]}" debl query --target hbase --threads $threads --requests "$requests" \
    --max-id $max_id --out "$out/hbase-$threads.csv" --json > "$out/query-hbase-$threads.json"
done
echo "results in $out"
