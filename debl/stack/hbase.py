"""The stack's HBase: standalone (master, region server and ZooKeeper in one JVM) and its Thrift1
server, proved by a table listing through Thrift.

Pitfall: HBase keeps its root directory on this HDFS, so HDFS must be up before HBase starts and
must stop after it (``lives_on``: ``debl stack up`` restarts HBase when HDFS was started again).
"""

from __future__ import annotations

from debl.stack.daemon import Daemon
from debl.stack.jvm_service import JvmService, site_xml
from debl.stack.service import require_free


class HBase(JvmService):
    name = "HBase"
    lives_on = ("HDFS",)

    @property
    def daemons(self) -> list[Daemon]:
        return [Daemon("hbase-master", self.home), Daemon("thrift", self.home)]

    @property
    def address(self) -> str:
        return (f"zk 127.0.0.1:{self.config.hbase.zookeeper_port}, "
                f"thrift {self.config.hbase.thrift_host}:{self.config.hbase.thrift_port}")

    def site(self) -> dict[str, object]:
        c = self.config
        return {
            "hbase.cluster.distributed": "false",
            "hbase.rootdir": f"{c.hdfs.uri}/hbase",
            "hbase.tmp.dir": str(self.home / "tmp"),
            "hbase.zookeeper.quorum": c.hbase.zookeeper_quorum,
            "hbase.zookeeper.property.clientPort": c.hbase.zookeeper_port,
            "hbase.zookeeper.property.clientPortAddress": "127.0.0.1",
            "hbase.zookeeper.property.dataDir": str(self.home / "zookeeper"),
            "hbase.master.port": c.hbase.master_port,
            "hbase.regionserver.port": c.hbase.regionserver_port,
            "hbase.master.ipc.address": "127.0.0.1",
            "hbase.regionserver.ipc.address": "127.0.0.1",
            "hbase.master.hostname": "127.0.0.1",
            "hbase.regionserver.hostname": "127.0.0.1",
            "hbase.master.info.port": -1,
            "hbase.regionserver.info.port": -1,
            "hbase.thrift.info.port": -1,
            "hbase.wal.provider": "filesystem",
            "hbase.unsafe.stream.capability.enforce": "false",
            "hbase.thrift.server.socket.read.timeout": 3_600_000,
            "hbase.thrift.minWorkerThreads": 64,
            "hbase.regionserver.thrift.framed": "false",
            "hbase.regionserver.thrift.compact": "false",
            "dfs.replication": 1,
            "dfs.client.block.write.replace-datanode-on-failure.enable": "false",
            # Bulk loads of many buckets: allow many HFiles per region and family.
            "hbase.mapreduce.bulkload.max.hfiles.perRegion.perFamily": 1024,
            "hbase.hstore.blockingStoreFiles": 200,
            "hbase.bulkload.retries.retryOnIOException": "true",
            # The region server reads its HFiles from this host's block files, as DeBL's raw
            # route reads its bucket files (docs/COORDINATOR.md, "Local block reads"): HDFS's
            # local reader that needs no native library. The bench compares like with like.
            **({"dfs.client.read.shortcircuit": "true",
                "dfs.client.use.legacy.blockreader.local": "true"} if c.hdfs.local_reads else {}),
        }

    def start(self) -> None:
        self.write_conf({"hbase-site.xml": site_xml(self.site()),
                         "core-site.xml": site_xml({"fs.defaultFS": self.config.hdfs.uri}),
                         "hdfs-site.xml": site_xml({"dfs.replication": 1})})
        master, thrift = self.daemons
        if master.pid() is None:
            require_free(master, self.config.hbase.zookeeper_port, self.config.hbase.master_port,
                          self.config.hbase.regionserver_port)
            master.start(self.java_argv("org.apache.hadoop.hbase.master.HMaster", "start",
                                        heap=self.config.hbase.heap))
        if thrift.pid() is None:
            require_free(thrift, self.config.hbase.thrift_port)
            thrift.start(self.thrift_argv())

    def thrift_argv(self) -> list[str]:
        """The Thrift server's command line. It listens on ``hbase.thrift_bind`` (loopback by
        default), never on ``hbase.thrift_host``: that is where clients reach a Thrift server,
        and Thrift1 has no authentication."""
        return self.java_argv("org.apache.hadoop.hbase.thrift.ThriftServer",
                              "-b", self.config.hbase.thrift_bind,
                              "-p", str(self.config.hbase.thrift_port), "start", heap="256m")

    def probe(self) -> str:
        # lazy import: happybase would cost every `debl` command's start-up
        # (docs/ARCHITECTURE.md, "Lazy imports")
        import happybase

        conn = happybase.Connection(self.config.hbase.thrift_host, self.config.hbase.thrift_port,
                                    timeout=10_000, autoconnect=True)
        try:
            tables = conn.tables()
        finally:
            conn.close()
        return f"{len(tables)} table(s) listed through Thrift"
