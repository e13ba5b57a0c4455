"""Hadoop's RPC as DeBL speaks it (debl.hadoop_rpc): protobuf's wire format, by hand, and a
refused call as an error that names the server's exception."""

from __future__ import annotations

import pytest

from debl.hadoop_rpc import HadoopRPC, RpcError, decode, encode, zigzag


def test_messages_round_trip_through_the_wire_format():
    nested = [(1, "pool"), (2, 2**40 + 3)]
    data = encode([(1, 5), (2, b"\x00\xff"), (3, nested), (3, "second"), (7, 0)])
    fields = decode(data)
    assert fields[1] == [5] and fields[2] == [b"\x00\xff"] and fields[7] == [0]
    assert decode(fields[3][0]) == {1: [b"pool"], 2: [2**40 + 3]}
    assert fields[3][1] == b"second"


def test_varints_as_protobuf_writes_them():
    # protobuf's own examples: 150 is 96 01; a negative int64 takes ten bytes
    assert encode([(1, 150)]) == b"\x08\x96\x01"
    assert len(encode([(1, -1)])) == 11
    assert decode(encode([(1, -1)]))[1] == [2**64 - 1]
    assert [zigzag(n) for n in (0, -1, 1, -2, -3)] == [0, 1, 2, 3, 5]


def test_a_wire_type_it_does_not_read_is_an_error():
    with pytest.raises(ValueError, match="wire type 3"):
        decode(b"\x0b")


@pytest.mark.stack
def test_a_call_the_namenode_refuses_names_its_exception(stack_config):
    host, port = stack_config.hdfs.uri.split("//")[1].split(":")
    namenode = HadoopRPC(host, int(port), "org.apache.hadoop.hdfs.protocol.ClientProtocol", 10)
    try:
        with pytest.raises(RpcError, match=r"noSuchMethod at .*: RpcNoSuchMethodException"):
            namenode.call("noSuchMethod", [])
        # The connection stays usable after a refused call: the next one gets its own answer.
        with pytest.raises(RpcError, match=r"FileNotFoundException: Path is not a file: /$"):
            namenode.call("getBlockLocations", [(1, "/"), (2, 0), (3, 1)])
    finally:
        namenode.close()


def test_a_server_that_is_not_there_is_an_rpc_error():
    client = HadoopRPC("127.0.0.1", 1, "org.apache.hadoop.hdfs.protocol.ClientProtocol", 2)
    with pytest.raises(RpcError, match=r"ClientProtocol.getBlockLocations at 127.0.0.1:1"):
        client.call("getBlockLocations", [(1, "/")])
