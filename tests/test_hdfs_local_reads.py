"""Local block reads (debl.hdfs.local_reads) on the real stack: reads across blocks, a file kept
after its deletion, a directory listed with its blocks, a user the DataNode refuses, and a block
the NameNode knows to be corrupt, which is read over the network, never locally.
Without Hadoop's descriptors the reads say how to get them (a pure unit test)."""

from __future__ import annotations

import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest
from hdfs_native import Client, WriteOptions

from debl.config import Config
from debl.errors import ServiceError
from debl.hdfs import FileGone, HdfsClient, messages
from debl.hdfs.rpc import RpcPool
from debl.stack.hdfs import HDFS


def _write_in_blocks(config, path: str, content: bytes, block: int = 1024 * 1024) -> None:
    """*content* written as blocks of *block* bytes (hdfs-native's own writer: the client
    writes files of the default block size)."""
    writer = Client(config.hdfs.uri).create(path, WriteOptions(block_size=block, overwrite=True,
                                                               create_parent=True))
    writer.write(content)
    writer.close()


@pytest.mark.stack
def test_a_file_of_several_blocks_reads_locally_across_them_and_keeps_its_bytes(stack_config):
    """A read that spans blocks is one answer; a file deleted after its opening gives the bytes
    it had (the listing is what tells it is gone)."""
    config = replace(stack_config, hdfs_root="/debl-hdfslocal")
    path = f"{config.hdfs.root}/blocks.bin"
    content = bytes(i % 251 for i in range(3 * 1024 * 1024 + 17))
    _write_in_blocks(config, path, content)
    hdfs = HdfsClient(config, timeout=30.0)
    try:
        f = hdfs.open(path)
        assert f.local is not None and len(f.local._blocks) == 4
        at = 1024 * 1024 - 100
        assert hdfs.read_many([(f, at, 2 * 1024 * 1024)]) == [content[at:at + 2 * 1024 * 1024]]
        hdfs.delete(path)
        assert hdfs.read_many([(f, 5, 1000)]) == [content[5:1005]]
        with pytest.raises(FileGone, match=f"{path} does not exist"):
            hdfs.open(path)
    finally:
        hdfs.delete(config.hdfs.root, recursive=True)
        hdfs.close()


@pytest.mark.stack
def test_a_directory_listed_with_its_blocks_opens_its_files_without_asking_the_namenode_again(
        stack_config, monkeypatch):
    """``list_located`` (the raw route opening a bucket): the NameNode's one listing gives what
    ``list`` does, and each file's blocks, so its opening asks only the DataNode."""
    config = replace(stack_config, hdfs_root="/debl-hdfslisted")
    directory = f"{config.hdfs.root}/bucket"
    contents = {f"{directory}/chunk-00001.0": b"small\n" * 10,
                f"{directory}/chunk-00002.0": bytes(i % 251 for i in range(2 * 1024 * 1024 + 3))}
    hdfs = HdfsClient(config, timeout=30.0)
    hdfs.mkdirs(f"{directory}/sub")
    for path, content in contents.items():
        _write_in_blocks(config, path, content)
    calls: list[str] = []
    real_call = RpcPool.call
    monkeypatch.setattr(RpcPool, "call", lambda self, address, method, *rest: (
        calls.append(method), real_call(self, address, method, *rest))[1])
    try:
        listed = hdfs.list_located(directory)
        assert calls == ["getListing"]
        assert [f for f, _ in listed] == hdfs.list(directory)
        for f, located in listed:
            if f.is_dir:
                assert located is None
                continue
            opened = hdfs.open_file(f, located)
            assert opened.local is not None
            assert hdfs.read_many([(opened, 0, opened.length)]) == [contents[f.path]]
        assert "getBlockLocations" not in calls and calls.count("getBlockLocalPathInfo") == 4
        assert hdfs.list_located(directory + "/missing") is None
        # Without local reads there is no listing with blocks: the caller lists with ``list``.
        plain = HdfsClient(replace(config, hdfs_local_reads=False), timeout=30.0)
        assert plain.list_located(directory) is None
        plain.close()
    finally:
        hdfs.delete(config.hdfs.root, recursive=True)
        hdfs.close()


