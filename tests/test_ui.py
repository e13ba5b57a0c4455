"""``debl ui``'s server without a browser (docs/UI.md): answers per second from the cumulative
counts, no credential in what it serves, the loopback only, read-only, and a MySQL that does not
answer worded in the JSON instead of a failure. The page in a real browser:
tests/test_ui_page.py."""

from __future__ import annotations

import http.client
import json
import socket

import pytest
from click.testing import CliRunner

from debl.cli import main
from debl.config import Config
from debl.errors import ConfigError
from debl.ui.history import AnswerHistory
from debl.ui.payload import scrub
from debl.ui.server import UIServer, check_loopback


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _no_mysql(tmp_path) -> Config:
    """A config whose MySQL port has nothing listening (and whose password is known)."""
    return Config(state_dir=tmp_path, mysql_port=_free_port(), mysql_password="pw-of-the-test",
                  hdfs_uri=f"hdfs://127.0.0.1:{_free_port()}", hbase_thrift_port=_free_port())


def _get(url: str, path: str, method: str = "GET", host: str | None = None):
    address = url.split("//")[1].rstrip("/")
    conn = http.client.HTTPConnection(address, timeout=10)
    try:
        conn.request(method, path, headers={"Host": host} if host else {})
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


# ------------------------------------------------------------------- answers per second


def test_rates_are_the_growth_of_the_counts_over_the_last_samples():
    h = AnswerHistory(window_s=600.0, span=2)
    for t, raw, immediate in ((0, 0, 0), (1, 10, 0), (2, 30, 5), (3, 60, 5)):
        h.add(1000.0 + t, "L1", {"raw": raw, "immediate": immediate})
    series = h.series()
    assert series["t"] == [1001.0, 1002.0, 1003.0]
    assert series["rates"]["raw"] == [10.0, 15.0, 25.0]  # over 1, 2, 2 samples
    assert series["rates"]["immediate"] == [0.0, 2.5, 2.5]
    assert list(series["rates"]) == ["immediate", "raw"]  # the page's order


def test_a_gap_and_a_new_load_never_count_what_came_before():
    h = AnswerHistory(span=3)
    h.add(0.0, "L1", {"raw": 100})
    h.add(1.0, "L1", {"raw": 110})
    h.gap()  # MySQL down: the counts published meanwhile arrive at once after it
    h.add(5.0, "L1", {"raw": 500})
    h.add(6.0, "L1", {"raw": 520})
    h.add(7.0, "L2", {"raw": 4})  # the next day became current: its counts start from 0
    series = h.series()
    assert series["t"] == [1.0, 6.0, 7.0]
    assert series["rates"]["raw"] == [10.0, 20.0, 2.0]


def test_levels_are_given_as_read_beside_the_rates():
    """The history of a load answering before its uptime: bytes fetched on demand as a rate,
    keys waiting as read; a history without levels has none."""
    h = AnswerHistory(span=2)
    for t, fetched, waiting in ((0, 0, 0), (1, 1000, 3), (2, 5000, 5), (3, 5000, 0)):
        h.add(100.0 + t, "L1", {"demand_bytes": fetched}, {"keys_waiting": waiting})
    series = h.series()
    assert series["t"] == [101.0, 102.0, 103.0]
    assert series["rates"] == {"demand_bytes": [1000.0, 2500.0, 2000.0]}
    assert series["levels"] == {"keys_waiting": [3, 5, 0]}
    plain = AnswerHistory()
    plain.add(1.0, "L1", {"early": 1})
    plain.add(2.0, "L1", {"early": 4, "immediate": 1})
    assert "levels" not in plain.series()
    assert list(plain.series()["rates"]) == ["immediate", "early"]  # the page's order


def test_the_history_keeps_the_window_only():
    h = AnswerHistory(window_s=10.0, span=1)
    for t in range(30):
        h.add(float(t), "L1", {"raw": t})
    assert h.series()["t"] == [float(t) for t in range(20, 30)]


# ------------------------------------------------------------------- no credential


def test_the_scrub_drops_url_passwords_and_the_mysql_password():
    text = json.dumps({"source": "http://reader:s3cr:et@files.example:8800/day/",
                       "other": "https://h/x?a=b@c", "error": 'denied for "pw-of-the-test"',
                       "quoted": 'p"w\\x'})
    out = scrub(text, ["pw-of-the-test", 'p"w\\x', None, "ab"])
    assert "s3cr" not in out and "http://reader@files.example:8800/day/" in out
    assert "https://h/x?a=b@c" in out  # no password in it: unchanged
    assert "pw-of-the-test" not in out and 'p\\"w\\\\x' not in out and out.count("***") == 2
    assert json.loads(out)["error"] == 'denied for "***"'


