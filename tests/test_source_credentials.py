"""Credentials of HTTP sources: never in the URL, so never in ``debl load``'s argv.
The password comes from the config (``source_password``, ``DEBL_SOURCE_PASSWORD``) or from
``source_password_file``, which must be its owner's alone; a URL with a password is refused
with a message that says where the password goes; no message, catalog row, output or file of
the state directory holds it. The stream-level tests need no stack; the last two run a real
``debl load`` on it."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from debl.cli import main
from debl.config import Config, load_config
from debl.errors import ConfigError, SourceError
from loaders.http_client import Credentials, source_credentials
from loaders.source import HttpSource, open_source
from tests.hostile_http import HostileSource

SECRET = "s3cr#t p@ss:w0rd"  # characters a URL would have to escape
LINE = b"1\t123456789\t2\t1\tdata\t1700000000\t1\n"


@pytest.fixture()
def guarded(tmp_path):
    """A source that answers only alice with SECRET."""
    served = tmp_path / "served"
    served.mkdir()
    (served / "a.tsv").write_bytes(LINE * 3)
    with HostileSource(served) as server:
        server.require_auth("alice", SECRET)
        yield server


def test_configured_credentials_are_sent_as_basic_auth(guarded):
    config = Config(source_user="alice", source_password=SECRET)
    source = open_source(guarded.url, config)
    assert [f.name for f in source.list()] == ["a.tsv"]
    assert source.read_range("a.tsv", 0, 5) == LINE[:5]
    assert source.describe() == guarded.url


def test_the_user_may_come_from_the_url(guarded):
    config = Config(source_password=SECRET)
    url = guarded.url.replace("http://", "http://alice@")
    assert len(open_source(url, config).list()) == 1
    with pytest.raises(SourceError, match="no user: set source.user"):
        open_source(guarded.url, config)


def test_a_wrong_or_missing_password_is_a_message_saying_where_it_goes(guarded):
    for config in (Config(source_user="alice", source_password="nope"), Config()):
        with pytest.raises(SourceError) as err:
            open_source(guarded.url, config).list()
        message = str(err.value)
        assert "HTTP 401" in message and "DEBL_SOURCE_PASSWORD" in message
        assert "nope" not in message


def test_a_url_with_a_password_is_refused_without_showing_it(guarded):
    url = guarded.url.replace("http://", "http://alice:s3cr%23t%20p%40ss@")
    for attempt in (lambda: open_source(url, Config()), lambda: HttpSource(url)):
        with pytest.raises(SourceError) as err:
            attempt()
        message = str(err.value)
        assert "s3cr" not in message and guarded.url.replace("http://", "http://alice@") in message
        assert "DEBL_SOURCE_PASSWORD" in message and "source.password_file" in message


def test_debl_load_refuses_a_url_with_a_password_before_anything_starts(tmp_path):
    nowhere = Config(mysql_port=1, mysql_password="x", service_timeout=2.0)
    result = CliRunner().invoke(main, ["load", "http://bob:hunter2@127.0.0.1:1/links"],
                                obj=nowhere)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert "holds a password" in result.output and "hunter2" not in result.output
    assert "http://bob@127.0.0.1:1/links" in result.output


def test_a_password_never_crosses_the_network_over_plain_http_unless_allowed(caplog):
    """Defect: the source's password went over plain http to any host (basic
    authentication is the password in clear text). Refused before any request, naming https://
    and the setting that allows it; with the setting, sent with a warning. https://, the
    loopback and a source without password need nothing."""
    config = Config(source_user="alice", source_password=SECRET)
    for url in ("http://192.0.2.7/links", "http://links.example.org:8080/d",
                "http://[2001:db8::1]/x", "http://127.0.0.1.example.org/"):
        with pytest.raises(SourceError) as err:
            open_source(url, config)
        message = str(err.value)
        assert "its password would cross the network in clear text" in message, url
        assert "https://" in message and "source.allow_password_over_http = true" in message
        assert SECRET not in message
    caplog.set_level(logging.WARNING)
    for url in ("https://links.example.org/d", "http://127.0.0.1:8800/", "http://127.5.0.1/",
                "http://localhost/x", "http://LocalHost/x", "http://[::1]:80/"):
        assert open_source(url, config).describe() == url.rstrip("/")  # nothing asked yet
    assert open_source("http://192.0.2.7/links", Config()).describe() == "http://192.0.2.7/links"
    assert caplog.records == []
    allowed = config.replace(source_allow_password_over_http=True)
    assert open_source("http://192.0.2.7/links", allowed).describe() == "http://192.0.2.7/links"
    (record,) = caplog.records
    assert record.levelno == logging.WARNING and "sent anyway" in record.getMessage()
    assert "http://192.0.2.7/links" in record.getMessage() and SECRET not in record.getMessage()


def test_a_password_file_must_be_its_owners_alone(tmp_path, guarded):
    secret = tmp_path / "source-password"
    secret.write_text(SECRET + "\n")
    secret.chmod(0o600)
    config = Config(source_user="alice", source_password_file=secret)
    assert source_credentials(config) == Credentials("alice", SECRET)
    assert len(open_source(guarded.url, config).list()) == 1
    for mode in (0o640, 0o604, 0o620):
        secret.chmod(mode)
        with pytest.raises(ConfigError, match=f"chmod 600 {secret}"):
            source_credentials(config)
    with pytest.raises(ConfigError, match="cannot be read"):
        source_credentials(config.replace(source_password_file=tmp_path / "missing"))


def test_credentials_come_from_the_environment_and_are_never_shown(tmp_path):
    config = load_config(tmp_path / "debl.toml", env={"DEBL_SOURCE_USER": "alice",
                                                      "DEBL_SOURCE_PASSWORD": SECRET})
    assert source_credentials(config) == Credentials("alice", SECRET)
    assert SECRET not in repr(config) and SECRET not in repr(source_credentials(config))
    assert source_credentials(Config()) is None


@pytest.mark.stack
@pytest.mark.parametrize("how", ["environment", "password file"])
def test_a_load_from_a_guarded_source_shows_its_password_nowhere(stack_config, spark,
                                                                 tmp_path, how):
    """A real `debl load` process (with its Spark JVM): every process's argv is read while
    it runs; its output, the catalog's rows of the load and every file of the state directory
    after it. Then `debl verify` re-reads the source with the same credentials."""
    from debl.catalog import Catalog
    from tests.dataset import make_dataset
    from tests.test_security import _argv_holding, _files_holding

    data = tmp_path / "data"
    data.mkdir()
    make_dataset(data, max_id=3001, files=3, bad_lines=2)
    env = {**os.environ, "DEBL_STATE_DIR": str(stack_config.state_dir),
           "DEBL_SOURCE_USER": "alice"}
    if how == "environment":
        env["DEBL_SOURCE_PASSWORD"] = SECRET
    else:
        (tmp_path / "pw").write_text(SECRET + "\n")
        (tmp_path / "pw").chmod(0o600)
        env["DEBL_SOURCE_PASSWORD_FILE"] = str(tmp_path / "pw")
    with HostileSource(data) as server:
        server.require_auth("alice", SECRET)
        proc = subprocess.Popen([sys.executable, "-m", "debl", "load", server.url,
                                 "--hot-bytes", "100KB", "--json"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        leaked, scans = [], 0
        while proc.poll() is None:
            leaked += _argv_holding(SECRET.encode())
            scans += 1
            time.sleep(0.2)
        out, err = proc.communicate()
        assert proc.returncode == 0, err.decode()[-2000:]
        verified = subprocess.run([sys.executable, "-m", "debl", "verify"], env=env,
                                  capture_output=True)
    assert verified.returncode == 0, verified.stdout.decode()[-2000:]
    assert scans >= 1 and leaked == []
    assert SECRET.encode() not in out + err + verified.stdout + verified.stderr
    with Catalog(stack_config) as catalog:
        load = catalog.loads.load()
    assert load.source == server.url and SECRET not in repr(load)
    assert _files_holding(stack_config.state_dir, SECRET.encode()) == []


@pytest.mark.stack
def test_the_resume_hint_of_a_failed_load_shows_no_password(stack_config, tmp_path):
    """A load stopped by its source says how to resume it, with the URL as given (no password
    can be in it) and the credentials still from the config."""
    from loaders.load import LoadOptions, run_load

    (tmp_path / "a.tsv").write_bytes(LINE * 1000)
    config = stack_config.replace(source_user="alice", source_password=SECRET, source_retries=1)
    with HostileSource(tmp_path) as server:
        server.require_auth("alice", SECRET)
        server.drop("a.tsv", at=100, times=None)  # every transfer of it ends early
        url = server.url.replace("http://", "http://alice@")
        with pytest.raises(SourceError) as err:
            run_load(config, url, LoadOptions(hot_bytes=1 << 30))
    notes = "\n".join(getattr(err.value, "__notes__", []))
    assert f"debl load {url} --resume " in notes
    assert SECRET not in str(err.value) + notes


@pytest.mark.stack
def test_debl_status_never_shows_the_password_of_a_recorded_source(stack_config):
    """A catalog is not trusted to hold URLs without passwords (an older DeBL's row)."""
    from debl.catalog import Catalog
    from debl.namespace import Namespace
    from loaders.load import new_load_id

    load_id = new_load_id()
    with Catalog(stack_config) as catalog:
        catalog.loads.begin_load(load_id, "debl", "http://bob:hunter2@host/links", 1 << 20, {},
                                 Namespace.of(stack_config, load_id))
        catalog.loads.update_load(load_id, state="failed", error="a test's load")
    for args in (["status"], ["status", "--json"]):
        result = CliRunner().invoke(main, args, obj=stack_config)
        assert result.exit_code == 0, result.output
        assert "hunter2" not in result.output and "http://bob@host/links" in result.output
