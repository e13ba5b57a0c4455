"""The jars a Spark application starts with: a jar built from other JVM sources than the
checkout's is refused with the step that fixes it, before Spark fails on a missing class."""

from __future__ import annotations

import subprocess

import pytest

from debl.config import Config
from debl.errors import ConfigError
from debl.spark.session import JVM_SOURCES, jvm_sources_digest, spark_jars


@pytest.fixture
def lib(tmp_path):
    lib = tmp_path / "lib"
    (lib / "spark").mkdir(parents=True)
    (lib / "spark" / "hbase.jar").write_bytes(b"jar")
    (lib / "debl-jobs.jar").write_bytes(b"jar")
    return lib


def test_the_digest_is_the_build_script_s():
    """scripts/build_jobs_jar.sh stamps the jar with sha256sum's lines, hashed again."""
    script = ("find pom.xml src -type f | LC_ALL=C sort | xargs sha256sum | sha256sum "
              "| cut -d' ' -f1")
    want = subprocess.run(["bash", "-c", script], cwd=JVM_SOURCES, check=True,
                          capture_output=True, text=True).stdout.strip()
    assert jvm_sources_digest() == want


def test_a_jar_of_other_sources_is_refused_with_the_build_step(lib):
    (lib / ".debl-jobs.stamp").write_text("0" * 64 + "\n")
    with pytest.raises(ConfigError, match="build_jobs_jar.sh"):
        spark_jars(Config(state_dir=lib.parent))


def test_a_jar_of_these_sources_is_used(lib):
    (lib / ".debl-jobs.stamp").write_text(jvm_sources_digest() + "\n")
    assert spark_jars(Config(state_dir=lib.parent))[-1] == lib / "debl-jobs.jar"
