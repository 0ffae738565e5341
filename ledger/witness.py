"""The witness side of C2SP ``tlog-witness``: the ``add-checkpoint`` request, its checks, durable state, and the
client side's request body and response parsing. No HTTP here (``heldout/witness`` serves and sends it).

Request body: ``old <size>\\n``, zero to 63 base64 consistency-proof lines, an empty line, then the checkpoint
note (it may carry several signatures). The witness, in this order:

* 404 when the origin is not a log it witnesses; 403 when no signature verifies under a key it trusts for it;
* 400 when the request is malformed or the old size is larger than the checkpoint's;
* 409 (body: its size and a newline, ``Content-Type: text/x.tlog.size``) when the old size is not the size it
  last cosigned for the origin (0 before the first), or when the sizes are equal and the roots differ;
* 422 when the consistency proof from (its size, its root) to the checkpoint does not verify (a proof must be
  empty from size 0);
* otherwise it stores the new size and root durably (SQLite, WAL, synchronous=FULL; concurrent requests share
  one commit) and only then answers 200 with its ``cosignature/v1`` line.

Checking the old size and storing the new state happen under one lock per origin, so two concurrent requests
cannot roll the state back (the race the spec describes). The witness therefore never cosigns two roots for
one size or a smaller size after a larger one, across restarts as long as its folder survives. Refused
requests that carry a valid log signature (a fork or a bad proof) are kept as evidence.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from keys import (
    HeldoutError,
    MalformedInput,
    PublicKey,
    Signer,
    b64decode_strict,
    b64encode,
    parse_verifier_key,
    verifier_key_string,
)
from keys.files import write_atomic
from keys.safeio import DOCUMENT_LIMIT, read_named
from ledger.checkpoint import Checkpoint, parse_checkpoint, verify_checkpoint
from ledger.cosignature import Cosignature, cosign, timestamp_of
from ledger.errors import LedgerError, LedgerStorageError
from ledger.verify import verify_consistency
from seals import parse_json_object

MAX_PROOF_LINES = 63
MAX_REQUEST_BYTES = 64 * 1024
SIZE_CONTENT_TYPE = "text/x.tlog.size"
MAX_EVIDENCE_PER_LOG = 1000
_OLD = re.compile(r"old (0|[1-9][0-9]{0,18})")
STATE_FILE = "state.sqlite"


class WitnessRefusal(LedgerError):
    """A witness refused an add-checkpoint request; ``status`` is the HTTP status of the spec."""

    status = 400

    def __init__(self, message: str, **evidence: Any) -> None:
        super().__init__(message, status=self.status, **evidence)


class BadRequest(WitnessRefusal):
    status = 400


class UnknownSignature(WitnessRefusal):
    status = 403


class UnknownLog(WitnessRefusal):
    status = 404


class SizeConflict(WitnessRefusal):
    """The old size is not the witness's (or the same size came with another root); ``size`` is the witness's."""

    status = 409

    def __init__(self, message: str, *, size: int, **evidence: Any) -> None:
        super().__init__(message, witness_size=size, **evidence)
        self.size = size


class BadProof(WitnessRefusal):
    status = 422


@dataclass(frozen=True)
class AddCheckpoint:
    """A parsed add-checkpoint request."""

    old_size: int
    proof: tuple[bytes, ...]
    checkpoint: Checkpoint

    def body(self) -> bytes:
        return request_body(self.old_size, self.proof, self.checkpoint.note)


def request_body(old_size: int, proof: tuple[bytes, ...] | list[bytes], note: str) -> bytes:
    """The add-checkpoint request body for a checkpoint note, its old size and consistency proof."""
    lines = [f"old {old_size}\n", *(b64encode(h) + "\n" for h in proof), "\n"]
    return ("".join(lines) + note).encode("utf-8")


def parse_request(body: bytes) -> AddCheckpoint:
    """Parse an add-checkpoint body; :class:`BadRequest` for anything malformed."""
    if len(body) > MAX_REQUEST_BYTES:
        raise BadRequest("request body too large", expected=MAX_REQUEST_BYTES, found=len(body))
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest("request body is not UTF-8") from None
    head, sep, note = text.partition("\n\n")
    if not sep:
        raise BadRequest("request has no empty line before the checkpoint")
    lines = head.split("\n")
    match = _OLD.fullmatch(lines[0])
    if not match:
        raise BadRequest("the first line is 'old <size>' in decimal without leading zeroes", found=lines[0][:40])
    if len(lines) - 1 > MAX_PROOF_LINES:
        raise BadRequest(f"more than {MAX_PROOF_LINES} consistency proof lines", found=len(lines) - 1)
    try:
        proof = tuple(b64decode_strict(line, what="proof line") for line in lines[1:])
    except MalformedInput as exc:
        raise BadRequest(exc.message) from None
    if any(len(h) != 32 for h in proof):
        raise BadRequest("a proof line is not a 32-byte hash")
    try:
        checkpoint = parse_checkpoint(note)
    except HeldoutError as exc:
        raise BadRequest(f"checkpoint: {exc.message}") from None
    old = int(match.group(1))
    if old > checkpoint.size:
        raise BadRequest("the old size is larger than the checkpoint size", expected=f"<= {checkpoint.size}",
                         found=old)
    return AddCheckpoint(old, proof, checkpoint)


def parse_size_response(body: bytes) -> int:
    """The body of a 409: the witness's size, in decimal, then a newline."""
    text = body.decode("ascii", errors="replace")
    match = re.fullmatch(r"(0|[1-9][0-9]{0,18})\n", text)
    if not match:
        raise BadRequest("a 409 response body is a decimal size and a newline", found=text[:40])
    return int(match.group(1))


