"""The reading half that both public layouts of a ledger share (``ledger.export`` and ``ledger.tiles``): the
entries held in memory, read once, and proofs from the tree they give."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from keys import b64encode, verifier_key_string
from ledger.errors import LedgerIntegrityError
from ledger.proving import ProvingLog
from ledger.replay import ReplayReport
from ledger.rfc6962 import leaf_hash
from ledger.tree import HashTree
from seals import canonical_bytes, parse_json_object


class EntryList(ProvingLog):
    """Entry access, roots and proofs over ``_load()`` (the entries, read and checked once by the layout's
    reader) and ``_hash_tree()`` (their tree)."""

    what = "the published log"

    def _load(self) -> list[bytes]:
        raise NotImplementedError

    def _hash_tree(self) -> HashTree:
        raise NotImplementedError

    def _proof_tree(self) -> HashTree:
        return self._hash_tree()

    @property
    def size(self) -> int:
        return len(self._load())

    def entry_bytes(self, index: int) -> bytes:
        return self._load()[self._index(index)]

    def entry(self, index: int) -> dict[str, Any]:
        return parse_json_object(self.entry_bytes(index), what=f"entry {index}")

    def leaf_hash(self, index: int) -> bytes:
        """The RFC 6962 leaf hash of entry ``index`` (``ledger.log.LogReader``)."""
        return leaf_hash(self.entry_bytes(index))

    def entries(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
        for index, data in enumerate(self._load()[start:end], start=start):
            yield index, parse_json_object(data, what=f"entry {index}")

    def entries_bytes(self) -> Iterator[tuple[int, bytes]]:
        yield from enumerate(self._load())


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
        # as JSON values: true is not 1 (Python's True == 1 would take one for the other)
        if member not in manifest or canonical_bytes(manifest[member]) != canonical_bytes(actual):
            raise LedgerIntegrityError(f"{what}'s {member} does not match the replayed ledger", file=file,
                                       field=member, expected=actual, found=manifest.get(member))
