"""Hadoop's RPC (its IPC protocol with the protobuf engine), for the calls of local block reads
(``debl.hdfs_local``): the NameNode's ``getListing`` and ``getBlockLocations`` and the
DataNode's ``getBlockLocalPathInfo``. Written from the protocol's published description (Hadoop's
``RpcHeader``, ``IpcConnectionContext``, ``ProtobufRpcEngine2`` messages); only simple
authentication, the stack's (a cluster with Kerberos gets an RpcError at the first call, and the
caller falls back to the reads it had).

The wire, in brief: a connection starts with ``hrpc``, the version (9), the service class (0)
and the authentication protocol (0: none), then a framed context naming the user and the
protocol. Every call and answer is framed: a 4-byte big-endian length, then varint-delimited
protobuf messages (the RPC header, the method's header, its request; the RPC header and the
response back).

Pitfalls:

- One connection per ``HadoopRPC``, one call at a time on it (a lock): the calls here are made
  when a directory is listed or a file opened, never per read.
- A server that does not answer within *timeout* is an RpcError; the connection is then closed
  and opened again at the next call.
"""

from __future__ import annotations

import getpass
import os
import socket
import struct
import threading
import uuid

from debl.errors import ServiceError

_CONNECTION_HEADER = b"hrpc" + bytes([9, 0, 0])  # version 9, service class 0, no SASL
_RPC_PROTOCOL_BUFFER = 2
_CONTEXT_CALL_ID = -3  # the call id Hadoop reserves for the connection context
_SUCCESS = 0

# A field of a message: its number and its value (an int is a varint, bytes or str a
# length-delimited field, a list a message of fields nested in it).
Field = tuple[int, "int | bytes | str | list[Field]"]


class RpcError(ServiceError):
    """The server refused or failed the call (its exception's class and first line), or did
    not answer."""


# ---------------------------------------------------------------------- protobuf's wire format

def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # a negative int64 is its two's complement, ten bytes
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def zigzag(n: int) -> int:
    """A ``sint32``'s varint value."""
    return (n << 1) ^ (n >> 31)


def encode(fields: list[Field]) -> bytes:
    """The message of *fields*."""
    out = bytearray()
    for number, value in fields:
        if isinstance(value, int):
            out += _varint(number << 3) + _varint(value)
            continue
        if isinstance(value, list):
            value = encode(value)
        elif isinstance(value, str):
            value = value.encode()
        out += _varint(number << 3 | 2) + _varint(len(value)) + value
    return bytes(out)


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        byte = data[at]
        at += 1
        n |= (byte & 0x7F) << shift
        if byte < 0x80:
            return n, at
        shift += 7


def decode(data: bytes) -> dict[int, list[int | bytes]]:
    """A message's fields by number, each a list of its values (a varint's int, a
    length-delimited field's bytes: a string or a nested message, for ``decode`` again)."""
    fields: dict[int, list[int | bytes]] = {}
    at = 0
    while at < len(data):
        key, at = _read_varint(data, at)
        kind = key & 7
        if kind == 0:
            value, at = _read_varint(data, at)
        elif kind == 2:
            size, at = _read_varint(data, at)
            value, at = data[at:at + size], at + size
        elif kind == 1:
            value, at = int.from_bytes(data[at:at + 8], "little"), at + 8
        elif kind == 5:
            value, at = int.from_bytes(data[at:at + 4], "little"), at + 4
        else:
            raise ValueError(f"protobuf wire type {kind} is not supported")
        fields.setdefault(key >> 3, []).append(value)
    return fields


def local_user() -> str:
    """The user HDFS knows this process as: ``HADOOP_USER_NAME``, else the login name (as
    Hadoop's own client and hdfs-native take it with simple authentication)."""
    return os.environ.get("HADOOP_USER_NAME") or getpass.getuser()


def _delimited(message: bytes) -> bytes:
    return _varint(len(message)) + message


# ---------------------------------------------------------------------- the client

class HadoopRPC:
    """Calls of *protocol* (its Java interface's name) on the server at *host*:*port*."""

    def __init__(self, host: str, port: int, protocol: str, timeout: float,
                 user: str | None = None) -> None:
        self.host, self.port, self.protocol, self.timeout = host, port, protocol, timeout
        self.user = user or local_user()
        self._client_id = uuid.uuid4().bytes
        self._sock: socket.socket | None = None
        self._next_call = 0
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._drop()

    def call(self, method: str, request: list[Field]) -> dict[int, list[int | bytes]]:
        """The decoded response of *method* for *request*. RpcError: refused, failed, or no
        answer within the timeout."""
        with self._lock:
            try:
                sock = self._connected()
                call_id, self._next_call = self._next_call, self._next_call + 1
                self._send(sock, [self._rpc_header(call_id, retry=0),
                                  encode([(1, method), (2, self.protocol), (3, 1)]),
                                  encode(request)])
                header, body = self._receive(sock)
            except OSError as exc:
                self._drop()
                raise RpcError(f"{self.protocol.rsplit('.', 1)[-1]}.{method} at "
                               f"{self.host}:{self.port}: {exc}") from exc
            if header.get(2, [_SUCCESS])[0] != _SUCCESS:
                name = bytes(header.get(4, [b"?"])[0]).decode(errors="replace")
                text = bytes(header.get(5, [b""])[0]).decode(errors="replace")
                raise RpcError(f"{method} at {self.host}:{self.port}: {name.rsplit('.', 1)[-1]}: "
                               f"{text.splitlines()[0] if text else ''}".rstrip(": "))
            return decode(body)

    def _rpc_header(self, call_id: int, retry: int) -> bytes:
        return encode([(1, _RPC_PROTOCOL_BUFFER), (2, 0), (3, zigzag(call_id)),
                       (4, self._client_id), (5, zigzag(retry))])

    def _connected(self) -> socket.socket:
        if self._sock is None:
            sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(_CONNECTION_HEADER)
            context = encode([(2, [(1, self.user)]), (3, self.protocol)])
            self._send(sock, [self._rpc_header(_CONTEXT_CALL_ID, retry=-1), context])
            self._sock = sock
        return self._sock

    def _drop(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    @staticmethod
    def _send(sock: socket.socket, messages: list[bytes]) -> None:
        payload = b"".join(_delimited(m) for m in messages)
        sock.sendall(struct.pack(">I", len(payload)) + payload)

    @staticmethod
    def _receive(sock: socket.socket) -> tuple[dict, bytes]:
        size = struct.unpack(">I", _exactly(sock, 4))[0]
        frame = _exactly(sock, size)
        header_size, at = _read_varint(frame, 0)
        header = decode(frame[at:at + header_size])
        at += header_size
        if at >= len(frame):
            return header, b""
        body_size, at = _read_varint(frame, at)
        return header, frame[at:at + body_size]


def _exactly(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        part = sock.recv(n - len(out))
        if not part:
            raise ConnectionError("the server closed the connection")
        out += part
    return bytes(out)
