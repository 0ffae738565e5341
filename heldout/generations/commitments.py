"""Per-case commitments, the set hash, and membership proofs in the set tree.

**commitment** (``heldout-commit-v1``) of a case = SHA-256( salt || JCS({"case_id", "content_sha256",
"label"}) ), 32 bytes. ``salt`` is 32 fresh random bytes per case for a sealed generation (kept under
``private/`` until the reveal), so the set hash hides which cases are in the set; the ``public`` generation
(the official released test split, membership public) uses the empty salt.

**set hash** = the RFC 6962 Merkle tree hash (MTH) whose leaves are the commitments sorted ascending as
bytes, each leaf hashed as ``leaf_hash(commitment)`` = SHA-256(0x00 || commitment), interior nodes
SHA-256(0x01 || left || right) (``ledger.rfc6962``). Written as 64 lowercase hex characters. A membership
proof is the RFC 9162 inclusion path of one leaf in that tree (verified with
``ledger.root_from_inclusion_proof``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from keys import MalformedInput, VerificationError
from ledger import root_from_inclusion_proof
from ledger.rfc6962 import HASH_SIZE, leaf_hash, reference_inclusion_path, reference_root
from seals import jcs_bytes
from seals.manifest import GENERATION_PATTERN

SALT_BYTES = 32
_HEX = frozenset("0123456789abcdef")


def commitment_payload(case_id: str, content_sha256: str, label: int) -> bytes:
    return jcs_bytes({"case_id": case_id, "content_sha256": content_sha256, "label": int(label)})


def commitment(salt: bytes, case_id: str, content_sha256: str, label: int) -> bytes:
    return hashlib.sha256(salt + commitment_payload(case_id, content_sha256, label)).digest()


def set_leaves(commitments: Sequence[bytes]) -> list[bytes]:
    """Leaf hashes of the set tree: the commitments sorted ascending, each through ``leaf_hash``."""
    return [leaf_hash(c) for c in sorted(commitments)]


def set_hash(commitments: Sequence[bytes]) -> str:
    if not commitments:
        raise MalformedInput("a generation has at least one case")
    return reference_root(set_leaves(commitments)).hex()


def inclusion_path(commitments: Sequence[bytes], target: bytes) -> tuple[int, list[bytes]]:
    """``(leaf index, audit path)`` of ``target`` in the set tree of ``commitments``."""
    ordered = sorted(commitments)
    try:
        index = ordered.index(target)
    except ValueError:
        raise MalformedInput("the commitment is not in the set") from None
    return index, reference_inclusion_path(index, [leaf_hash(c) for c in ordered])


def hex_bytes(value: Any, *, size: int | None, what: str) -> bytes:
    """Strict lowercase hex to bytes (``size`` in bytes, or any length when None)."""
    if not isinstance(value, str) or (size is not None and len(value) != 2 * size) or not set(value) <= _HEX \
            or len(value) % 2:
        expected = f"{2 * size} lowercase hex characters" if size is not None else "lowercase hex"
        raise MalformedInput(f"{what} must be {expected}", field=what, found=str(value)[:80])
    return bytes.fromhex(value)


@dataclass(frozen=True)
class MemberProof:
    """One case's opening and its inclusion path in a generation's set tree."""

    generation: str
    set_hash: str
    case_id: str
    task: str
    content_sha256: str
    label: int
    salt: bytes
    leaf_index: int
    tree_size: int
    path: tuple[bytes, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "heldout/member-proof",
            "generation": self.generation,
            "set_hash": self.set_hash,
            "case": {"case_id": self.case_id, "task": self.task, "content_sha256": self.content_sha256,
                     "label": self.label, "salt": self.salt.hex()},
            "commitment": commitment(self.salt, self.case_id, self.content_sha256, self.label).hex(),
            "leaf_index": self.leaf_index,
            "tree_size": self.tree_size,
            "audit_path": [h.hex() for h in self.path],
        }

    @classmethod
    def from_json(cls, doc: Any) -> MemberProof:
        if not isinstance(doc, dict) or doc.get("type") != "heldout/member-proof":
            raise MalformedInput("not a heldout member proof", field="type")
        try:
            case = doc["case"]
            path = doc["audit_path"]
            if not isinstance(case, dict) or not isinstance(path, list):
                raise TypeError
            texts = (doc["generation"], doc["set_hash"], case["case_id"], case["task"], case["content_sha256"])
            # (no str() coercion: a number or a list is not a name, and its text must not reach the verdict)
            if not all(isinstance(text, str) for text in texts):
                raise TypeError
            proof = cls(
                generation=doc["generation"], set_hash=doc["set_hash"], case_id=case["case_id"],
                task=case["task"], content_sha256=case["content_sha256"], label=case["label"],
                salt=hex_bytes(case["salt"], size=None, what="case.salt"), leaf_index=doc["leaf_index"],
                tree_size=doc["tree_size"],
                path=tuple(hex_bytes(h, size=HASH_SIZE, what="audit_path[]") for h in path),
            )
        except (KeyError, TypeError):
            raise MalformedInput("member proof lacks a member or has one of the wrong type") from None
        if not GENERATION_PATTERN.fullmatch(proof.generation):
            raise MalformedInput("member proof generation is not a generation's name (genN or public)",
                                 field="generation", found=proof.generation[:60])
        for name in ("label", "leaf_index", "tree_size"):
            value = getattr(proof, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise MalformedInput(f"member proof {name} must be an integer", field=name)
        if "commitment" in doc and doc["commitment"] != commitment(
                proof.salt, proof.case_id, proof.content_sha256, proof.label).hex():
            raise VerificationError(f"case {proof.case_id}: the commitment does not match the opening",
                                    case_id=proof.case_id, field="commitment")
        return proof

    def verify(self, expected_set_hash: str) -> None:
        """Raise unless the opening's commitment leads, along the path, to ``expected_set_hash``."""
        leaf = leaf_hash(commitment(self.salt, self.case_id, self.content_sha256, self.label))
        root = root_from_inclusion_proof(self.leaf_index, self.tree_size, leaf, list(self.path)).hex()
        if root != expected_set_hash:
            raise VerificationError(
                f"case {self.case_id} is not proven a member of {self.generation}: the path leads to another root",
                case_id=self.case_id, expected=expected_set_hash, found=root)
