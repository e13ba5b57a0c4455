"""The catalog's connection and schema: one transaction per call, driver errors worded, the
schema version checked (and an older catalog replaced by a new load). Every role that reads and
writes the tables is handed the one ``CatalogEngine`` of its ``Catalog`` (``debl.catalog``) and
takes its transactions from it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from debl.catalog.engines import engine_for, named_lock
from debl.catalog.schema import (METADATA, RETIRED_TABLES, SCHEMA_VERSION, schema_table,
                                 schema_version)
from debl.config import Config
from debl.errors import CatalogVersionError, ServiceError
from debl.mysql import describe


class CatalogEngine:
    """The connection and schema that every role of a ``Catalog`` shares. Thread-safe: every
    ``transaction`` takes a pooled connection for one transaction.

    Raises ServiceError when MySQL cannot be reached, CatalogVersionError when the database
    holds the catalog of another DeBL version; with *replace_older* (a new load) an older
    catalog is dropped instead."""

    def __init__(self, config: Config, *, replace_older: bool = False):
        self.config = config
        self.engine = engine_for(config)
        self._check_schema(replace_older)

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A pooled connection in one transaction, committed at the end (rolled back on an
        error); driver errors become ServiceErrors that name the cause."""
        try:
            with self.engine.begin() as conn:
                yield conn
        except DBAPIError as exc:
            raise ServiceError(describe(exc.orig or exc, self.config)) from exc

    def kept_connection(self) -> Connection:
        """A connection of its own in autocommit, for a caller that reads often (a tailer of
        the change log): no checkout, ping and commit per read. The caller closes it; its
        driver errors are the caller's to word (``describe``)."""
        try:
            return self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        except DBAPIError as exc:
            raise ServiceError(describe(exc.orig or exc, self.config)) from exc

    # -- the schema

    def _check_schema(self, replace_older: bool) -> None:
        """Read the version; any other than this DeBL's is read again under the named lock
        ``debl_schema.<database>``, which whoever creates (or replaces) the catalog holds:
        commands started together against a new database would otherwise race, one's CREATE
        TABLE meeting a table another has just made, or one reading a catalog half made as an
        older one (docs/LOADING.md, "The catalog")."""
        with self.transaction() as conn:
            found = schema_version(conn)
        if found != SCHEMA_VERSION:
            found = self._settle(replace_older)
        if found != SCHEMA_VERSION:
            raise CatalogVersionError(self._version_message(found))

    def _settle(self, replace_older: bool) -> int | None:
        """Under the schema lock: the version once more; an older catalog dropped if
        *replace_older*; what is missing created and the version recorded. Returns the version
        now recorded."""
        # Half the connection's read timeout: GET_LOCK's wait must end before the socket's.
        wait = self.config.service_timeout / 2
        lock = named_lock(self.config, f"debl_schema.{self.config.mysql.database}", wait=wait)
        if lock is None:
            raise ServiceError(
                f"another DeBL command has been creating the catalog in MySQL database "
                f"{self.config.mysql.database!r} for over {wait:g} s "
                "(it holds the MySQL lock debl_schema.<database>): look for a hung `debl` "
                "command, end it, and try again")
        try:
            with self.transaction() as conn:
                found = schema_version(conn)
            if found is not None and found < SCHEMA_VERSION and replace_older:
                with self.transaction() as conn:
                    METADATA.drop_all(conn)
                    for name in RETIRED_TABLES:
                        conn.execute(sa.schema.DropTable(sa.Table(name, sa.MetaData()),
                                                         if_exists=True))
                found = None
            if found is not None:  # this version (made meanwhile), or another: not ours to touch
                return found
            with self.transaction() as conn:
                METADATA.create_all(conn)
                conn.execute(mysql.insert(schema_table).prefix_with("IGNORE")
                             .values(version=SCHEMA_VERSION))
                return schema_version(conn)
        finally:
            lock.release()

    def _version_message(self, found: int | None) -> str:
        where = f"the catalog in MySQL database {self.config.mysql.database!r}"
        if found is not None and found > SCHEMA_VERSION:
            return (f"{where} was written by a newer DeBL (schema version {found}; this DeBL "
                    f"reads version {SCHEMA_VERSION}): use that DeBL, or point this one at "
                    "another database (mysql_database, DEBL_MYSQL_DATABASE)")
        return (f"{where} was written by an older DeBL (schema version {found or 0}; this DeBL "
                f"reads version {SCHEMA_VERSION}), so its loads cannot be read: run `debl load` "
                "anew (a new load replaces the old catalog), or drop the database, or point "
                "DeBL at another one (mysql_database, DEBL_MYSQL_DATABASE)")
