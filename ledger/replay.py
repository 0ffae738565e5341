"""Replay: rebuild a ledger's tree from its entry bytes alone and check every signed checkpoint against it.

The same procedure serves the operator's database (``Ledger.verify``) and a third party's export
(``LedgerExport.verify``). It trusts nothing but entry 0: the ledger id is recomputed from the genesis bytes
(and compared with the id the caller asked for), the checkpoint key is the one genesis declares, and then

* every entry must be canonical JSON of a known type, valid for its index (genesis at 0 only);
* every checkpoint must be a well-formed note for this ledger's origin, signed by the genesis key, for a
  size within the entries, with the root the replayed tree has at that size;
* checkpoint sizes strictly increase, each is consistent with the one before (an RFC 9162 consistency
  proof from the replayed tree, checked by ``ledger.verify``), and the last one covers every entry (no
  unsigned tail; entries missing under a signed size are a truncation).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from keys import HeldoutError, TrustedKey, b64encode, verifier_key_string
from ledger.checkpoint import Checkpoint, verify_checkpoint
from ledger.entries import blob_references, decode_entry, genesis_key, ledger_id_of, origin_of
from ledger.errors import LedgerIntegrityError, ProofError
from ledger.rfc6962 import leaf_hash
from ledger.tree import HashTree, MemoryNodes
from ledger.verify import verify_consistency

ProgressFn = Callable[[int, int], None]
PROGRESS_EVERY = 4096


@dataclass(frozen=True)
class CheckpointClaim:
    """A checkpoint as a source presents it: the size it is filed under, its note, and the root the source
    stored beside it (``None`` when the source keeps only the note)."""

    size: int
    note: str
    root: bytes | None = None


@dataclass(frozen=True)
class ReplayReport:
    ledger_id: str
    origin: str
    size: int
    root: bytes
    key: TrustedKey
    checkpoints: int
    latest: Checkpoint
    entry_types: dict[str, int]
    blobs: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "ledger_id": self.ledger_id,
            "origin": self.origin,
            "size": self.size,
            "root": b64encode(self.root),
            "key": {"key_id": self.key.key_id, "name": self.key.name, "public_key_b64": self.key.public_key.b64},
            "note_verifier_key": verifier_key_string(self.key.name, self.key.public_key),
            "checkpoints": self.checkpoints,
            "latest_checkpoint": self.latest.size,
            "entry_types": dict(sorted(self.entry_types.items())),
            "blobs_referenced": len(self.blobs),
        }


def _with_checkpoint(exc: HeldoutError, size: int) -> LedgerIntegrityError:
    evidence = {k: v for k, v in exc.evidence.items() if k != "checkpoint"}
    return LedgerIntegrityError(f"checkpoint {size}: {exc.message}", checkpoint=size, **evidence)


def replay(entries: Iterable[tuple[bytes, bytes | None]], total: int, claims: Sequence[CheckpointClaim], *,
           expected_id: str | None = None, progress: ProgressFn | None = None) -> tuple[ReplayReport, MemoryNodes]:
    """Replay ``entries`` (each ``(bytes, stored leaf hash or None)``, in index order; ``total`` of them is
    only for progress) and check ``claims`` (sorted by size). Returns the report and the rebuilt tree;
    raises :class:`LedgerIntegrityError` naming the entry or checkpoint at fault."""
    nodes = MemoryNodes()
    types: Counter[str] = Counter()
    blobs: dict[str, None] = {}
    ledger_id = origin = ""
    key: TrustedKey | None = None
    for index, (data, stored_leaf) in enumerate(entries):
        entry = decode_entry(data, index=index)
        if index == 0:
            ledger_id = ledger_id_of(data)
            origin = origin_of(ledger_id)
            key = genesis_key(entry)
            if expected_id is not None and not ledger_id.startswith(expected_id):
                raise LedgerIntegrityError("this is not the ledger asked for: its genesis entry hashes to "
                                           "another id", index=0, expected=expected_id, found=ledger_id)
        leaf = leaf_hash(data)
        if stored_leaf is not None and stored_leaf != leaf:
            raise LedgerIntegrityError(f"entry {index}: stored leaf hash does not match the entry bytes",
                                       index=index, expected=b64encode(leaf), found=b64encode(stored_leaf))
        nodes.append(leaf)
        types[entry["type"]] += 1
        for digest in blob_references(entry):
            blobs.setdefault(digest)
        if progress is not None and (index + 1) % PROGRESS_EVERY == 0:
            progress(index + 1, total)
    size = nodes.tree_size()
    if progress is not None:
        progress(size, total)
    if size == 0 or key is None:
        raise LedgerIntegrityError("the ledger has no entries (not even its genesis entry)", found=0)
    if not claims:
        raise LedgerIntegrityError("the ledger has no signed checkpoint", size=size)
    tree = HashTree(nodes)
    previous: Checkpoint | None = None
    for claim in claims:
        try:
            checkpoint = verify_checkpoint(claim.note, name=key.name, key=key.public_key, origin=origin)
        except HeldoutError as exc:
            raise _with_checkpoint(exc, claim.size) from None
        if checkpoint.size != claim.size or (claim.root is not None and checkpoint.root != claim.root):
            raise LedgerIntegrityError(f"checkpoint filed under size {claim.size} signs another tree head",
                                       checkpoint=claim.size, found=checkpoint.size)
        if previous is not None and checkpoint.size <= previous.size:
            raise LedgerIntegrityError("checkpoint sizes must strictly increase", checkpoint=checkpoint.size,
                                       expected=f"> {previous.size}", found=checkpoint.size)
        if checkpoint.size > size:
            raise LedgerIntegrityError(
                f"ledger truncated: checkpoint signs {checkpoint.size} entries but only {size} are present",
                checkpoint=checkpoint.size, expected=checkpoint.size, found=size)
        replayed = tree.root_at(checkpoint.size)
        if replayed != checkpoint.root:
            raise LedgerIntegrityError(
                f"checkpoint {checkpoint.size}: signed root does not match the entries (tampered, reordered "
                "or replaced entries)", checkpoint=checkpoint.size, expected=checkpoint.root_b64,
                found=b64encode(replayed))
        if previous is not None:
            try:
                verify_consistency(previous.size, checkpoint.size, previous.root, checkpoint.root,
                                   tree.consistency_path(previous.size, checkpoint.size))
            except ProofError as exc:
                raise _with_checkpoint(exc, checkpoint.size) from None
        previous = checkpoint
    assert previous is not None
    if previous.size != size:
        raise LedgerIntegrityError(
            f"{size - previous.size} entries after the last signed checkpoint ({previous.size})",
            checkpoint=previous.size, expected=previous.size, found=size)
    report = ReplayReport(ledger_id, origin, size, tree.root_at(size), key, len(claims), previous, dict(types),
                          tuple(blobs))
    return report, nodes
