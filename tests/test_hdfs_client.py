"""DeBL's HDFS client (debl.hdfs): writes, listings and renames over hdfs-native, reads with exact
bytes, errors told apart by class that name the file or the server, and waits bounded by the
timeout whatever the library does (it has none of its own). The threads alone are pure unit
tests; the rest uses the real stack. Local block reads: tests/test_hdfs_local_reads.py."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import replace

import pytest

from debl.config import Config
from debl.errors import ServiceError
from debl.hdfs import FileGone, HdfsClient, HdfsFile, HdfsTimeout, calls
from debl.hdfs import messages
from debl.hdfs.rpc import NAMENODE, RpcConnection


def test_a_call_that_never_returns_is_an_error_naming_hdfs_within_the_timeout():
    hdfs = HdfsClient(Config(), timeout=0.3, threads=2)
    release = threading.Event()
    try:
        started = time.monotonic()
        with pytest.raises(HdfsTimeout, match=r"HDFS at 127\.0\.0\.1:\d+ did not answer within "
                                               r"0.3 s \(read /some/file\); is the stack up"):
            hdfs.run([(release.wait, ())], "read /some/file")
        assert time.monotonic() - started < 2.0
        # The stuck thread does not stop the other one from serving.
        assert hdfs.run([(lambda: 7, ())], "x") == [7]
    finally:
        release.set()
        hdfs.close()


def test_calls_run_in_parallel_and_give_results_in_order_and_their_first_error():
    hdfs = HdfsClient(Config(), timeout=5.0, threads=4)
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


def test_threads_start_as_calls_need_them_and_end_when_idle(monkeypatch):
    """A client made for one call costs one thread, and none once it has been idle a while,
    closed or not: the one-off clients of the loader and the status page leave nothing."""
    monkeypatch.setattr(calls, "IDLE_S", 0.2)
    threads = calls.CallThreads("127.0.0.1:1", timeout=5.0, threads=8)
    assert threads.run([(lambda: 1, ())], "x") == [1]
    assert len(threads._threads) == 1
    deadline = time.monotonic() + 5
    while threads._threads:
        assert time.monotonic() < deadline, "an idle thread did not end"
        time.sleep(0.05)
    assert threads.run([(lambda: 2, ())], "x") == [2]  # a new one starts for the next call
    threads.close()
    with pytest.raises(ServiceError, match="is closed"):
        threads.run([(lambda: 3, ())], "x")


def test_a_namenode_that_refuses_the_connection_is_an_error_within_seconds():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    hdfs = HdfsClient(Config(hdfs_uri=f"hdfs://127.0.0.1:{port}"), timeout=30.0)
    started = time.monotonic()
    with pytest.raises(ServiceError, match=rf"HDFS at 127.0.0.1:{port} did not answer \(list "
                                           r"/x\): .*is the stack up"):
        hdfs.list("/x")
    assert time.monotonic() - started < 10.0  # not the library's retries for minutes
    hdfs.close()


@pytest.mark.stack
def test_files_and_directories_written_listed_renamed_and_deleted(stack_config):
    config = replace(stack_config, hdfs_root="/debl-hdfsclient")
    root = config.hdfs.root
    with HdfsClient(config) as fs:
        try:
            fs.mkdirs(f"{root}/d/e")
            fs.write(f"{root}/d/a", [b"hello ", b"", b"world\n"])
            fs.write_atomic(f"{root}/d/b", b"x" * 100_000)
            listed = fs.list(f"{root}/d")
            assert [(f.name, f.length, f.is_dir) for f in listed] == [
                ("a", 12, False), ("b", 100_000, False), ("e", 0, True)]
            assert fs.status(f"{root}/d/a") == listed[0] and fs.status(f"{root}/none") is None
            assert fs.status(f"{root}/d/b._COPYING_") is None
            assert fs.read(f"{root}/d/a") == b"hello world\n"
            assert fs.read_range(f"{root}/d/b", 99_990, 10) == b"x" * 10
            assert [len(b) for b in fs.stream(f"{root}/d/b", 40_000, offset=10)] == \
                [40_000, 40_000, 19_990]
            assert fs.size(f"{root}/d") == 100_012 and fs.size(f"{root}/none") == 0
            with pytest.raises(ServiceError, match=rf"{root}/d/a at 10 for 5 bytes: the file has "
                                                   "12 bytes"):
                fs.read_range(f"{root}/d/a", 10, 5)  # past the end: an error, never a panic
            with pytest.raises(ServiceError, match=rf"could not write {root}/d/a: it exists"):
                fs.write(f"{root}/d/a", b"again")
            fs.rename(f"{root}/d/b", f"{root}/d/a", overwrite=True)
            assert fs.read(f"{root}/d/a") == b"x" * 100_000
            assert [f.name for f in fs.list(f"{root}/d")] == ["a", "e"]
            for call in (lambda: fs.list(f"{root}/none"), lambda: fs.read(f"{root}/none"),
                         lambda: fs.rename(f"{root}/none", f"{root}/x")):
                with pytest.raises(FileGone, match=rf"HDFS: {root}/none does not exist"):
                    call()
            assert fs.delete(f"{root}/d/e") and not fs.delete(f"{root}/d/e")
        finally:
            fs.delete(root, recursive=True)


@pytest.mark.stack
def test_a_write_whose_data_fails_midway_leaves_no_file_and_can_be_made_again(stack_config):
    """The caller's data raising (a source that broke) ends the write: the file is closed, so
    that its lease does not refuse the next write of the path, and deleted."""
    config = replace(stack_config, hdfs_root="/debl-hdfsclient-broken")
    path = f"{config.hdfs.root}/chunk"

    def broken():
        yield b"a" * 70_000
        raise OSError("the source broke")

    with HdfsClient(config) as fs:
        try:
            with pytest.raises(OSError, match="the source broke"):
                fs.write_atomic(path, broken())
            assert fs.list(config.hdfs.root) == []
            fs.write_atomic(path, [b"b" * 10])
            assert fs.read(path) == b"b" * 10
        finally:
            fs.delete(config.hdfs.root, recursive=True)


@pytest.mark.stack
def test_a_change_refused_in_safe_mode_says_so(stack_config):
    """hdfs-native gives the NameNode's refusal as a plain RuntimeError; the client then asks
    the NameNode (over Hadoop's RPC) whether it is in safe mode, and says so."""
    host, port = stack_config.hdfs.uri.split("//")[1].split(":")
    namenode = RpcConnection(host, int(port), NAMENODE, 10.0)

    def safe_mode(action: str) -> bool:
        return namenode.call("setSafeMode", messages.SetSafeModeRequestProto(action=action),
                             messages.SetSafeModeResponseProto).result

    with HdfsClient(stack_config) as fs:
        assert not fs.in_safe_mode()
        assert safe_mode("SAFEMODE_ENTER")
        try:
            assert fs.in_safe_mode()
            with pytest.raises(ServiceError, match=r"could not make the directory /debl-safe: .*"
                                                   r"SafeModeException.*the NameNode is in safe "
                                                   r"mode .*retry in a few seconds"):
                fs.mkdirs("/debl-safe")
        finally:
            safe_mode("SAFEMODE_LEAVE")
            namenode.close()
        assert not fs.in_safe_mode() and fs.status("/debl-safe") is None


@pytest.mark.stack
@pytest.mark.parametrize("local_reads", [True, False])
def test_reads_give_the_files_bytes_and_errors_name_the_file(stack_config, local_reads):
    config = replace(stack_config, hdfs_root="/debl-hdfsreads", hdfs_local_reads=local_reads)
    path = f"{config.hdfs.root}/f.bin"
    content = bytes(range(256)) * 4096  # 1 MiB: several HDFS packets
    hdfs = HdfsClient(config, timeout=30.0)
    try:
        hdfs.write(path, content, overwrite=True)
        f = hdfs.open(path)
        assert f.file == hdfs.status(path) and f.length == len(content)
        # The stack's DataNode is on this host and grants this user its block files.
        assert (f.local is not None) == local_reads
        assert hdfs.read_many([(f, 0, 10), (f, 65536 * 3 + 5, 70000), (f, len(content) - 1, 1)]) \
            == [content[:10], content[65536 * 3 + 5:65536 * 3 + 5 + 70000], content[-1:]]
        with pytest.raises(ServiceError, match=rf"{path} at {len(content) - 5} for 10 bytes: the "
                                               rf"file has {len(content)} bytes"):
            hdfs.read_many([(f, len(content) - 5, 10)])  # past the end: never a panic
        with pytest.raises(FileGone, match=rf"{path}-missing does not exist"):
            hdfs.open(path + "-missing")
        directory = config.hdfs.root
        before, missing = hdfs.modified_ms([directory, directory + "/missing"])
        assert missing is None
        time.sleep(0.01)
        hdfs.rename(path, path + "-renamed")
        assert hdfs.modified_ms([directory])[0] > before  # a rename in it moves its time
        with pytest.raises(ServiceError, match=rf"{path}-renamed changed while it was opened "
                                               rf"\({len(content) + 1} bytes listed"):
            hdfs.run([(hdfs.open_file, (HdfsFile(path + "-renamed", len(content) + 1, False,
                                                 0),))], "open")
    finally:
        hdfs.delete(config.hdfs.root, recursive=True)
        hdfs.close()
