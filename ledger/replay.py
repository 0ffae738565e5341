"""Replay: rebuild a ledger's tree from its entry bytes alone and check every signed checkpoint against it, in one
streamed pass that holds ``O(log n)`` tree state (a compact range), whatever the length of the log.

The same walk serves the operator's database (``Ledger.verify``), a third party's export or tiles
(``verify``), and the audit (``heldout.audit``, which also uses :func:`locate_damage` to name the entries a
failed replay points at). It trusts nothing but entry 0: the ledger id is recomputed from the genesis bytes
(and compared with the id the caller asked for), the checkpoint key is the one genesis declares, and then

* every entry must be canonical JSON of a known type, valid for its index (genesis at 0 only), decoded once;
* every checkpoint must be a well-formed note for this ledger's origin, signed by the genesis key, for a
  size within the entries, with the root the streamed tree has at that size;
* checkpoint sizes strictly increase, each is consistent with the one before (an RFC 9162 consistency proof
  assembled from the streamed tree: the old checkpoint's compact range, the perfect subtrees completed since,
  and the new compact range; checked by ``ledger.verify``), and the last one covers every entry (no unsigned
  tail; entries missing under a signed size are a truncation);
* with ``stored_nodes`` (a database's interior tree nodes in the order their last leaf completes them), every
  stored node is the one the entries give, none is missing and none lies beyond the entries.

Entries and checkpoints are iterables consumed once, in order (a database cursor, an export's lines), so
nothing here grows with the log: the state is the compact range, the pending consistency proof of the current
pair of checkpoints (``O(log n)`` hashes) and a count per entry type.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from keys import HeldoutError, TrustedKey, b64encode, verifier_key_string
from ledger.checkpoint import Checkpoint, verify_checkpoint
from ledger.entries import decode_entry, genesis_key, ledger_id_of, origin_of
from ledger.errors import LedgerIntegrityError, ProofError
from ledger.rfc6962 import LEAF_PREFIX, leaf_hash
from ledger.tree import CompactRange, consistency_ranges
from ledger.verify import verify_consistency

ProgressFn = Callable[[int, int], None]
#: Called with (index, entry bytes, decoded entry) for every entry, in order, as the replay decodes it.
EntryFn = Callable[[int, bytes, dict[str, Any]], None]
PROGRESS_EVERY = 4096
#: A stored tree node as a database yields it: (level, index, hash).
StoredNode = tuple[int, int, bytes]

_sha256 = hashlib.sha256
_NEVER = 1 << 62


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
        }


def _with_checkpoint(exc: HeldoutError, size: int) -> LedgerIntegrityError:
    evidence = {k: v for k, v in exc.evidence.items() if k != "checkpoint"}
    return LedgerIntegrityError(f"checkpoint {size}: {exc.message}", checkpoint=size, **evidence)


class _PendingProof:
    """The consistency proof from a verified checkpoint (``old``) to the next claimed size, filled in as the
    stream passes the subtrees it needs: those left of ``old`` come from the old compact range at once, the
    perfect subtrees right of it when their last leaf is pushed, the ragged right edge from the new compact
    range at the new size."""

    def __init__(self, old: Checkpoint, tree: CompactRange, new_size: int) -> None:
        self.old = old
        self.new_size = new_size
        self.path: list[bytes | None] = []
        self.wanted: dict[tuple[int, int], int] = {}  # (level, index) -> slot
        self.captures: list[int] = []  # leaf indices whose push completes a wanted subtree
        self.edge: tuple[int, int] | None = None  # (slot, start) of the ragged range ending at new_size
        for start, end in consistency_ranges(old.size, new_size):
            slot = len(self.path)
            self.path.append(None)
            width = end - start
            if end <= old.size:
                self.path[slot] = tree.subtree(start)
            elif width & (width - 1) == 0:
                level = width.bit_length() - 1
                self.wanted[(level, start >> level)] = slot
                self.captures.append(end - 1)
            else:
                self.edge = (slot, start)

    def take(self, completed: list[tuple[int, int, bytes]]) -> None:
        for level, index, digest in completed:
            slot = self.wanted.get((level, index))
            if slot is not None:
                self.path[slot] = digest

    def proof(self, tree: CompactRange) -> list[bytes]:
        if self.edge is not None:
            self.path[self.edge[0]] = tree.suffix_root(self.edge[1])
        missing = [slot for slot, item in enumerate(self.path) if item is None]
        if missing:  # pragma: no cover (the stream passes every subtree the ranges name before the new size)
            raise LedgerIntegrityError("internal: a consistency proof element was not streamed", found=missing)
        return [item for item in self.path if item is not None]


class Replay:
    """One streamed replay. Iterate :meth:`checkpoints` for each checkpoint as it is verified (the entries
    below its size are checked by then); once it is exhausted, :attr:`report` holds the result. Any failure
    raises :class:`LedgerIntegrityError` naming the entry or checkpoint at fault."""

    def __init__(self, entries: Iterable[tuple[bytes, bytes | None]], total: int, claims: Iterable[CheckpointClaim],
                 *, expected_id: str | None = None, progress: ProgressFn | None = None,
                 stored_nodes: Iterable[StoredNode] | None = None, min_node_level: int = 1,
                 on_entry: EntryFn | None = None) -> None:
        self._entries = entries
        self.total = total
        self._claims = iter(claims)
        self.expected_id = expected_id
        self.progress = progress
        self._nodes = None if stored_nodes is None else iter(stored_nodes)
        self.min_node_level = min_node_level if stored_nodes is not None else _NEVER
        self.on_entry = on_entry
        self.tree = CompactRange()
        self.ledger_id = self.origin = ""
        self.key: TrustedKey | None = None
        self.types: dict[str, int] = {}
        self.previous: Checkpoint | None = None
        self.verified = 0
        self.pending: _PendingProof | None = None
        self._next_claim: CheckpointClaim | None = next(self._claims, None)
        self._captures: list[int] = []
        self.report: ReplayReport | None = None

    # the stream ---------------------------------------------------------------------------------------------
    def checkpoints(self) -> Iterator[Checkpoint]:
        on_entry = self.on_entry
        types = self.types
        sha256 = _sha256
        leaves: list[bytes] = []  # leaf hashes not yet in the tree: at most PROGRESS_EVERY of them
        size = 0
        stop = 0  # the next size at which something besides hashing a leaf happens
        for data, stored_leaf in self._entries:
            entry = decode_entry(data, index=size)
            if size == stop:  # before the leaf at index ``size``: the tree takes the pending leaves first
                self._extend(leaves)
                if size == 0:
                    self._genesis(data, entry)
                yield from self._events(size)
                capture = bool(self._captures) and self._captures[0] == size
                stop = self._next_stop(size)
            else:
                capture = False
            leaf = sha256(LEAF_PREFIX + data).digest()
            if stored_leaf is not None and stored_leaf != leaf:
                raise LedgerIntegrityError(f"entry {size}: stored leaf hash does not match the entry bytes",
                                           index=size, expected=b64encode(leaf), found=b64encode(stored_leaf))
            if capture:
                self._push_capturing(leaf)
            else:
                leaves.append(leaf)
            kind = entry["type"]
            types[kind] = types.get(kind, 0) + 1
            if on_entry is not None:
                on_entry(size, data, entry)
            size += 1
        self._extend(leaves)
        if self.progress is not None:
            self.progress(size, self.total)
        if size == 0 or self.key is None:
            raise LedgerIntegrityError("the ledger has no entries (not even its genesis entry)", found=0)
        yield from self._events(size)
        while self._next_claim is not None:  # claims past the entries: each is refused (truncation at the latest)
            yield self._check_claim(self._take_claim(), size)
        self._finish(size)

    def _extend(self, leaves: list[bytes]) -> None:
        """Push the pending leaf hashes and check the nodes they complete against the stored ones."""
        for level, index, digest in self.tree.extend(leaves, self.min_node_level):
            self._check_node(level, index, digest)
        leaves.clear()

    def _genesis(self, data: bytes, entry: dict[str, Any]) -> None:
        self.ledger_id = ledger_id_of(data)
        self.origin = origin_of(self.ledger_id)
        self.key = genesis_key(entry)
        if self.expected_id is not None and not self.ledger_id.startswith(self.expected_id):
            raise LedgerIntegrityError("this is not the ledger asked for: its genesis entry hashes to another id",
                                       index=0, expected=self.expected_id, found=self.ledger_id)

    def _next_stop(self, size: int) -> int:
        stops = [((size // PROGRESS_EVERY) + 1) * PROGRESS_EVERY]
        if self._next_claim is not None and self._next_claim.size > size:
            stops.append(self._next_claim.size)
        later = [index for index in self._captures if index > size]  # one at ``size`` is pushed right after
        if later:
            stops.append(later[0])
        return min(stops)

    def _events(self, size: int) -> Iterator[Checkpoint]:
        if size and size % PROGRESS_EVERY == 0 and self.progress is not None:
            self.progress(size, self.total)
        while self._next_claim is not None and self._next_claim.size <= size:
            yield self._check_claim(self._take_claim(), size)

    def _take_claim(self) -> CheckpointClaim:
        claim = self._next_claim
        assert claim is not None
        self._next_claim = next(self._claims, None)
        return claim

    def _push_capturing(self, leaf: bytes) -> None:
        index = self.tree.size
        completed = self.tree.push(leaf)
        while self._captures and self._captures[0] == index:
            self._captures.pop(0)
        if self.pending is not None:
            self.pending.take(completed)
        for level, node_index, digest in completed[1:]:
            if level >= self.min_node_level:
                self._check_node(level, node_index, digest)

    def _check_node(self, level: int, index: int, digest: bytes) -> None:
        """The next stored node (``NODE_ORDER``) must be this one: a later one means this one is missing, an
        earlier one is a node the entries do not make."""
        assert self._nodes is not None
        stored = next(self._nodes, None)
        if stored is None or ((stored[1] + 1) << stored[0], stored[0]) > ((index + 1) << level, level):
            raise LedgerIntegrityError("tree nodes are missing from the database", level=level, index=index)
        if stored[0] != level or stored[1] != index:
            raise LedgerIntegrityError("the database holds a tree node the entries do not make", level=stored[0],
                                       index=stored[1], expected=f"level {level} index {index}")
        if stored[2] != digest:
            raise LedgerIntegrityError("a stored tree node does not match the entries", level=level, index=index)

    # checkpoints --------------------------------------------------------------------------------------------
    def _check_claim(self, claim: CheckpointClaim, size: int) -> Checkpoint:
        """Check one claim with the tree at ``size`` leaves (the claim's size, or fewer: the stream ended)."""
        key = self.key
        assert key is not None
        try:
            checkpoint = verify_checkpoint(claim.note, name=key.name, key=key.public_key, origin=self.origin)
        except HeldoutError as exc:
            raise _with_checkpoint(exc, claim.size) from None
        if checkpoint.size != claim.size or (claim.root is not None and checkpoint.root != claim.root):
            raise LedgerIntegrityError(f"checkpoint filed under size {claim.size} signs another tree head",
                                       checkpoint=claim.size, found=checkpoint.size)
        previous = self.previous
        if previous is not None and checkpoint.size <= previous.size:
            raise LedgerIntegrityError("checkpoint sizes must strictly increase", checkpoint=checkpoint.size,
                                       expected=f"> {previous.size}", found=checkpoint.size)
        if checkpoint.size > size:
            raise LedgerIntegrityError(
                f"ledger truncated: checkpoint signs {checkpoint.size} entries but only {size} are present",
                checkpoint=checkpoint.size, expected=checkpoint.size, found=size)
        replayed = self.tree.root()
        if replayed != checkpoint.root:
            raise LedgerIntegrityError(
                f"checkpoint {checkpoint.size}: signed root does not match the entries (tampered, reordered "
                "or replaced entries)", checkpoint=checkpoint.size, expected=checkpoint.root_b64,
                found=b64encode(replayed))
        if previous is not None:
            pending = self.pending
            try:
                if pending is None or pending.new_size != checkpoint.size:  # pragma: no cover (planned at the last)
                    raise ProofError("no consistency proof was planned for this size", found=checkpoint.size)
                verify_consistency(previous.size, checkpoint.size, previous.root, checkpoint.root,
                                   pending.proof(self.tree))
            except ProofError as exc:
                raise _with_checkpoint(exc, checkpoint.size) from None
        self.previous = checkpoint
        self.verified += 1
        self.pending = None
        self._captures = []
        upcoming = self._next_claim
        if upcoming is not None and upcoming.size > checkpoint.size:
            self.pending = _PendingProof(checkpoint, self.tree, upcoming.size)
            self._captures = sorted(self.pending.captures)
        return checkpoint

    def _finish(self, size: int) -> None:
        previous = self.previous
        if previous is None:
            raise LedgerIntegrityError("the ledger has no signed checkpoint", size=size)
        if previous.size != size:
            raise LedgerIntegrityError(
                f"{size - previous.size} entries after the last signed checkpoint ({previous.size})",
                checkpoint=previous.size, expected=previous.size, found=size)
        if self._nodes is not None:
            extra = next(self._nodes, None)
            if extra is not None:
                raise LedgerIntegrityError("the database holds a tree node beyond the entries", level=extra[0],
                                           index=extra[1])
        assert self.key is not None
        self.report = ReplayReport(self.ledger_id, self.origin, size, self.tree.root(), self.key,
                                   self.verified, previous, dict(self.types))


def replay(entries: Iterable[tuple[bytes, bytes | None]], total: int, claims: Iterable[CheckpointClaim], *,
           expected_id: str | None = None, progress: ProgressFn | None = None,
           stored_nodes: Iterable[StoredNode] | None = None, min_node_level: int = 1,
           on_entry: EntryFn | None = None) -> ReplayReport:
    """Replay ``entries`` (each ``(bytes, stored leaf hash or None)``, in index order; ``total`` of them is
    only for progress) and check ``claims`` (sorted by size), both streamed once (see :class:`Replay`)."""
    walk = Replay(entries, total, claims, expected_id=expected_id, progress=progress, stored_nodes=stored_nodes,
                  min_node_level=min_node_level, on_entry=on_entry)
    for _ in walk.checkpoints():
        pass
    assert walk.report is not None
    return walk.report


def locate_damage(entries: Iterable[bytes], checkpoints: Iterable[Checkpoint], key: TrustedKey,
                  origin: str) -> tuple[set[int], tuple[int, int] | None]:
    """After a failed replay: walk the checkpoints (sorted by size) that verify under ``key`` against the streamed
    tree of ``entries``. Returns the sizes whose notes verify, and the first and last index of the entries that
    break the signed history: those after the last checkpoint that still holds, up to the first that does not
    (or the unsigned tail); ``None`` for the range when every verified checkpoint holds and nothing is
    unsigned. Notes that do not verify are skipped (they say nothing about the entries)."""
    ordered = iter(checkpoints)
    tree = CompactRange()
    verified: set[int] = set()
    good = 0
    damaged: tuple[int, int] | None = None
    upcoming = next(ordered, None)

    def judge(checkpoint: Checkpoint, size: int) -> None:
        nonlocal good, damaged
        try:
            verify_checkpoint(checkpoint.note, name=key.name, key=key.public_key, origin=origin)
        except HeldoutError:
            return
        verified.add(checkpoint.size)
        if damaged is not None or checkpoint.size <= good:
            return
        if checkpoint.size > size or tree.root() != checkpoint.root:
            damaged = (good, checkpoint.size - 1)
        else:
            good = checkpoint.size

    for data in entries:
        while upcoming is not None and upcoming.size <= tree.size:
            judge(upcoming, tree.size)
            upcoming = next(ordered, None)
        tree.push(leaf_hash(data))
    while upcoming is not None:
        judge(upcoming, tree.size)
        upcoming = next(ordered, None)
    if damaged is None and tree.size > good:
        damaged = (good, tree.size - 1)
    return verified, damaged
