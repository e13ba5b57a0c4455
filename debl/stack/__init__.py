"""The local stack: MariaDB, HDFS and HBase + Thrift on 127.0.0.1, state under ``.debl/``."""
