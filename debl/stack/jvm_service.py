"""The stack's JVM services (HDFS, HBase + Thrift): run from the Maven-resolved jars with plain
``java``, their configuration written as Hadoop ``*-site.xml`` files under ``.debl/<service>/conf``.

Pitfall: the JVM runtime comes from Maven (``.debl/lib/stack``, resolved by scripts/setup.sh);
there is no Hadoop or HBase install, so the usual ``bin/`` scripts' JDK 17 flags are set here
(``JDK17_FLAGS``).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from xml.sax.saxutils import escape

from debl.errors import StackError
from debl.stack.service import Service

JDK17_FLAGS = [
    "-XX:+UseG1GC",
    "-Djava.net.preferIPv4Stack=true",
    "-Dorg.apache.hbase.thirdparty.io.netty.tryReflectionSetAccessible=true",
    "--add-modules", "jdk.unsupported",
    *[f"--add-opens=java.base/{pkg}=ALL-UNNAMED" for pkg in (
        "java.io", "java.nio", "sun.nio.ch", "java.lang", "jdk.internal.ref",
        "java.lang.reflect", "java.util", "java.util.concurrent", "java.net")],
    "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED",
    "--add-exports=java.base/sun.net.dns=ALL-UNNAMED",
    "--add-exports=java.base/sun.net.util=ALL-UNNAMED",
]

# INFO, but not a line per HDFS operation: the NameNode's audit log (off, as in Hadoop's own
# configuration), its block allocations, and the DataNode's lines per block written and deleted
# (its clienttrace is a child of the DataNode logger). Those made most of the logs, which grew
# without bound (docs/RUNTIME.md, "Logs", has the sizes).
LOG4J2 = """\
status = warn
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_OUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{ISO8601} %-5p [%t] %c{2}: %m%n
rootLogger = INFO, console
logger.zk.name = org.apache.zookeeper
logger.zk.level = WARN
logger.hadoopmetrics.name = org.apache.hadoop.metrics2
logger.hadoopmetrics.level = WARN
logger.audit.name = org.apache.hadoop.hdfs.server.namenode.FSNamesystem.audit
logger.audit.level = OFF
logger.statechange.name = org.apache.hadoop.hdfs.StateChange
logger.statechange.level = WARN
logger.datanode.name = org.apache.hadoop.hdfs.server.datanode.DataNode
logger.datanode.level = WARN
logger.deletion.name = org.apache.hadoop.hdfs.server.datanode.fsdataset.impl.FsDatasetAsyncDiskService
logger.deletion.level = WARN
"""  # noqa: E501 -- a logger's name is one line of log4j's properties


def site_xml(props: Mapping[str, object]) -> str:
    body = "".join(f"  <property><name>{escape(k)}</name><value>{escape(str(v))}</value>"
                   "</property>\n" for k, v in props.items())
    return f'<?xml version="1.0"?>\n<configuration>\n{body}</configuration>\n'


class JvmService(Service):
    """A service run from the Maven-resolved jars with plain ``java``."""

    heap = "512m"

    @property
    def conf_dir(self) -> Path:
        return self.home / "conf"

    def classpath(self) -> str:
        lib = (self.config.lib_dir / "stack").absolute()
        if not any(lib.glob("hbase-server-*.jar")):
            raise StackError(self.name, f"the HBase/Hadoop runtime is missing in {lib}: "
                             "run scripts/setup.sh")
        return f"{self.conf_dir}:{lib}/*"

    def java_argv(self, main_class: str, *args: str, heap: str | None = None) -> list[str]:
        java = shutil.which("java")
        if not java:
            raise StackError(self.name, "java is not installed: run scripts/setup.sh")
        return [java, f"-Xmx{heap or self.heap}", *JDK17_FLAGS,
                f"-Dlog4j2.configurationFile={self.conf_dir / 'log4j2.properties'}",
                f"-Dhadoop.log.dir={self.home / 'logs'}", f"-Dhbase.log.dir={self.home / 'logs'}",
                "-cp", self.classpath(), main_class, *args]

    def write_conf(self, files: dict[str, str]) -> None:
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        (self.home / "logs").mkdir(exist_ok=True)
        for name, text in {**files, "log4j2.properties": LOG4J2}.items():
            (self.conf_dir / name).write_text(text)
        # Hadoop's HTTP servers look up webapps/<name> on the classpath, and the Maven jars do
        # not ship those resources; empty directories are enough for WebHDFS and JMX.
        for webapp in ("hdfs", "datanode", "secondary", "static"):
            (self.conf_dir / "webapps" / webapp).mkdir(parents=True, exist_ok=True)
