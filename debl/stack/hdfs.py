"""The stack's HDFS: a NameNode (formatted once) and one DataNode on 127.0.0.1, proved by a
small file written and read back through DeBL's HDFS client.
"""

from __future__ import annotations

import secrets
import subprocess
from pathlib import Path

from debl.config import Config
from debl.errors import StackError
from debl.hdfs import HdfsClient, local_user
from debl.stack.daemon import Daemon
from debl.stack.jvm_service import JvmService, site_xml
from debl.stack.service import require_free


def hdfs_site(config: Config, home: Path) -> dict[str, object]:
    lo = "127.0.0.1"
    return {
        "dfs.replication": 1,
        "dfs.namenode.name.dir": f"file://{home / 'name'}",
        "dfs.datanode.data.dir": f"file://{home / 'data'}",
        "dfs.permissions.enabled": "false",
        "dfs.client.block.write.replace-datanode-on-failure.enable": "false",
        "dfs.namenode.rpc-address": f"{lo}:{_port(config.hdfs.uri)}",
        "dfs.namenode.http-address": f"{lo}:{config.hdfs.http_port}",
        "dfs.namenode.https-address": f"{lo}:0",
        "dfs.namenode.secondary.http-address": f"{lo}:0",
        "dfs.namenode.secondary.https-address": f"{lo}:0",
        "dfs.datanode.address": f"{lo}:{config.hdfs.datanode_port}",
        "dfs.datanode.http.address": f"{lo}:{config.hdfs.datanode_http_port}",
        "dfs.datanode.https.address": f"{lo}:0",
        "dfs.datanode.ipc.address": f"{lo}:{config.hdfs.datanode_ipc_port}",
        "dfs.datanode.hostname": lo,
        "dfs.namenode.datanode.registration.ip-hostname-check": "false",
        "dfs.namenode.safemode.extension": 0,
        "dfs.namenode.fs-limits.min-block-size": 0,
        "dfs.datanode.du.reserved": 0,
        # A laptop-size disk: do not refuse writes when it is 90% full.
        "dfs.namenode.resource.du.reserved": 1 << 30,
        # A close completes a file whose last block the DataNode has finalized but not yet
        # reported: no close sleeps (docs/LOADING.md, "Closing many small files").
        "dfs.namenode.file.close.num-committed-allowed": 1,
        # The raw route reads the block files of this host's DataNode itself (HDFS's local
        # reads, docs/COORDINATOR.md, "Local block reads"): the DataNode tells their paths to
        # this user only.
        "dfs.block.local-path-access.user": local_user(),
    }


def _port(uri: str) -> int:
    return int(uri.rsplit(":", 1)[1].split("/")[0])


class HDFS(JvmService):
    name = "HDFS"

    @property
    def daemons(self) -> list[Daemon]:
        return [Daemon("namenode", self.home), Daemon("datanode", self.home)]

    @property
    def address(self) -> str:
        return self.config.hdfs.uri

    def start(self) -> None:
        core = {"fs.defaultFS": self.config.hdfs.uri, "hadoop.tmp.dir": str(self.home / "tmp")}
        self.write_conf({"core-site.xml": site_xml(core),
                         "hdfs-site.xml": site_xml(hdfs_site(self.config, self.home))})
        namenode, datanode = self.daemons
        if not (self.home / "name" / "current" / "VERSION").exists():
            result = subprocess.run(
                self.java_argv("org.apache.hadoop.hdfs.server.namenode.NameNode",
                               "-format", "-nonInteractive", "-force"),
                capture_output=True, text=True)
            if result.returncode != 0:
                raise StackError("HDFS NameNode", "formatting the NameNode failed", None,
                                 (result.stdout + result.stderr)[-2000:])
        if namenode.pid() is None:
            require_free(namenode, _port(self.config.hdfs.uri), self.config.hdfs.http_port)
            namenode.start(self.java_argv("org.apache.hadoop.hdfs.server.namenode.NameNode"))
        if datanode.pid() is None:
            require_free(datanode, self.config.hdfs.datanode_port,
                          self.config.hdfs.datanode_http_port, self.config.hdfs.datanode_ipc_port)
            datanode.start(self.java_argv("org.apache.hadoop.hdfs.server.datanode.DataNode"))

    def probe(self) -> str:
        """Write a small file, read it back, delete it."""
        with HdfsClient(self.config) as fs:
            path = "/tmp/debl-probe"
            payload = secrets.token_bytes(64)
            fs.write(path, payload, overwrite=True)
            if fs.read(path) != payload:
                raise RuntimeError("read back different bytes")
            fs.delete(path)
        return "write and read back OK"
