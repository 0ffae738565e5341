"""The reading half that both public layouts of a ledger share (``ledger.export`` and ``ledger.tiles``): the
entries held in memory, read once, and proofs from the tree they give."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from keys import b64encode, verifier_key_string
from ledger.errors import LedgerIntegrityError, LedgerUsageError
from ledger.proofs import ConsistencyProof, InclusionProof
from ledger.replay import ReplayReport
from ledger.rfc6962 import leaf_hash
from ledger.tree import HashTree
from seals import parse_json_object


class EntryList:
    """Entry access, roots and proofs over ``_load()`` (the entries, read and checked once by the layout's
    reader) and ``_hash_tree()`` (their tree)."""

    what = "the published log"

    def _load(self) -> list[bytes]:
        raise NotImplementedError

    def _hash_tree(self) -> HashTree:
        raise NotImplementedError

    @property
    def size(self) -> int:
        return len(self._load())

    def entry_bytes(self, index: int) -> bytes:
        entries = self._load()
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(entries):
            raise LedgerUsageError(f"index {index} is outside {self.what} (size {len(entries)})", index=index)
        return entries[index]

    def entry(self, index: int) -> dict[str, Any]:
        return parse_json_object(self.entry_bytes(index), what=f"entry {index}")

    def entries(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
        for index, data in enumerate(self._load()[start:end], start=start):
            yield index, parse_json_object(data, what=f"entry {index}")

    def entries_bytes(self) -> Iterator[tuple[int, bytes]]:
        yield from enumerate(self._load())

    def root(self, size: int | None = None) -> bytes:
        size = self.size if size is None else size
        if not 0 <= size <= self.size:
            raise LedgerUsageError(f"size {size} is outside 0..{self.size}", size=size)
        return self._hash_tree().root_at(size)

    def inclusion_proof(self, index: int, size: int | None = None) -> InclusionProof:
        size = self.size if size is None else size
        entry = self.entry_bytes(index)
        if not index < size <= self.size:
            raise LedgerUsageError(f"index {index} is not inside size {size}", index=index, size=size)
        tree = self._hash_tree()
        return InclusionProof(index, size, leaf_hash(entry), tree.root_at(size),
                              tuple(tree.inclusion_path(index, size)), entry)

    def consistency_proof(self, old_size: int, new_size: int | None = None) -> ConsistencyProof:
        new = self.size if new_size is None else new_size
        if not 1 <= old_size <= new <= self.size:
            raise LedgerUsageError(f"sizes {old_size}..{new} are outside 1..{self.size}", old=old_size, new=new)
        tree = self._hash_tree()
        return ConsistencyProof(old_size, new, tree.root_at(old_size), tree.root_at(new),
                                tuple(tree.consistency_path(old_size, new)))


def check_replayed_claims(manifest: dict[str, Any], report: ReplayReport, *, what: str, file: str,
                          **more: Any) -> None:
    """The members a published manifest states about the log (id, origin, size, root, verifier key, and
    ``more``) must be what the replay found."""
    expected: dict[str, Any] = {
        "ledger_id": report.ledger_id, "origin": report.origin, "size": report.size,
        "root": b64encode(report.root), **more,
        "note_verifier_key": verifier_key_string(report.key.name, report.key.public_key),
    }
    for member, actual in expected.items():
        if manifest.get(member) != actual:
            raise LedgerIntegrityError(f"{what}'s {member} does not match the replayed ledger", file=file,
                                       field=member, expected=actual, found=manifest.get(member))
