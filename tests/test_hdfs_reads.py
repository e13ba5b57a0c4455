"""The raw route's HDFS reads over HDFS's own protocols (debl.hdfs_reads): exact bytes, errors
that name the file, and waits bounded by the timeout whatever the client library does (it has no
timeouts of its own). The thread mechanism alone is a pure unit test; the reads use the real
stack."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import pytest
from hdfs_native import Client, WriteOptions

from debl.config import Config
from debl.errors import ServiceError
from debl.hadoop_rpc import HadoopRPC
from debl.hdfs_reads import FileGone, HdfsTimeout, NativeHDFS
from debl.webhdfs import WebHDFS


def test_a_call_that_never_returns_is_an_error_naming_hdfs_within_the_timeout():
    hdfs = NativeHDFS(Config(), timeout=0.3, threads=2)
    release = threading.Event()
    try:
        started = time.monotonic()
        with pytest.raises(HdfsTimeout, match=r"HDFS at 127\.0\.0\.1:\d+ .*did not answer "
                                               r"within 0.3 s \(read /some/file\)"):
            hdfs.run([(release.wait, ())], "read /some/file")
        assert time.monotonic() - started < 2.0
        # The stuck thread does not stop the other one from serving.
        assert hdfs.run([(lambda: 7, ())], "x") == [7]
    finally:
        release.set()
        hdfs.close()


def test_calls_run_in_parallel_and_give_results_in_order_and_their_first_error():
    hdfs = NativeHDFS(Config(), timeout=5.0, threads=4)
    try:
        barrier = threading.Barrier(3, timeout=2.0)  # three calls must run at once to pass
        assert hdfs.run([(lambda i=i: (barrier.wait(), i)[1], ()) for i in range(3)], "x") == \
            [0, 1, 2]

        def fail() -> None:
            raise ServiceError("HDFS DataNode could not read /f")
        with pytest.raises(ServiceError, match="could not read /f"):
            hdfs.run([(lambda: 1, ()), (fail, ())], "x")
    finally:
        hdfs.close()


@pytest.mark.stack
@pytest.mark.parametrize("local_reads", [True, False])
def test_reads_give_the_files_bytes_and_errors_name_the_file(stack_config, local_reads):
    config = replace(stack_config, hdfs_root="/debl-hdfsreads", hdfs_local_reads=local_reads)
    fs = WebHDFS(config)
    path = f"{config.hdfs.root}/f.bin"
    content = bytes(range(256)) * 4096  # 1 MiB: several HDFS packets
    fs.write(path, content, overwrite=True)
    hdfs = NativeHDFS(config, timeout=30.0)
    try:
        f = hdfs.open(path)
        assert f.length == len(content)
        # The stack's DataNode is on this host and grants this user its block files.
        assert (f.local is not None) == local_reads
        assert hdfs.read_many([(f, 0, 10), (f, 65536 * 3 + 5, 70000), (f, len(content) - 1, 1)]) \
            == [content[:10], content[65536 * 3 + 5:65536 * 3 + 5 + 70000], content[-1:]]
        with pytest.raises(ServiceError, match=rf"{path} at {len(content) - 5} for 10 bytes: the "
                                               rf"file has {len(content)} bytes"):
            hdfs.read(f, len(content) - 5, 10)  # past the end: an error, never a panic
        with pytest.raises(FileGone, match=rf"{path}-missing does not exist"):
            hdfs.open(path + "-missing")
        directory = config.hdfs.root
        before, missing = hdfs.modified_ms([directory, directory + "/missing"])
        assert missing is None
        time.sleep(0.01)
        fs.rename(path, path + "-renamed")
        assert hdfs.modified_ms([directory])[0] > before  # a rename in it moves its time
    finally:
        hdfs.close()
        fs.delete(config.hdfs.root, recursive=True)


@pytest.mark.stack
def test_a_file_of_several_blocks_reads_locally_across_them_and_keeps_its_bytes(stack_config):
    """Local reads (debl.hdfs_local): a read that spans blocks is one answer; a file deleted
    after its opening gives the bytes it had (the listing is what tells it is gone)."""
    config = replace(stack_config, hdfs_root="/debl-hdfslocal")
    fs = WebHDFS(config)
    path = f"{config.hdfs.root}/blocks.bin"
    content = bytes(i % 251 for i in range(3 * 1024 * 1024 + 17))
    fs.mkdirs(config.hdfs.root)
    writer = Client(config.hdfs.uri).create(path, WriteOptions(block_size=1024 * 1024,
                                                               overwrite=True))
    writer.write(content)
    writer.close()
    hdfs = NativeHDFS(config, timeout=30.0)
    try:
        f = hdfs.open(path)
        assert f.local is not None and len(f.local._blocks) == 4
        at = 1024 * 1024 - 100
        assert hdfs.read(f, at, 2 * 1024 * 1024) == content[at:at + 2 * 1024 * 1024]
        fs.delete(path)
        assert hdfs.read(f, 5, 1000) == content[5:1005]
        with pytest.raises(FileGone, match=f"{path} does not exist"):
            hdfs.open(path)
    finally:
        hdfs.close()
        fs.delete(config.hdfs.root, recursive=True)


@pytest.mark.stack
def test_a_directory_listed_with_its_blocks_opens_its_files_without_asking_the_namenode_again(
        stack_config, monkeypatch):
    """``list_located`` (the raw route opening a bucket): the NameNode's one listing gives what
    WebHDFS's does, and each file's blocks, so its opening asks only the DataNode."""
    config = replace(stack_config, hdfs_root="/debl-hdfslisted")
    fs = WebHDFS(config)
    directory = f"{config.hdfs.root}/bucket"
    contents = {f"{directory}/chunk-00001.0": b"small\n" * 10,
                f"{directory}/chunk-00002.0": bytes(i % 251 for i in range(2 * 1024 * 1024 + 3))}
    fs.mkdirs(f"{directory}/sub")
    for path, content in contents.items():
        writer = Client(config.hdfs.uri).create(path, WriteOptions(block_size=1024 * 1024,
                                                                   overwrite=True))
        writer.write(content)
        writer.close()
    hdfs = NativeHDFS(config, timeout=30.0)
    calls: list[str] = []
    real_call = HadoopRPC.call
    monkeypatch.setattr(HadoopRPC, "call", lambda self, method, request: (
        calls.append(method), real_call(self, method, request))[1])
    try:
        listed = hdfs.list_located(directory)
        assert calls == ["getListing"]
        assert {(f.path, f.length, f.is_dir, f.modification_time_ms) for f in listed} == {
            (s.path, s.length, s.is_dir, s.modification_time_ms) for s in fs.list(directory)}
        for f in listed:
            if f.is_dir:
                continue
            opened = hdfs.open_file(f.path, f.located)
            assert opened.local is not None
            assert hdfs.read(opened, 0, opened.length) == contents[f.path]
        assert "getBlockLocations" not in calls and calls.count("getBlockLocalPathInfo") == 4
        assert hdfs.list_located(directory + "/missing") is None
        # Without local reads there is no listing with blocks: the caller lists over WebHDFS.
        plain = NativeHDFS(replace(config, hdfs_local_reads=False), timeout=30.0)
        try:
            assert plain.list_located(directory) is None
        finally:
            plain.close()
    finally:
        hdfs.close()
        fs.delete(config.hdfs.root, recursive=True)


@pytest.mark.stack
def test_a_user_the_datanode_does_not_grant_local_paths_reads_over_the_network(
        stack_config, monkeypatch):
    config = replace(stack_config, hdfs_root="/debl-hdfslocal-refused")
    fs = WebHDFS(config)
    path = f"{config.hdfs.root}/f.bin"
    content = b"x" * 70000
    fs.write(path, content, overwrite=True)
    monkeypatch.setenv("HADOOP_USER_NAME", "debl-not-granted")
    hdfs = NativeHDFS(config, timeout=30.0)
    try:
        f = hdfs.open(path)
        assert f.local is None
        assert hdfs.read(f, 100, 65536) == content[100:65636]
        (refusal,) = hdfs.local.refusals.values()
        assert "AccessControlException" in refusal
        # Refused once: the next file costs the DataNode no call.
        assert hdfs.open(path).local is None and len(hdfs.local.refusals) == 1
    finally:
        hdfs.close()
        fs.delete(config.hdfs.root, recursive=True)
