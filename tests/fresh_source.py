"""The source's side in the tests of fresh answers (docs/FRESHNESS.md): ``SourceHistory``
writes to the source's link table, one transaction per write, reads its GTID back (``SELECT
@@last_gtid``) and keeps the table as it is after each write (``rows_at``: the source at any
position since the dump), the reference an answer at position ``p`` must equal; the changes
reach the change log through the real follower (``Following``: `debl follow`'s ``Follower``
in a thread of the test's process), never written by the test. One writer at a time: the
history is every change of the table since the dump.
"""

from __future__ import annotations

import threading

from debl.config import Config
from debl.format.link import Link
from debl.position import DumpPosition, parse_gtid
from debl.store import source_db
from loaders.follower import Follower

_COLUMNS = "id1, link_type, id2, visibility, data, time, version"


class SourceHistory:
    """Writes to *config*'s source table from the dump at *position* on, and its table at
    each position since (see the module). ``close``."""

    def __init__(self, config: Config, position: DumpPosition):
        self.config, self.source = config, position.source
        self.table = config.source_db.table
        self.conn = source_db.connect(config)
        self.rows = {link.key: link for link in self.select()}  # the table now
        self.at_dump = dict(self.rows)  # nothing was written since the dump but other tables
        self.history: list[tuple[int, list[tuple[tuple, Link | None]]]] = []  # since the dump
        self.dump_seq = position.seq

    def _sql(self, sql: str, args=()) -> list[tuple]:
        with self.conn.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())

    def select(self, id1: int | None = None, link_type: int | None = None) -> list[Link]:
        """The table's rows (of one (id1, link_type)), read from the source."""
        where = "" if id1 is None else " WHERE id1 = %s AND link_type = %s"
        return [Link(*row) for row in self._sql(f"SELECT {_COLUMNS} FROM `{self.table}`{where}",
                                                () if id1 is None else (id1, link_type))]

    def head(self) -> int:
        with self.conn.cursor() as cur:
            return parse_gtid(source_db.head(cur))[2]

    def _commit(self, sql: str, args: tuple, after: list[tuple[tuple, Link | None]]) -> int:
        """Run one write (a transaction of its own): *after* is each key it touches with its
        row after the write (None: gone). Its position."""
        with self.conn.cursor() as cur:
            cur.execute(sql, args)
            assert cur.rowcount == 1, f"{sql} changed {cur.rowcount} rows"
            cur.execute("SELECT @@last_gtid")
            (gtid,) = cur.fetchone() or (None,)
            seq = parse_gtid(gtid)[2]
        for key, row in after:
            if row is None:
                self.rows.pop(key, None)
            else:
                self.rows[key] = row
        self.history.append((seq, after))
        return seq

    # -- LinkBench's writes, and the source's own

    def add(self, link: Link) -> int:
        assert link.key not in self.rows
        return self._commit(f"INSERT INTO `{self.table}` ({_COLUMNS}) VALUES "
                            "(%s, %s, %s, %s, %s, %s, %s)", tuple(link), [(link.key, link)])

    def update(self, link: Link) -> int:
        """The row of *link*'s key replaced by *link* (any time and version, older too)."""
        assert link.key in self.rows and self.rows[link.key] != link
        return self._commit(f"UPDATE `{self.table}` SET visibility = %s, data = %s, time = %s, "
                            "version = %s WHERE id1 = %s AND link_type = %s AND id2 = %s",
                            (link.visibility, link.data, link.time, link.version, *link.key),
                            [(link.key, link)])

    def hide(self, key: tuple[int, int, int]) -> int:
        """LinkBench's delete_link: visibility 0."""
        return self.update(self.rows[key]._replace(visibility=0))

    def delete(self, key: tuple[int, int, int]) -> int:
        """An expunge: the row deleted."""
        assert key in self.rows
        return self._commit(f"DELETE FROM `{self.table}` WHERE id1 = %s AND link_type = %s "
                            "AND id2 = %s", key, [(key, None)])

    def move(self, key: tuple[int, int, int], to: tuple[int, int, int]) -> int:
        """The key's columns updated: the old key deleted, the new one written, in one
        transaction (two row changes at one position)."""
        old = self.rows[key]
        assert to not in self.rows
        new = Link(*to, old.visibility, old.data, old.time, old.version)
        return self._commit(f"UPDATE `{self.table}` SET id1 = %s, link_type = %s, id2 = %s "
                            "WHERE id1 = %s AND link_type = %s AND id2 = %s", (*to, *key),
                            [(key, None), (to, new)])

    @property
    def last_write(self) -> int:
        """The position of the last write made here (the dump's if none)."""
        return self.history[-1][0] if self.history else self.dump_seq

    def rows_at(self, position: int) -> dict[tuple, Link]:
        """The table at *position* (a seq since the dump): the table at the dump with the
        writes up to it."""
        rows = dict(self.at_dump)
        for seq, after in self.history:
            if seq > position:
                break
            for key, row in after:
                if row is None:
                    rows.pop(key, None)
                else:
                    rows[key] = row
        return rows

    def close(self) -> None:
        self.conn.close()


class Following:
    """`debl follow` (``loaders.follower.Follower``) on *config*'s dataset in a thread, from
    the dump's position of its oldest kept load, until closed; ``with Following(config):``."""

    def __init__(self, config: Config):
        self.config = config
        self._stop = threading.Event()
        self.follower = Follower(config)
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name="test-follower")
        self._thread.start()

    def _run(self) -> None:
        try:
            self.follower.serve(should_stop=self._stop.is_set)
        except BaseException as exc:  # noqa: BLE001 -- said by close
            self.error = exc

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30.0)
        self.follower.close()
        assert self.error is None, f"the follower stopped: {self.error}"

    def __enter__(self) -> "Following":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
