"""A checkpoint client that cannot be rolled back.

It pins one ledger (origin) and its checkpoint key, remembers the last checkpoint it accepted in a state file,
and accepts a new one only if it is signed by that key and

* has the same size and root as the accepted one (nothing new), or
* is larger and comes with a consistency proof from the accepted checkpoint that verifies.

It refuses a smaller size (:class:`RollbackError`), a different root at the same size, and a larger size
without a valid consistency proof (:class:`ForkError`). On a refusal of a *signed* checkpoint it keeps both
signed notes (and the proof offered) in an evidence folder: two signed, incompatible tree heads are proof
that the log showed different histories, which anyone can check with the public key alone.

The state file is JSON ``{"format", "version", "origin", "key": {name, public_key_b64}, "note"}``; the note is
re-verified whenever the state is loaded, so an edited state file is refused rather than trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from keys import HeldoutError, MalformedInput, PublicKey, b64encode
from keys.files import write_atomic
from keys.safeio import DOCUMENT_LIMIT, UnsafeFile, read_named
from ledger.checkpoint import Checkpoint, verify_checkpoint
from ledger.errors import ForkError, LedgerIntegrityError, LedgerUsageError, ProofError, RollbackError
from ledger.verify import verify_consistency
from seals import parse_json_object

STATE_FORMAT = "heldout-checkpoint-client"
STATE_VERSION = 1


@dataclass(frozen=True)
class ClientState:
    """A follower's state file, validated member by member when read: it is read back from disk, where anything
    may have been written in its place."""

    origin: str
    key_name: str
    public_key_b64: str
    note: str

    @classmethod
    def parse(cls, data: bytes, path: Path) -> ClientState:
        try:
            state = parse_json_object(data, what=str(path))
        except MalformedInput as exc:
            raise LedgerIntegrityError(f"client state is unreadable: {exc.message}", file=str(path)) from None
        key = state.get("key")
        if set(state) != _STATE_MEMBERS:
            problem = "its members are not format, version, origin, key and note"
        elif state["format"] != STATE_FORMAT or type(state["version"]) is not int or state["version"] != STATE_VERSION:
            problem = "it is not a heldout checkpoint client state version 1"
        elif not isinstance(key, dict) or set(key) != {"name", "public_key_b64"} or \
                not all(isinstance(v, str) for v in key.values()):
            problem = "its key is not {name, public_key_b64}, both text"
        elif not isinstance(state["origin"], str) or not isinstance(state["note"], str):
            problem = "its origin or note is not text"
        else:
            return cls(origin=state["origin"], key_name=key["name"], public_key_b64=key["public_key_b64"],
                       note=state["note"])
        raise LedgerIntegrityError(f"client state is not in the expected format: {problem}", file=str(path))


_STATE_MEMBERS = frozenset({"format", "version", "origin", "key", "note"})


def read_client_state(path: Path) -> ClientState | None:
    """The state at ``path``; ``None`` only when nothing at all is there (a first use): one that exists but cannot
    be read (a link loop, a dangling link, a folder, a FIFO, no permission) is refused (exit 2), never taken for
    "nothing accepted yet", which would let the next presentation roll the follower back; one that reads but is
    not a state is refused (exit 1, :meth:`ClientState.parse`)."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LedgerUsageError(f"the client state {path} cannot be read: {exc.strerror}", path=str(path)) from None
    if not stat.S_ISREG(found.st_mode):
        raise LedgerUsageError(f"the client state {path} is not a regular file", path=str(path))
    try:
        data = read_named(path, limit=DOCUMENT_LIMIT, what="client state")
    except UnsafeFile as exc:  # over its bound, or swapped for something else while opened
        raise LedgerUsageError(exc.message, path=str(path)) from None
    return ClientState.parse(data, path)


