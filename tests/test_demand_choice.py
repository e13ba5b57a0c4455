"""Which waiting keys a round of fetches on demand takes (loaders.demand, docs/LOADING.md, "The
copy follows demand": "Who is fetched"): the most wanted first; a key of one piece whatever its
size up to MAX_PIECE; a key of several pieces only while they are small in all, so that a big
change log's keys, a piece in every file, wait for the bulk copy."""

from __future__ import annotations

from debl.keys.manifest import Piece
from loaders.coverage import Coverage
from loaders.demand import MAX_KEY_BYTES, MAX_PIECE, DemandFetcher


class _Early:
    def __init__(self, missing: dict[int, list[Piece]]):
        self._missing = missing

    def missing(self, id1: int) -> list[Piece]:
        return self._missing.get(id1, [])


def _chooser(missing: dict[int, list[Piece]], sizes: dict[int, int]) -> DemandFetcher:
    """A fetcher with only what ``_choose`` reads: the pieces each key misses and the ledger."""
    fetcher = object.__new__(DemandFetcher)
    fetcher.coverage = Coverage(sizes)
    fetcher.early = _Early(missing)  # type: ignore[assignment]  # a stand-in
    return fetcher


def test_a_key_of_one_piece_is_fetched_whatever_its_size_and_of_several_only_while_small():
    big, small = 1 << 20, MAX_KEY_BYTES // 4
    missing = {
        1: [Piece(0, 0, big, 1, 1)],                                          # one piece, 1 MiB
        2: [Piece(k, 0, small, 2, 2) for k in (1, 2, 3)],                     # three, 192 KiB
        3: [Piece(k, small, small + MAX_KEY_BYTES // 2, 3, 3) for k in (1, 2, 3)],  # 384 KiB
        4: [Piece(0, big, big + MAX_PIECE + 1, 4, 4)],                        # over MAX_PIECE
    }
    sizes = {k: 4 * MAX_PIECE for k in range(4)}
    chosen = _chooser(missing, sizes)._choose({1: 1, 2: 5, 3: 9, 4: 2})
    assert {(p.file_seq, p.start) for p in chosen} == {(0, 0), (1, 0), (2, 0), (3, 0)}


def test_the_pieces_already_taken_are_not_fetched_again():
    sizes = {0: 1 << 20}
    fetcher = _chooser({7: [Piece(0, 0, 1000, 7, 7)]}, sizes)
    fetcher.coverage.take(0, 0, b"x\n" * 500)
    assert fetcher._choose({7: 1}) == []
