"""A small WebHDFS client: DeBL's way to HDFS from Python (the cold copy, dist_ch's bucket files,
gen_HF's reads, the raw route, verify).

WebHDFS is HDFS's REST interface on the NameNode's HTTP port; writes and reads are redirected to a
DataNode. Using it keeps the copy in the loader's process (no JVM per chunk) and streams: a chunk
is sent as it is read from the source, never held whole in memory.

Pitfalls:

- ``CREATE`` and ``OPEN`` answer with a 307 redirect to a DataNode; urllib does not follow a
  redirect for PUT, so this client follows it itself with ``http.client``.
- A write is not atomic: write to a temporary name and ``rename`` it over the final one (what
  ``write_atomic`` does) so that a killed copy never leaves a half chunk under the final name.
- ``read_range`` asks the DataNode of its previous redirect directly (any DataNode serves any
  file, reading remote blocks itself): many small reads then cost one request each, not two,
  and the NameNode's redirect cost as much as the read itself (docs/COORDINATOR.md, "The raw
  route", row "How it reaches HDFS"). If that DataNode fails, the NameNode is asked again.
"""

from __future__ import annotations

import getpass
import json
import http.client
import urllib.parse
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from debl import request_cost
from debl.config import Config
from debl.errors import ServiceError


@dataclass(frozen=True)
class FileStatus:
    path: str
    length: int
    is_dir: bool
    modification_time_ms: int


