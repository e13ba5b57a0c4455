"""The source's history during a run, as the check of fresh answers rebuilds it
(docs/FRESHNESS.md, "The checker"): the dump's rows of the keys that matter, then every write
of the run applied in the order of its commit's position.

- **The dump** (``dump_rows``): one pass over the dump's files (a ``debl source dump`` output
  or the load's source directory, its position in ``index.json``), keeping only the lines of
  the id1s asked or written: the merge rule among them (files in the listing's order, then
  lines), as a load of them does.
- **The writes** (``build_history``): the bench's writers are the only writers of the link
  table during the run, so its changes past the dump's position are exactly the writes that
  changed a row, each one transaction of one row at its GTID: the history is the dump with each
  write applied in position order by the overlay rule (``debl.format.overlay``). add_link and
  update_link write the row their record carries; delete_link hides the row it found
  (visibility 0, the rest kept). What contradicts that is a **history problem**, counted and
  shown with examples: without the change log, a position past the dump's that no write
  holds (a gap: another writer, or a write whose GTID was lost; the change log, when given,
  says instead which positions changed the link table: a transaction of another table of the
  source database is no problem then), two writes at one position, a write that changed a row
  without a GTID or failed after it was sent (its commit unknown), a write whose ``found`` or
  ``changed`` does not match the rows before it (another writer on the key), and, given the
  change log (``debl_changes``), a change that is not the write at its position, a write the
  log lacks, a position the follower has not reached.

Pitfall: a write at or before the dump's position is in the dump's rows already: it bounds
answers but is never applied again.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from debl.catalog import Catalog, Change
from debl.errors import ConfigError
from debl.format.link import Link, Origin, ParseError, merge_rank, parse_line
from debl.format.overlay import Key
from debl.position import DumpPosition, parse_gtid
from debl.workload.mix import ADD_LINK, DELETE_LINK, UPDATE_LINK
from debl.workload.writers import WriteRecord
from loaders.listing import listing_position
from loaders.source import LocalSource

MAX_EXAMPLES = 5
_READ = 8 << 20  # bytes of a dump file read at a time
_CHANGE_PAGE = 50_000

ListKey = tuple[int, int]  # (id1, link_type)


@dataclass
class Problems:
    """What was found wrong, by kind: how many, and a few examples of each."""

    counts: Counter = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def add(self, kind: str, example: str) -> None:
        self.counts[kind] += 1
        shown = self.examples.setdefault(kind, [])
        if len(shown) < MAX_EXAMPLES:
            shown.append(example)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def to_dict(self) -> dict:
        return {kind: {"count": n, "examples": self.examples.get(kind, [])}
                for kind, n in sorted(self.counts.items())}


@dataclass
class KeyHistory:
    """One (id1, link_type) during the run: its rows at the dump (``base``, by id2), and each
    write that changed one of them, in position order (``seqs``; ``changes``: the id2 and the
    row after it). Its **versions**: version 0 is the dump's, version v the state after its
    v-th write (from position ``seqs[v - 1]`` on)."""

    base: dict[int, Link] = field(default_factory=dict)
    seqs: list[int] = field(default_factory=list)
    changes: list[tuple[int, Link | None]] = field(default_factory=list)


@dataclass
class History:
    """The source from the dump's position on: per (id1, link_type), its ``KeyHistory``
    (the keys asked or written; any other key is empty); the writes that bound the answers
    (``logged``: their sent and acknowledged instants and positions); what contradicts the
    history (``problems``); the dump's rows read."""

    dump: DumpPosition
    keys: dict[ListKey, KeyHistory]
    logged: list[WriteRecord]
    seqs: list[int]  # the position of each of ``logged``
    problems: Problems
    dump_lines: int = 0
    dump_rows: int = 0

    @property
    def dump_seq(self) -> int:
        return self.dump.seq

    def key(self, id1: int, link_type: int) -> KeyHistory:
        return self.keys.get((id1, link_type)) or KeyHistory()


