#!/usr/bin/env bash
# Set up DeBL on a fresh Debian machine, idempotently:
#   - Debian packages: MariaDB server and client; a JDK 17 and Maven only if missing; what pip
#     needs to build mysqlclient (the link store's read path: libmariadb headers, pkg-config, gcc);
#     Chromium and its driver, with a font, for the tests of `debl ui`'s page in a real browser
#     (tests/test_ui_page.py: a test tool's own browser download cannot work offline);
#   - a virtualenv (.venv) with DeBL installed in editable mode, with the dev extra;
#   - the HBase/Hadoop runtime (scripts/maven/stack/pom.xml) and the Spark-side HBase jars
#     (scripts/maven/spark/pom.xml) resolved from Maven Central into ~/.m2 and copied to .debl/lib;
#   - DeBL's own JVM tasks (dist_ch's and gen_HF's per-row work, loaders/jvm) built by Maven
#     (loaders/jvm/pom.xml, scripts/build_jobs_jar.sh) into .debl/lib/debl-jobs.jar.
# A second run only checks stamps and finishes in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
lib=$root/.debl/lib
mkdir -p "$lib"
log() { printf '[setup] %s\n' "$*"; }
stamp_ok() { [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; }

# --- Debian packages -------------------------------------------------------------------------
need=()
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || need+=(mariadb-server mariadb-client)
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)
command -v javac >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || need+=(maven)
pkg-config --exists libmariadb 2>/dev/null || need+=(libmariadb-dev pkg-config)
command -v gcc >/dev/null 2>&1 || need+=(gcc)
py_include=$("${PYTHON:-python3}" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
[ -f "$py_include/Python.h" ] || need+=(python3-dev)
[ -x /usr/bin/chromium ] || need+=(chromium)
[ -x /usr/bin/chromedriver ] || need+=(chromium-driver)
fc-list 2>/dev/null | grep -q . || need+=(fonts-dejavu-core)
if [ ${#need[@]} -gt 0 ]; then
  log "installing Debian packages: ${need[*]}"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  # The package's own service must not start: DeBL runs MariaDB with its own data directory.
  DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 $sudo apt-get install -y -qq --no-install-recommends \
    "${need[@]}" >/dev/null
fi

# --- Python ----------------------------------------------------------------------------------
py=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  log "creating .venv"
  "$py" -m venv .venv
fi
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if ! stamp_ok .venv/.debl-installed "$want"; then
  log "installing DeBL and its dependencies into .venv"
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e '.[dev]'
  echo "$want" > .venv/.debl-installed
fi

# --- Maven artifacts -------------------------------------------------------------------------
for part in stack spark; do
  pom=scripts/maven/$part/pom.xml
  want=$(sha256sum "$pom" | cut -d' ' -f1)
  if ! stamp_ok "$lib/$part/.stamp" "$want"; then
    log "resolving the $part runtime from Maven Central (first time: a few minutes)"
    rm -rf "$lib/$part"
    mvn -q -B -f "$pom" dependency:copy-dependencies -DoutputDirectory="$lib/$part"
    echo "$want" > "$lib/$part/.stamp"
  fi
done

# --- Hadoop's protobuf descriptors (debl/hdfs/proto) -----------------------------------------
# DeBL's own Hadoop RPC calls (local block reads, the safe mode) build their messages from
# Hadoop's descriptors, taken from the stack's Hadoop jars: they ship no .proto files, but their
# generated classes carry the compiled descriptors (docs/RUNTIME.md, "HDFS from Python").
proto=debl/hdfs/proto
want=$(cat "$lib/stack/.stamp" scripts/HadoopDescriptors.java | sha256sum | cut -d' ' -f1)
if ! stamp_ok "$proto/.stamp" "$want"; then
  log "extracting Hadoop's protobuf descriptors from its jars"
  mkdir -p "$proto"
  java -cp "$lib/stack/*" scripts/HadoopDescriptors.java "$proto/hadoop.pb" \
    org.apache.hadoop.ipc.protobuf.RpcHeaderProtos \
    org.apache.hadoop.ipc.protobuf.IpcConnectionContextProtos \
    org.apache.hadoop.ipc.protobuf.ProtobufRpcEngine2Protos \
    org.apache.hadoop.hdfs.protocol.proto.ClientNamenodeProtocolProtos \
    org.apache.hadoop.hdfs.protocol.proto.ClientDatanodeProtocolProtos
  echo "$want" > "$proto/.stamp"
fi

# --- DeBL's JVM tasks (loaders/jvm) ----------------------------------------------------------
# Online: the first build fetches the few compile-time jars (provided scope) into ~/.m2.
bash scripts/build_jobs_jar.sh --online

log "ready: activate with 'source .venv/bin/activate', then 'debl stack up'"