class WebHDFS:
    """WebHDFS client for the configured NameNode. Cheap to create; holds no connection. Each
    socket operation waits at most *timeout* seconds (default ``service_timeout``)."""

    def __init__(self, config: Config, timeout: float | None = None):
        parsed = urllib.parse.urlparse(config.hdfs.uri)
        self.host = parsed.hostname or "127.0.0.1"
        self.port = config.hdfs.http_port
        # Per socket operation: a NameNode or DataNode silent this long fails the request.
        self.timeout = config.service_timeout if timeout is None else timeout
        self.user = getpass.getuser()
        # (host, port, query parameters but offset and length) of the last OPEN's DataNode
        self._datanode: tuple[str, int, dict[str, str]] | None = None

    # -- plumbing

    def _url(self, path: str, op: str, **params: object) -> str:
        if not path.startswith("/"):
            raise ValueError(f"HDFS path must be absolute: {path!r}")
        query = urllib.parse.urlencode({"op": op, "user.name": self.user, **params})
        return f"/webhdfs/v1{urllib.parse.quote(path)}?{query}"

    def _request(self, method: str, url: str, host: str | None = None, port: int | None = None,
                 body: bytes | Iterable[bytes] | None = None) -> http.client.HTTPResponse:
        conn = http.client.HTTPConnection(host or self.host, port or self.port, timeout=self.timeout)
        try:
            if body is None or isinstance(body, bytes):
                conn.request(method, url, body=body)
            else:
                conn.request(method, url, body=body, encode_chunked=True,
                             headers={"Transfer-Encoding": "chunked",
                                      "Content-Type": "application/octet-stream"})
            resp = conn.getresponse()
            resp.debl_server = f"{_who(host)} at {host or self.host}:{port or self.port}"
            return resp
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise ServiceError(f"{_who(host)} at {host or self.host}:{port or self.port} did "
                               f"not answer: {exc or type(exc).__name__}; is the stack up "
                               "(`debl stack status`)?") from exc

    def _body(self, resp: http.client.HTTPResponse, amount: int | None = None) -> bytes:
        """Read (part of) a response's body; a connection that breaks or stalls midway is a
        ServiceError naming the server, never a raw socket error."""
        try:
            return resp.read(amount)
        except (OSError, http.client.HTTPException) as exc:
            server = getattr(resp, "debl_server", f"HDFS at {self.host}:{self.port}")
            raise ServiceError(f"{server} broke off a transfer: {exc or type(exc).__name__}; "
                               "is the stack up (`debl stack status`)?") from exc

    def _json(self, method: str, path: str, op: str, **params: object) -> dict:
        resp = self._request(method, self._url(path, op, **params))
        data = self._body(resp)
        if resp.status >= 400:
            raise ServiceError(_remote_error(op, path, resp.status, data))
        return json.loads(data) if data else {}

    def _redirected(self, method: str, path: str, op: str, body=None,
                    **params: object) -> http.client.HTTPResponse:
        first = self._request(method, self._url(path, op, **params))
        if first.status != 307:
            data = self._body(first)
            raise ServiceError(_remote_error(op, path, first.status, data))
        self._body(first)
        target = urllib.parse.urlparse(first.getheader("Location"))
        if op == "OPEN" and target.hostname and target.port:
            self._datanode = (target.hostname, target.port, {
                k: v for k, v in urllib.parse.parse_qsl(target.query)
                if k not in ("offset", "length")})
        resp = self._request(method, f"{target.path}?{target.query}", target.hostname,
                             target.port, body)
        if resp.status >= 400:
            raise ServiceError(_remote_error(op, path, resp.status, self._body(resp)))
        return resp

    # -- operations

    def write(self, path: str, data: bytes | Iterable[bytes], overwrite: bool = False) -> None:
        """Create *path* with *data* (bytes, or an iterable of byte blocks sent as they come)."""
        self._body(self._redirected("PUT", path, "CREATE", body=data,
                                    overwrite=str(overwrite).lower()))

    def write_atomic(self, path: str, data: bytes | Iterable[bytes]) -> None:
        """Write to ``path + '._COPYING_'`` then rename over *path*: never a half file."""
        tmp = path + "._COPYING_"
        self.write(tmp, data, overwrite=True)
        self.rename(tmp, path, overwrite=True)

    def read(self, path: str) -> bytes:
        return self._body(self._redirected("GET", path, "OPEN"))

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        """Exactly *length* bytes of *path* from *offset* (one ranged OPEN); ServiceError if the
        file ends first."""
        if length <= 0:
            return b""
        data = self._read_from_datanode(path, offset, length)
        if data is None:
            data = self._body(self._redirected("GET", path, "OPEN", offset=offset,
                                               length=length))
        if len(data) != length:
            raise ServiceError(f"HDFS OPEN {path} at {offset}: {len(data)} bytes instead of "
                               f"{length}: the file is shorter than expected (did it change?)")
        return data

    def _read_from_datanode(self, path: str, offset: int, length: int) -> bytes | None:
        """A ranged OPEN straight to the last redirect's DataNode; None when there is none or it
        failed (then the NameNode redirects again). A missing file is an error at once."""
        datanode = self._datanode
        if datanode is None:
            return None
        host, port, params = datanode
        query = urllib.parse.urlencode({**params, "offset": offset, "length": length})
        try:
            resp = self._request("GET", f"/webhdfs/v1{urllib.parse.quote(path)}?{query}", host,
                                 port)
            data = resp.read()
        except (ServiceError, OSError, http.client.HTTPException):
            self._datanode = None
            return None
        if resp.status == 404:
            raise ServiceError(_remote_error("OPEN", path, resp.status, data))
        if resp.status != 200:
            self._datanode = None
            return None
        return data

    def stream(self, path: str, block: int = 1 << 20, offset: int = 0,
               length: int | None = None) -> Iterator[bytes]:
        """The bytes of *path* (from *offset*, at most *length*), *block* at a time."""
        params: dict[str, object] = {"offset": offset} if offset else {}
        if length is not None:
            params["length"] = length
        resp = self._redirected("GET", path, "OPEN", **params)
        while data := self._body(resp, block):
            yield data

    def mkdirs(self, path: str) -> None:
        self._json("PUT", path, "MKDIRS")

    def delete(self, path: str, recursive: bool = False) -> bool:
        return bool(self._json("DELETE", path, "DELETE", recursive=str(recursive).lower())
                    .get("boolean"))

    def rename(self, src: str, dst: str, overwrite: bool = False) -> None:
        if overwrite:
            self.delete(dst)
        if not self._json("PUT", src, "RENAME", destination=dst).get("boolean"):
            raise ServiceError(f"HDFS rename {src} -> {dst} failed")

    def status(self, path: str) -> FileStatus | None:
        resp = self._request("GET", self._url(path, "GETFILESTATUS"))
        data = self._body(resp)
        if resp.status == 404:
            return None
        if resp.status >= 400:
            raise ServiceError(_remote_error("GETFILESTATUS", path, resp.status, data))
        return _status(path, json.loads(data)["FileStatus"])

    def size(self, path: str) -> int:
        """The bytes of every file under *path* (0 when it does not exist): one replica's."""
        resp = self._request("GET", self._url(path, "GETCONTENTSUMMARY"))
        data = self._body(resp)
        if resp.status == 404:
            return 0
        if resp.status >= 400:
            raise ServiceError(_remote_error("GETCONTENTSUMMARY", path, resp.status, data))
        return int(json.loads(data)["ContentSummary"]["length"])

    def list(self, path: str) -> list[FileStatus]:
        with request_cost.Timed(request_cost.HDFS_META):  # the raw route's, on a query's path
            statuses = self._json("GET", path, "LISTSTATUS")["FileStatuses"]["FileStatus"]
        return [_status(f"{path.rstrip('/')}/{s['pathSuffix']}", s) for s in statuses]


def _who(datanode_host: str | None) -> str:
    """Which HDFS server a request went to: the NameNode, or (after a redirect) a DataNode."""
    return "HDFS" if datanode_host is None else "HDFS DataNode"


def _status(path: str, s: dict) -> FileStatus:
    return FileStatus(path, int(s["length"]), s["type"] == "DIRECTORY", int(s["modificationTime"]))


def _remote_error(op: str, path: str, status: int, body: bytes) -> str:
    try:
        exc = json.loads(body)["RemoteException"]
        reason = f"{exc.get('exception')}: {exc.get('message')}"
    except (ValueError, KeyError, TypeError):
        reason = body[:300].decode(errors="replace")
    if "SafeModeException" in reason:
        reason += " (the NameNode is still starting; retry in a few seconds)"
    return f"HDFS {op} {path} failed ({status}): {reason}"
