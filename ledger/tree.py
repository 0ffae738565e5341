"""The Merkle tree over a ledger's entries: O(log n) roots and RFC 9162 audit paths from stored perfect-subtree
nodes, and the compact range a streamed replay holds.

Storage model. Level 0 holds the leaf hashes; level ``l`` holds the root of every *complete* perfect subtree
of width ``2**l``, node ``(l, i)`` covering leaves ``[i * 2**l, (i + 1) * 2**l)``. A node is written once, when
its last leaf is appended, and never changes. A source may leave out the lowest interior levels (below
``min_stored_level``): such a subtree has at most ``2**min_stored_level`` leaves and is rehashed from its
leaf hashes in one range read when needed. The ledger stores levels >= 4 (about n/8 rows for n leaves, which
keeps appends cheap); the in-memory tree of an export stores every level. The root for any size is the fold
of at most ``log2(n)`` subtree roots (one per bit of the size), and every range in a proof is a left-aligned
range whose root is again such a fold, so a root or a proof costs ``O(log n)`` lookups (plus at most 15 leaf
hashes per small subtree), never a rehash of the log.

:class:`HashTree` does that decomposition itself (it replaced pymerkle's generic root machinery here, which cost
about a fifth of a single append's CPU; the tests still cross-check every root against pymerkle's own tree and
the RFC's reference recursions). Complete subtrees are cached, since they never change; a write clears the cache
first, so that its self-check reads the stored tree as it is.

:class:`CompactRange` is the whole state a streamed replay needs: the roots of the maximal perfect subtrees of
``[0, size)``, one per set bit of the size (RFC 9162's "compact range", the right edge of the tree), so
verifying a log of any length holds ``O(log n)`` hashes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import Protocol

from ledger.errors import LedgerIntegrityError, LedgerUsageError
from ledger.rfc6962 import EMPTY_ROOT, HASH_SIZE, NODE_PREFIX, node_hash, split_point

#: Complete subtrees kept in a tree's cache; far more than the O(log n) nodes a root or proof touches.
SUBTREE_CACHE_ENTRIES = 65536

Frontier = list[tuple[int, bytes]]
"""The compact range of a tree: roots of its maximal perfect subtrees, left to right, as (level, hash)."""

_sha256 = hashlib.sha256


class NodeSource(Protocol):
    """Where a tree reads its leaf hashes and stored interior nodes (levels >= ``min_stored_level``)."""

    min_stored_level: int

    def tree_size(self) -> int: ...

    def node(self, level: int, index: int) -> bytes: ...

    def leaf_range(self, offset: int, width: int) -> list[bytes]: ...


def fold_perfect(hashes: list[bytes]) -> bytes:
    """The root of a perfect subtree from its ``2**k`` leaf hashes, level by level."""
    level = hashes
    while len(level) > 1:
        level = [_sha256(NODE_PREFIX + level[i] + level[i + 1]).digest() for i in range(0, len(level), 2)]
    return level[0]


class HashTree:
    """Roots and audit paths of the tree a :class:`NodeSource` stores. Read-only: appending goes through the
    owner of the storage (the ledger's transaction)."""

    def __init__(self, source: NodeSource) -> None:
        self.source = source
        self._cache: dict[tuple[int, int], bytes] = {}

    def cache_clear(self) -> None:
        """Forget cached subtrees (after a rolled-back write whose nodes may be in the cache)."""
        self._cache.clear()

    def subtree_root(self, level: int, index: int) -> bytes:
        """The root of the complete perfect subtree ``(level, index)`` (stored, or rehashed from its leaves)."""
        key = (level, index)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        if 0 < level < self.source.min_stored_level:  # not stored: rehashed from at most 2**level leaf hashes
            digest = fold_perfect(self.source.leaf_range(index << level, 1 << level))
        else:
            digest = self.source.node(level, index)
        if len(self._cache) >= SUBTREE_CACHE_ENTRIES:
            self._cache.clear()
        self._cache[key] = digest
        return digest

    def range_root(self, start: int, end: int) -> bytes:
        """The root of leaves ``[start, end)`` for a range aligned as the RFC's recursion makes them (``start``
        a multiple of the largest power of two below ``end - start``): the right-to-left fold of its maximal
        aligned perfect subtrees."""
        if end <= start:
            return EMPTY_ROOT
        parts: list[bytes] = []
        while start < end:
            level = (end - start).bit_length() - 1
            if start:
                level = min(level, (start & -start).bit_length() - 1)
            parts.append(self.subtree_root(level, start >> level))
            start += 1 << level
        root = parts[-1]
        for left in reversed(parts[:-1]):
            root = node_hash(left, root)
        return root

    def root_at(self, size: int) -> bytes:
        """MTH of the first ``size`` leaves; the caller has checked ``size`` against the tree."""
        return self.range_root(0, size)

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
                out.append((level, self.subtree_root(level, offset >> level)))
                offset += 1 << level
        return out


class ChunkNodes:
    """The nodes that lie wholly inside a chunk of leaves ``[first, end)``: at each level, every perfect subtree
    of width ``2**level`` within the chunk, as one buffer of hashes in index order (level 0: the chunk's leaf
    hashes). The replay's decoding workers compute them beside the decoding, so that the main process, which
    builds the tree (:meth:`CompactRange.extend_from`), hashes only the few nodes that straddle a chunk's
    start: one a level at most."""

    __slots__ = ("end", "first", "levels")

    def __init__(self, first: int, end: int, levels: list[bytes]) -> None:
        self.first, self.end, self.levels = first, end, levels

    @classmethod
    def of_leaves(cls, leaves: list[bytes], first: int) -> ChunkNodes:
        """Pair the leaves ``[first, first + len(leaves))`` level by level, keeping the pairs that lie inside."""
        levels: list[bytes] = []
        nodes, start, sha256, prefix = leaves, first, _sha256, NODE_PREFIX
        while nodes:
            levels.append(b"".join(nodes))
            if start & 1:  # its sibling is left of the chunk: no parent inside
                nodes = nodes[1:]
                start += 1
            # an unpaired last node's sibling is right of the chunk: zip leaves it out
            nodes = [sha256(prefix + left + right).digest()
                     for left, right in zip(nodes[::2], nodes[1::2], strict=False)]
            start >>= 1
        return cls(first, first + len(leaves), levels)

    def lowest(self, level: int) -> int:
        """Index of the first node of ``level`` inside the chunk."""
        return -(-self.first >> level)

    def node(self, level: int, index: int) -> bytes:
        offset = (index - self.lowest(level)) * HASH_SIZE
        return self.levels[level][offset:offset + HASH_SIZE]

    def nodes(self, level: int, start: int, end: int) -> list[bytes]:
        """Nodes ``[start, end)`` of ``level`` (all inside the chunk)."""
        if end <= start:
            return []
        buffer, base = self.levels[level], (start - self.lowest(level)) * HASH_SIZE
        return [buffer[offset:offset + HASH_SIZE]
                for offset in range(base, base + (end - start) * HASH_SIZE, HASH_SIZE)]


def _completion_order(node: tuple[int, int, bytes]) -> tuple[int, int]:
    level, index, _ = node
    return (index + 1) << level, level


class CompactRange:
    """The compact range ``[0, size)`` of a growing tree: one hash per set bit of ``size``, highest level
    first. ``hashes`` and ``size`` are public so that a hot loop can push leaves inline (:meth:`push` is the
    same step); everything else reads them through the methods."""

    __slots__ = ("hashes", "size")

    def __init__(self, size: int = 0, hashes: list[bytes] | None = None) -> None:
        self.hashes: list[bytes] = [] if hashes is None else hashes
        self.size = size
        if len(self.hashes) != size.bit_count():
            raise LedgerUsageError("a compact range holds one hash per set bit of its size", size=size,
                                   found=len(self.hashes))

    @classmethod
    def of(cls, frontier: Frontier) -> CompactRange:
        """The compact range a :data:`Frontier` describes."""
        return cls(sum(1 << level for level, _ in frontier), [digest for _, digest in frontier])

    def extend(self, leaves: Iterable[bytes], keep_level: int) -> list[tuple[int, int, bytes]]:
        """Append leaf hashes; returns the nodes they complete at ``keep_level`` and above (the nodes a ledger
        stores), as (level, index, hash), in the order they complete (:data:`NODE_ORDER`: by the last leaf
        under them, then by level).

        A level at a time: the new nodes of a level are paired in one pass (with the range's own node of that
        level first, when the level's first new node is a right child), their parents are the next level's
        new nodes, and an unpaired last node joins the range. A loop of list passes instead of a loop per leaf:
        this is on the append path (the replay takes :meth:`extend_from`)."""
        nodes = list(leaves)
        if not nodes:
            return []
        count = len(nodes)
        stack, size, sha256, prefix = self.hashes, self.size, _sha256, NODE_PREFIX
        kept: list[tuple[int, int, bytes]] = []
        unpaired: list[bytes] = []  # the range's new hashes, lowest level first
        start, level = size, 0  # index (at ``level``) of nodes[0]
        while nodes:
            if start & 1:  # a right child: its left sibling is the range's hash of this level (the last one)
                nodes = [stack.pop(), *nodes]
                start -= 1
            if len(nodes) & 1:
                unpaired.append(nodes.pop())
            if not nodes:
                break
            pairs = zip(nodes[::2], nodes[1::2], strict=True)  # an even count: the unpaired one is off
            nodes = [sha256(prefix + left + right).digest() for left, right in pairs]
            start >>= 1
            level += 1
            if level >= keep_level:
                kept.extend(zip([level] * len(nodes), range(start, start + len(nodes)), nodes, strict=True))
        stack.extend(reversed(unpaired))
        self.size = size + count
        kept.sort(key=_completion_order)
        return kept

    def extend_from(self, count: int, chunk: ChunkNodes, keep_level: int,
                    want: dict[tuple[int, int], bytes | None] | None = None) -> list[tuple[int, int, bytes]]:
        """:meth:`extend` by the next ``count`` leaves, which lie in ``chunk`` (as the range's size does), with
        the same answer: every new node that lies wholly inside the chunk is taken from it, and only those
        that straddle the chunk's start (at most one a level, its left part in this range) are hashed here.
        ``want``: (level, index) of subtrees whose hashes the caller needs (a consistency proof's), filled in
        where these leaves complete them.

        The same level-at-a-time walk as :meth:`extend`, except that a level's new nodes are not a list but
        a short ``head`` of hashes in hand (the range's own node when the first new one is a right child, and
        the nodes straddling the chunk's start) followed by the chunk's nodes: the parent of two of the
        chunk's nodes is again one of the chunk's, so only pairs within the head are hashed."""
        size = self.size
        if not chunk.first <= size <= size + count <= chunk.end:
            raise LedgerUsageError("the leaves to add are not in this chunk", size=size, found=count,
                                   expected=f"within [{chunk.first}, {chunk.end})")
        if not count:
            return []
        stack, sha256, prefix = self.hashes, _sha256, NODE_PREFIX
        kept: list[tuple[int, int, bytes]] = []
        unpaired: list[bytes] = []  # the range's new hashes, lowest level first
        head: list[bytes] = []  # this level's nodes [start, start + len(head)); the chunk's from there to end
        start, end, level = size, size + count, 0
        while True:
            if start & 1:  # a right child: its left sibling is the range's hash of this level (the last one)
                head.insert(0, stack.pop())
                start -= 1
            if want:
                for wanted_level, wanted_index in want:
                    if wanted_level == level and start <= wanted_index < end:
                        want[(wanted_level, wanted_index)] = (head[wanted_index - start]
                                                              if wanted_index < start + len(head)
                                                              else chunk.node(level, wanted_index))
            if (end - start) & 1:
                end -= 1
                unpaired.append(head.pop() if end < start + len(head) else chunk.node(level, end))
            if start == end:
                break
            in_hand = start + len(head)
            head = [sha256(prefix + head[i - start] + (head[i + 1 - start] if i + 1 < in_hand
                                                       else chunk.node(level, i + 1))).digest()
                    for i in range(start, in_hand, 2)]
            start >>= 1
            end >>= 1
            level += 1
            if level >= keep_level:
                kept.extend(zip([level] * (end - start), range(start, end),
                                head + chunk.nodes(level, start + len(head), end), strict=True))
        stack.extend(reversed(unpaired))
        self.size = size + count
        kept.sort(key=_completion_order)
        return kept

    def push(self, leaf: bytes) -> list[tuple[int, int, bytes]]:
        """Append a leaf hash; returns every node it completes, the leaf itself first, as (level, index,
        hash)."""
        completed = [(0, self.size, leaf)]
        digest, n, level, stack = leaf, self.size, 0, self.hashes
        while n & 1:
            digest = _sha256(NODE_PREFIX + stack.pop() + digest).digest()
            n >>= 1
            level += 1
            completed.append((level, self.size >> level, digest))
        stack.append(digest)
        self.size += 1
        return completed

    def root(self) -> bytes:
        if not self.hashes:
            return EMPTY_ROOT
        root = self.hashes[-1]
        for left in reversed(self.hashes[:-1]):
            root = node_hash(left, root)
        return root

    def frontier(self) -> Frontier:
        levels = [level for level in range(self.size.bit_length() - 1, -1, -1) if self.size >> level & 1]
        return list(zip(levels, self.hashes, strict=True))

    def subtree(self, start: int) -> bytes:
        """The root of the perfect subtree of this range that starts at leaf ``start``."""
        offset = 0
        for level, digest in self.frontier():
            if offset == start:
                return digest
            offset += 1 << level
        raise LedgerUsageError("no subtree of the compact range starts there", start=start, size=self.size)

    def suffix_root(self, start: int) -> bytes:
        """The root of leaves ``[start, size)`` where ``start`` is a subtree boundary of this range."""
        offset, parts, aligned = 0, [], False
        for level, digest in self.frontier():
            aligned = aligned or offset == start
            if aligned:
                parts.append(digest)
            offset += 1 << level
        if not parts:
            raise LedgerUsageError("no subtree of the compact range starts there", start=start, size=self.size)
        root = parts[-1]
        for left in reversed(parts[:-1]):
            root = node_hash(left, root)
        return root


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

