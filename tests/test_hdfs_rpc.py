"""Hadoop's RPC as DeBL speaks it (debl.hdfs.rpc): Hadoop's own messages, a refused call as an
error carrying the server's exception class, and the connections a client's threads share."""

from __future__ import annotations

import threading

import pytest

from debl.hdfs import messages
from debl.hdfs.errors import FILE_NOT_FOUND, RemoteError, RpcError
from debl.hdfs.rpc import NAMENODE, RpcConnection, RpcPool


def test_messages_have_hadoops_field_names_and_numbers():
    fields = {f.name: f.number for f in messages.LocatedBlockProto.DESCRIPTOR.fields}
    assert fields["corrupt"] == 4 and fields["locs"] == 3 and fields["b"] == 1
    request = messages.GetListingRequestProto(src="/d", startAfter=b"x", needLocation=True)
    assert request.SerializeToString() == b"\x0a\x02/d\x12\x01x\x18\x01"  # fields 1, 2, 3
    assert messages.GetListingRequestProto.FromString(request.SerializeToString()) == request
    with pytest.raises(AttributeError):
        messages.no_such_message  # noqa: B018 -- not a message's name


@pytest.mark.stack
def test_a_call_the_namenode_refuses_names_its_exception_class(stack_config):
    host, port = stack_config.hdfs.uri.split("//")[1].split(":")
    namenode = RpcConnection(host, int(port), NAMENODE, 10)
    try:
        with pytest.raises(RemoteError, match=r"noSuchMethod at .*: RpcNoSuchMethodException") \
                as refused:
            namenode.call("noSuchMethod", messages.GetListingRequestProto(
                src="/", startAfter=b"", needLocation=False), messages.GetListingResponseProto)
        assert refused.value.class_name == "org.apache.hadoop.ipc.RpcNoSuchMethodException"
        # The connection stays usable after a refused call: the next one gets its own answer.
        with pytest.raises(RemoteError, match=r"FileNotFoundException: Path is not a file: /$") \
                as refused:
            namenode.call("getBlockLocations",
                          messages.GetBlockLocationsRequestProto(src="/", offset=0, length=1),
                          messages.GetBlockLocationsResponseProto)
        assert refused.value.class_name == FILE_NOT_FOUND
        listing = namenode.call("getListing", messages.GetListingRequestProto(
            src="/", startAfter=b"", needLocation=False), messages.GetListingResponseProto)
        assert listing.HasField("dirList")
    finally:
        namenode.close()


def test_a_server_that_is_not_there_is_an_rpc_error():
    client = RpcConnection("127.0.0.1", 1, NAMENODE, 2)
    with pytest.raises(RpcError, match=r"ClientProtocol.getBlockLocations at 127.0.0.1:1"):
        client.call("getBlockLocations", messages.GetBlockLocationsRequestProto(
            src="/", offset=0, length=1), messages.GetBlockLocationsResponseProto)


class _Connection:
    """A stand-in for one connection: counts the calls on it at once (at most one may run)."""

    made: list[_Connection] = []

    def __init__(self, host: str, port: int, protocol: str, timeout: float) -> None:
        self.busy, self.most, self.closed = 0, 0, False
        self.lock = threading.Lock()
        _Connection.made.append(self)

    def call(self, method, request, response_type):
        with self.lock:
            self.busy += 1
            self.most = max(self.most, self.busy)
        threading.Event().wait(0.01)
        with self.lock:
            self.busy -= 1
        return method

    def close(self) -> None:
        self.closed = True


def test_a_pool_shares_a_few_connections_per_server_among_every_thread():
    """The local reads' pool: many threads, each calling many times, open at most *size*
    connections to each server, one call at a time on each; ``close`` closes them all, one lent
    at that moment once it comes back."""
    _Connection.made = []
    pool = RpcPool(NAMENODE, timeout=10.0, size=2, connect=_Connection)
    barrier = threading.Barrier(8)

    def calls(port: int) -> None:
        barrier.wait()
        for _ in range(10):
            assert pool.call(("127.0.0.1", port), "getListing", None, None) == "getListing"

    threads = [threading.Thread(target=calls, args=(1 + i % 2,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert 2 <= len(_Connection.made) == pool.held() <= 4  # two servers, at most two each
    assert max(c.most for c in _Connection.made) == 1
    pool.close()
    assert all(c.closed for c in _Connection.made) and pool.held() == 0
    with pytest.raises(RpcError, match="closed"):
        pool.call(("127.0.0.1", 1), "getListing", None, None)
