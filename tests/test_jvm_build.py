"""The JVM tasks' build (loaders/jvm/pom.xml) compiles against what runs them: the installed
pyspark's own jars and the HBase jars scripts/maven/spark/pom.xml resolves (docs/RUNTIME.md).
Every dependency is ``provided``: the jar carries DeBL's classes only. Pure unit tests: they read
the poms and pyspark's jar directory, Maven is not run."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pyspark
import pytest

ROOT = Path(__file__).resolve().parents[1]
NS = {"m": "http://maven.apache.org/POM/4.0.0"}
PYSPARK_JARS = Path(pyspark.__file__).parent / "jars"


def _pom(path: Path) -> ET.Element:
    return ET.parse(path).getroot()


def _properties(pom: ET.Element) -> dict[str, str]:
    return {child.tag.split("}")[1]: child.text or ""
            for child in pom.find("m:properties", NS) or ()}


def _dependencies(pom: ET.Element) -> list[dict[str, str | None]]:
    props = _properties(pom) if pom.find("m:properties", NS) is not None else {}

    def resolve(text: str | None) -> str | None:
        for key, value in props.items():
            text = text.replace("${%s}" % key, value) if text else text
        return text

    return [{field: resolve(dep.findtext(f"m:{field}", None, NS))
             for field in ("groupId", "artifactId", "version", "scope")}
            for dep in pom.find("m:dependencies", NS) or ()]


JOBS = _pom(ROOT / "loaders/jvm/pom.xml")
DEPS = {d["artifactId"]: d for d in _dependencies(JOBS)}


def test_every_dependency_is_provided():
    assert DEPS and {d["scope"] for d in DEPS.values()} == {"provided"}


def test_spark_is_the_installed_pyspark():
    assert DEPS["spark-core_2.12"]["version"] == pyspark.__version__
    assert DEPS["spark-common-utils_2.12"]["version"] == pyspark.__version__
    assert (PYSPARK_JARS / f"spark-core_2.12-{pyspark.__version__}.jar").is_file()


@pytest.mark.parametrize("artifact", ["scala-library", "hadoop-client-api", "jackson-databind",
                                      "log4j-core"])
def test_the_other_jvm_libraries_are_those_pyspark_ships(artifact):
    version = DEPS[artifact]["version"]
    assert (PYSPARK_JARS / f"{artifact}-{version}.jar").is_file(), \
        sorted(p.name for p in PYSPARK_JARS.glob(f"{artifact}-*.jar"))


def test_hbase_is_what_the_spark_runtime_resolves():
    runtime = {d["artifactId"]: d
               for d in _dependencies(_pom(ROOT / "scripts/maven/spark/pom.xml"))}
    assert DEPS["hbase-shaded-mapreduce"]["version"] == runtime["hbase-shaded-mapreduce"]["version"]


def test_the_jar_is_named_as_the_spark_session_expects():
    """debl/spark/session.py puts ``<lib_dir>/debl-jobs.jar`` on the classpath; the build names it
    so and scripts/build_jobs_jar.sh moves it there."""
    assert JOBS.findtext("m:build/m:finalName", None, NS) == "debl-jobs"
    script = (ROOT / "scripts/build_jobs_jar.sh").read_text()
    assert 'jar="$state/lib/debl-jobs.jar"' in script and "loaders/jvm" in script
    assert (ROOT / "loaders/jvm/src/main/java/debl/jobs/DistCh.java").is_file()