def dump_rows(directory: Path | str, id1s: set[int],
              say: Callable[[str], None] = lambda _: None
              ) -> tuple[dict[ListKey, dict[int, Link]], DumpPosition | None, int]:
    """The rows of the dump in *directory* whose id1 is in *id1s*, by (id1, link_type) and id2
    (the merge rule among the dump's lines: files in the listing's order), its position from
    ``index.json`` (None if it carries none; *say* is told why), and the lines read."""
    source = LocalSource(Path(directory))
    files = source.list()
    if not files:
        raise ConfigError(f"{directory} holds no file of a dump")
    position = listing_position(files, say)
    wanted = {str(i).encode() for i in id1s}
    best: dict[Key, tuple[tuple, Link]] = {}
    lines = 0
    for file_seq, f in enumerate(files):
        with open(Path(directory) / f.name, "rb") as stream:
            tail = b""
            while True:
                block = stream.read(_READ)
                if not block:
                    break
                block = tail + block
                cut = block.rfind(b"\n") + 1
                tail = block[cut:]
                lines = _keep(block[:cut].split(b"\n")[:-1], lines, wanted, id1s, file_seq, best)
            if tail:
                lines = _keep([tail], lines, wanted, id1s, file_seq, best)
    rows: dict[ListKey, dict[int, Link]] = defaultdict(dict)
    for (id1, link_type, id2), (_, link) in best.items():
        rows[(id1, link_type)][id2] = link
    return dict(rows), position, lines


def _keep(block: list[bytes], lines: int, wanted: set[bytes], id1s: set[int], file_seq: int,
          best: dict[Key, tuple[tuple, Link]]) -> int:
    """The lines of *block* whose id1 is wanted, into *best* by the merge rule; the lines
    counted so far."""
    for line in block:
        lines += 1
        head = line[:line.find(b"\t")]
        # an id1 written with leading zeros still names its id (docs/DESIGN.md section 3)
        if head not in wanted and not (head[:1] == b"0" and len(head) > 1 and head.isdigit()
                                       and int(head) in id1s):
            continue
        try:
            link = parse_line(line)
        except ParseError:  # a rejected line is no row of the source either
            continue
        rank = merge_rank(link, Origin(0, file_seq, lines))
        old = best.get(link.key)
        if old is None or rank > old[0]:
            best[link.key] = (rank, link)
    return lines


def read_change_log(catalog: Catalog, source: str, after: int
                    ) -> tuple[list[Change], int | None]:
    """Every change of *source* in the change log past position *after*, in position order,
    and the position the follower has reached (None: the source has no follower)."""
    state = catalog.changes.follower(source)
    if state is None:
        return [], None
    found: list[Change] = []
    while True:
        changes, upto = catalog.changes.since(source, after, _CHANGE_PAGE)
        if not changes:
            return found, upto
        found += changes
        after = upto


def build_history(dump_dir: Path | str, writes: Sequence[WriteRecord], asked: Iterable[ListKey],
                  position: DumpPosition | None = None,
                  changes: Sequence[Change] | None = None, changes_upto: int | None = None,
                  say: Callable[[str], None] = lambda _: None) -> History:
    """The history of the keys *asked* and of every key written, from the dump in *dump_dir*
    (at *position*, default its ``index.json``'s) and the *writes* of the run; with *changes*
    (the change log past the dump's position, read up to *changes_upto*), checked against
    it. ConfigError if the dump has no position and none is given."""
    problems = Problems()
    id1s = {id1 for id1, _ in asked} | {w.id1 for w in writes}
    rows, listed, lines = dump_rows(dump_dir, id1s, say)
    dump = position or listed
    if dump is None:
        raise ConfigError(f"the dump in {dump_dir} carries no position (index.json): give it "
                          "(--position GTID)")
    keys = {key: KeyHistory(base) for key, base in rows.items()}
    logged, seqs = _logged(writes, dump, problems)
    state: dict[Key, Link | None] = {}  # the written keys' rows now, from the dump's on
    derived: dict[int, tuple[Key, Link | None]] = {}
    for seq, w in sorted(zip(seqs, logged), key=lambda pair: pair[0]):
        if seq <= dump.seq:
            continue
        key = (w.id1, w.link_type, w.id2)
        if key not in state:
            base = keys.get((w.id1, w.link_type))
            state[key] = base.base.get(w.id2) if base is not None else None
        state[key] = after = _after(w, seq, state[key], problems)
        history = keys.setdefault((w.id1, w.link_type), KeyHistory())
        history.seqs.append(seq)
        history.changes.append((w.id2, after))
        derived[seq] = (key, after)
    if changes is not None:  # it says which positions changed the table: the others' are gaps
        _against_change_log(derived, changes, changes_upto, dump.seq, problems)
    else:
        _gaps(dump.seq, seqs, problems)
    return History(dump, keys, logged, seqs, problems, lines,
                   sum(len(r) for r in rows.values()))


