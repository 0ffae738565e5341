"""Proof objects handed out by the ledger, with their JSON form (hashes in standard base64).

``InclusionProof.to_json()`` is ``{"index", "size", "root", "leaf_b64", "leaf_hash", "proof": [...]}`` where
``leaf_b64`` is the entry's raw bytes (so a verifier hashes the leaf itself) and ``proof`` the RFC 9162 audit
path, leaf to root. ``ConsistencyProof.to_json()`` is ``{"old", "new", "old_root", "new_root", "proof": [...]}``.
``verify`` checks a proof against a root the caller trusts (from a verified checkpoint), never against the
root the proof object carries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from keys import MalformedInput, b64decode_strict, b64encode
from ledger.errors import ProofError
from ledger.rfc6962 import leaf_hash
from ledger.verify import verify_consistency, verify_inclusion


def _hashes(value: Any, what: str) -> tuple[bytes, ...]:
    if not isinstance(value, list):
        raise ProofError(f"{what} is a list of base64 hashes", field=what)
    try:
        return tuple(b64decode_strict(item, what=f"{what} element") for item in value)
    except MalformedInput as exc:
        raise ProofError(exc.message, field=what) from None


def _int(body: dict[str, Any], member: str) -> int:
    value = body.get(member)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ProofError(f"proof member {member!r} is a non-negative integer", field=member)
    return value


def _b64(body: dict[str, Any], member: str) -> bytes:
    try:
        return b64decode_strict(body.get(member), what=member)  # type: ignore[arg-type]
    except MalformedInput as exc:
        raise ProofError(exc.message, field=member) from None


@dataclass(frozen=True)
class InclusionProof:
    index: int
    size: int
    leaf_hash: bytes
    root: bytes
    path: tuple[bytes, ...]
    entry: bytes | None = None

    def verify(self, root: bytes) -> None:
        """Raise unless this proof puts the entry at ``index`` of the tree of ``size`` with ``root``."""
        if self.entry is not None and leaf_hash(self.entry) != self.leaf_hash:
            raise ProofError("the proof's entry bytes do not hash to its leaf hash", index=self.index)
        verify_inclusion(self.index, self.size, self.leaf_hash, self.path, root)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"index": self.index, "size": self.size, "root": b64encode(self.root),
                               "leaf_hash": b64encode(self.leaf_hash), "proof": [b64encode(h) for h in self.path]}
        if self.entry is not None:
            out["leaf_b64"] = b64encode(self.entry)
        return out

    @classmethod
    def from_json(cls, body: Any) -> InclusionProof:
        if not isinstance(body, dict):
            raise ProofError("an inclusion proof is a JSON object")
        entry = _b64(body, "leaf_b64") if "leaf_b64" in body else None
        if "leaf_hash" in body:
            leaf = _b64(body, "leaf_hash")
        elif entry is not None:
            leaf = leaf_hash(entry)
        else:
            raise ProofError("an inclusion proof carries leaf_b64 or leaf_hash")
        return cls(_int(body, "index"), _int(body, "size"), leaf, _b64(body, "root"),
                   _hashes(body.get("proof"), "proof"), entry)


@dataclass(frozen=True)
class ConsistencyProof:
    old_size: int
    new_size: int
    old_root: bytes
    new_root: bytes
    path: tuple[bytes, ...]

    def verify(self, old_root: bytes, new_root: bytes) -> None:
        """Raise unless the tree (old_size, old_root) is a prefix of (new_size, new_root)."""
        verify_consistency(self.old_size, self.new_size, old_root, new_root, self.path)

    def to_json(self) -> dict[str, Any]:
        return {"old": self.old_size, "new": self.new_size, "old_root": b64encode(self.old_root),
                "new_root": b64encode(self.new_root), "proof": [b64encode(h) for h in self.path]}

    @classmethod
    def from_json(cls, body: Any) -> ConsistencyProof:
        if not isinstance(body, dict):
            raise ProofError("a consistency proof is a JSON object")
        return cls(_int(body, "old"), _int(body, "new"), _b64(body, "old_root"), _b64(body, "new_root"),
                   _hashes(body.get("proof"), "proof"))
