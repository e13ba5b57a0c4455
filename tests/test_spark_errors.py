"""What a failed call into Spark's JVM tells the user (loaders.jobs, the door to the JVM): the
error is chosen by the Java exceptions' classes, never by their text. Pure unit tests of the
wording (``service_error`` over a chain of Java exceptions as ``call`` reads it), then the door
with Spark's real JVM: a Java exception's chain read through py4j."""

from __future__ import annotations

import pytest

from debl.format.bucket_map import BucketMap
from debl.errors import ServiceError
from loaders import jobs
from loaders.jobs import JavaError, JavaFailure, service_error

SPARK = ("org.apache.spark.SparkException", "java.lang.Exception")
JOB_ABORTED = JavaError(SPARK, "org.apache.spark.SparkException: Job aborted due to stage failure: "
                        "Task 0 in stage 3.0 failed 1 times, most recent failure: Lost task 0.0 in "
                        "stage 3.0 (TID 3) (127.0.0.1 executor driver): ...\n\tat ...")
UDF_FAILED = JavaError(SPARK, "org.apache.spark.SparkException: [FAILED_EXECUTE_UDF] Failed to "
                       "execute user defined function (`debl_dist_ch`)")
IO = ("java.io.IOException", "java.lang.Exception")


def _error(*chain: JavaError, stopped: bool = False) -> str:
    return str(service_error("dist_ch", JavaFailure(chain, stopped)))


@pytest.mark.parametrize("chain, stopped", [
    # what the uncapped 4 GiB load met: the driver's context shut down after a task's OOM
    ((JavaError(SPARK, "org.apache.spark.SparkException: Job 5 cancelled because SparkContext "
                "was shut down"),), True),
    ((JOB_ABORTED, JavaError(("java.lang.OutOfMemoryError", "java.lang.VirtualMachineError",
                              "java.lang.Error"), "java.lang.OutOfMemoryError: Java heap space")),
     False),
])
def test_a_task_out_of_heap_names_the_heap_settings(chain, stopped):
    message = _error(*chain, stopped=stopped)
    assert message.startswith(f"dist_ch failed: {chain[-1].text}")
    assert "spark.driver_memory" in message and "spark.executor_memory" in message


def test_another_java_error_is_its_innermost_cause_without_a_hint():
    missing = JavaError(("java.io.FileNotFoundException",) + IO,
                        "java.io.FileNotFoundException: /x/chunk-00001\n\tat somewhere")
    assert _error(JOB_ABORTED, UDF_FAILED, missing) == \
        "dist_ch failed: java.io.FileNotFoundException: /x/chunk-00001"


@pytest.mark.parametrize("cause", [
    JavaError(("java.net.ConnectException", "java.net.SocketException") + IO,
              "java.net.ConnectException: Connection refused"),
    # no word of the old text signs in it: only its class tells
    JavaError(("java.net.NoRouteToHostException", "java.net.SocketException") + IO,
              "java.net.NoRouteToHostException: No route to host"),
    # a subclass the list does not name: its superclass is what counts
    JavaError(("org.apache.hadoop.net.ConnectTimeoutException", "java.net.SocketTimeoutException",
               "java.io.InterruptedIOException") + IO,
              "org.apache.hadoop.net.ConnectTimeoutException: 20000 millis"),
    JavaError(("org.apache.hadoop.hdfs.BlockMissingException",) + IO,
              "org.apache.hadoop.hdfs.BlockMissingException: Could not obtain block: BP-1 file=/x"),
    JavaError(("org.apache.hadoop.ipc.RemoteException",) + IO,
              "org.apache.hadoop.ipc.RemoteException(java.io.IOException): File /x._COPYING_ "
              "could only be written to 0 of the 1 minReplication nodes. There are 0 datanode(s)",
              server_class="java.io.IOException"),
])
def test_a_service_that_does_not_answer_is_known_by_its_class(cause):
    message = _error(JOB_ABORTED, UDF_FAILED, cause)
    assert message.startswith(f"dist_ch failed: {cause.text}")
    assert message.endswith("(a service does not answer: is the stack up? `debl stack status`)")


@pytest.mark.parametrize("text", [
    "java.io.FileNotFoundException: File /in/timed out/links.tsv does not exist",
    "java.io.IOException: /b/chunk-00001.0 line 3 is not a bucket line (SocketTimeoutException "
    "in data): the bucket files were not written by this version of dist_ch",
])
def test_words_in_a_message_are_not_a_service_down(text):
    """A message that happens to hold a network error's words names no service that is down:
    grepping the text added the stack hint to these."""
    assert _error(JOB_ABORTED, JavaError(IO, text)) == f"dist_ch failed: {text}"


def test_a_lost_task_without_an_exception_is_worded_without_the_job_abort():
    lost = JavaError(SPARK, "org.apache.spark.SparkException: Job aborted due to stage failure: "
                     "Task 1 in stage 2.0 failed 4 times, most recent failure: Lost task 1.3 in "
                     "stage 2.0 (TID 9) (127.0.0.1 executor 1): ExecutorLostFailure (executor 1 "
                     "exited caused by one of the running tasks) Reason: Command exited with code "
                     "52\nDriver stacktrace:")
    assert _error(lost) == ("dist_ch failed: ExecutorLostFailure (executor 1 exited caused by one "
                            "of the running tasks) Reason: Command exited with code 52")


# ---------------------------------------------------------------- through the real JVM


def test_a_chunk_that_is_gone_fails_naming_it(spark, tmp_path):
    """A task's exception, read through py4j behind Spark's job abort and the SQL function's
    wrapping: its innermost cause, its class first."""
    request = jobs.DistChRequest(f"file://{tmp_path}/chunk-00004", ((0, 0),), ((0, 1, 5, 0, 0, 0),),
                                 BucketMap.fixed(10), f"file://{tmp_path}/buckets", 4, 1000)
    with pytest.raises(ServiceError) as caught:
        jobs.dist_ch(spark, request)
    assert str(caught.value) == (f"dist_ch failed: java.io.FileNotFoundException: File "
                                 f"file:{tmp_path}/chunk-00004 does not exist")


def test_a_refused_argument_fails_with_the_jvm_s_reason(spark, tmp_path):
    """An argument the driver's JVM refuses (here: HBase's TableName a name; PySpark turns the
    IllegalArgumentException into its own before the door sees it) comes back as its message."""
    with pytest.raises(ServiceError, match=r"^HBase bulk load failed: Illegal character code:32,"
                                           r" .*: no such table$"):
        jobs.bulk_load(spark, "no such table", (tmp_path / "none").as_uri(), {})
