"""HDFS for DeBL: the one client (``HdfsClient``), the one record of a file (``HdfsFile``), a
file opened for reads (``OpenFile``) and HDFS's errors as DeBL's (docs/RUNTIME.md, "HDFS from
Python")."""

from debl.hdfs.client import HdfsClient, OpenFile, read_file
from debl.hdfs.errors import FileChanged, FileGone, HdfsTimeout
from debl.hdfs.files import HdfsFile
from debl.hdfs.rpc import local_user

__all__ = ["FileChanged", "FileGone", "HdfsClient", "HdfsFile", "HdfsTimeout", "OpenFile",
           "local_user", "read_file"]
