"""What the reliability campaigns watch of the catalog's MySQL sessions (docs/RELIABILITY.md):
the statements other sessions run (a kill's moment) and how many sessions are open (a leak)."""

from __future__ import annotations

import sqlalchemy as sa

from debl.catalog.base import CatalogEngine


class ProbesCatalog:
    """The catalog's MySQL sessions as the campaigns see them: ``Catalog.probes``."""

    def __init__(self, engine: CatalogEngine):
        self._transaction = engine.transaction

    def running_statements(self) -> list[str]:
        """The first 64 characters of each statement that another session of this MySQL user
        runs now in this database (a fault campaign records them as the point a kill hit: the
        hot path's ``LOAD DATA``, its merge, its index build)."""
        query = sa.text("SELECT LEFT(info, 64) FROM information_schema.processlist "
                        "WHERE db = DATABASE() AND id <> CONNECTION_ID() AND info IS NOT NULL "
                        "AND command <> 'Sleep'")
        with self._transaction() as conn:
            return [row[0] for row in conn.execute(query)]

    def session_count(self) -> int:
        """The MySQL sessions open on this database, this one included (the soak watches them
        stay flat: a leak of connections shows here first)."""
        query = sa.text("SELECT COUNT(*) FROM information_schema.processlist "
                        "WHERE db = DATABASE()")
        with self._transaction() as conn:
            return int(conn.execute(query).scalar() or 0)