# ------------------------------------------------------------------- the server


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "example.org", ""])
def test_any_bind_but_the_loopback_is_refused(tmp_path, host):
    with pytest.raises(ConfigError, match="loopback only"):
        UIServer(_no_mysql(tmp_path), port=0, host=host)


def test_the_loopback_is_accepted():
    assert check_loopback("127.0.0.1") == "127.0.0.1"
    assert check_loopback("::1") == "::1" and check_loopback("localhost") == "localhost"


def test_a_port_in_use_is_a_clear_error(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(main, ["ui", "--port", str(port)],
                                    obj=_no_mysql(tmp_path))
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"port {port} on 127.0.0.1 is in use" in result.output and "--port" in result.output


def test_ui_port_is_a_tcp_port():
    with pytest.raises(ConfigError, match="ui.port"):
        Config(ui_port=70000)


def test_it_serves_the_page_and_the_json_only_read_only_and_for_the_loopback(tmp_path):
    with UIServer(_no_mysql(tmp_path), port=0, interval=0.2) as ui:
        status, headers, body = _get(ui.url, "/")
        assert status == 200 and b'src="ui.js"' in body and b'src="early.js"' in body
        assert "default-src 'self'" in headers["Content-Security-Policy"]
        for path, kind in (("/ui.js", "javascript"), ("/dom.js", "javascript"),
                           ("/early.js", "javascript"), ("/ui.css", "css"),
                           ("/status.json", "json")):
            status, headers, _ = _get(ui.url, path)
            assert status == 200 and kind in headers["Content-Type"], path
        assert _get(ui.url, "/../debl.toml")[0] == 404
        assert _get(ui.url, "/server.py")[0] == 404
        for method in ("POST", "PUT", "DELETE"):
            assert _get(ui.url, "/status.json", method)[0] == 501
        # a page elsewhere reaching it through a DNS name rebound to 127.0.0.1
        assert _get(ui.url, "/status.json", host="attacker.example:8790")[0] == 403
        assert _get(ui.url, "/", host="localhost:9999")[0] == 200  # an ssh forward's port


HOSTILE_HOSTS = ("127.attacker.example", "127.attacker.example:8790", "127.0.0.1.nip.io",
                 "127.0.0.1.attacker.example:80", "localhost.attacker.example",
                 "127.1.attacker", "127.", "127.0.0.1:notaport", "[::1]x:80", "[::1", "::1:80",
                 "[fe80::1]:80", "10.0.0.1", "", " ", "localhost:", "[::1]:", "127.0.0.1:99999")
LOOPBACK_HOSTS = ("127.0.0.1", "127.0.0.1:8790", "127.1.2.3:80", "localhost", "LOCALHOST:9999",
                  "[::1]", "[::1]:8790", "[0:0:0:0:0:0:0:1]:80")


@pytest.mark.parametrize("host", HOSTILE_HOSTS)
def test_a_host_that_only_starts_like_the_loopback_is_refused(tmp_path, host):
    """Defect: ``127.attacker.example`` passed the guard (a prefix test), so a page on a
    name the attacker rebinds to 127.0.0.1 could read the status. Only a loopback address
    (with an optional port, IPv6 in brackets) or ``localhost`` passes."""
    with UIServer(_no_mysql(tmp_path), port=0, interval=0.2) as ui:
        assert _get(ui.url, "/status.json", host=host or " ")[0] == 403


@pytest.mark.parametrize("host", LOOPBACK_HOSTS)
def test_the_loopback_by_address_or_localhost_is_served(tmp_path, host):
    with UIServer(_no_mysql(tmp_path), port=0, interval=0.2) as ui:
        assert _get(ui.url, "/", host=host)[0] == 200


def test_a_mysql_that_does_not_answer_is_a_message_in_the_json_not_a_failure(tmp_path):
    config = _no_mysql(tmp_path)
    with UIServer(config, port=0, interval=0.2) as ui:
        import time

        deadline = time.monotonic() + 20
        while True:
            status, _, body = _get(ui.url, "/status.json")
            data = json.loads(body)
            if data["error"] or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    assert status == 200 and data["status"] is None
    assert data["error"].startswith(f"MySQL at 127.0.0.1:{config.mysql.port} is not reachable")
    assert "Traceback" not in body.decode() and "pw-of-the-test" not in body.decode()
    mysql = next(s for s in data["services"] if s["service"] == "MySQL")
    assert mysql["ok"] is False and mysql["detail"] == data["error"]
