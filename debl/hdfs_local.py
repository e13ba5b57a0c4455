"""Local block reads: a file whose blocks are on a DataNode of this host is read from the block
files themselves, by ``os.pread``, without the DataNode (docs/COORDINATOR.md, "Local block
reads"). This is HDFS's own local read (its "legacy" short-circuit read, the one that needs no
native library): the NameNode gives the blocks (``getBlockLocations``), the DataNode each
block's file (``getBlockLocalPathInfo``, granted to the users of
``dfs.block.local-path-access.user`` only), and the reader opens it. ``list`` gives a
directory's files with their blocks in one NameNode call (``getListing`` with locations), so that
opening a directory's files asks the NameNode once, not once per file.

A read costs the DataNode nothing and the client a fraction of a data-transfer read
(docs/COORDINATOR.md, "Local block reads", has the measurement).

Pitfalls:

- Only a complete file is read locally (a file still being written has a block that grows):
  ``LocalBlocks.open`` gives None for it, as for a file with a block on another host, a DataNode
  that refuses (the user is not in ``dfs.block.local-path-access.user``) or a block file this
  process cannot open. The caller then reads over the network, as before; a refusal is
  remembered per DataNode (``refusals``), so a cluster without the setting costs one call.
- An open block file keeps its bytes when the DataNode deletes or moves the block (the inode
  stays while it is open): a read gives the file's bytes as they were at its opening, never a
  mix, exactly as a read over the network does until the block is gone. A caller that must notice
  a file gone checks the listing (the raw route does). The descriptors close when the
  ``LocalFile`` is collected (``weakref.finalize``): keep no reference to a file no longer read,
  or its deleted blocks keep their disk space.
- HDFS's checksums are not verified here, as with ``dfs.client.read.shortcircuit.skip.checksum``:
  the bytes are the block file's own; the DataNode's block scanner verifies them in the
  background.
"""

from __future__ import annotations

import os
import socket
import threading
import weakref
from dataclasses import dataclass
from urllib.parse import urlparse

from debl.config import Config
from debl.hadoop_rpc import HadoopRPC, RpcError, decode

_NAMENODE = "org.apache.hadoop.hdfs.protocol.ClientProtocol"
_DATANODE = "org.apache.hadoop.hdfs.protocol.ClientDatanodeProtocol"
_WHOLE_FILE = 1 << 62


@dataclass(frozen=True)
class Listed:
    """A directory's entry as the NameNode lists it (``LocalBlocks.list``), with its blocks."""

    path: str
    length: int
    is_dir: bool
    modification_time_ms: int
    located: bytes  # its blocks (a LocatedBlocksProto), for ``LocalBlocks.open``; b"" for a dir


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
    bounds each call to the NameNode or a DataNode."""

    def __init__(self, config: Config, timeout: float) -> None:
        uri = urlparse(config.hdfs.uri)
        self.namenode = (uri.hostname or "127.0.0.1", uri.port or 8020)
        self.timeout = timeout
        self.refusals: dict[tuple[str, int], str] = {}  # DataNode -> why it gave no paths
        self._local_ips: dict[str, bool] = {}
        self._mine = threading.local()  # each thread's connections: one call at a time on each
        self._clients: list[HadoopRPC] = []
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            clients, self._clients = self._clients, []
        for client in clients:
            client.close()

    def list(self, directory: str) -> list[Listed] | None:
        """The entries of *directory* with their blocks, in one NameNode call (more for a
        directory longer than the NameNode's ``dfs.ls.limit``), or None when it does not exist.
        RpcError: the NameNode did not answer."""
        namenode = self._client(*self.namenode, _NAMENODE)
        entries: list[Listed] = []
        after = b""
        while True:
            answer = namenode.call("getListing", [(1, directory), (2, after), (3, 1)])
            if 1 not in answer:
                return None
            listing = decode(answer[1][0])
            for raw in listing.get(1, []):
                status = decode(raw)
                after = status[2][0]
                entries.append(Listed(f"{directory.rstrip('/')}/{after.decode()}", status[3][0],
                                      status[1][0] == 1, status[7][0],
                                      status.get(12, [b""])[0]))
            if not listing.get(2, [0])[0] or not listing.get(1):
                return entries

    def open(self, path: str, located: bytes | None = None) -> LocalFile | None:
        """*path* opened through its block files, or None when it cannot be (module's
        pitfalls); *located*: its blocks as ``list`` gave them (else the NameNode is asked).
        RpcError: the NameNode did not answer."""
        if not located:
            namenode = self._client(*self.namenode, _NAMENODE)
            answer = namenode.call("getBlockLocations", [(1, path), (2, 0), (3, _WHOLE_FILE)])
            if 1 not in answer:
                raise RpcError(f"getBlockLocations: the NameNode has no {path}")
            located = answer[1][0]
        located = decode(located)
        if located[3][0]:  # under construction
            return None
        length, spans = located[1][0], []
        for raw in located.get(2, []):
            block = decode(raw)
            local_path = self._local_path(block)
            if local_path is None:
                return None
            offset, size = block[2][0], decode(block[1][0]).get(4, [0])[0]
            spans.append((offset, offset + size, local_path))
        if sum(stop - start for start, stop, _ in spans) != length:
            return None
        blocks: list[_Block] = []
        try:
            for start, stop, local_path in spans:
                blocks.append(_Block(start, stop, os.open(local_path, os.O_RDONLY | os.O_CLOEXEC)))
        except OSError:
            _close_all([b.fd for b in blocks])
            return None
        return LocalFile(path, length, blocks)

    def _local_path(self, block: dict) -> str | None:
        """The block's file from a DataNode of this host that holds it, or None."""
        for raw in block.get(3, []):
            node = decode(decode(raw)[1][0])
            ip, ipc_port = node[1][0].decode(), node[6][0]
            if not self._is_local(ip) or (ip, ipc_port) in self.refusals:
                continue
            try:
                answer = self._client(ip, ipc_port, _DATANODE).call(
                    "getBlockLocalPathInfo", [(1, block[1][0]), (2, block[5][0])])
            except RpcError as exc:
                if "AccessControlException" in str(exc):
                    self.refusals[(ip, ipc_port)] = str(exc)
                continue
            return answer[2][0].decode()
        return None

    def _client(self, host: str, port: int, protocol: str) -> HadoopRPC:
        clients = self._mine.__dict__.setdefault("clients", {})
        client = clients.get((host, port))
        if client is None:
            client = clients[(host, port)] = HadoopRPC(host, port, protocol, self.timeout)
            with self._lock:
                self._clients.append(client)
        return client

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
