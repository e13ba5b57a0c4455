"""What a failed call into Spark's JVM tells the user (debl.spark.call_jvm): pure unit tests, no
JVM is started (no SparkContext: the JVM cannot be the one that is gone)."""

from __future__ import annotations

import pytest

from debl.errors import ServiceError
from debl.spark import call_jvm


def _raising(text: str):
    def call():
        raise RuntimeError(text)
    return call


@pytest.mark.parametrize("java", [
    # what the uncapped 4 GiB load met: the driver's context shut down after a task's OOM
    "org.apache.spark.SparkException: Job 5 cancelled because SparkContext was shut down",
    "java.lang.OutOfMemoryError: Java heap space",
])
def test_a_task_out_of_heap_names_the_heap_settings(java):
    with pytest.raises(ServiceError) as caught:
        call_jvm("dist_ch", _raising(f"An error occurred while calling o42.bucket.\n: {java}\n"
                                     "\tat org.apache.spark.SparkContext.runJob"))
    message = str(caught.value)
    assert message.startswith(f"dist_ch failed: {java}")
    assert "spark_driver_memory" in message and "spark_executor_memory" in message


def test_another_java_error_gets_no_heap_hint():
    with pytest.raises(ServiceError) as caught:
        call_jvm("dist_ch", _raising("An error occurred while calling o42.bucket.\n"
                                     ": java.io.FileNotFoundException: /x/chunk-00001"))
    assert str(caught.value) == "dist_ch failed: java.io.FileNotFoundException: /x/chunk-00001"
