"""The stored tree: roots and RFC 9162 proofs from the SQLite and PostgreSQL ledgers and from the in-memory
replay tree agree with the RFC's reference recursions (ledger.rfc6962) and with pymerkle's own InmemoryTree
roots, whatever the batching of the appends."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pymerkle import InmemoryTree

from ledger import Ledger, LedgerUsageError
from ledger.rfc6962 import (
    EMPTY_ROOT,
    leaf_hash,
    reference_consistency_proof,
    reference_inclusion_path,
    reference_root,
)
from ledger.tree import CompactRange, HashTree, MemoryNodes, consistency_ranges, inclusion_ranges
from tests.conftest import LEDGER_BACKENDS, fresh_backend
from tests.test_ledger_support import T0, bundle_entry, ledger_signer, new_ledger

SIZE = 150
Grown = tuple[Ledger, list[bytes], InmemoryTree]


@pytest.fixture(scope="module", params=LEDGER_BACKENDS)
def grown(request: pytest.FixtureRequest,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Ledger, list[bytes], InmemoryTree]]:
    """A ledger of SIZE entries appended in uneven batches (on SQLite, then on PostgreSQL), its leaf hashes,
    and pymerkle's in-memory tree over the same entry bytes."""
    signer = ledger_signer()
    ledger = new_ledger(fresh_backend(request, tmp_path_factory))
    rng = random.Random(7)
    while ledger.size < SIZE:
        count = min(rng.choice([1, 1, 2, 3, 7, 16]), SIZE - ledger.size)
        ledger.append_batch([bundle_entry(ledger.size + i) for i in range(count)], signer=signer, now=T0)
    entries = [ledger.entry_bytes(i) for i in range(ledger.size)]
    pymerkle_tree = InmemoryTree(algorithm="sha256")
    for data in entries:
        pymerkle_tree.append_entry(data)
    yield ledger, [leaf_hash(d) for d in entries], pymerkle_tree
    ledger.close()


def test_roots_match_reference_and_pymerkle_at_every_size(grown: Grown) -> None:
    ledger, leaves, pymerkle_tree = grown
    for size in range(0, SIZE + 1):
        root = ledger.root(size)
        assert root == reference_root(leaves[:size])
        if size:
            assert root == pymerkle_tree.get_root(size)
        else:
            assert root == EMPTY_ROOT


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_inclusion_proofs_match_reference(grown: Grown, data: st.DataObject) -> None:
    ledger, leaves, _ = grown
    size = data.draw(st.integers(min_value=1, max_value=SIZE))
    index = data.draw(st.integers(min_value=0, max_value=size - 1))
    proof = ledger.inclusion_proof(index, size)
    assert list(proof.path) == reference_inclusion_path(index, leaves[:size])
    assert proof.leaf_hash == leaves[index] and proof.entry == ledger.entry_bytes(index)
    proof.verify(reference_root(leaves[:size]))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_consistency_proofs_match_reference(grown: Grown, data: st.DataObject) -> None:
    ledger, leaves, _ = grown
    new = data.draw(st.integers(min_value=1, max_value=SIZE))
    old = data.draw(st.integers(min_value=1, max_value=new))
    proof = ledger.consistency_proof(old, new)
    assert list(proof.path) == reference_consistency_proof(old, leaves[:new])
    proof.verify(reference_root(leaves[:old]), reference_root(leaves[:new]))


def test_every_stored_checkpoint_matches_the_reference_root(grown: Grown) -> None:
    ledger, leaves, _ = grown
    checkpoints = ledger.checkpoints()
    assert checkpoints[-1].size == SIZE and len(checkpoints) > 20
    for checkpoint in checkpoints:
        assert checkpoint.root == reference_root(leaves[:checkpoint.size])


