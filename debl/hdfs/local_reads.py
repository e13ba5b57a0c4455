"""Local block reads: a file whose blocks are on a DataNode of this host is read from the block
files themselves, by ``os.pread``, without the DataNode (docs/COORDINATOR.md, "Local block
reads"). This is HDFS's own local read (its "legacy" short-circuit read, the one that needs no
native library): the NameNode gives the blocks (``getBlockLocations``), the DataNode each
block's file (``getBlockLocalPathInfo``, granted to the users of
``dfs.block.local-path-access.user`` only), and the reader opens it. ``list`` gives a
directory's files with their blocks in one NameNode call (``getListing`` with locations), so that
opening a directory's files asks the NameNode once, not once per file. hdfs-native offers none of
these calls: they go over Hadoop's RPC (``debl.hdfs.rpc``).

A read costs the DataNode nothing and the client a fraction of a data-transfer read
(docs/COORDINATOR.md, "Local block reads", has the measurement).

Pitfalls:

- Only a complete file with no block the NameNode knows to be corrupt is read locally (a file
  still being written has a block that grows; a corrupt block's bytes would be read unverified):
  ``LocalBlocks.open`` gives None for it, as for a file with a block on another host, a DataNode
  that refuses (the user is not in ``dfs.block.local-path-access.user``), a block file this
  process cannot open, or a file whose length differs from its listing's. The caller then reads
  over the network, which verifies the checksums; a refusal is remembered per DataNode
  (``refusals``), so a cluster without the setting costs one call.
- The calls share a few connections per server (``CONNECTIONS``) among every thread, kept until
  ``close``: the threads that open files come and go (the raw route's warm-up starts new ones
  for every load it opens ahead).
- An open block file keeps its bytes when the DataNode deletes or moves the block (the inode
  stays while it is open): a read gives the file's bytes as they were at its opening, never a
  mix, exactly as a read over the network does until the block is gone. A caller that must notice
  a file gone checks the listing (the raw route does). The descriptors close when the
  ``LocalFile`` is collected (``weakref.finalize``): keep no reference to a file no longer read,
  or its deleted blocks keep their disk space.
- HDFS's checksums are not verified here, as with ``dfs.client.read.shortcircuit.skip.checksum``:
  the bytes are the block file's own; the DataNode's block scanner verifies them in the
  background, and a block it (or any reader) finds corrupt is not read here any more.
"""

from __future__ import annotations

import os
import socket
import weakref
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from debl.config import Config
from debl.hdfs import messages
from debl.hdfs.errors import ACCESS_CONTROL, FILE_NOT_FOUND, FileGone, RemoteError, RpcError
from debl.hdfs.files import HdfsFile
from debl.hdfs.rpc import DATANODE, NAMENODE, RpcPool

_WHOLE_FILE = 1 << 62
# Connections per server (the NameNode, each DataNode of this host) shared by a reader's
# threads: its read threads open a bucket's files in parallel, one call each at a time.
CONNECTIONS = 4


@dataclass(frozen=True)
class _Block:
    start: int  # the block's first byte in the file
    stop: int
    fd: int


class LocalFile:
    """A complete file's block files, opened; ``read`` gives any range of the file."""

    def __init__(self, path: str, length: int, blocks: list[_Block]) -> None:
        self.path, self.length, self._blocks = path, length, blocks
        weakref.finalize(self, _close_all, [b.fd for b in blocks])

    def read(self, offset: int, length: int) -> bytes:
        """Exactly the file's bytes [offset, offset + length); ValueError past its end, OSError
        from the block file."""
        if offset < 0 or length < 0 or offset + length > self.length:
            raise ValueError(f"{self.path}: {offset}+{length} is past its {self.length} bytes")
        parts, at, stop = [], offset, offset + length
        for block in self._blocks:
            if at >= stop:
                break
            if block.stop <= at:
                continue
            n = min(stop, block.stop) - at
            data = os.pread(block.fd, n, at - block.start)
            if len(data) != n:
                raise OSError(f"{self.path}: its block file is shorter than the NameNode says")
            parts.append(data)
            at += n
        return parts[0] if len(parts) == 1 else b"".join(parts)


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


