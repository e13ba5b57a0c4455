"""The stack's source database: a second MariaDB, with LinkBench's link table and its binary
log on, which clients write to and ``debl source dump`` dumps (docs/RUNTIME.md, "The source
database"; docs/FRESHNESS.md). Its state is under ``.debl/source_db/``: data directory, socket,
pid file, log and the two users' passwords (0600 files, as MySQL's).

The binary log is what a follower reads: ``ROW`` events with ``FULL`` row images and full
metadata (``binlog_row_metadata=FULL``: without it a replication client knows no column types
and reads ``VARBINARY`` as UTF-8, failing on LinkBench data that is not: RUNTIME_NOTES, checked
here), GTIDs in domain 0 from ``source_db.server_id``, kept ``source_db.log_expire`` seconds.
Its memory is small (it is a second server beside DeBL's own on the 2-core machine): a
256 MiB buffer pool, 100 connections.
"""

from __future__ import annotations

from debl.stack.mariadb import Account, MariaDBServer, stack_password
from debl.store.source_db import server_summary, table_ddl


class SourceDB(MariaDBServer):
    name = "Source DB"
    daemon_name = "source-db"

    @property
    def slug(self) -> str:
        return "source_db"

    @property
    def port(self) -> int:
        return self.config.source_db.port

    @property
    def address(self) -> str:
        return f"{self.config.source_db.host}:{self.config.source_db.port}"

    def options(self) -> list[str]:
        db = self.config.source_db
        return [f"--log-bin={self.home / 'data' / 'binlog'}", "--binlog-format=ROW",
                "--binlog-row-image=FULL", "--binlog-row-metadata=FULL",
                f"--server-id={db.server_id}", "--gtid-domain-id=0",
                f"--binlog-expire-logs-seconds={db.log_expire}",
                "--innodb-buffer-pool-size=256M", "--innodb-log-file-size=128M",
                "--innodb-flush-log-at-trx-commit=2", "--key-buffer-size=8M",
                "--max-allowed-packet=64M", "--max-connections=100"]

    def databases(self) -> list[str]:
        return [self.config.source_db.database]

    def schema(self) -> list[str]:
        db = self.config.source_db
        return [f"USE `{db.database}`", table_ddl(db.table)]

    def accounts(self) -> list[Account]:
        db, config = self.config.source_db, self.config
        return [
            Account(db.user, stack_password(db.password, config.source_db_password_file),
                    (("ALL PRIVILEGES", f"`{db.database}`.*"),)),
            # The follower's: the log, its status, and the table (docs/FRESHNESS.md, "Capture")
            Account(db.replication_user,
                    stack_password(db.replication_password,
                                   config.source_db_replication_password_file),
                    (("REPLICATION SLAVE, BINLOG MONITOR", "*.*"),
                     ("SELECT", f"`{db.database}`.`{db.table}`"))),
        ]

    def probe(self) -> str:
        return server_summary(self.config)
