"""Hadoop's RPC (its IPC protocol with the protobuf engine), for the calls hdfs-native does not
offer (docs/RUNTIME.md, "HDFS from Python"): the NameNode's ``getListing`` with block locations,
``getBlockLocations`` and ``setSafeMode`` (to ask), and the DataNode's ``getBlockLocalPathInfo``.
Every message is Hadoop's own (``debl.hdfs.messages``), every field by its name; only simple
authentication, the stack's (a cluster with Kerberos refuses the first call, and the caller
falls back to the reads it had).

The wire format: a connection starts with ``hrpc``, the version (9), the service class (0) and the
authentication protocol (0: none), then a framed ``IpcConnectionContextProto`` naming the user
and the protocol. Every call and answer is one frame: a 4-byte big-endian length, then
varint-delimited messages: ``RpcRequestHeaderProto``, ``RequestHeaderProto`` (the method) and
the request; ``RpcResponseHeaderProto`` and the response back. A refusal is the response
header's ``status`` with its ``exceptionClassName``: ``RemoteError.class_name``, by which
callers tell refusals apart.

Pitfalls:

- One call at a time on a connection (``RpcConnection``): ``RpcPool`` shares a few connections
  per server among every thread of a client, and closes them with it.
- A server that does not answer within *timeout* is an RpcError; the connection is then closed
  (a late answer would be taken for the next call's) and opened again at the next call.
"""

from __future__ import annotations

import getpass
import os
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable

from debl.hdfs import messages
from debl.hdfs.errors import RemoteError, RpcError

NAMENODE = "org.apache.hadoop.hdfs.protocol.ClientProtocol"
DATANODE = "org.apache.hadoop.hdfs.protocol.ClientDatanodeProtocol"
_CONNECTION_HEADER = b"hrpc" + bytes([9, 0, 0])  # version 9, service class 0, no SASL
_CONTEXT_CALL_ID = -3  # the call id Hadoop reserves for the connection context


def local_user() -> str:
    """The user HDFS knows this process as: ``HADOOP_USER_NAME``, else the login name (as
    Hadoop's own client and hdfs-native take it with simple authentication)."""
    return os.environ.get("HADOOP_USER_NAME") or getpass.getuser()


