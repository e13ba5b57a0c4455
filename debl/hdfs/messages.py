"""Hadoop's protobuf messages, by name, for the calls DeBL makes over Hadoop's RPC
(``debl.hdfs.rpc``): ``messages.GetListingRequestProto(src=..., needLocation=True)``, every field
by its name in Hadoop's ``.proto`` files.

Hadoop's jars carry no ``.proto`` files, but each class that protoc generated from one carries
the file's compiled descriptor (the ``.proto`` as protoc read it: every message, field name and
number). scripts/setup.sh writes the descriptors of the protocols DeBL speaks (the RPC header,
the connection context, the NameNode's and the DataNode's client protocols, and the files they
import), taken from the stack's own Hadoop jars, into ``debl/hdfs/proto/hadoop.pb`` (one
``FileDescriptorSet``; Hadoop's, so not in git), and the protobuf library builds the message
classes from it here (docs/RUNTIME.md, "HDFS from Python").

Pitfalls: the classes are built at the first name asked for (a few tens of ms), not at import,
so a command that never speaks Hadoop's RPC never pays for it; a missing descriptor file is a
``ServiceError`` that names scripts/setup.sh. They are built all at once, under a lock: two
threads that built one message's class each had two classes of it, and a message of one was
refused as a field of a message of the other. The classes live in a pool of their own, so they
never clash with another library's copy of the same ``.proto`` files.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from debl.errors import ServiceError

DESCRIPTORS = Path(__file__).with_name("proto") / "hadoop.pb"
_PACKAGES = ("hadoop.common", "hadoop.hdfs")
_built: dict[str, Any] = {}  # every message class by its full name, once built
_building = threading.Lock()


def _classes() -> dict[str, Any]:
    """Every message class of Hadoop's descriptors, by full name, built at the first call."""
    with _building:
        if not _built:
            # lazy import: the protobuf runtime costs a command that never reads blocks locally
            # its start-up (docs/ARCHITECTURE.md, "Lazy imports")
            from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

            try:
                data = DESCRIPTORS.read_bytes()
            except OSError as exc:
                raise ServiceError(f"Hadoop's protobuf descriptors are missing ({DESCRIPTORS}: "
                                   f"{exc.strerror}): run `bash scripts/setup.sh`") from exc
            files = descriptor_pb2.FileDescriptorSet.FromString(data).file
            # in dependency order, as setup.sh wrote them
            _built.update(message_factory.GetMessages(files, descriptor_pool.DescriptorPool()))
        return _built


def message(name: str) -> Any:
    """The message class of Hadoop's *name* (``RpcRequestHeaderProto``), whichever of Hadoop's
    packages it is in; KeyError for a name none has."""
    classes = _classes()
    for package in _PACKAGES:
        found = classes.get(f"{package}.{name}")
        if found is not None:
            return found
    raise KeyError(f"no message {name} in Hadoop's descriptors ({DESCRIPTORS})")


def __getattr__(name: str) -> Any:
    """``messages.X``: the message class X (``message``), for names that end in ``Proto``."""
    if not name.endswith("Proto"):
        raise AttributeError(name)
    return message(name)
