"""Key sets and the answerable rule (docs/LOADING.md, "The manifest"): ``KeySet``'s algebra
against Python sets over small domains, and the answerable rule against brute force over random
files (sorted or not, with a manifest or without), their pieces and random copy orders: random
line-aligned byte ranges landing in random order. And the point of it all: a key found
answerable has every one of its lines in bucketed bytes."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from debl.keys import keyspace
from debl.keys.keyspace import Answerability, KeySet, answerable
from debl.keys.manifest import ID1_MAX, Piece, pieces
from debl.keys.manifest_build import build_manifest

DOMAIN = 40
intervals = st.lists(st.tuples(st.integers(0, DOMAIN - 1), st.integers(0, DOMAIN - 1)),
                     max_size=8)


def as_set(ks: KeySet) -> set[int]:
    return {i for i in range(DOMAIN) if i in ks}


def brute(spans) -> set[int]:
    return {i for lo, hi in spans for i in range(lo, hi + 1)}


@settings(max_examples=300, deadline=None)
@given(intervals, intervals)
def test_keyset_algebra_is_set_algebra(a, b):
    x, y = KeySet(a), KeySet(b)
    assert as_set(x) == brute(a) and x.size() == len(brute(a))
    assert as_set(x.union(y)) == brute(a) | brute(b)
    assert as_set(x.intersection(y)) == brute(a) & brute(b)
    assert as_set(x.complement(0, DOMAIN - 1)) == set(range(DOMAIN)) - brute(a)
    assert x.complement().size() == ID1_MAX + 1 - x.size()
    assert x.complement().complement() == x
    # Canonical: equal sets are equal objects, intervals sorted, disjoint and not adjacent.
    assert x == KeySet((i, i) for i in brute(a))
    iv = x.intervals()
    assert all(h1 + 1 < l2 for (_, h1), (l2, _) in zip(iv, iv[1:]))
    assert KeySet.from_json(x.to_json()) == x and hash(KeySet(a)) == hash(x)
    assert bool(x) == bool(brute(a))


def test_keyset_edges():
    every = KeySet.every()
    assert every == KeySet([(0, ID1_MAX)]) and every.size() == 2 ** 63
    assert ID1_MAX in every and 0 in every and -1 not in every and 2 ** 63 not in every
    assert every.complement() == KeySet() and KeySet().complement() == every
    assert KeySet([(5, 4)]) == KeySet() and "x" not in KeySet([(0, 9)])
    assert KeySet([(1, 3), (4, 6), (9, 9)]).intervals() == [(1, 6), (9, 9)]
    assert KeySet([(1, 3), (4, 6)]).to_json() == [1, 6]
    with pytest.raises(ValueError):
        KeySet([(0, ID1_MAX + 1)])
    with pytest.raises(ValueError):
        KeySet([(-1, 3)])
    for bad in ([1], [1, 2.0], "1,2", [True, 3]):
        with pytest.raises(ValueError):
            KeySet.from_json(bad)


# -- the answerable rule


@st.composite
def loads(draw):
    """Random files (sorted, unsorted, without valid lines, empty; with a manifest or
    without), their pieces, and a random copy: line-aligned byte ranges in random order, some
    of them over bytes other ranges hold too."""
    rng = random.Random(draw(st.integers(0, 2 ** 32)))
    files = []
    for seq in range(draw(st.integers(1, 4))):
        n = rng.choice([0, 1, 3, 10, 30])
        ids = [rng.randrange(DOMAIN) for _ in range(n)]
        if rng.random() < 0.7:
            ids.sort()
        lines = [b"%d\t1\t%d\t1\tx\t5\t1\n" % (i, k) if rng.random() > 0.1 else b"bad\n"
                 for k, i in enumerate(ids)]
        data = b"".join(lines)
        manifest = build_manifest([data], step=rng.choice([1, 20, 64, 500]))
        if rng.random() < 0.2:
            manifest = None
        starts = [sum(len(x) for x in lines[:k]) for k in range(len(lines))] + [len(data)]
        # The copy: cut the file at random line starts, the parts in random order.
        cuts = sorted({0, len(data), *rng.sample(starts, rng.randint(0, len(starts)))})
        ranges = [(seq, a, b) for a, b in zip(cuts, cuts[1:])]
        for _ in range(rng.randint(0, 2)):  # a part bucketed again, over others' bytes
            a, b = sorted(rng.sample(starts, 2)) if len(starts) > 1 else (0, 0)
            ranges += [(seq, a, b)] if a < b else []
        valid = [(starts[k], i) for k, (i, line) in enumerate(zip(ids, lines))
                 if line != b"bad\n"]
        files.append((seq, data, manifest, ranges, valid))
    copy = [r for f in files for r in f[3]]
    rng.shuffle(copy)
    return files, copy


def brute_answerable(ps: list[Piece], covered: list[tuple[int, int, int]]) -> set[int]:
    """A key is answerable iff every piece whose claim holds it has every byte covered."""
    def whole(p: Piece) -> bool:
        return all(any(seq == p.file_seq and a <= b < e for seq, a, e in covered)
                   for b in range(p.start, p.end))
    return {k for k in range(DOMAIN) if all(whole(p) for p in ps if p.claims(k))}


def claimed(p: Piece, ks: KeySet) -> bool:
    """Whether every id1 *p* claims is in *ks*."""
    claim = KeySet([(p.lo, p.hi)])
    return ks.intersection(claim) == claim


@pytest.mark.parametrize("loop", [32, 0], ids=["piece by piece", "in one pass"])
@settings(max_examples=100, deadline=None)
@given(load=loads())
def test_answerability_is_the_brute_force_rule_at_every_step_of_any_copy(loop, load):
    saved, keyspace._LOOP = keyspace._LOOP, loop  # both ways of taking pieces out
    try:
        check_copy(*load)
    finally:
        keyspace._LOOP = saved


def check_copy(files, copy) -> None:
    ps = [p for seq, data, m, _, _ in files for p in pieces(seq, len(data), m)]
    state = Answerability(ps)
    assert state.total_bytes() == sum(len(f[1]) for f in files)
    landed: list[tuple[int, int, int]] = []
    for step in range(len(copy) + 1):
        ks = state.answerable()
        expected = brute_answerable(ps, landed)
        assert as_set(ks) == expected
        done = {(p.file_seq, p.start) for p in ps
                if all(any(s == p.file_seq and a <= b < e for s, a, e in landed)
                       for b in range(p.start, p.end))}
        # Past the domain only the pieces without manifest claim anything.
        big = all(p.hi < DOMAIN or (p.file_seq, p.start) in done for p in ps)
        assert (ID1_MAX in ks) == big
        assert answerable(ps, done) == ks
        assert answerable(ps, lambda p: (p.file_seq, p.start) in done) == ks  # noqa: B023 -- called at once, in this iteration
        assert state.bucketed_bytes() == sum(p.size for p in ps if (p.file_seq, p.start) in done)
        assert state.answerable_bytes() == sum(
            p.size for p in ps if (p.file_seq, p.start) in done and claimed(p, ks))
        for k in range(0, DOMAIN, 7):
            assert {(p.file_seq, p.start) for p in state.missing(k)} == {
                (p.file_seq, p.start) for p in ps if p.claims(k) and (p.file_seq, p.start)
                not in done}
        # What it is for: every line of an answerable key lies in bucketed bytes.
        for seq, _, _, _, valid in files:
            for offset, id1 in valid:
                if id1 in ks:
                    assert any(s == seq and a <= offset < e for s, a, e in landed)
        if step < len(copy):
            landed.append(copy[step])
            state.add(*copy[step])
    assert state.answerable() == KeySet.every()
    assert state.answerable_bytes() == state.total_bytes()


def test_a_piece_counts_only_when_whole_and_ranges_merge_in_any_order():
    ps = [Piece(0, 0, 10, 5, 6), Piece(0, 10, 20, 6, 9), Piece(1, 0, 5, 0, -1)]
    state = Answerability(ps)
    assert state.answerable() == KeySet([(0, 4), (10, ID1_MAX)])
    assert state.add(0, 12, 20) == 0 and state.add(0, 0, 9) == 0
    assert state.answerable() == KeySet([(0, 4), (10, ID1_MAX)])
    assert state.add(0, 9, 12) == 2  # joins both: each piece whole at last
    assert state.answerable() == KeySet.every()
    assert state.answerable_bytes() == 20  # the piece that claims nothing is not bucketed
    assert state.add(1, 0, 5) == 1 and state.answerable_bytes() == 25
    assert state.add(0, 3, 4) == 0  # again: nothing new


def test_many_pieces_newly_bucketed_at_once():
    ps = [Piece(0, 10 * k, 10 * k + 10, k, k + 1) for k in range(500)]
    state = Answerability(ps)
    assert state.add(0, 0, 2000) == 200
    assert state.answerable() == KeySet([(0, 199), (501, ID1_MAX)])
    assert state.add(0, 2000, 5000) == 300 and state.answerable() == KeySet.every()


def test_wrong_pieces_and_ranges_are_refused():
    with pytest.raises(ValueError):
        Answerability([Piece(0, 0, 10, 1, 2), Piece(0, 5, 15, 1, 2)])
    with pytest.raises(ValueError):
        Answerability([Piece(0, 3, 3, 1, 2)])
    state = Answerability([Piece(0, 0, 10, 1, 2)])
    with pytest.raises(ValueError):
        state.add(1, 0, 5)
    with pytest.raises(ValueError):
        state.add(0, 5, 11)
    with pytest.raises(ValueError):
        state.missing(-1)
    assert state.add(0, 4, 4) == 0
