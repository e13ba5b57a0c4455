"""DeBL's exceptions. Every error a user can meet is a ``DeblError`` with a message that names
the cause and, where there is one, the next step; the command line prints it without a traceback.

    DeblError
    ├── ConfigError          a setting is missing, unknown or invalid
    ├── ServiceError         MariaDB, HDFS, HBase/Thrift or Spark cannot be reached or failed
    │   ├── StackError       the local stack could not start; names the service and its log
    │   ├── GenHFLockHeld    another gen_HF holds the dataset's lock
    │   ├── FollowerLockHeld another `debl follow` holds the dataset's lock
    │   ├── ChangesForgotten the change log no longer holds a load's changes: for good
    │   └── JvmGone          this process's Spark driver JVM died: start the command again
    ├── CatalogVersionError  the catalog's tables are from another DeBL version
    ├── SourceError          the input source is missing, unreadable or unreachable
    ├── ManifestError        a file's manifest is malformed (names the file and the field)
    ├── BadInputError        too many lines that do not parse (over --max-bad)
    ├── LoadStateError       a load id that does not exist, or cannot be resumed
    ├── BucketFileError      a bucket file in HDFS is gone or damaged (names the file)
    └── QueryTimeout         a query passed its deadline before its bucket was loaded
"""


class DeblError(Exception):
    """Base of every error DeBL raises on purpose."""


class ConfigError(DeblError):
    pass


class ServiceError(DeblError):
    pass


class StackError(ServiceError):
    def __init__(self, service: str, message: str, log: str | None = None, tail: str = ""):
        text = f"{service}: {message}"
        if log:
            text += f"\n  log: {log}"
        if tail:
            text += "\n  last lines:\n" + "\n".join("    " + line for line in tail.splitlines())
        super().__init__(text)
        self.service = service
        self.log = log


class GenHFLockHeld(ServiceError):
    """Another gen_HF runs on this dataset; one may start when it ends (callers may wait)."""


class FollowerLockHeld(ServiceError):
    """Another ``debl follow`` runs on this dataset; the message says where."""


class ChangesForgotten(ServiceError):
    """The change log no longer holds every change past a load's dump (pruned, or lost with
    the source's log): that load cannot be kept fresh, however often it is asked."""


class JvmGone(ServiceError):
    """The Spark driver JVM of this process died (killed, crashed, out of memory): nothing can
    run in it any more, so retrying in the same process is pointless."""


class CatalogVersionError(DeblError):
    """The database's catalog has another schema version; the message says what to do."""


class SourceError(DeblError):
    pass


class ManifestError(DeblError):
    """A source file's manifest (docs/LOADING.md, "The manifest") that cannot be used; the
    message names the file and the field. The file then claims every id1: the load goes on."""


class BadInputError(DeblError):
    pass


class LoadStateError(DeblError):
    pass


class BucketFileError(DeblError):
    pass


class QueryTimeout(DeblError):
    pass
