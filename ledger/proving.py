"""Bounds checks, roots and RFC 9162 proofs of a log, written once for every kind of log that can prove: the
database ledger (``ledger.ledger.Ledger``) and the published readers (``ledger.published``: exports and tiles).
Each supplies its size, its entries' bytes and its Merkle tree; the rules for what may be asked (an index
inside the tree, a size no larger than the log, no consistency proof from the empty tree) live here only."""

from __future__ import annotations

from ledger.errors import LedgerIntegrityError, LedgerUsageError
from ledger.proofs import ConsistencyProof, InclusionProof
from ledger.rfc6962 import leaf_hash
from ledger.tree import HashTree


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class ProvingLog:
    """Roots and proofs over ``size``, ``entry_bytes`` and ``_proof_tree()``."""

    #: How errors name this log ("the ledger", "the export", ...).
    what = "the log"

    @property
    def size(self) -> int:
        raise NotImplementedError

    def entry_bytes(self, index: int) -> bytes:
        raise NotImplementedError

    def _proof_tree(self) -> HashTree:
        raise NotImplementedError

    def _damaged(self, what: str, exc: LedgerIntegrityError) -> LedgerIntegrityError:
        return LedgerIntegrityError(f"{self.what}'s {what} does not verify ({exc.message}): its tree is damaged "
                                    "(run heldout ledger verify)", **exc.evidence)

    def _check_root(self, size: int, root: bytes) -> None:
        """Raise when ``root``, computed from the proof tree for ``size`` entries, is not what the log's
        signatures vouch for. Every root and proof handed out passes here first. A log whose tree is computed
        from its entries as they are read needs nothing; the database ledger, whose tree is a stored cache,
        checks it against its signed checkpoints (``Ledger._check_root``)."""

    def _index(self, index: int, size: int | None = None) -> int:
        """``index`` when it is an entry of the tree of ``size`` entries (default: the whole log)."""
        limit = self.size if size is None else size
        if not _is_count(index) or not 0 <= index < limit:
            raise LedgerUsageError(f"index {index!r} is outside {self.what} (size {limit})", index=index, size=limit)
        return index

    def _size(self, size: int | None) -> int:
        """``size`` (default: the log's) when it is a tree size the log has."""
        current = self.size
        if size is None:
            return current
        if not _is_count(size) or not 0 <= size <= current:
            raise LedgerUsageError(f"size {size!r} is outside 0..{current}", size=size, found=current)
        return size

    def root(self, size: int | None = None) -> bytes:
        """The RFC 6962 root of the first ``size`` entries (default: all)."""
        tree_size = self._size(size)
        root = self._proof_tree().root_at(tree_size)
        self._check_root(tree_size, root)
        return root

    def inclusion_proof(self, index: int, size: int | None = None) -> InclusionProof:
        """Entry ``index``'s RFC 9162 inclusion proof in the tree of ``size`` entries (default: all)."""
        tree_size = self._size(size)
        self._index(index, tree_size)
        entry = self.entry_bytes(index)
        tree = self._proof_tree()
        proof = InclusionProof(index, tree_size, leaf_hash(entry), tree.root_at(tree_size),
                               tuple(tree.inclusion_path(index, tree_size)), entry)
        self._check_root(tree_size, proof.root)
        try:  # the path from this entry's own bytes (not a stored leaf hash) must reach that root
            proof.verify(proof.root)
        except LedgerIntegrityError as exc:
            raise self._damaged(f"inclusion proof of entry {index} in size {tree_size}", exc) from None
        return proof

    def consistency_proof(self, old_size: int, new_size: int | None = None) -> ConsistencyProof:
        """The RFC 9162 consistency proof from ``old_size`` to ``new_size`` (default: all)."""
        new = self._size(new_size)
        if not _is_count(old_size) or not 1 <= old_size <= new:
            raise LedgerUsageError(f"old size {old_size!r} must be between 1 and the new size {new} (a proof from "
                                   "the empty tree proves nothing)", old=old_size, new=new)
        tree = self._proof_tree()
        proof = ConsistencyProof(old_size, new, tree.root_at(old_size), tree.root_at(new),
                                 tuple(tree.consistency_path(old_size, new)))
        self._check_root(old_size, proof.old_root)
        self._check_root(new, proof.new_root)
        try:
            proof.verify(proof.old_root, proof.new_root)
        except LedgerIntegrityError as exc:
            raise self._damaged(f"consistency proof from size {old_size} to {new}", exc) from None
        return proof