class RpcConnection:
    """Calls of *protocol* (its Java interface's name) on the server at *host*:*port*, one at a
    time."""

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

    def call(self, method: str, request, response_type):
        """*method*'s answer to *request*, a *response_type* message. RemoteError: the server
        refused or failed it (its exception's class); RpcError: no answer within the timeout,
        or one that could not be read."""
        # lazy import: as in debl.hdfs.messages
        from google.protobuf.message import DecodeError

        where = f"{self.protocol.rsplit('.', 1)[-1]}.{method} at {self.host}:{self.port}"
        with self._lock:
            try:
                sock = self._connected()
                call_id, self._next_call = self._next_call, self._next_call + 1
                self._send(sock, [self._rpc_header(call_id, retry=0),
                                  messages.RequestHeaderProto(
                                      methodName=method, declaringClassProtocolName=self.protocol,
                                      clientProtocolVersion=1),
                                  request])
                header, body = self._receive(sock)
                if header.callId != call_id:
                    raise ConnectionError(f"the answer is to call {header.callId}, not {call_id}")
                if header.status != header.SUCCESS:
                    if header.status == header.FATAL:
                        self._drop()  # the server closes the connection after a fatal error
                    text = header.errorMsg.split("\n", 1)[0]
                    raise RemoteError(f"{where}: {header.exceptionClassName.rsplit('.', 1)[-1]}"
                                      f"{': ' + text if text else ''}",
                                      header.exceptionClassName)
                return response_type.FromString(body)
            except (OSError, DecodeError) as exc:
                self._drop()
                raise RpcError(f"{where}: {exc or type(exc).__name__}") from exc

    def _rpc_header(self, call_id: int, retry: int):
        return messages.RpcRequestHeaderProto(
            rpcKind="RPC_PROTOCOL_BUFFER", rpcOp="RPC_FINAL_PACKET", callId=call_id,
            clientId=self._client_id, retryCount=retry)

    def _connected(self) -> socket.socket:
        if self._sock is None:
            sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.sendall(_CONNECTION_HEADER)
                context = messages.IpcConnectionContextProto(
                    userInfo=messages.UserInformationProto(effectiveUser=self.user),
                    protocol=self.protocol)
                self._send(sock, [self._rpc_header(_CONTEXT_CALL_ID, retry=-1), context])
            except OSError:
                sock.close()
                raise
            self._sock = sock
        return self._sock

    def _drop(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    @staticmethod
    def _send(sock: socket.socket, parts: list) -> None:
        payload = b"".join(_delimited(part.SerializeToString()) for part in parts)
        sock.sendall(struct.pack(">I", len(payload)) + payload)

    @staticmethod
    def _receive(sock: socket.socket):
        size = struct.unpack(">I", _exactly(sock, 4))[0]
        frame = _exactly(sock, size)
        header_size, at = _read_varint(frame, 0)
        header = messages.RpcResponseHeaderProto.FromString(frame[at:at + header_size])
        at += header_size
        if at >= len(frame):
            return header, b""
        body_size, at = _read_varint(frame, at)
        return header, frame[at:at + body_size]


class RpcPool:
    """Connections of *protocol* to its servers, shared by every thread: at most *size* to
    each server, each lent to one call at a time (a call waits at most *timeout* for one to be
    free). ``close`` closes them all; one lent then closes when it comes back."""

    def __init__(self, protocol: str, timeout: float, size: int,
                 connect: Callable[..., RpcConnection] = RpcConnection) -> None:
        self.protocol, self.timeout, self.size = protocol, timeout, size
        self._connect = connect
        self._idle: dict[tuple[str, int], list[RpcConnection]] = {}
        self._open: dict[tuple[str, int], int] = {}  # connections per server, lent or idle
        self._free = threading.Condition()
        self._closed = False

    def call(self, address: tuple[str, int], method: str, request, response_type):
        """``RpcConnection.call`` on a connection to *address* (host, port)."""
        connection = self._take(address)
        try:
            return connection.call(method, request, response_type)
        finally:
            self._give(address, connection)

    def held(self) -> int:
        """The connections the pool holds, lent or idle, to every server."""
        with self._free:
            return sum(self._open.values())

    def close(self) -> None:
        with self._free:
            self._closed = True
            idle, self._idle = self._idle, {}
            for address, connections in idle.items():
                self._open[address] -= len(connections)
            self._free.notify_all()
        for connections in idle.values():
            for connection in connections:
                connection.close()

    def _take(self, address: tuple[str, int]) -> RpcConnection:
        deadline = time.monotonic() + self.timeout
        with self._free:
            while True:
                if self._closed:
                    raise RpcError(f"{self.protocol.rsplit('.', 1)[-1]}: the client is closed")
                idle = self._idle.get(address)
                if idle:
                    return idle.pop()
                if self._open.get(address, 0) < self.size:
                    self._open[address] = self._open.get(address, 0) + 1
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RpcError(f"{self.protocol.rsplit('.', 1)[-1]} at {address[0]}:"
                                   f"{address[1]}: no connection free within {self.timeout:g} s")
                self._free.wait(left)
        return self._connect(*address, self.protocol, self.timeout)  # connects at its 1st call

    def _give(self, address: tuple[str, int], connection: RpcConnection) -> None:
        with self._free:
            if not self._closed:
                self._idle.setdefault(address, []).append(connection)
                self._free.notify()
                return
            self._open[address] -= 1
        connection.close()


def _delimited(message: bytes) -> bytes:
    n, out = len(message), bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out) + message


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        if at >= len(data):
            raise ConnectionError("the server's answer ends inside a length")
        byte = data[at]
        at += 1
        n |= (byte & 0x7F) << shift
        if byte < 0x80:
            return n, at
        shift += 7


def _exactly(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        part = sock.recv(n - len(out))
        if not part:
            raise ConnectionError("the server closed the connection")
        out += part
    return bytes(out)