@pytest.fixture(scope="module", params=LEDGER_BACKENDS)
def backend_kind(request: pytest.FixtureRequest) -> pytest.FixtureRequest:
    return request


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=8))
def test_batching_does_not_change_the_tree(backend_kind: pytest.FixtureRequest,
                                           tmp_path_factory: pytest.TempPathFactory, batches: list[int]) -> None:
    signer = ledger_signer()
    with new_ledger(fresh_backend(backend_kind, tmp_path_factory)) as ledger:
        for count in batches:
            ledger.append_batch([bundle_entry(ledger.size + i) for i in range(count)], signer=signer, now=T0)
        leaves = [leaf_hash(ledger.entry_bytes(i)) for i in range(ledger.size)]
        assert ledger.root() == reference_root(leaves)
        assert [c.size for c in ledger.checkpoints()] == [1, *[1 + sum(batches[:k + 1]) for k in range(len(batches))]]
        ledger.verify()  # also compares every stored node with the replayed tree


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(max_size=12), min_size=1, max_size=90))
def test_memory_tree_matches_reference(entries: list[bytes]) -> None:
    nodes = MemoryNodes()
    leaves = [leaf_hash(e) for e in entries]
    for leaf in leaves:
        nodes.append(leaf)
    tree = HashTree(nodes)
    n = len(leaves)
    assert nodes.root() == tree.root_at(n) == reference_root(leaves)
    for size in {1, n // 2 or 1, n}:
        assert tree.inclusion_path(size - 1, size) == reference_inclusion_path(size - 1, leaves[:size])
        assert tree.consistency_path(1, size) == reference_consistency_proof(1, leaves[:size])


def test_range_layouts_refuse_impossible_requests() -> None:
    with pytest.raises(LedgerUsageError):
        inclusion_ranges(3, 3)
    with pytest.raises(LedgerUsageError):
        consistency_ranges(4, 3)
    assert consistency_ranges(3, 3) == [] and consistency_ranges(0, 5) == []


@settings(max_examples=150, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=70), min_size=1, max_size=8),
       keep_level=st.integers(min_value=1, max_value=5))
def test_compact_range_extend_is_pushing_leaf_by_leaf(cuts: list[int], keep_level: int) -> None:
    """``CompactRange.extend`` (a level at a time) leaves the range that pushing each leaf leaves, and returns
    the nodes at ``keep_level`` and above that the pushes complete, in the order they complete, whatever the
    batches (including empty ones and batches that start on a right child at any level)."""
    leaves = [leaf_hash(b"%d" % i) for i in range(sum(cuts))]
    batched, single = CompactRange(), CompactRange()
    start = 0
    for cut in cuts:
        batch = leaves[start:start + cut]
        kept = batched.extend(iter(batch), keep_level)  # any iterable, not only a list
        expected = [node for leaf in batch for node in single.push(leaf)[1:] if node[0] >= keep_level]
        assert kept == expected
        assert (batched.size, batched.hashes) == (single.size, single.hashes)
        start += cut
    assert batched.root() == reference_root(leaves)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.integers(0, 40), min_size=1, max_size=4), min_size=1, max_size=6),
       st.integers(1, 5), st.data())
def test_compact_range_extend_from_chunk_nodes_is_extend(chunks: list[list[int]], keep_level: int,
                                                        data: st.DataObject) -> None:
    """``CompactRange.extend_from`` (the replay's tree step, taking the nodes inside a chunk from
    ``ChunkNodes``) gives what ``extend`` gives from the leaves: the same range and the same kept nodes in the
    same order, for chunks of any size starting anywhere, each added in pieces of any size (including empty
    pieces); and every wanted subtree a piece completes is filled in, each filled one with its root."""
    from ledger.tree import ChunkNodes

    total = sum(sum(pieces) for pieces in chunks)
    leaves = [leaf_hash(b"%d" % i) for i in range(total)]
    plain, chunked = CompactRange(), CompactRange()
    start = 0
    for pieces in chunks:
        nodes = ChunkNodes.of_leaves(leaves[start:start + sum(pieces)], start)
        for piece in pieces:
            size = plain.size
            wanted = data.draw(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 80)), max_size=4))
            want: dict[tuple[int, int], bytes | None] = dict.fromkeys(wanted)
            expected = plain.extend(leaves[size:size + piece], keep_level)
            assert chunked.extend_from(piece, nodes, keep_level, want) == expected
            for (level, index), digest in want.items():
                first, end = index << level, (index + 1) << level
                if size < end <= size + piece:  # completed by this piece
                    assert digest is not None
                if digest is not None:
                    assert end <= size + piece and digest == reference_root(leaves[first:end])
            assert (chunked.size, chunked.hashes) == (plain.size, plain.hashes)
        start += sum(pieces)
    assert chunked.root() == reference_root(leaves)


def test_chunk_nodes_hold_every_subtree_inside_the_chunk() -> None:
    from ledger.tree import ChunkNodes

    leaves = [leaf_hash(b"%d" % i) for i in range(64)]
    for first, end in ((0, 64), (5, 37), (7, 8), (16, 32), (3, 3)):
        nodes = ChunkNodes.of_leaves(leaves[first:end], first)
        for level in range(7):
            width = 1 << level
            inside = [i for i in range(64 // width) if first <= i * width and (i + 1) * width <= end]
            if inside:
                assert len(nodes.nodes(level, inside[0], inside[-1] + 1)) == len(inside)
            for i in inside:
                assert nodes.node(level, i) == reference_root(leaves[i * width:(i + 1) * width]), (first, end, level)
    with pytest.raises(LedgerUsageError):
        CompactRange().extend_from(3, ChunkNodes.of_leaves(leaves[1:4], 1), 1)