@dataclass(frozen=True)
class WitnessedLog:
    """A log the witness follows: its origin and the note key it signs checkpoints with."""

    origin: str
    name: str
    key: PublicKey

    @property
    def vkey(self) -> str:
        return verifier_key_string(self.name, self.key)

    @classmethod
    def from_vkey(cls, origin: str, vkey: str) -> WitnessedLog:
        if not origin or any(ord(c) < 0x20 or ord(c) == 0x7F for c in origin):
            raise MalformedInput("a log origin is one non-empty line without control characters", found=origin[:80])
        name, _, key = parse_verifier_key(vkey)
        return cls(origin, name, key)


@dataclass(frozen=True)
class LogState:
    size: int
    root: bytes
    timestamp: int = 0


class _StateStore:
    """The witness's state in ``state.sqlite`` (WAL, ``synchronous=FULL``), written by one flusher thread that
    commits everything pending in one transaction (group commit: one fsync for all concurrent requests), and a
    trigger that refuses, in the database too, a smaller size or another root for the same size."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = self._connect()
        self._pending: list[tuple[str, LogState, str, threading.Event]] = []
        self._cond = threading.Condition()
        self.failed: BaseException | None = None
        self._closing = False
        self._thread = threading.Thread(target=self._flusher, name="witness-state", daemon=True)
        self._thread.start()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=60)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("CREATE TABLE IF NOT EXISTS logs (origin TEXT PRIMARY KEY, size INTEGER NOT NULL, "
                     "root BLOB NOT NULL, timestamp INTEGER NOT NULL, note TEXT NOT NULL) STRICT")
        conn.execute("CREATE TRIGGER IF NOT EXISTS logs_only_grow BEFORE UPDATE ON logs WHEN NEW.size < OLD.size "
                     "OR (NEW.size = OLD.size AND NEW.root != OLD.root) OR NEW.timestamp < OLD.timestamp "
                     "BEGIN SELECT RAISE(ABORT, 'a witness never cosigns a smaller size or another root'); END")
        conn.execute("CREATE TRIGGER IF NOT EXISTS logs_no_delete BEFORE DELETE ON logs "
                     "BEGIN SELECT RAISE(ABORT, 'witness state is never deleted'); END")
        return conn

    def load(self) -> dict[str, LogState]:
        rows = self._conn.execute("SELECT origin, size, root, timestamp FROM logs").fetchall()
        return {str(o): LogState(int(size), bytes(root), int(ts)) for o, size, root, ts in rows}

    def close(self) -> None:
        """Flush what is pending, stop the flusher and close the database."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join(timeout=30)
        self._conn.close()

    def submit(self, origin: str, state: LogState, note: str) -> threading.Event:
        done = threading.Event()
        with self._cond:
            self._pending.append((origin, state, note, done))
            self._cond.notify()
        return done

    def _flusher(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closing:
                    self._cond.wait()
                if not self._pending:
                    return
                batch, self._pending = self._pending, []
            try:
                if self.failed is None:
                    self._conn.execute("BEGIN IMMEDIATE")
                    self._conn.executemany(
                        "INSERT INTO logs (origin, size, root, timestamp, note) VALUES (?, ?, ?, ?, ?) "
                        "ON CONFLICT (origin) DO UPDATE SET size = excluded.size, root = excluded.root, "
                        "timestamp = excluded.timestamp, note = excluded.note",
                        [(o, st.size, st.root, st.timestamp, note) for o, st, note, _ in batch])
                    self._conn.execute("COMMIT")
            except BaseException as exc:  # a witness that cannot persist must stop cosigning
                self.failed = exc
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
            for *_, done in batch:
                done.set()


class Witness:
    """A witness over a folder: ``logs.json`` (the logs it follows), ``state.sqlite`` (latest size, root and
    timestamp per origin), ``evidence/`` (refused signed requests); its key is handed in by the caller
    (``keys.Signer``, loaded from the folder's ``private/``).

    Concurrency: the check of a request against the log's latest state and the update of that state happen
    under one lock per origin; the state is then persisted by the group-committing flusher, and the
    cosignature is made and returned only once that commit is durable. A later request may be checked against
    a state whose commit is still in flight; its own answer waits for a commit that includes it, so no answer
    ever rests on a state that is not on disk. If a commit fails, the witness refuses everything from then on.
    """

    def __init__(self, folder: Path, signer: Signer, *, clock: Callable[[], datetime]) -> None:
        self.folder = Path(folder)
        self.signer = signer
        self.clock = clock
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self.logs = load_logs(self.folder)
        self._store = _StateStore(self.folder / STATE_FILE)
        self._states = self._store.load()

    def state(self, origin: str) -> LogState | None:
        return self._states.get(origin)

    def close(self) -> None:
        self._store.close()

    def __enter__(self) -> Witness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _lock(self, origin: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(origin, threading.Lock())

    def _evidence(self, origin: str, kind: str, body: bytes) -> None:
        folder = self.folder / "evidence" / hashlib.sha256(origin.encode()).hexdigest()[:32]
        folder.mkdir(parents=True, exist_ok=True)
        if sum(1 for _ in folder.iterdir()) >= MAX_EVIDENCE_PER_LOG:
            return
        write_atomic(folder / f"{kind}-{hashlib.sha256(body).hexdigest()[:16]}.req", body)

    # the protocol -----------------------------------------------------------------------------------------
    def add_checkpoint(self, body: bytes) -> Cosignature:
        """Check an add-checkpoint request and, when it passes, store the new state and cosign; raises a
        :class:`WitnessRefusal` carrying the HTTP status otherwise."""
        if self._store.failed is not None:
            raise LedgerError(f"the witness cannot persist its state ({self._store.failed}); it cosigns nothing")
        request = parse_request(body)
        checkpoint = request.checkpoint
        log = self.logs.get(checkpoint.origin)
        if log is None:
            raise UnknownLog("this witness does not follow that log", found=checkpoint.origin[:120])
        try:
            verify_checkpoint(checkpoint.note, name=log.name, key=log.key, origin=log.origin)
        except HeldoutError as exc:
            raise UnknownSignature(f"the checkpoint is not signed by the log's key: {exc.message}",
                                   origin=log.origin) from None
        with self._lock(log.origin):
            state = self._states.get(log.origin)
            size = state.size if state else 0
            if request.old_size != size:
                raise SizeConflict(f"old size {request.old_size} is not the witness's size {size}", size=size,
                                   expected=size, found=request.old_size)
            if state is not None and checkpoint.size == state.size:
                if checkpoint.root != state.root:
                    self._evidence(log.origin, "fork", body)
                    raise SizeConflict(f"another root for size {state.size}: the log forked", size=size,
                                       expected=b64encode(state.root), found=checkpoint.root_b64)
                if request.proof:
                    raise BadProof("a consistency proof between equal sizes is empty", found=len(request.proof))
                # The checkpoint it already cosigned: the same cosignature again (its timestamp then; Ed25519 is
                # deterministic), never a fresh one. A fresh timestamp makes a new line, and a draw seeded by
                # the cosignatures on the intent's checkpoint could be ground by asking again until it suits.
                return cosign(checkpoint, self.signer, state.timestamp)
            elif state is None:
                if request.proof:
                    raise BadProof("the proof from size 0 must be empty", found=len(request.proof))
            else:
                try:
                    verify_consistency(state.size, checkpoint.size, state.root, checkpoint.root, request.proof)
                except HeldoutError as exc:
                    self._evidence(log.origin, "inconsistent", body)
                    raise BadProof(f"consistency proof does not verify: {exc.message}", old=state.size,
                                   new=checkpoint.size) from None
            # A witness's timestamps for one log never go backwards, whatever its clock does.
            timestamp = max(timestamp_of(self.clock()), state.timestamp if state else 0)
            new = LogState(checkpoint.size, checkpoint.root, timestamp)
            self._states[log.origin] = new
            durable = self._store.submit(log.origin, new, checkpoint.note)
        durable.wait()
        if self._store.failed is not None:
            raise LedgerError(f"the witness could not persist its state ({self._store.failed}); not cosigned")
        return cosign(checkpoint, self.signer, timestamp)


LOGS_FILE = "logs.json"


def load_logs(folder: Path) -> dict[str, WitnessedLog]:
    path = Path(folder) / LOGS_FILE
    if not os.path.lexists(path):
        return {}
    try:  # present in any form, it is read (bounded, a regular file) or refused: never "no logs followed"
        body = parse_json_object(read_named(path, limit=DOCUMENT_LIMIT, what="the witness's logs file"),
                                 what=str(path))
    except MalformedInput as exc:
        raise LedgerStorageError(f"{path}: {exc.message}", path=str(path)) from None
    items = body.get("logs")
    if not isinstance(items, list) or not all(isinstance(item, dict) and isinstance(item.get("origin"), str)
                                              and isinstance(item.get("vkey"), str) for item in items):
        raise LedgerStorageError(f"{path} is not a witness's logs file: its logs are not a list of {{origin, vkey}} "
                                 "objects", path=str(path), field="logs")
    logs = {}
    for item in items:
        log = WitnessedLog.from_vkey(item["origin"], item["vkey"])
        logs[log.origin] = log
    return logs


def trust_log(folder: Path, log: WitnessedLog) -> None:
    """Add (or re-key) a log the witness follows, in ``logs.json`` (written atomically)."""
    logs = load_logs(folder)
    logs[log.origin] = log
    body = {"logs": [{"origin": o, "vkey": v.vkey} for o, v in sorted(logs.items())]}
    write_atomic(Path(folder) / LOGS_FILE, (json.dumps(body, indent=1, sort_keys=True) + "\n").encode())
