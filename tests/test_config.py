"""Config: defaults, TOML, environment, validation, the password kept out of repr, and its
typed sections read and replaced by the settings' names. How each setting is spelt (one table,
old spellings, the nearest setting of a misspelt one): tests/test_config_spellings.py."""

from __future__ import annotations

from pathlib import Path

import dataclasses
import operator
import pickle
import re

import pytest

from debl.config import SECTIONS, SPELLINGS, Config, MysqlConfig, load_config
from debl.errors import ConfigError


def test_defaults_point_at_the_local_stack(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = load_config(tmp_path / "debl.toml", env={})
    assert config.mysql.host == "127.0.0.1"
    assert config.hdfs.uri.startswith("hdfs://127.0.0.1:")
    assert config.spark.master.startswith("local")
    assert config.gen_hf.run_buckets == 2


def test_toml_tables_and_env_override(tmp_path):
    path = tmp_path / "debl.toml"
    path.write_text('[loading]\nchunk_size = 1024\n[mysql]\nport = 4000\nengine = "MyISAM"\n'
                    '[spark]\nmaster = "spark://h:7077"\n')
    config = load_config(path, env={"DEBL_MYSQL_PORT": "4001",
                                    "DEBL_COORDINATOR_POLL_INTERVAL": "0.25"})
    assert config.mysql.port == 4001
    assert config.mysql.engine == "MyISAM"
    assert config.spark.master == "spark://h:7077"
    assert config.loading.chunk_size == 1024
    assert config.coordinator.poll_interval == 0.25
    assert config.state_dir.is_absolute()


@pytest.mark.parametrize("text, message", [
    ("[mysql]\nprot = 1\n", "unknown setting [mysql] prot: did you mean [mysql] port"),
    ('[mysql]\nlink_table = "links; DROP TABLE x"\n', "not a plain SQL identifier"),
    ('[mysql]\nengine = "Memory"\n', "choose one of"),
    ("[mysql]\nport = \"abc\"\n", "not a valid int"),
    ("[loading]\nchunk_size = 0\n", "loading.chunk_size must be positive"),
    ("[coordinator]\nraw_after = -1\n", "coordinator.raw_after must be"),
    ('[coordinator]\nraw_after = "soon"\n', "not a valid float"),
    ("[coordinator]\nraw_cache_bytes = 0\n", "coordinator.raw_cache_bytes must be positive"),
    ("[coordinator]\nraw_read_threads = 0\n", "coordinator.raw_read_threads must be positive"),
    ("[coordinator]\nraw_slots = -1\n", "coordinator.raw_slots must be 0 or more"),
    ('[hdfs]\nlocal_reads = "maybe"\n', "hdfs.local_reads"),
    ("[mysql\n", "debl.toml"),
    # mysql.user is quoted into the stack's CREATE USER / GRANT statements.
    ("[mysql]\nuser = \"x'@'%' IDENTIFIED BY 'y'; DROP DATABASE debl; -- \"\n",
     "not a plain MySQL user name"),
    ('[mysql]\nuser = "deb\\\\l"\n', "not a plain MySQL user name"),
    ('[mysql]\nuser = ""\n', "not a plain MySQL user name"),
    ('[mysql]\nuser = "%s"\n' % ("u" * 81), "not a plain MySQL user name"),
    # Names DeBL derives from these must fit MySQL's 64 characters (a lock, a staging table).
    ('[mysql]\ndatabase = "%s"\n' % ("d" * 53), "longer than 52 characters"),
    ('[mysql]\nlink_table = "%s"\n' % ("t" * 35), "longer than 34 characters"),
    ("[coordinator]\nquery_timeout = 0\n", "coordinator.query_timeout must be positive"),
    ("[source]\nretries = -1\n", "source.retries must be 0 or more"),
])
def test_bad_config_is_a_clear_error(tmp_path, text, message):
    path = tmp_path / "debl.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(path, env={})


@pytest.mark.parametrize("text, env, expected", [
    ("", {}, Config().coordinator.raw_after),
    ('[coordinator]\nraw_after = "off"\n', {}, None),
    ("[coordinator]\nraw_after = 2\n", {}, 2.0),
    ("[coordinator]\nraw_after = 2\n", {"DEBL_COORDINATOR_RAW_AFTER": "OFF"}, None),
    ('[coordinator]\nraw_after = "off"\n', {"DEBL_COORDINATOR_RAW_AFTER": "0"}, 0.0),
])
def test_raw_after_is_seconds_or_off(tmp_path, text, env, expected):
    path = tmp_path / "debl.toml"
    path.write_text(text)
    assert load_config(path, env=env).coordinator.raw_after == expected


# Every duration-like setting, and what 0 means where it means something.
DURATIONS = {"service_timeout": None, "coordinator.poll_interval": None,
             "coordinator.query_timeout": None, "coordinator.raw_after": "the raw route at once",
             "loading.coordinator_ack_timeout": "no wait",
             "loading.keep_previous_load": "dropped once no coordinator serves it"}


@pytest.mark.parametrize("name", DURATIONS)
@pytest.mark.parametrize("bad", ["nan", "inf", "-inf", "-1", "1e10", "0"])
def test_a_duration_that_is_no_finite_positive_seconds_is_refused_naming_it(tmp_path, name, bad):
    """``poll_interval`` of 0, -1 or NaN was taken (the sweep and the poller spun against the
    NameNode and MySQL), NaN timeouts passed their checks and ``service_timeout = inf`` failed
    later with OverflowError. Each is refused at load, in the file and in the environment,
    with the setting's name and what it may be; 0 only where it means something."""
    section, _, field = name.rpartition(".")
    zero = DURATIONS[name]
    if bad == "0" and zero is not None:
        assert Config().replace(**{name.replace(".", "_"): 0.0}).setting(name) == 0.0
        return
    message = f"{name} must be " + (f"0 ({zero}" if zero else "positive")
    toml, empty = tmp_path / "debl.toml", tmp_path / "empty.toml"
    toml.write_text((f"[{section}]\n" if section else "") + f"{field} = {bad}\n")
    empty.write_text("")
    for path, env in ((toml, {}), (empty, {"DEBL_" + name.replace(".", "_").upper(): bad})):
        with pytest.raises(ConfigError, match=re.escape(message)) as caught:
            load_config(path, env=env)
        assert "at most 2,147,483 (24 days)" in str(caught.value)


def test_the_longest_duration_is_taken_and_off_still_switches_the_raw_route_off():
    config = Config(**{name.replace(".", "_"): 2_147_483.0 for name in DURATIONS})
    assert [config.setting(name) for name in DURATIONS] == [2_147_483.0] * len(DURATIONS)
    assert Config(coordinator_raw_after=None).coordinator.raw_after is None


def test_mysql_user_from_the_environment_is_validated_too():
    with pytest.raises(ConfigError, match="mysql.user"):
        load_config(env={"DEBL_MYSQL_USER": "debl'@'%"})
    assert load_config(env={"DEBL_MYSQL_USER": "app-reader.2"}).mysql.user == "app-reader.2"


def test_unknown_environment_variable_is_an_error():
    with pytest.raises(ConfigError, match="DEBL_MYSQL_PROT: did you mean DEBL_MYSQL_PORT"):
        load_config(Path("/nonexistent/debl.toml"), env={"DEBL_MYSQL_PROT": "1"})


def test_missing_explicit_config_file_is_an_error():
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(env={"DEBL_CONFIG": "/nonexistent/x.toml"})


def test_password_never_in_repr():
    config = Config(mysql_password="s3cret-value", source_password="other-secret")
    assert "s3cret-value" not in repr(config)
    assert "s3cret-value" not in repr(config.mysql)
    assert "other-secret" not in repr(config) + repr(config.source)
    assert config.mysql_secret == "s3cret-value"


def test_every_setting_is_in_one_section_and_a_table_is_its_section(tmp_path):
    """A TOML table [t] k = v is the setting t.k: [mysql] port is config.mysql.port, [mysql]
    link_table config.mysql.link_table, [coordinator] raw_after config.coordinator.raw_after."""
    assert {s.section for s in SPELLINGS.settings} - {None} == set(SECTIONS)
    assert [s.name for s in SPELLINGS.settings if s.section is None] == \
        ["state_dir", "service_timeout", "fault_point"]
    assert len(SPELLINGS.settings) == sum(len(dataclasses.fields(c)) for c in SECTIONS.values()) + 3
    path = tmp_path / "debl.toml"
    path.write_text("[mysql]\nport = 4001\nlink_table = \"t2\"\n[source]\nretries = 2\n"
                    "[client]\nprocesses = 3\n[ui]\nport = 0\n[coordinator]\nraw_after = 5\n"
                    "[loading]\nchunk_size = 4096\ncoordinator_ack_timeout = 7\n")
    config = load_config(path, env={"DEBL_GEN_HF_RUN_BUCKETS": "7", "DEBL_HBASE_TABLE": "h2"})
    assert (config.mysql.port, config.source.retries, config.client.processes, config.ui.port,
            config.mysql.link_table, config.gen_hf.run_buckets, config.hbase.table) == \
        (4001, 2, 3, 0, "t2", 7, "h2")
    assert (config.coordinator.raw_after, config.loading.chunk_size,
            config.loading.coordinator_ack_timeout) == (5.0, 4096, 7.0)


def test_settings_are_given_by_keyword_and_read_by_name():
    config = Config(mysql_port=4002, coordinator_raw_after=None, hdfs_root="/x")
    assert (config.mysql.port, config.coordinator.raw_after, config.hdfs.root) == \
        (4002, None, "/x")
    assert config.setting("mysql.port") == 4002 and config.settings()["hdfs.root"] == "/x"
    assert config.setting("coordinator.raw_after") is None
    assert list(config.settings()) == [s.name for s in SPELLINGS.settings]
    # replace, Config's own and the dataclasses one, keep every other setting
    changed = config.replace(mysql_database="other", loading_chunk_size=4096)
    assert changed.mysql.port == 4002 and changed.mysql.database == "other"
    assert changed.loading.chunk_size == 4096
    assert dataclasses.replace(config, spark_workers=0).hdfs.root == "/x"
    # a section given whole, then a setting of it on top
    assert Config(mysql=MysqlConfig(port=1, user="u"), mysql_port=2).mysql == \
        MysqlConfig(port=2, user="u")
    with pytest.raises(ConfigError, match=r"unknown setting mysql_prot=: did you mean "
                                          r"mysql_port= \(mysql\.port\)"):
        Config(mysql_prot=1)
    misspelt = "mysql.prot"
    with pytest.raises(ConfigError, match="did you mean 'mysql.port'"):
        config.setting(misspelt)
    with pytest.raises(AttributeError, match="config.mysql.port"):
        operator.attrgetter("mysql_port")(config)  # a read by the keyword says where it is
    with pytest.raises(AttributeError, match="config.loading.chunk_size"):
        operator.attrgetter("chunk_size")(config)


def test_a_section_validates_its_settings_by_their_names():
    with pytest.raises(ConfigError, match="mysql.pool_size must be positive"):
        Config(mysql_pool_size=0)
    with pytest.raises(ConfigError, match="hbase.table="):
        Config(hbase_table="no-dashes")
    with pytest.raises(ConfigError, match="source.retries must be 0 or more"):
        Config(source_retries=-1)
    with pytest.raises(ConfigError, match="loading.hot_path_start must be"):
        Config(loading_hot_path_start="never")


def test_a_config_survives_pickling_and_the_environment_of_a_child(tmp_path, monkeypatch):
    """Spark ships Config to executors; the bench's and campaigns' children get it as DEBL_*,
    a setting switched off included, whatever debl.toml the child's working directory holds."""
    config = Config(mysql_port=4003, coordinator_raw_after=1.5, loading_chunk_size=4096,
                    gen_hf_carry_demand=False, state_dir=Path("/tmp/x"))
    assert pickle.loads(pickle.dumps(config)) == config
    assert load_config(env=config.child_env()) == config
    monkeypatch.chdir(tmp_path)
    (tmp_path / "debl.toml").write_text("[coordinator]\nraw_after = 7.5\n")
    off = config.replace(coordinator_raw_after=None)
    env = off.child_env(DEBL_EXTRA_FOR_TEST="1")
    assert env["DEBL_COORDINATOR_RAW_AFTER"] == "off" and env["DEBL_EXTRA_FOR_TEST"] == "1"
    del env["DEBL_EXTRA_FOR_TEST"]
    assert load_config(env=env) == off
    # a None that means "not given" (a password) is left out: the child's default is None too
    assert "DEBL_MYSQL_PASSWORD" not in env and "DEBL_SOURCE_USER" not in env


def test_missing_password_names_the_file(tmp_path):
    config = Config(state_dir=tmp_path)
    with pytest.raises(ConfigError, match="debl stack up"):
        _ = config.mysql_secret


def test_booleans_from_toml_and_environment(tmp_path):
    path = tmp_path / "debl.toml"
    path.write_text("[loading]\nbucket_target_covers_heaviest = false\n")
    assert load_config(path, env={}).loading.bucket_target_covers_heaviest is False
    for raw, value in (("true", True), ("0", False), ("No", False), ("1", True)):
        config = load_config(path, env={"DEBL_LOADING_BUCKET_TARGET_COVERS_HEAVIEST": raw})
        assert config.loading.bucket_target_covers_heaviest is value
    with pytest.raises(ConfigError, match="loading.bucket_target_covers_heaviest='maybe'"):
        load_config(path, env={"DEBL_LOADING_BUCKET_TARGET_COVERS_HEAVIEST": "maybe"})


def test_spark_workers_put_the_applications_on_the_stacks_cluster(tmp_path):
    path = tmp_path / "debl.toml"
    path.write_text("[spark]\nworkers = 2\nmaster_port = 7177\n")
    config = load_config(path, env={})
    assert config.spark.url == "spark://127.0.0.1:7177"
    assert config.spark.executor_slots == 2
    assert config.spark.app_cores == 1  # half: a load's (or bench's) and gen_HF's at once
    assert load_config(path, env={"DEBL_SPARK_CORES_MAX": "2"}).spark.app_cores == 2
    four = load_config(path, env={"DEBL_SPARK_WORKER_CORES": "2",
                                  "DEBL_SPARK_WORKER_MEMORY": "2g"})
    assert (four.spark.executor_slots, four.spark.app_cores) == (4, 2)
    # Without workers: spark.master as set, and no cap unless one is asked for.
    assert Config().spark.url == Config().spark.master == "local[2]"
    assert Config(spark_master="spark://h:7077").spark.app_cores is None
    assert Config(spark_master="spark://h:7077", spark_cores_max=3).spark.app_cores == 3


@pytest.mark.parametrize("settings, message", [
    ({"spark_workers": 2, "spark_master": "spark://h:7077"}, "names another"),
    ({"spark_workers": 1}, "room for 1 executor"),
    ({"spark_workers": 2, "spark_executor_memory": "2g"}, "room for 0 executor"),
    ({"spark_workers": 2, "spark_executor_cores": 2},
     "spark.worker_cores \\(1\\) must be at least"),
    ({"spark_workers": -1}, "must be 0 or positive"),
    ({"spark_executor_memory": "lots"}, "spark.executor_memory 'lots' is not a JVM memory size"),
    ({"spark_worker_memory": "1.5g"}, "not a JVM memory size"),
    ({"spark_executor_cores": 0}, "spark.executor_cores must be positive"),
])
def test_a_spark_cluster_that_cannot_work_is_a_config_error(settings, message):
    with pytest.raises(ConfigError, match=message):
        Config(**settings)


def test_a_child_keeps_a_setting_that_is_off(tmp_path, monkeypatch):
    """Defect: ``child_env`` left out every None, so a parent with ``raw_after = "off"``
    started children with the default (0: the raw route on). A child loads exactly the parent's
    config, a setting switched off included, whatever ``debl.toml`` its working directory
    holds; a real child process reads it too."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "debl.toml").write_text("[coordinator]\nraw_after = 7.5\n")
    config = Config(coordinator_raw_after=None, mysql_port=4003, state_dir=tmp_path)
    env = config.child_env()
    assert load_config(env=env) == config
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", "from debl.config import load_config; "
                          "print(load_config().coordinator.raw_after)"],
                         env=env, cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "None"
    # every setting that may be None but is not by default travels as such
    optional = [s for s in SPELLINGS.settings
                if "None" in s.type and Config().setting(s.name) is not None]
    assert "coordinator.raw_after" in [s.name for s in optional]
    for s in optional:
        off = Config(**{s.key: None})
        assert load_config(env=off.child_env()).setting(s.name) is None, s.name