class LocalBlocks:
    """Opens files through the block files of this host's DataNodes (thread-safe). *timeout*
    bounds each call to the NameNode or a DataNode. ``close`` closes the connections."""

    def __init__(self, config: Config, timeout: float, connections: int = CONNECTIONS) -> None:
        uri = urlparse(config.hdfs.uri)
        self.namenode = (uri.hostname or "127.0.0.1", uri.port or 8020)
        self.timeout = timeout
        self.refusals: dict[tuple[str, int], str] = {}  # DataNode -> why it gave no paths
        self._local_ips: dict[str, bool] = {}
        self.namenode_calls = RpcPool(NAMENODE, timeout, connections)
        self.datanode_calls = RpcPool(DATANODE, timeout, connections)

    def close(self) -> None:
        self.namenode_calls.close()
        self.datanode_calls.close()

    def list(self, directory: str) -> list[tuple[HdfsFile, Any]] | None:
        """The entries of *directory*, each with its blocks (a ``LocatedBlocksProto``, for
        ``open``; None for a directory), in one NameNode call (more for a directory longer than
        the NameNode's ``dfs.ls.limit``), or None when it does not exist. RpcError: the
        NameNode did not answer."""
        entries: list[tuple[HdfsFile, Any]] = []
        after = b""
        while True:
            answer = self.namenode_calls.call(
                self.namenode, "getListing",
                messages.GetListingRequestProto(src=directory, startAfter=after,
                                                needLocation=True),
                messages.GetListingResponseProto)
            if not answer.HasField("dirList"):
                return None
            listing = answer.dirList
            for status in listing.partialListing:
                after = status.path
                entries.append((
                    HdfsFile(f"{directory.rstrip('/')}/{status.path.decode()}", status.length,
                             status.fileType == status.IS_DIR, status.modification_time),
                    status.locations if status.HasField("locations") else None))
            if not listing.remainingEntries or not listing.partialListing:
                return entries

    def open(self, file: HdfsFile, located: Any = None) -> LocalFile | None:
        """*file* opened through its block files, or None when it cannot be (module's
        pitfalls); *located*: its blocks as ``list`` gave them (else the NameNode is asked).
        FileGone: the NameNode has no such file; RpcError: it did not answer."""
        if located is None:
            try:
                answer = self.namenode_calls.call(
                    self.namenode, "getBlockLocations",
                    messages.GetBlockLocationsRequestProto(src=file.path, offset=0,
                                                           length=_WHOLE_FILE),
                    messages.GetBlockLocationsResponseProto)
            except RemoteError as exc:
                if exc.class_name == FILE_NOT_FOUND:
                    raise FileGone(f"HDFS: {file.path} does not exist") from exc
                raise
            if not answer.HasField("locations"):
                raise FileGone(f"HDFS: {file.path} does not exist")
            located = answer.locations
        if located.underConstruction or located.fileLength != file.length:
            return None
        if any(block.corrupt for block in located.blocks):
            return None  # read over the network, whose checksums tell what is wrong
        spans = []
        for block in located.blocks:
            local_path = self._local_path(block)
            if local_path is None:
                return None
            spans.append((block.offset, block.offset + block.b.numBytes, local_path))
        if sum(stop - start for start, stop, _ in spans) != file.length:
            return None
        blocks: list[_Block] = []
        try:
            for start, stop, local_path in spans:
                blocks.append(_Block(start, stop, os.open(local_path, os.O_RDONLY | os.O_CLOEXEC)))
        except OSError:
            _close_all([b.fd for b in blocks])
            return None
        return LocalFile(file.path, file.length, blocks)

    def _local_path(self, block: Any) -> str | None:
        """The file of *block* (a ``LocatedBlockProto``) from a DataNode of this host that
        holds it, or None."""
        for location in block.locs:
            datanode = (location.id.ipAddr, location.id.ipcPort)
            if not self._is_local(datanode[0]) or datanode in self.refusals:
                continue
            try:
                answer = self.datanode_calls.call(
                    datanode, "getBlockLocalPathInfo",
                    messages.GetBlockLocalPathInfoRequestProto(block=block.b,
                                                               token=block.blockToken),
                    messages.GetBlockLocalPathInfoResponseProto)
            except RemoteError as exc:
                if exc.class_name == ACCESS_CONTROL:
                    self.refusals[datanode] = str(exc)
                continue
            except RpcError:
                continue
            return answer.localPath
        return None

    def _is_local(self, ip: str) -> bool:
        """Whether *ip* is an address of this host: one a socket can bind to."""
        local = self._local_ips.get(ip)
        if local is None:
            try:
                with socket.socket(socket.AF_INET6 if ":" in ip else socket.AF_INET) as probe:
                    probe.bind((ip, 0))
                local = True
            except OSError:
                local = False
            self._local_ips[ip] = local
        return local