class CheckpointClient:
    """Rollback- and fork-detecting follower of one ledger's checkpoints."""

    def __init__(self, state_path: Path, *, origin: str, name: str, key: PublicKey,
                 evidence_dir: Path | None = None) -> None:
        self.state_path = Path(state_path)
        self.origin = origin
        self.name = name
        self.key = key
        self.evidence_dir = Path(evidence_dir) if evidence_dir else self.state_path.with_name(
            self.state_path.name + ".evidence")

    def accepted(self) -> Checkpoint | None:
        """The last accepted checkpoint, re-verified; ``None`` before the first (``read_client_state``)."""
        state = read_client_state(self.state_path)
        if state is None:
            return None
        if state.origin != self.origin or state.key_name != self.name or state.public_key_b64 != self.key.b64:
            raise LedgerUsageError("this client state belongs to another ledger or key", file=str(self.state_path),
                                   expected=self.origin, found=state.origin)
        try:
            return verify_checkpoint(state.note, name=self.name, key=self.key, origin=self.origin)
        except HeldoutError as exc:
            raise LedgerIntegrityError(f"client state holds a checkpoint that does not verify: {exc.message}",
                                       file=str(self.state_path)) from None

    def _save(self, checkpoint: Checkpoint) -> None:
        state = {"format": STATE_FORMAT, "version": STATE_VERSION, "origin": self.origin,
                 "key": {"name": self.name, "public_key_b64": self.key.b64}, "note": checkpoint.note}
        write_atomic(self.state_path, (json.dumps(state, indent=1, sort_keys=True) + "\n").encode())

    def _evidence(self, kind: str, accepted: Checkpoint, presented: Checkpoint,
                  proof: Sequence[bytes] | None) -> Path:
        tag = hashlib.sha256(presented.note_bytes).hexdigest()[:12]
        folder = self.evidence_dir / f"{kind}-{accepted.size}-{presented.size}-{tag}"
        folder.mkdir(parents=True, exist_ok=True)
        write_atomic(folder / "accepted.note", accepted.note_bytes)
        write_atomic(folder / "presented.note", presented.note_bytes)
        summary: dict[str, Any] = {
            "kind": kind, "origin": self.origin,
            "key": {"name": self.name, "public_key_b64": self.key.b64},
            "accepted": {"size": accepted.size, "root": accepted.root_b64},
            "presented": {"size": presented.size, "root": presented.root_b64},
            "proof": None if proof is None else [b64encode(bytes(h)) for h in proof],
        }
        write_atomic(folder / "evidence.json", (json.dumps(summary, indent=1, sort_keys=True) + "\n").encode())
        return folder

    def update(self, note: str | bytes, proof: Sequence[bytes] | None = None) -> Checkpoint:
        """Offer a checkpoint (and, when it is larger than the accepted one, the consistency proof from the
        accepted size to it). Returns the checkpoint now accepted; raises and keeps evidence otherwise."""
        presented = verify_checkpoint(note, name=self.name, key=self.key, origin=self.origin)
        accepted = self.accepted()
        if accepted is None:
            self._save(presented)  # trust on first use: the caller chose this ledger and key
            return presented
        where = {"expected": f">= {accepted.size}", "found": presented.size}
        if presented.size < accepted.size:
            folder = self._evidence("rollback", accepted, presented, proof)
            raise RollbackError(
                f"checkpoint of size {presented.size} is older than the accepted size {accepted.size}",
                evidence=str(folder), **where)
        if presented.size == accepted.size:
            if presented.root != accepted.root:
                folder = self._evidence("fork", accepted, presented, proof)
                raise ForkError(f"two signed roots for size {presented.size}: the log forked", evidence=str(folder),
                                expected=accepted.root_b64, found=presented.root_b64)
            return accepted
        try:
            verify_consistency(accepted.size, presented.size, accepted.root, presented.root, proof or [])
        except ProofError as exc:
            folder = self._evidence("fork", accepted, presented, proof)
            raise ForkError(
                f"checkpoint of size {presented.size} is not proven to extend the accepted size {accepted.size}: "
                f"{exc.message}", evidence=str(folder), expected=accepted.root_b64, found=presented.root_b64
            ) from None
        self._save(presented)
        return presented
