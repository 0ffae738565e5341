"""The Merkle tree over a ledger's entries: pymerkle's tree machinery on top of stored perfect-subtree nodes,
plus RFC 9162 audit paths.

Storage model. Level 0 holds the leaf hashes; level ``l`` holds the root of every *complete* perfect subtree
of width ``2**l``, node ``(l, i)`` covering leaves ``[i * 2**l, (i + 1) * 2**l)``. A node is written once, when
its last leaf is appended, and never changes. A source may leave out the lowest interior levels (below
``min_stored_level``): such a subtree has at most ``2**min_stored_level`` leaves and is rehashed from its
leaf hashes in one range read when needed. The ledger stores levels >= 4 (about n/8 rows for n leaves, which
keeps appends cheap); the in-memory replay tree stores every level. The root for any size is the fold of at
most ``log2(n)`` subtree roots (one per bit of the size), and every range in a proof is a left-aligned range
whose root is again such a fold, so a root or a proof costs ``O(log n)`` lookups (plus at most 15 leaf
hashes per small subtree), never a rehash of the log.

pymerkle (``BaseMerkleTree``) supplies the root computation: its ``_get_root(start, end)`` decomposes a range
into maximal perfect subtrees and folds their roots, asking ``_get_subroot(offset, width)``, which we answer
from the stored nodes (and which pymerkle caches: a complete subtree never changes). pymerkle's own proof
format is not RFC 9162, so the audit paths are laid out here (the RFC's PATH and SUBPROOF recursions,
unrolled) and each path element is a range root from pymerkle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from pymerkle.core import BaseMerkleTree

from ledger.errors import LedgerIntegrityError, LedgerUsageError
from ledger.rfc6962 import EMPTY_ROOT, HASH_SIZE, node_hash, split_point

#: pymerkle's subroot cache: 16 MiB holds far more than the O(log n) nodes a root or proof touches.
SUBROOT_CACHE_BYTES = 16 * 1024 * 1024

Frontier = list[tuple[int, bytes]]
"""The compact range of a tree: roots of its maximal perfect subtrees, left to right, as (level, hash)."""


class NodeSource(Protocol):
    """Where a tree reads its leaf hashes and stored interior nodes (levels >= ``min_stored_level``)."""

    min_stored_level: int

    def tree_size(self) -> int: ...

    def node(self, level: int, index: int) -> bytes: ...

    def leaf_range(self, offset: int, width: int) -> list[bytes]: ...


class HashTree(BaseMerkleTree):
    """A read-only pymerkle tree whose storage hooks read a :class:`NodeSource`. Appending goes through the
    owner of the storage (the ledger's transaction), never through pymerkle."""

    def __init__(self, source: NodeSource) -> None:
        self.source = source
        super().__init__("sha256", capacity=SUBROOT_CACHE_BYTES)

    # pymerkle storage interface ---------------------------------------------------------------------------
    def _encode_entry(self, data: bytes) -> bytes:
        return data

    def _store_leaf(self, data: Any, digest: bytes) -> int:
        raise NotImplementedError("ledger trees are appended to by the ledger, not through pymerkle")

    def _get_leaf(self, index: int) -> bytes:  # pymerkle counts leaves from one
        return self.source.node(0, index - 1)

    def _get_leaves(self, offset: int, width: int) -> list[bytes]:
        return self.source.leaf_range(offset, width)

    def _get_size(self) -> int:
        return self.source.tree_size()

    def _get_subroot_uncached(self, offset: int, width: int) -> bytes:
        level = width.bit_length() - 1
        if 0 < level < self.source.min_stored_level:  # not stored: pymerkle rehashes it from the leaves
            return bytes(super()._get_subroot_uncached(offset, width))
        return self.source.node(level, offset >> level)

    # what the ledger uses ---------------------------------------------------------------------------------
    def root_at(self, size: int) -> bytes:
        """MTH of the first ``size`` leaves; the caller has checked ``size`` against the tree."""
        if size == 0:
            return EMPTY_ROOT
        return bytes(self._get_root(0, size))

    def range_root(self, start: int, end: int) -> bytes:
        return bytes(self._get_root(start, end))

    def inclusion_path(self, index: int, size: int) -> list[bytes]:
        return [self.range_root(start, end) for start, end in inclusion_ranges(index, size)]

    def consistency_path(self, old_size: int, new_size: int) -> list[bytes]:
        return [self.range_root(start, end) for start, end in consistency_ranges(old_size, new_size)]

    def frontier(self, size: int) -> Frontier:
        """The compact range of the first ``size`` leaves, from stored nodes."""
        out: Frontier = []
        offset = 0
        for level in range(size.bit_length() - 1, -1, -1):
            if size >> level & 1:
                out.append((level, bytes(self._get_subroot(offset, 1 << level))))
                offset += 1 << level
        return out


def inclusion_ranges(index: int, size: int) -> list[tuple[int, int]]:
    """Leaf ranges whose roots form PATH(index, D[size]) (RFC 9162 2.1.3.1), ordered leaf to root."""
    if not 0 <= index < size:
        raise LedgerUsageError(f"index {index} is outside a tree of size {size}", index=index, size=size)
    ranges: list[tuple[int, int]] = []
    start, end = 0, size
    while end - start > 1:
        k = split_point(end - start)
        if index < start + k:
            ranges.append((start + k, end))
            end = start + k
        else:
            ranges.append((start, start + k))
            start += k
    ranges.reverse()
    return ranges


def consistency_ranges(old_size: int, new_size: int) -> list[tuple[int, int]]:
    """Leaf ranges whose roots form PROOF(old, D[new]) (RFC 9162 2.1.4.1); empty when old is 0 or new."""
    if not 0 <= old_size <= new_size:
        raise LedgerUsageError(f"old size {old_size} must be between 0 and the new size {new_size}",
                               old=old_size, new=new_size)
    if old_size in (0, new_size):
        return []
    ranges: list[tuple[int, int]] = []
    start, end, m, complete = 0, new_size, old_size, True
    while True:
        width = end - start
        if m == width:
            if not complete:
                ranges.append((start, end))
            break
        k = split_point(width)
        if m <= k:
            ranges.append((start + k, end))
            end = start + k
        else:
            ranges.append((start, start + k))
            start += k
            m -= k
            complete = False
    ranges.reverse()
    return ranges


def frontier_root(frontier: Frontier) -> bytes:
    """Fold a compact range right to left into the tree root."""
    if not frontier:
        return EMPTY_ROOT
    root = frontier[-1][1]
    for _, left in reversed(frontier[:-1]):
        root = node_hash(left, root)
    return root


def frontier_push(frontier: Frontier, leaf: bytes, size_before: int,
                  emit: Callable[[int, int, bytes], None] | None = None) -> None:
    """Append a leaf hash to a compact range in place; ``emit(level, index, hash)`` receives every perfect
    subtree the leaf completes (the nodes to store)."""
    frontier.append((0, leaf))
    size_after = size_before + 1
    while len(frontier) >= 2 and frontier[-1][0] == frontier[-2][0]:
        level, right = frontier.pop()
        _, left = frontier.pop()
        parent = node_hash(left, right)
        frontier.append((level + 1, parent))
        if emit is not None:
            emit(level + 1, (size_after >> (level + 1)) - 1, parent)


class MemoryNodes:
    """An in-memory :class:`NodeSource` (one bytearray per level, 32 bytes a node): replays and exports build
    their tree here, about 64 bytes a leaf in all."""

    min_stored_level = 1

    def __init__(self) -> None:
        self.levels: list[bytearray] = [bytearray()]
        self._frontier: Frontier = []

    def tree_size(self) -> int:
        return len(self.levels[0]) // HASH_SIZE

    def node(self, level: int, index: int) -> bytes:
        if level >= len(self.levels) or (index + 1) * HASH_SIZE > len(self.levels[level]) or index < 0:
            raise LedgerIntegrityError("tree node not present", level=level, index=index)
        return bytes(self.levels[level][index * HASH_SIZE:(index + 1) * HASH_SIZE])

    def leaf_range(self, offset: int, width: int) -> list[bytes]:
        return [self.node(0, i) for i in range(offset, offset + width)]

    def _store(self, level: int, index: int, digest: bytes) -> None:
        while len(self.levels) <= level:
            self.levels.append(bytearray())
        self.levels[level] += digest

    def append(self, leaf: bytes) -> list[tuple[int, int, bytes]]:
        """Add a leaf hash; returns the interior nodes it completed."""
        size = self.tree_size()
        completed: list[tuple[int, int, bytes]] = []

        def emit(level: int, index: int, digest: bytes) -> None:
            completed.append((level, index, digest))
            self._store(level, index, digest)

        self.levels[0] += leaf
        frontier_push(self._frontier, leaf, size, emit)
        return completed

    def root(self) -> bytes:
        return frontier_root(self._frontier)

    def frontier(self) -> Frontier:
        return list(self._frontier)

