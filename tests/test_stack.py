"""The real local stack: each service answers and does real work."""

from __future__ import annotations

import secrets

import pytest

from debl.stack.stack import stack_status, stack_up

pytestmark = pytest.mark.stack


def test_status_reports_every_service_healthy(stack_config):
    health = {h.service: h for h in stack_status(stack_config)}
    assert set(health) == {"MariaDB", "Source DB", "HDFS", "HBase"} | (
        {"Spark"} if stack_config.spark.workers else set())
    for h in health.values():
        assert h.healthy, h.detail
        assert all(pid for pid in h.pids)
        assert len(h.rss_kib) == len(h.pids) and all(r and r > 0 for r in h.rss_kib)


def test_up_is_a_noop_when_up(stack_config):
    results = stack_up(stack_config)
    assert [r.already_up for r in results] == [True] * (5 if stack_config.spark.workers else 4)


def test_mysql_round_trip(stack_config):
    import pymysql

    conn = pymysql.connect(host=stack_config.mysql.host, port=stack_config.mysql.port,
                           user=stack_config.mysql.user, password=stack_config.mysql_secret,
                           database=stack_config.mysql.database, local_infile=True)
    data = bytes(range(32, 101)) + b"\\'\"\t"
    try:
        with conn.cursor() as cur:
            cur.execute("DROP TABLE IF EXISTS t_roundtrip")
            cur.execute("CREATE TABLE t_roundtrip (k INT PRIMARY KEY, v VARBINARY(255))")
            cur.execute("INSERT INTO t_roundtrip VALUES (1, %s)", (data,))
            cur.execute("SELECT v FROM t_roundtrip WHERE k = 1")
            assert cur.fetchone()[0] == data
            cur.execute("DROP TABLE t_roundtrip")
    finally:
        conn.close()


def test_mysql_listens_on_loopback_only(stack_config):
    import pymysql

    conn = pymysql.connect(host=stack_config.mysql.host, port=stack_config.mysql.port,
                           user=stack_config.mysql.user, password=stack_config.mysql_secret)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT @@bind_address, @@local_infile")
            assert cur.fetchone() == ("127.0.0.1", 1)
    finally:
        conn.close()


def test_mysql_keeps_its_temporary_tables_in_a_directory_of_its_own(stack_config):
    """Not the shared /tmp: a MariaDB starting on the same machine deletes the temporary tables
    there, and with them another stack's statement in flight (docs/RUNTIME.md)."""
    import pymysql

    conn = pymysql.connect(host=stack_config.mysql.host, port=stack_config.mysql.port,
                           user=stack_config.mysql.user, password=stack_config.mysql_secret)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT @@tmpdir")
            assert cur.fetchone()[0] == str(stack_config.state_dir / "mariadb" / "tmp")
    finally:
        conn.close()


def test_password_file_is_private(stack_config):
    assert stack_config.mysql_password_file.stat().st_mode & 0o077 == 0


def test_hdfs_write_and_read_through_the_client(stack_config):
    from debl.hdfs import HdfsClient

    fs = HdfsClient(stack_config)
    path = f"/tmp/test-{secrets.token_hex(4)}/blob"
    payload = secrets.token_bytes(3 << 20)
    fs.write_atomic(path, (payload[i:i + 65536] for i in range(0, len(payload), 65536)))
    assert fs.status(path).length == len(payload)
    assert fs.read(path) == payload
    assert fs.status(path + "._COPYING_") is None
    fs.delete(path.rsplit("/", 1)[0], recursive=True)
    assert fs.status(path) is None


def test_hbase_table_through_thrift(stack_config):
    import happybase

    name = f"t_{secrets.token_hex(4)}"
    conn = happybase.Connection(stack_config.hbase.thrift_host, stack_config.hbase.thrift_port)
    try:
        conn.create_table(name, {"f": {}})
        table = conn.table(name)
        with table.batch() as batch:
            for i in range(100):
                batch.put(b"row%03d" % i, {b"f:q": b"%d" % (i * i)})
        rows = list(table.scan(row_start=b"row010", row_stop=b"row020"))
        assert [r for r, _ in rows] == [b"row%03d" % i for i in range(10, 20)]
        assert rows[3][1] == {b"f:q": b"169"}
    finally:
        conn.delete_table(name, disable=True)
        conn.close()


def test_spark_reads_and_writes_hdfs(stack_config, spark):
    from debl.hdfs import HdfsClient

    fs = HdfsClient(stack_config)
    base = f"/tmp/spark-{secrets.token_hex(4)}"
    fs.write(f"{base}/in.txt", b"".join(b"%d\t%d\n" % (i, i % 7) for i in range(1000)))
    lines = spark.sparkContext.textFile(f"{stack_config.hdfs.uri}{base}/in.txt")
    counts = dict(lines.map(lambda l: (int(l.split("\t")[1]), 1)).reduceByKey(lambda a, b: a + b)
                  .collect())
    assert counts == {k: len(range(k, 1000, 7)) for k in range(7)}
    lines.map(lambda l: l.upper()).saveAsTextFile(f"{stack_config.hdfs.uri}{base}/out")
    names = {s.path.rsplit("/", 1)[1] for s in fs.list(f"{base}/out")}
    assert "_SUCCESS" in names
    fs.delete(base, recursive=True)


def test_hdfs_clients_close_files_without_the_long_first_sleep(stack_config, spark, tmp_path):
    """Every Spark application asks the NameNode to complete a file again after 25 ms, not
    Hadoop's 400 ms, with at least Hadoop's patience in all; the stack's NameNode completes a
    file whose last block is committed (docs/LOADING.md, "Closing many small files")."""
    from debl.spark.session import HDFS_CLOSE_SETTINGS
    from debl.stack.hdfs import hdfs_site

    delay = "dfs.client.block.write.locateFollowingBlock.initial.delay.ms"
    retries = "dfs.client.block.write.locateFollowingBlock.retries"
    first, tries = int(HDFS_CLOSE_SETTINGS[delay]), int(HDFS_CLOSE_SETTINGS[retries])
    assert first <= 50 and first * (2 ** tries - 1) >= 400 * (2 ** 5 - 1)
    conf = spark.sparkContext.getConf()
    assert {k: conf.get(f"spark.hadoop.{k}") for k in HDFS_CLOSE_SETTINGS} == HDFS_CLOSE_SETTINGS
    assert hdfs_site(stack_config, tmp_path)["dfs.namenode.file.close.num-committed-allowed"] \
        == 1


def test_spark_java_options_reach_the_driver_jvm(spark, stack_config):
    """``spark.java_options`` (the suite sets the C1 JIT alone: tests/conftest.py) is given to
    the application's JVMs, and the driver's JVM runs with it."""
    assert stack_config.spark.java_options == "-XX:TieredStopAtLevel=1"
    conf = spark.sparkContext.getConf()
    for jvm in ("driver", "executor"):  # after Spark's own defaults
        assert conf.get(f"spark.{jvm}.extraJavaOptions").endswith(" -XX:TieredStopAtLevel=1")
    flags = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean() \
        .getInputArguments().toString()
    assert "-XX:TieredStopAtLevel=1" in flags, flags