def _logged(writes: Sequence[WriteRecord], dump: DumpPosition,
            problems: Problems) -> tuple[list[WriteRecord], list[int]]:
    """The writes that committed a change at a known position, with their positions."""
    domain = parse_gtid(dump.gtid)[0]
    logged: list[WriteRecord] = []
    seqs: list[int] = []
    at: dict[int, str] = {}  # a position's write, described
    for w in writes:
        what = f"{w.op}({w.id1}, {w.link_type}, {w.id2})"
        if not w.ok:
            if w.sent_ns is not None:
                problems.add("write of unknown outcome",
                             f"{what} failed after it was sent ({w.error}): whether it "
                             "committed, and where, is unknown")
            continue
        if not w.changed:
            continue
        if w.gtid is None:
            problems.add("write without position",
                         f"{what} changed a row and has no GTID: does the source keep a binary "
                         "log?")
            continue
        w_domain, _, seq = parse_gtid(w.gtid)
        if w_domain != domain:
            problems.add("write of another domain",
                         f"{what} committed at {w.gtid}, the dump is of domain {domain}")
            continue
        if seq in at:
            problems.add("two writes at one position",
                         f"{what} and {at[seq]} both committed at {w.gtid}")
            continue
        at[seq] = what
        logged.append(w)
        seqs.append(seq)
    return logged, seqs


def _after(w: WriteRecord, seq: int, before: Link | None, problems: Problems) -> Link | None:
    """The row of *w*'s key after it, from the row before it; a problem where the write's own
    account (found, the row) contradicts the row before it."""
    what = f"{w.op}({w.id1}, {w.link_type}, {w.id2}) at position {seq}"
    if w.op == DELETE_LINK:
        if before is None or before.visibility == 0:
            problems.add("write contradicts the history",
                         f"{what} hid a row, but the key's row before it is "
                         f"{'absent' if before is None else 'hidden'}: another writer?")
            return before
        return before._replace(visibility=0)
    if w.op not in (ADD_LINK, UPDATE_LINK) or w.row is None:
        problems.add("write without its row",
                     f"{what}: the write log does not say what it wrote (an older log?)")
        return before
    if w.found != (before is not None) or w.row == before:
        problems.add("write contradicts the history",
                     f"{what} found {'a' if w.found else 'no'} row and changed it, but the "
                     f"key's row before it is {before}: another writer?")
    return w.row


def _gaps(dump_seq: int, seqs: Sequence[int], problems: Problems) -> None:
    past = sorted(s for s in seqs if s > dump_seq)
    if not past:
        return
    expected = past[-1] - dump_seq
    if len(past) == expected:
        return
    taken = set(past)
    for seq in range(dump_seq + 1, past[-1] + 1):
        if seq not in taken:
            problems.add("position no write holds",
                         f"position {seq}: a transaction of the source that none of the run's "
                         "writes committed (another writer, or a write whose GTID was lost)")


def _against_change_log(derived: dict[int, tuple[Key, Link | None]], changes: Sequence[Change],
                        upto: int | None, dump_seq: int, problems: Problems) -> None:
    """Each change past the dump is the write at its position, its row the one derived."""
    by_seq: dict[int, list[Change]] = defaultdict(list)
    for c in changes:
        if c.seq > dump_seq:
            by_seq[c.seq].append(c)
    for seq, found in by_seq.items():
        want = derived.get(seq)
        if want is None:
            problems.add("change no write made",
                         f"the change log has {len(found)} change(s) at position {seq} (e.g. "
                         f"{found[0].key}) that no write of the run committed: another writer")
        elif len(found) != 1 or (found[0].key, found[0].link) != want:
            problems.add("change differs from its write",
                         f"position {seq}: the write left {want[0]} as {want[1]}, the change "
                         f"log has {[(c.key, c.link) for c in found]}")
    for seq in derived:
        if seq in by_seq:
            continue
        if upto is not None and seq > upto:
            problems.add("write past the follower",
                         f"position {seq}: the follower has reached {upto} only: wait until "
                         "it has caught up (`debl status`)")
        else:
            problems.add("write missing from the change log",
                         f"position {seq}: the write is not in the change log")