@pytest.mark.stack
def test_a_user_the_datanode_does_not_grant_local_paths_reads_over_the_network(
        stack_config, monkeypatch):
    """The DataNode's refusal is told by its exception's class (AccessControlException, the RPC
    answer's exceptionClassName), remembered, and the file read over the network."""
    config = replace(stack_config, hdfs_root="/debl-hdfslocal-refused")
    path = f"{config.hdfs.root}/f.bin"
    content = b"x" * 70000
    HdfsClient(config).write(path, content, overwrite=True)
    monkeypatch.setenv("HADOOP_USER_NAME", "debl-not-granted")
    hdfs = HdfsClient(config, timeout=30.0)
    try:
        f = hdfs.open(path)
        assert f.local is None
        assert hdfs.read_many([(f, 100, 65536)]) == [content[100:65636]]
        (refusal,) = hdfs.local.refusals.values()
        assert "AccessControlException" in refusal
        # Refused once: the next file costs the DataNode no call.
        assert hdfs.open(path).local is None and len(hdfs.local.refusals) == 1
    finally:
        hdfs.delete(config.hdfs.root, recursive=True)
        hdfs.close()


@pytest.mark.stack
def test_a_block_the_namenode_knows_corrupt_is_read_over_the_network_not_locally(stack_config):
    """Defect: a local read verifies no checksum, and the local reads ignored the NameNode's
    ``corrupt`` flag, so a block known to be corrupt was served as it is on disk. Here its file
    on the DataNode's disk is damaged, and Hadoop's own client reads it: it finds the checksum
    wrong and reports the block to the NameNode, as any reader does. From then on the file is
    opened over the network, whose read verifies the checksums: an error, never the bad bytes."""
    config = replace(stack_config, hdfs_root="/debl-hdfslocal-corrupt")
    path = f"{config.hdfs.root}/f.bin"
    content = bytes(range(256)) * 400
    hdfs = HdfsClient(config, timeout=60.0)
    try:
        hdfs.write(path, content, overwrite=True)
        assert hdfs.open(path).local is not None
        (_, located), = hdfs.list_located(config.hdfs.root)
        block_id = located.blocks[0].b.blockId
        (block_file,) = Path(config.state_dir).glob(
            f"hdfs/data/current/*/current/finalized/**/blk_{block_id}")
        damaged = bytearray(block_file.read_bytes())
        damaged[100:110] = b"X" * 10
        block_file.write_bytes(bytes(damaged))
        shell = subprocess.run(HDFS(config).java_argv("org.apache.hadoop.fs.FsShell", "-cat",
                                                      f"{config.hdfs.uri}{path}"),
                               capture_output=True, timeout=300)
        assert shell.returncode != 0 and b"Checksum" in shell.stderr
        deadline = time.monotonic() + 30
        while not hdfs.list_located(config.hdfs.root)[0][1].blocks[0].corrupt:
            assert time.monotonic() < deadline, "the NameNode did not mark the block corrupt"
            time.sleep(0.5)
        f = hdfs.open(path)
        assert f.local is None
        with pytest.raises(ServiceError, match=f"HDFS DataNode could not read {path} at 100"):
            hdfs.read_many([(f, 100, 10)])
    finally:
        hdfs.delete(config.hdfs.root, recursive=True)
        hdfs.close()


def test_missing_descriptors_are_an_error_naming_the_setup(tmp_path, monkeypatch):
    monkeypatch.setattr(messages, "DESCRIPTORS", tmp_path / "hadoop.pb")
    monkeypatch.setattr(messages, "_built", {})
    with pytest.raises(ServiceError, match=r"Hadoop's protobuf descriptors are missing "
                                           r"\(.*hadoop.pb: .*\): run `bash scripts/setup.sh`"):
        HdfsClient(Config()).local.list("/")
