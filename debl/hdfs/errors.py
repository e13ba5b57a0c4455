"""HDFS's errors as DeBL's, told apart by class, never by their message's text (docs/RUNTIME.md,
"HDFS from Python").

Two clients raise them: ``hdfs-native`` raises Python's own exception classes (a path that does
not exist is ``FileNotFoundError``, one that exists already ``FileExistsError``, a server that
refuses the connection ``OSError``; every other failure, a remote exception included, is a
``RuntimeError``), and DeBL's own Hadoop RPC (``debl.hdfs.rpc``) reads the remote exception's
class from its answer's header (``exceptionClassName``): ``RemoteError.class_name``.

Pitfall: hdfs-native's ``RuntimeError`` carries the remote class only inside its text, so DeBL
does not tell those apart; a caller that must know a state asks HDFS for it (the safe mode:
``HdfsClient.in_safe_mode``).
"""

from __future__ import annotations

from debl.errors import ServiceError

# Remote exceptions DeBL tells apart, by the class name the RPC answer's header gives.
FILE_NOT_FOUND = "java.io.FileNotFoundException"
ACCESS_CONTROL = "org.apache.hadoop.security.AccessControlException"

# The first this many characters of a library's message: its Rust debug dumps name every
# replica's protobuf, and a remote exception's text has the server's stack trace in it.
_REASON_CHARS = 300


class FileGone(ServiceError):
    """The NameNode says the path does not exist (anymore)."""


class FileChanged(ServiceError):
    """A file's length when it was opened differs from its listing's: it changed in between."""


class HdfsTimeout(ServiceError):
    """HDFS did not answer a call within the timeout (the call's thread may still be stuck)."""


class RpcError(ServiceError):
    """A call over Hadoop's RPC that got no answer (refused connection, timeout, an answer that
    could not be read)."""


class RemoteError(RpcError):
    """The server refused or failed the call: *class_name* is its Java exception's class (the
    RPC answer's ``exceptionClassName``)."""

    def __init__(self, message: str, class_name: str) -> None:
        super().__init__(message)
        self.class_name = class_name


def native_error(exc: Exception, what: str, path: str, server: str) -> ServiceError:
    """hdfs-native's *exc*, raised doing *what* (``open /x``) to *path*, as DeBL's error, by its
    class: ``FileGone`` for a path that does not exist, else a ``ServiceError`` naming *server*
    (the NameNode's address) and the next step."""
    if isinstance(exc, FileNotFoundError):
        return FileGone(f"HDFS: {path} does not exist")
    if isinstance(exc, FileExistsError):
        return ServiceError(f"HDFS could not {what}: it exists already")
    if isinstance(exc, IsADirectoryError):
        return ServiceError(f"HDFS could not {what}: it is a directory")
    if isinstance(exc, OSError):  # the connection: refused, reset, unreachable
        return ServiceError(f"HDFS at {server} did not answer ({what}): {reason(exc)}; is the "
                            "stack up (`debl stack status`)?")
    return ServiceError(f"HDFS could not {what}: {reason(exc)}; is the stack up (`debl stack "
                        "status`)?")


def reason(exc: BaseException) -> str:
    """A library's error in a line, for a message: its text up to its first line break (a
    remote exception's stack trace follows it, escaped or not), at most ``_REASON_CHARS``."""
    text = str(exc) or type(exc).__name__
    return text.split("\n", 1)[0].split("\\n", 1)[0][:_REASON_CHARS]
