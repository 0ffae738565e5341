"""Verification of RFC 9162 proofs: pure functions that return nothing on success and raise
:class:`ledger.errors.ProofError` (with the evidence) on any failure. They never return ``False``.

Inclusion (RFC 9162 2.1.3.2) and consistency (2.1.4.2) follow the RFC's algorithms; hashes are the 32-byte
SHA-256 values of RFC 6962 (leaf = H(0x00 || entry), node = H(0x01 || left || right)).

The rule for size 0 (the RFC leaves it open; transparency-dev and Go's tlog refuse it):

* The empty tree has exactly one root, SHA-256 of the empty string. A claim about size 0 with any other
  root is refused.
* Nothing is included in the empty tree: an inclusion proof against size 0 is refused.
* Consistency from size 0 to itself is accepted only with an empty proof and both roots equal to the empty
  root. Consistency from size 0 to a larger size is refused whatever the proof: it would prove nothing (every
  tree extends the empty one) and a verifier that accepted it could be walked from "nothing" to any root
  without ever having checked one. A client starts instead from a first checkpoint it trusts (in this project
  every ledger's first checkpoint is at size 1, over its genesis entry).
"""

from __future__ import annotations

from collections.abc import Sequence

from keys import b64encode
from ledger.errors import ProofError
from ledger.rfc6962 import EMPTY_ROOT, HASH_SIZE, leaf_hash, node_hash


def _b64(value: bytes) -> str:
    return b64encode(bytes(value))


def _check_size(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ProofError(f"{name} must be a non-negative integer", field=name, found=repr(value)[:40])
    return value


def _check_path(proof: Sequence[bytes] | None) -> list[bytes]:
    path = list(proof or [])
    for position, item in enumerate(path):
        if not isinstance(item, (bytes, bytearray)) or len(item) != HASH_SIZE:
            raise ProofError(
                f"proof element {position} is not a {HASH_SIZE}-byte hash", field=f"proof[{position}]",
                expected=HASH_SIZE, found=len(item) if isinstance(item, (bytes, bytearray)) else repr(item)[:40])
    return [bytes(item) for item in path]


def root_from_inclusion_proof(index: int, size: int, leaf: bytes, proof: Sequence[bytes] | None) -> bytes:
    """The root an inclusion proof implies for ``leaf`` (a leaf *hash*) at ``index`` in a tree of ``size``.

    Raises :class:`ProofError` when the proof cannot be a proof for that index and size (wrong length,
    index outside the tree)."""
    index = _check_size("index", index)
    size = _check_size("size", size)
    path = _check_path(proof)
    if index >= size:
        raise ProofError(f"index {index} is outside a tree of size {size}", index=index, size=size)
    if not isinstance(leaf, (bytes, bytearray)) or len(leaf) != HASH_SIZE:
        raise ProofError(f"a leaf hash is {HASH_SIZE} bytes", field="leaf_hash", expected=HASH_SIZE,
                         found=len(leaf) if isinstance(leaf, (bytes, bytearray)) else repr(leaf)[:40])
    fn, sn, r = index, size - 1, bytes(leaf)
    for position, sibling in enumerate(path):
        if sn == 0:
            raise ProofError("inclusion proof is longer than the tree is deep", index=index, size=size,
                             expected=position, found=len(path))
        if fn & 1 or fn == sn:
            r = node_hash(sibling, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, sibling)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError("inclusion proof is shorter than the tree is deep", index=index, size=size,
                         found=len(path))
    return r


def verify_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes] | None, root: bytes) -> None:
    """Check that ``leaf`` (a leaf hash) is at ``index`` of the tree of ``size`` entries with ``root``."""
    computed = root_from_inclusion_proof(index, size, leaf, proof)
    if computed != bytes(root):
        raise ProofError(f"inclusion proof for index {index} does not lead to the root of size {size}",
                         index=index, size=size, expected=_b64(bytes(root)), found=_b64(computed))


def verify_entry_inclusion(index: int, size: int, entry: bytes, proof: Sequence[bytes] | None,
                           root: bytes) -> None:
    """:func:`verify_inclusion` for the raw entry bytes (the leaf hash is computed here)."""
    verify_inclusion(index, size, leaf_hash(bytes(entry)), proof, root)


def verify_consistency(old_size: int, new_size: int, old_root: bytes, new_root: bytes,
                       proof: Sequence[bytes] | None) -> None:
    """Check that the tree of ``old_size`` with ``old_root`` is a prefix of the tree of ``new_size`` with
    ``new_root`` (RFC 9162 2.1.4.2). See the module docstring for the rule at size 0."""
    old_size = _check_size("old size", old_size)
    new_size = _check_size("new size", new_size)
    path = _check_path(proof)
    old_root, new_root = bytes(old_root), bytes(new_root)
    where = {"old": old_size, "new": new_size}
    if old_size > new_size:
        raise ProofError(f"old size {old_size} is larger than new size {new_size}", **where)
    if old_size == new_size:
        if path:
            raise ProofError("a consistency proof between equal sizes must be empty", found=len(path), **where)
        if old_size == 0 and old_root != EMPTY_ROOT:
            raise ProofError("the root of the empty tree is SHA-256 of the empty string", **where,
                             expected=_b64(EMPTY_ROOT), found=_b64(old_root))
        if old_root != new_root:
            raise ProofError("two different roots for the same size", **where, expected=_b64(old_root),
                             found=_b64(new_root))
        return
    if old_size == 0:
        raise ProofError("a consistency proof from the empty tree proves nothing and is refused", **where)
    if not path:
        raise ProofError("consistency proof is empty", **where)
    if old_size & (old_size - 1) == 0:  # the old tree is a perfect subtree: its root starts the path
        path = [old_root, *path]
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for position, item in enumerate(path[1:], start=1):
        if sn == 0:
            raise ProofError("consistency proof is too long", **where, expected=position, found=len(path))
        if fn & 1 or fn == sn:
            fr = node_hash(item, fr)
            sr = node_hash(item, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, item)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError("consistency proof is too short", **where, found=len(path))
    if fr != old_root:
        raise ProofError(f"consistency proof does not lead to the root of size {old_size}", **where,
                         expected=_b64(old_root), found=_b64(fr))
    if sr != new_root:
        raise ProofError(f"consistency proof does not lead to the root of size {new_size}", **where,
                         expected=_b64(new_root), found=_b64(sr))
