"""RFC 6962 / RFC 9162 Merkle tree hashing and a small reference implementation.

The reference functions follow the RFC's recursive definitions literally (MTH, PATH, SUBPROOF). They are
O(n) and exist to cross-check the fast tree and to serve small trees (a generation's set tree). Production
proofs for the ledger come from the stored tree; both must agree byte for byte.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

LEAF_PREFIX = b"\x00"
NODE_PREFIX = b"\x01"
HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()


def leaf_hash(data: bytes) -> bytes:
    """SHA-256(0x00 || data)."""
    return hashlib.sha256(LEAF_PREFIX + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """SHA-256(0x01 || left || right)."""
    return hashlib.sha256(NODE_PREFIX + left + right).digest()


def split_point(n: int) -> int:
    """The largest power of two strictly smaller than ``n`` (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


def reference_root(leaves: Sequence[bytes]) -> bytes:
    """MTH over leaf *hashes* (RFC 9162 2.1.1); the empty tree hashes to SHA-256 of the empty string."""
    n = len(leaves)
    if n == 0:
        return EMPTY_ROOT
    if n == 1:
        return leaves[0]
    k = split_point(n)
    return node_hash(reference_root(leaves[:k]), reference_root(leaves[k:]))


def reference_inclusion_path(index: int, leaves: Sequence[bytes]) -> list[bytes]:
    """PATH(m, D[n]) over leaf hashes (RFC 9162 2.1.3.1), ordered leaf to root."""
    n = len(leaves)
    if not 0 <= index < n:
        raise ValueError(f"index {index} outside a tree of size {n}")
    if n == 1:
        return []
    k = split_point(n)
    if index < k:
        return [*reference_inclusion_path(index, leaves[:k]), reference_root(leaves[k:])]
    return [*reference_inclusion_path(index - k, leaves[k:]), reference_root(leaves[:k])]


def reference_consistency_proof(old_size: int, leaves: Sequence[bytes]) -> list[bytes]:
    """PROOF(m, D[n]) over leaf hashes (RFC 9162 2.1.4.1); empty when m == n or m == 0."""
    n = len(leaves)
    if not 0 <= old_size <= n:
        raise ValueError(f"old size {old_size} outside 0..{n}")
    if old_size in (0, n):
        return []
    return _subproof(old_size, leaves, True)


def _subproof(m: int, leaves: Sequence[bytes], complete: bool) -> list[bytes]:
    n = len(leaves)
    if m == n:
        return [] if complete else [reference_root(leaves)]
    k = split_point(n)
    if m <= k:
        return [*_subproof(m, leaves[:k], complete), reference_root(leaves[k:])]
    return [*_subproof(m - k, leaves[k:], False), reference_root(leaves[:k])]
