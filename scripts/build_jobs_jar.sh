#!/usr/bin/env bash
# Build .debl/lib/debl-jobs.jar, DeBL's JVM tasks (dist_ch's and gen_HF's per-row work, pre-split
# table creation, the bulk load), from loaders/jvm with Maven (loaders/jvm/pom.xml).
#
# A thin wrapper over `mvn -o -q package`: the jar is built in loaders/jvm/target and moved into
# place under a temporary name first, so a running Spark JVM never sees a half-written jar.
# Idempotent: does nothing when the pom and the sources are those of the last build (a stamp
# next to the jar); --force rebuilds. Offline by default (rerun it after a Java change);
# --online lets Maven fetch what ~/.m2 lacks (scripts/setup.sh on a fresh machine).
#
# Environment: DEBL_STATE_DIR (default .debl, relative to the repository root).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
state="${DEBL_STATE_DIR:-$root/.debl}"
jvm="$root/loaders/jvm"
jar="$state/lib/debl-jobs.jar"
stamp="$state/lib/.debl-jobs.stamp"
offline=-o force=""
for arg in "$@"; do
  case "$arg" in
    --online) offline="" ;;
    --force) force=1 ;;
    *) echo "usage: $0 [--online] [--force]" >&2; exit 2 ;;
  esac
done

want="$(cd "$jvm" && find pom.xml src -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1)"
if [[ -z "$force" && -f "$jar" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  echo "up to date: $jar"
  exit 0
fi

mvn -q -B $offline -Dstyle.color=never -f "$jvm/pom.xml" package
mkdir -p "$(dirname "$jar")"
cp "$jvm/target/debl-jobs.jar" "$jar.tmp"
mv -f "$jar.tmp" "$jar"
echo "$want" > "$stamp"
echo "built: $jar"
