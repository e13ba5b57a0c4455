#!/usr/bin/env bash
# Build .debl/lib/debl-jobs.jar: DeBL's JVM side for Spark (dist_ch's and gen_HF's per-row
# tasks, pre-split table creation, the bulk-load entry point).
#
# Compiles loaders/jvm/src/main/java against PySpark's jars and .debl/lib/spark/*.jar (the
# Maven-resolved hbase-shaded-mapreduce; run scripts/setup.sh first). Idempotent: does nothing
# when the jar is newer than every source and this script; --force rebuilds.
#
# Environment: PYTHON (the interpreter whose pyspark to compile against; default python3),
# DEBL_STATE_DIR (default .debl, relative to the repository root).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
state="${DEBL_STATE_DIR:-$root/.debl}"
src="$root/loaders/jvm/src/main/java"
jar="$state/lib/debl-jobs.jar"
python="${PYTHON:-python3}"

if [[ "${1:-}" != "--force" && -f "$jar" ]]; then
  newer="$(find "$src" "${BASH_SOURCE[0]}" -newer "$jar" -type f | head -n 1)"
  if [[ -z "$newer" ]]; then
    echo "up to date: $jar"
    exit 0
  fi
fi

spark_jars="$("$python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
if ! compgen -G "$state/lib/spark/*.jar" >/dev/null; then
  echo "error: no jars in $state/lib/spark: run scripts/setup.sh first" >&2
  exit 1
fi

build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT
mapfile -t sources < <(find "$src" -name '*.java' | sort)
# -Xlint:none: the jars' manifests and annotations (findbugs, absent) only make noise.
javac --release 17 -Xlint:none -nowarn \
  -cp "$spark_jars/*:$state/lib/spark/*" -d "$build/classes" "${sources[@]}"
mkdir -p "$(dirname "$jar")"
# Write to a temporary name and rename, so a concurrent reader never sees a half-written jar.
jar --create --file "$build/debl-jobs.jar" -C "$build/classes" .
mv -f "$build/debl-jobs.jar" "$jar"
echo "built: $jar"
