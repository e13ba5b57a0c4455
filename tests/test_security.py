"""Security: ``debl source serve`` never serves outside its directory and
cannot be made to pile up threads; every service and server listens on loopback unless the
config says otherwise (checked on the listening sockets themselves); no password in any
process's argv, in the catalog or in any file under the state directory (a source's password
is never in its URL: tests/test_source_credentials.py); LOCAL INFILE sends only the files DeBL
chose."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from debl.bench.source_server import make_server
from debl.catalog import Catalog
from debl.config import Config
from debl.errors import ServiceError
from debl.mysql import connect, connect_reader
from debl.stack.hbase import HBase
from debl.stack.stack import all_services
from tests.unavailable import unavailable

SECRET = b"top secret: outside the served directory\n"


@pytest.fixture()
def served(tmp_path):
    root, outside = tmp_path / "served", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.tsv").write_bytes(SECRET)
    (root / "a.tsv").write_bytes(b"1\t1\t1\t1\tx\t1\t1\n")
    (root / ".hidden").write_bytes(SECRET)
    (root / "escape.tsv").symlink_to(outside / "secret.tsv")
    (root / "escape-dir").symlink_to(outside)
    (root / "inside.tsv").symlink_to(root / "a.tsv")  # a link that stays inside is fine
    server = make_server(root, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield root, server.server_address[1]
    server.shutdown()
    server.server_close()


def _get(port: int, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


@pytest.mark.parametrize("path", [
    "/files/escape.tsv",  # a symlink out of the root
    "/files/escape-dir%2Fsecret.tsv", "/files/escape-dir/secret.tsv",
    "/files/..%2Foutside%2Fsecret.tsv", "/files/%2e%2e%2foutside%2fsecret.tsv",
    "/files/%2E%2E/outside/secret.tsv", "/files/../outside/secret.tsv",
    "/files/..", "/files/%2e%2e", "/files//etc/passwd", "/files/%2Fetc%2Fpasswd",
    "/files/.hidden", "/files/a.tsv%00", "/files/", "/../outside/secret.tsv",
    "/files/%ff%fe",
])
def test_the_source_server_never_serves_outside_its_directory(served, path):
    _, port = served
    status, body = _get(port, path)
    assert status == 404 and SECRET not in body


def test_the_listing_holds_only_files_that_are_served(served):
    import json

    _, port = served
    status, body = _get(port, "/index.json")
    assert status == 200
    assert sorted(e["name"] for e in json.loads(body)) == ["a.tsv", "inside.tsv"]
    assert _get(port, "/files/inside.tsv") == (200, b"1\t1\t1\t1\tx\t1\t1\n")


def test_idle_clients_cannot_pile_up_threads_and_are_let_go(tmp_path):
    """Past max_connections a client is answered 503 at once (no thread, the accept loop goes
    on); the idle ones are closed after the timeout, and the server serves again."""
    (tmp_path / "a.tsv").write_bytes(b"x" * 1000)
    # Another test's server in this process may still end its request threads: not counted.
    others = [t for t in threading.enumerate() if "process_request_thread" in t.name]
    server = make_server(tmp_path, port=0, max_connections=2, timeout=0.5)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    idle = [socket.create_connection(("127.0.0.1", port), timeout=2) for _ in range(20)]
    try:
        most = 0
        for s in idle:  # every one is closed: 2 after the timeout, 18 at once with a 503
            s.settimeout(10)
            most = max(most, sum("process_request_thread" in t.name and t not in others
                                 for t in threading.enumerate()))
            answer = s.recv(100)
            assert answer == b"" or answer.startswith(b"HTTP/1.1 503 ")
        assert most <= 2
        assert _get(port, "/files/a.tsv") == (200, b"x" * 1000)
    finally:
        for s in idle:
            s.close()
        server.shutdown()
        server.server_close()


def test_thrift_listens_where_the_config_says_never_where_clients_reach_it():
    config = Config(hbase_thrift_host="thrift.example.org")
    argv = HBase(config).thrift_argv() if _has_runtime(config) else None
    if argv is None:
        message = "the HBase runtime is not set up (scripts/setup.sh)"
        unavailable(message)
    assert argv[argv.index("-b") + 1] == "127.0.0.1"
    wide = config.replace(hbase_thrift_bind="0.0.0.0")
    argv = HBase(wide).thrift_argv()
    assert argv[argv.index("-b") + 1] == "0.0.0.0"


def _has_runtime(config: Config) -> bool:
    return any((config.lib_dir / "stack").glob("hbase-server-*.jar"))


# ---------------------------------------------------------------------------- on the stack


def _listening(pids: set[int]) -> dict[int, list[str]]:
    """pid -> the TCP addresses it listens on (every socket of the process)."""
    found: dict[int, list[str]] = {}
    for pid in pids:
        try:
            sockets = psutil.Process(pid).net_connections(kind="tcp")
        except psutil.Error:  # ended meanwhile
            continue
        for c in sockets:
            if c.status == psutil.CONN_LISTEN:
                found.setdefault(pid, []).append(f"{c.laddr.ip}:{c.laddr.port}")
    return found


def _descendants(pid: int) -> set[int]:
    try:
        return {pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))}
    except psutil.NoSuchProcess:
        return {pid}


def _loopback(address: str) -> bool:
    host = address.rsplit(":", 1)[0]
    return host in ("127.0.0.1", "::1", "::ffff:127.0.0.1")


@pytest.mark.stack
def test_every_service_and_server_listens_on_loopback_only(stack_config, spark, tmp_path):
    pids = {d.pid() for service in all_services(stack_config) for d in service.daemons}
    assert None not in pids
    server = make_server(tmp_path, port=0)  # debl source serve, in this process
    try:
        ours = set().union(*(_descendants(p) for p in pids | {os.getpid()}))
        listening = _listening(ours)
    finally:
        server.server_close()
    everything = [a for addresses in listening.values() for a in addresses]
    # The stack's daemons, this process (the source server) and the Spark JVM it started.
    spark_pid = spark.sparkContext._jvm.ProcessHandle.current().pid()
    assert spark_pid in listening and os.getpid() in listening
    assert {stack_config.mysql.port, stack_config.hbase.thrift_port} <= {
        int(a.rsplit(":", 1)[1]) for a in everything}
    assert [a for a in everything if not _loopback(a)] == []


@pytest.mark.stack
def test_local_infile_sends_only_the_file_debl_chose(stack_config, tmp_path):
    chosen, other = tmp_path / "chosen.tsv", tmp_path / "other.tsv"
    chosen.write_bytes(b"chosen\n")
    other.write_bytes(b"not for the server\n")
    conn = connect(stack_config, local_infile=True)
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE TEMPORARY TABLE t_infile (v VARCHAR(100))")
            conn.allow(str(chosen))
            # The server names the file; a statement (or a server) naming another gets nothing.
            with pytest.raises(ServiceError, match="asked for the local file .*other.tsv"):
                cur.execute(f"LOAD DATA LOCAL INFILE '{other}' INTO TABLE t_infile")
    finally:
        conn.close()
    conn = connect(stack_config, local_infile=True)
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE TEMPORARY TABLE t_infile (v VARCHAR(100))")
            conn.allow(str(chosen))
            cur.execute(f"LOAD DATA LOCAL INFILE '{chosen}' INTO TABLE t_infile")
            cur.execute("SELECT v FROM t_infile")
            assert cur.fetchall() == (("chosen",),)
    finally:
        conn.close()
    # Every other connection has LOCAL INFILE off: the pymysql ones and the mysqlclient reader.
    for conn in (connect(stack_config), connect_reader(stack_config)):
        try:
            cur = conn.cursor()
            cur.execute("CREATE TEMPORARY TABLE t_infile (v VARCHAR(100))")
            with pytest.raises(Exception, match="local infile"):
                cur.execute(f"LOAD DATA LOCAL INFILE '{other}' INTO TABLE t_infile")
            cur.close()
        finally:
            conn.close()


@pytest.mark.stack
def test_no_password_in_any_argv_during_a_load_nor_in_any_file_of_the_state_dir(
        stack_config, spark, tmp_path):
    """A real `debl load` in its own process (with its Spark JVM); every process's argv is
    read while it runs; after it, every file under the state directory (logs, rejects,
    reports, the stack's data) but the password file itself."""
    from tests.dataset import make_dataset

    secret = stack_config.mysql_secret.encode()
    data = tmp_path / "data"
    data.mkdir()
    make_dataset(data, max_id=3001, files=3, bad_lines=2)
    env = {**os.environ, "DEBL_STATE_DIR": str(stack_config.state_dir)}
    proc = subprocess.Popen([sys.executable, "-m", "debl", "load", str(data), "--hot-bytes",
                             "100KB", "--bucket-width", "1000", "--json"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    scans = 0
    leaked = []
    while proc.poll() is None:
        leaked += _argv_holding(secret)
        scans += 1
        time.sleep(0.2)
    out, err = proc.communicate()
    assert proc.returncode == 0, err.decode()[-2000:]
    assert scans >= 1 and leaked == []
    assert secret not in out and secret not in err
    password_file = stack_config.mysql_password_file.resolve()
    assert _files_holding(stack_config.state_dir, secret, but=password_file) == []


@pytest.mark.stack
def test_a_password_in_the_source_url_is_refused_before_anything_is_recorded(stack_config,
                                                                            tmp_path):
    """The password goes in the config, never the URL (tests/test_source_credentials.py)."""
    from debl.errors import SourceError
    from loaders.load import LoadOptions, run_load
    from tests.hostile_http import HostileSource

    (tmp_path / "a.tsv").write_bytes(b"1\t1\t1\t1\tx\t1\t1\n2\t1\t1\t1\ty\t1\t1\n")
    with Catalog(stack_config) as catalog:
        before = catalog.loads.load()
    with HostileSource(tmp_path) as server:
        url = server.url.replace("http://", "http://alice:Pa55-in-the-URL@")
        with pytest.raises(SourceError, match="holds a password") as err:
            run_load(stack_config, url, LoadOptions(hot_bytes=1 << 30))
    assert "Pa55" not in str(err.value)
    with Catalog(stack_config) as catalog:
        after = catalog.loads.load()
    assert (after and after.load_id) == (before and before.load_id)
    assert _files_holding(stack_config.state_dir, b"Pa55-in-the-URL") == []


def _argv_holding(needle: bytes) -> list[int]:
    """The pids of every process whose argv holds *needle*, as the system shows them now."""
    text = needle.decode(errors="surrogateescape")  # as psutil decodes an argv
    return [p.pid for p in psutil.process_iter(["cmdline"])
            if text in "\0".join(p.info["cmdline"] or ())]


def _files_holding(root: Path, needle: bytes, but: Path | None = None) -> list[str]:
    """Every file under *root* (but *but*) that holds *needle*, read in blocks."""
    found = []
    for path in root.rglob("*"):
        if not path.is_file() or path.is_symlink() or path.resolve() == but:
            continue
        try:
            with open(path, "rb") as f:
                tail = b""
                while block := f.read(8 << 20):
                    if needle in tail + block:
                        found.append(str(path))
                        break
                    tail = block[-len(needle):]
        except OSError:
            pass
    return found


@pytest.mark.stack
@pytest.mark.parametrize("approach", ["fileCopy", "debl", "debl-raw", "debl-cold",
                                      "bulkLoad-mysql", "bulkLoad-hbase", "batchPut-hbase"])
def test_a_hostile_listing_writes_nothing_anywhere_with_any_approach(stack_config, tmp_path,
                                                                     approach):
    """Defect: with ``--approach fileCopy`` an ``index.json`` naming
    ``../../../../home/u/.ssh/authorized_keys`` (or an absolute path) wrote the source's bytes
    there. Every approach refuses the listing before anything is copied or recorded, naming
    the entry."""
    from debl.bench.baselines import run_approach
    from debl.errors import SourceError
    from loaders.load import LoadOptions
    from tests.hostile_http import HostileSource

    served, victim = tmp_path / "served", tmp_path / "home" / "u" / ".ssh"
    served.mkdir()
    victim.mkdir(parents=True)
    (served / "payload.tsv").write_bytes(b"1\t1\t1\t1\tssh-ed25519 AAAA attacker\t1\t1\n")
    climbing = "../" * 40 + str(victim / "authorized_keys").lstrip("/")
    absolute = str(victim / "absolute_keys")
    with Catalog(stack_config) as catalog:
        before = catalog.loads.load()
    for name in (climbing, absolute):
        with HostileSource(served) as server:
            server.serve_listing([{"name": "good.tsv", "size": 38, "mtime": 1000.0},
                                  {"name": name, "size": 38, "mtime": 2000.0}],
                                 {"good.tsv": "payload.tsv", name: "payload.tsv"})
            with pytest.raises(SourceError) as err:
                run_approach(stack_config, server.url, LoadOptions(approach=approach))
        assert "index.json entry 2" in str(err.value) and repr(name) in str(err.value)
    assert sorted(p.name for p in victim.iterdir()) == []
    with Catalog(stack_config) as catalog:
        after = catalog.loads.load()
    assert (after and after.load_id) == (before and before.load_id)  # nothing recorded


@pytest.mark.stack
def test_names_shown_on_a_terminal_are_escaped(stack_config, tmp_path):
    """Defect: a local file name (or source directory) holding escape characters reached
    the terminal as they were through `debl status` (and `debl verify`): ESC ] 0 ; sets a
    terminal's title, ESC [ 2 J clears it. They are shown escaped; --json was already safe."""
    from click.testing import CliRunner

    from debl.cli import main

    config = stack_config.replace(mysql_database="debl_escapetest")
    source = tmp_path / "src\x1b[2J"
    source.mkdir()
    name = "evil\x1b]0;owned\x07.tsv"
    (source / name).write_bytes(b"1\t1\t1\t1\tx\t1\t1\nnot a line\n")
    runner = CliRunner()
    loaded = runner.invoke(main, ["load", str(source), "--approach", "bulkLoad-mysql"],
                           obj=config)
    assert loaded.exit_code == 0, loaded.output
    status = runner.invoke(main, ["status"], obj=config).output
    assert "\x1b" not in status and "\x07" not in status, status
    assert "evil\\x1b]0;owned\\x07.tsv: 1" in status and "src\\x1b[2J" in status, status
    with open(source / name, "ab") as f:  # a line more than was loaded: verify names the file
        f.write(b"2\t1\t1\t1\tx\t1\t1\n")
    verified = runner.invoke(main, ["verify"], obj=config)
    assert verified.exit_code == 1 and "MISMATCH file evil" in verified.output, verified.output
    assert "\x1b" not in verified.output and "\x07" not in verified.output, verified.output
