"""The ledger: an append-only log of typed entries, a Merkle tree over them, and a signed checkpoint for every
append batch. The rows live in a backend (``ledger.storage``: a SQLite file, ``ledger.sqlite``, or a
PostgreSQL schema, ``ledger.postgres``); everything else is here, written once for both.

Writing. ``append``/``append_batch`` validate and canonicalise the entries first (nothing is written for a
refused entry), then, in one write transaction under the backend's writer lock (SQLite's ``BEGIN
IMMEDIATE``, PostgreSQL's advisory lock on the ledger): read the size, insert the entries and the
perfect-subtree nodes they complete, compute the new root, check that it is consistent with the last signed
checkpoint (an RFC 9162 consistency proof from the stored tree, verified by ``ledger.verify``), sign the
checkpoint and insert it, commit. The commit is the acknowledgement: it is durable before ``append`` returns
(SQLite: WAL with ``synchronous=FULL``; PostgreSQL: ``synchronous_commit``). Several processes may append at
once; the lock serializes them into one history and every checkpoint extends the previous one.

The ledger's checkpoint key is the one its genesis entry declares: any other signer is refused.

Time only moves forward: an append whose entries' ``created_utc`` is earlier than the last entry's is refused
(:class:`TimeRegression`), so an operator who sets the clock back
cannot log an entry dated before one already logged.

Witnessing: after each commit that signed a new checkpoint, ``after_checkpoint`` (set by the caller, e.g. the
heldout CLI with the store's witnesses) is called with it. The append is already durable then; a failure of
the hook is kept in ``witnessing_error`` and never undoes or fails the append. Witnesses' cosignatures are
stored by :meth:`add_cosignature` (each verified first) and served by :meth:`cosigned_checkpoint`.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from itertools import repeat
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, cast

from keys import HeldoutError, Signer, TrustedKey, verifier_key_string
from ledger import sqlite
from ledger.checkpoint import Checkpoint, parse_checkpoint, sign_checkpoint
from ledger.cosignature import Cosignature, Cosigner, time_of, with_cosignatures
from ledger.db import MIN_NODE_LEVEL
from ledger.entries import (
    NONCE_BYTES,
    decode_entry,
    encode_entries,
    encode_entry,
    genesis_key,
    ledger_id_of,
    make_genesis,
    origin_of,
    validate_batch,
)
from ledger.errors import (
    AppendConflict,
    CheckpointError,
    EntryAfterClock,
    EntryAfterNow,
    EntryRejected,
    LedgerIntegrityError,
    LedgerKeyError,
    LedgerUsageError,
    TimeRegression,
    database_error,
)
from ledger.proving import ProvingLog
from ledger.replay import CheckpointClaim, EntryFn, ProgressFn, ReplayReport, replay
from ledger.rfc6962 import LEAF_PREFIX, leaf_hash
from ledger.storage import CheckpointRow, Fill, LedgerStorage
from ledger.tree import CompactRange, HashTree
from ledger.verify import verify_consistency

if TYPE_CHECKING:  # ledger.db imports sqlite-utils its own way (without pandas)
    from sqlite_utils import Database
from seals import CLOCK_TOLERANCE, format_utc, parse_json_object, shifted

_sha256 = hashlib.sha256
_digest = type(_sha256()).digest  # (the unbound methods: mapped over hashes in C)
_copy, _update = type(_sha256()).copy, type(_sha256()).update
_LEAF_HASH = _sha256(LEAF_PREFIX)  # (copied, never updated itself)
#: How far after the append's own time an entry may be dated (the system's clock tolerance); further ahead is
#: refused (the ledger's time only moves forward, so an entry dated far ahead would refuse every later append).
MAX_AHEAD = CLOCK_TOLERANCE


def _ahead(now: datetime) -> datetime:
    """The latest time an entry appended at ``now`` may carry: ``now + MAX_AHEAD``, or the last time a datetime
    holds when that is sooner (an append dated 9999-12-31T23:00:00Z must not overflow)."""
    return shifted(now, MAX_AHEAD)


@contextmanager
def closing_streams(*streams: Iterator[Any]) -> Iterator[tuple[Iterator[Any], ...]]:
    """The storage's streams, each closed on leaving, however it is left: a stream a failed replay abandoned
    would otherwise be closed by the garbage collector at a moment of its choosing (a PostgreSQL server cursor,
    on a connection then busy with another statement)."""
    try:
        yield streams
    finally:
        for stream in streams:
            close = getattr(stream, "close", None)
            if close is not None:
                close()


def _signed_head(storage: LedgerStorage, size: int) -> CheckpointRow | None:
    """Inside a write transaction: the last checkpoint's row, refused when entries lie past it. Every append
    writes its entries and their checkpoint in one transaction, so such entries were written by something else
    (rows inserted into the database directly): signing over them would vouch for bytes and leaf hashes nothing
    here validated."""
    row = storage.latest_checkpoint_row()
    if row is not None and row[0] != size:
        raise LedgerIntegrityError(f"the ledger holds {size - row[0]} entries past its last signed checkpoint "
                                   f"({row[0]}), written outside heldout: nothing is signed over them (run heldout "
                                   "ledger verify)", size=size, expected=row[0], found=size)
    return row


class Ledger(ProvingLog):
    """One ledger, on whichever backend holds its rows (``ledger.storage``): a SQLite file (:meth:`create`,
    :meth:`open`) or a PostgreSQL schema (``ledger.backend``). Close it (or use it as a context manager)."""

    what = "the ledger"

    def __init__(self, storage: LedgerStorage) -> None:
        self.storage = storage
        self.path: Path | None = storage.path
        self.location: str = storage.location
        self._tree = HashTree(storage)
        genesis_bytes = storage.entry_data(0)
        if genesis_bytes is None:
            raise LedgerIntegrityError(f"{self.location} has no genesis entry", path=self.location, index=0)
        self.genesis: dict[str, Any] = decode_entry(genesis_bytes, index=0)
        self.ledger_id: str = ledger_id_of(genesis_bytes)
        self.origin: str = origin_of(self.ledger_id)
        self.key: TrustedKey = genesis_key(self.genesis)
        self.after_checkpoint: Callable[[Ledger, Checkpoint], None] | None = None
        self.witnessing_error: BaseException | None = None
        # The machine's clock, which no entry may run ahead of (by more than MAX_AHEAD): set by the store on the
        # ledgers its commands write, so that a time given for a rehearsal (or mistyped) cannot date an entry
        # that stops every append made on the real date. ``None``: the caller's ``now`` is the only time (tests,
        # benchmarks, rehearsal stores).
        self.wall_clock: Callable[[], datetime] | None = None
        # What the last append read back and parsed, keyed by the very row it came from: the next append takes
        # it again only when the stored row is still byte for byte that one (another writer's append, or an
        # altered row, is a different key and is parsed afresh)
        self._parsed_head: tuple[CheckpointRow, Checkpoint] | None = None
        self._last_time: tuple[tuple[int, bytes], str] | None = None
        meta = storage.meta()
        if meta.get("ledger_id") != self.ledger_id:
            raise LedgerIntegrityError("the ledger id recorded in the database is not the hash of its genesis entry",
                                       path=self.location, expected=self.ledger_id, found=meta.get("ledger_id"))
        if meta.get("min_node_level") != str(MIN_NODE_LEVEL):
            raise LedgerUsageError("the ledger database stores its tree in another layout", path=self.location,
                                   expected=MIN_NODE_LEVEL, found=meta.get("min_node_level"))

    # opening ----------------------------------------------------------------------------------------------
    @classmethod
    def create(cls, folder: Path, signer: Signer, *, name: str, now: datetime,
               nonce: bytes | None = None) -> Ledger:
        """Write ``<folder>/<ledger id>.sqlite`` holding the genesis entry and the first signed checkpoint.

        The file appears complete or not at all (built under a temporary name, then linked into place).
        ``nonce`` (32 bytes) is for reproducible tests; by default it is random."""
        return cls.create_with(lambda ledger_id, fill: sqlite.create_storage(Path(folder), ledger_id, fill),
                               signer, name=name, now=now, nonce=nonce)

    @classmethod
    def create_with(cls, create_storage: Callable[[str, Fill], LedgerStorage], signer: Signer, *, name: str,
                    now: datetime, nonce: bytes | None = None) -> Ledger:
        """A new ledger (genesis entry and first signed checkpoint) in the storage ``create_storage(ledger id,
        fill)`` makes; the backend creates it atomically (complete or not at all)."""
        nonce = os.urandom(NONCE_BYTES) if nonce is None else nonce
        genesis = make_genesis(name=name, signer=signer, now=now, nonce=nonce)
        kind, data = encode_entry(genesis, index=0)
        ledger_id = ledger_id_of(data)
        created = format_utc(now)
        leaf = leaf_hash(data)
        checkpoint = sign_checkpoint(origin_of(ledger_id), 1, leaf, signer, created_utc=created)

        def fill(storage: LedgerStorage) -> None:
            storage.insert_meta(ledger_meta(ledger_id, name, created))
            storage.insert_entries([(0, kind, data, leaf, created)])
            storage.insert_checkpoint((1, leaf, checkpoint.note, created))

        return cls(create_storage(ledger_id, fill))

    @classmethod
    def open(cls, path: Path, *, read_only: bool = False) -> Ledger:
        """Open a ledger file; ``read_only`` for commands that only read (works on a read-only copy)."""
        path = Path(path)
        try:
            return cls.open_storage(sqlite.open_storage(path, read_only=read_only))
        except sqlite3.Error as exc:
            raise database_error(exc, path) from None

    @classmethod
    def open_storage(cls, storage: LedgerStorage) -> Ledger:
        """The ledger over an opened storage (closed again when it is not a valid ledger)."""
        try:
            return cls(storage)
        except BaseException:
            storage.close()
            raise

    @staticmethod
    def locate(folder: Path, ledger_id_or_prefix: str) -> Path:
        """``<folder>/<id>.sqlite`` for a ledger id or a unique prefix of one."""
        return sqlite.locate(folder, ledger_id_or_prefix)

    @staticmethod
    def list_ids(folder: Path) -> list[str]:
        return sqlite.list_ids(folder)

    @property
    def db(self) -> Database:
        """The SQLite database of a ledger file (tests and SQLite-only tools; no other backend has one)."""
        if not isinstance(self.storage, sqlite.SqliteStorage):
            raise LedgerUsageError(f"{self.location} is not a SQLite ledger", path=self.location)
        return self.storage.db

    def snapshot(self) -> AbstractContextManager[None]:
        """One consistent state for a block of reads (concurrent appends stay invisible inside it)."""
        return self.storage.snapshot()

    def operation_lock(self) -> AbstractContextManager[None]:
        """An exclusive lock across processes for an operation that checks the log and then appends; plain
        appends do not wait for it (they serialize on the write transaction)."""
        return self.storage.operation_lock()

    def close(self) -> None:
        self.storage.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    # reading ----------------------------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return self.storage.tree_size()

    @property
    def verifier_key(self) -> str:
        """The note verifier key of the ledger's checkpoints (``<name>+<hash>+<base64>``)."""
        return verifier_key_string(self.key.name, self.key.public_key)

    def _proof_tree(self) -> HashTree:
        return self._tree

    def _check_root(self, size: int, root: bytes) -> None:
        """The stored tree (interior nodes, leaf hashes) is a cache of what the signed checkpoints vouch for: a
        root computed from it for ``size`` entries must be the latest checkpoint's, or lead to it by a
        consistency proof read from the same tree, before any root or proof leaves here (red-team round 15: a
        zeroed node gave proofs to a root no checkpoint has, and ``passport issue`` signed and logged one)."""
        row = self.storage.latest_checkpoint_row()
        if row is None or size == 0:
            return
        parsed = self._parsed_head
        latest = parsed[1] if parsed is not None and parsed[0] == row else self._checkpoint_row(row)
        if size > latest.size:
            raise LedgerIntegrityError(f"the ledger holds entries past its last signed checkpoint ({latest.size}), "
                                       "written outside heldout: nothing is signed over them (run heldout ledger "
                                       "verify)", size=size, expected=latest.size)
        try:
            if size == latest.size:
                if root != latest.root:
                    raise LedgerIntegrityError("the root differs from the signed checkpoint's", size=size,
                                               expected=latest.root.hex(), found=root.hex())
            else:
                verify_consistency(size, latest.size, root, latest.root, self._tree.consistency_path(size, latest.size))
        except LedgerIntegrityError as exc:
            raise LedgerIntegrityError(
                f"the stored tree disagrees with signed checkpoint {latest.size} at size {size} ({exc.message}): "
                "a stored tree node or leaf hash is damaged, or the checkpoint was signed over another history (run "
                "heldout ledger verify)", size=size, checkpoint=latest.size) from None

    def entry_bytes(self, index: int) -> bytes:
        self._index(index)
        data = self.storage.entry_data(index)
        if data is None:
            raise LedgerIntegrityError("an entry is missing from the ledger database", index=index)
        return data

    def leaf_hash(self, index: int) -> bytes:
        """The stored RFC 6962 leaf hash of entry ``index``."""
        return self.storage.node(0, self._index(index))

    def entry(self, index: int) -> dict[str, Any]:
        return parse_json_object(self.entry_bytes(index), what=f"entry {index}")

    def entries(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
        for index, data in self.entries_bytes(start, end):
            yield index, parse_json_object(data, what=f"entry {index}")

    def entries_bytes(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, bytes]]:
        """(index, raw bytes) for ``start <= index < end`` (to the current size by default)."""
        yield from self.storage.entries_bytes(start, self._size(end))

    def entry_time(self, index: int) -> str:
        created = self.storage.entry_time(self._index(index))
        if created is None:
            raise LedgerIntegrityError("an entry is missing from the ledger database", index=index)
        return created

    @staticmethod
    def _checkpoint_row(row: CheckpointRow) -> Checkpoint:
        size, root, note, created = row
        checkpoint = parse_checkpoint(str(note), created_utc=str(created))
        if checkpoint.size != size or checkpoint.root != bytes(root):
            raise LedgerIntegrityError("a stored checkpoint note does not match its row", checkpoint=size)
        return checkpoint

    def latest_checkpoint(self) -> Checkpoint:
        row = self.storage.latest_checkpoint_row()
        if row is None:
            raise LedgerIntegrityError("the ledger has no checkpoint", path=self.location)
        return self._checkpoint_row(row)

    def checkpoints(self) -> list[Checkpoint]:
        return [self._checkpoint_row(row) for row in self.storage.checkpoint_rows()]

    def checkpoint_at(self, size: int) -> Checkpoint | None:
        row = self.storage.checkpoint_row(size)
        return None if row is None else self._checkpoint_row(row)

    # writing ----------------------------------------------------------------------------------------------
    def _check_signer(self, signer: Signer) -> None:
        if signer.public_key != self.key.public_key or signer.name != self.key.name:
            raise LedgerKeyError(
                "this key does not sign this ledger's checkpoints (its genesis entry names another)",
                expected=f"{self.key.name} {self.key.public_key.b64}",
                found=f"{signer.name} {signer.public_key.b64}")

    @contextmanager
    def _write(self, *, durable: bool = True) -> Iterator[LedgerStorage]:
        try:
            with self.storage.write(durable=durable):
                # every write reads the stored tree afresh: its self-check must see the nodes as they are in the
                # database now (a node altered behind this process's back included), not as cached earlier
                self._tree.cache_clear()
                yield self.storage
        except BaseException:
            self._tree.cache_clear()  # it may hold nodes of the rolled-back transaction
            raise

    def _sign_head(self, size: int, root: bytes, signer: Signer, created: str,
                   row: CheckpointRow | None) -> tuple[Checkpoint, bool]:
        """Inside the write transaction: sign ``(size, root)`` after checking it against the last checkpoint
        (``row``, as the transaction read it)."""
        if row is not None:
            parsed = self._parsed_head
            last = parsed[1] if parsed is not None and parsed[0] == row else self._checkpoint_row(row)
            if size < last.size:
                raise CheckpointError("refusing to sign a smaller size after a larger one", expected=f">= {last.size}",
                                      found=size)
            if size == last.size:
                if root != last.root:
                    raise CheckpointError("refusing to sign a second root for the same size", size=size)
                return last, False
            # The self-check: a consistency proof read back from the stored tree (the nodes just inserted, the
            # older ones, leaf hashes for the unstored low levels) must lead from the last signed root to the
            # root computed in memory from the new leaves; so the stored tree and the new root agree.
            verify_consistency(last.size, size, last.root, root, self._tree.consistency_path(last.size, size))
        elif self._tree.root_at(size) != root:
            raise LedgerIntegrityError("the stored tree disagrees with the appended leaves", size=size)
        checkpoint = sign_checkpoint(self.origin, size, root, signer, created_utc=created)
        stored = (size, root, checkpoint.note, created)
        self.storage.insert_checkpoint(stored)
        self._parsed_head = (stored, checkpoint)
        return checkpoint, True

    def _signed(self, checkpoint: Checkpoint, new: bool) -> Checkpoint:
        """After the commit: hand a newly signed checkpoint to ``after_checkpoint`` (witnessing). Whatever the
        hook does, the append stands; its failure is kept in ``witnessing_error``."""
        self.witnessing_error = None
        if new and self.after_checkpoint is not None:
            try:
                self.after_checkpoint(self, checkpoint)
            except Exception as exc:  # the append is committed: no failure downstream may undo or fail it
                self.witnessing_error = exc
        return checkpoint

    def _check_time(self, first_entry_time: str | None) -> None:
        """Inside the write transaction: refuse entries dated (``created_utc``) before the last entry. The
        entries' own times are what exports carry and audits check, so they are what must not run backwards."""
        if first_entry_time is None:
            return
        row = self.storage.last_entry()
        if row is None:
            return
        index, data = row
        known = self._last_time
        last = known[1] if known is not None and known[0] == row else \
            parse_json_object(data, what=f"entry {index}").get("created_utc")
        if isinstance(last, str) and first_entry_time < last:
            raise TimeRegression(f"the entry's created_utc {first_entry_time} is before the last entry's ({last}): "
                                 "the ledger's time only moves forward (is the clock set back?)", index=index,
                                 field="created_utc", expected=f">= {last}", found=first_entry_time)

    def append(self, entry: Mapping[str, Any], *, signer: Signer, now: datetime) -> int:
        """Append one entry with its own signed checkpoint; returns its index once durable."""
        return self.append_batch([entry], signer=signer, now=now)[0]

    def append_batch(self, entries: Sequence[Mapping[str, Any]], *, signer: Signer, now: datetime,
                     expected_size: int | None = None) -> list[int]:
        """Append entries in one transaction with one signed checkpoint; returns their indices once durable.
        All or nothing: one refused entry refuses the batch. ``expected_size``: a compare-and-swap for callers
        whose entries record their own index (a seal manifest does): refused with :class:`AppendConflict`,
        nothing written, when the ledger has another size by the time the write lock is held."""
        self._check_signer(signer)
        if not entries:
            raise LedgerUsageError("nothing to append")
        regression = _time_regression(
            list(map(dict.get, cast(list[dict[str, Any]], entries), repeat("created_utc")))  # (in C)
            if set(map(type, entries)) == {dict}
            else [entry.get("created_utc") if isinstance(entry, Mapping) else None for entry in entries])
        try:
            plain, kinds = validate_batch(entries)
        except EntryRejected as exc:  # the first fault in the batch's order is the one named
            if regression is None or regression[0] > exc.evidence.get("position", 0):
                raise
        if regression is not None:
            position, previous, stamp = regression
            raise TimeRegression("entries of a batch are dated in order: the ledger's time only moves forward",
                                 field="created_utc", position=position, expected=f">= {previous}", found=stamp)
        encoded = list(zip(kinds, encode_entries(plain), strict=True))
        first, last = plain[0].get("created_utc"), plain[-1].get("created_utc")
        moment = format_utc(_ahead(now))
        if isinstance(last, str) and last > moment:  # (dated in order: the last one is the latest)
            position = next(p for p, e in enumerate(plain) if str(e.get("created_utc")) > moment)
            found = plain[position].get("created_utc")
            raise EntryAfterNow(f"an entry is dated {found}, more than {MAX_AHEAD} after the append's time "
                                f"{format_utc(now)}: entries are dated when they are made, not ahead (one far ahead "
                                "would stop every later append)", field="created_utc", position=position,
                                expected=f"<= {moment}", found=found)
        if isinstance(last, str) and self.wall_clock is not None:
            self._check_clock(plain, last)
        return self._append_encoded(encoded, signer=signer, now=now, expected_size=expected_size,
                                    first_entry_time=first if isinstance(first, str) else None,
                                    last_entry_time=last if isinstance(last, str) else None)

    def _check_clock(self, plain: Sequence[Mapping[str, Any]], last: str) -> None:
        assert self.wall_clock is not None
        clock = self.wall_clock()
        bound = format_utc(_ahead(clock))
        if last <= bound:  # (dated in order: the last one is the latest)
            return
        position = next(p for p, e in enumerate(plain) if str(e.get("created_utc")) > bound)
        raise self.after_clock(str(plain[position].get("created_utc")), clock, position=position)

    @staticmethod
    def after_clock(found: str, clock: datetime, *, position: int = 0) -> EntryAfterClock:
        """The refusal of an entry dated ``found``, more than MAX_AHEAD after the machine's clock ``clock``."""
        return EntryAfterClock(f"an entry would be dated {found}, more than {MAX_AHEAD} after this machine's clock "
                               f"({format_utc(clock)}): the ledger's time only moves forward, so every append made "
                               "before that date would be refused, for good (is --at or $HELDOUT_NOW mistyped? a "
                               "rehearsal of a later day runs on a store of its own, with $HELDOUT_REHEARSAL=1)",
                               field="created_utc", position=position, expected=f"<= {format_utc(_ahead(clock))}",
                               found=found)

    def _append_encoded(self, encoded: list[tuple[str, bytes]], *, signer: Signer, now: datetime,
                        expected_size: int | None = None, first_entry_time: str | None = None,
                        last_entry_time: str | None = None) -> list[int]:
        """The write path after validation: ``(type, canonical bytes)`` pairs, one transaction, one checkpoint.

        ``append_batch`` validates and canonicalises before calling this. The benchmark also calls it directly
        with bytes made from one canonical template, to build 10^6-entry ledgers without canonicalising each
        entry (bench/ledger_bench.py documents it); nothing else should."""
        self._check_signer(signer)
        created = format_utc(now)
        with self._write() as storage:
            size = storage.tree_size()
            if expected_size is not None and size != expected_size:
                raise AppendConflict("the ledger grew before this append: another writer came first",
                                     expected=expected_size, found=size)
            signed_head = _signed_head(storage, size)
            self._check_time(first_entry_time)
            tree = CompactRange.of(self._tree.frontier(size))
            kinds, datas = zip(*encoded, strict=True)
            # (C loops, the hot path: each leaf's hash a copy of one fed the leaf prefix, cheaper than a new one)
            hashes = list(map(_copy, repeat(_LEAF_HASH, len(datas))))
            deque(map(_update, hashes, datas), 0)
            leaves = map(_digest, hashes)
            rows = list(zip(range(size, size + len(encoded)), kinds, datas, leaves, repeat(created), strict=False))
            nodes = tree.extend((row[3] for row in rows), MIN_NODE_LEVEL)
            storage.insert_entries(rows)
            storage.insert_nodes(nodes)
            signed = self._sign_head(tree.size, tree.root(), signer, created, signed_head)
            if last_entry_time is not None:  # the created_utc that parsing the last entry's bytes gives
                self._last_time = ((rows[-1][0], rows[-1][2]), last_entry_time)
        self._signed(*signed)
        return list(range(size, size + len(encoded)))

    def checkpoint(self, *, signer: Signer, now: datetime) -> Checkpoint:
        """Sign the current head on demand (the existing checkpoint when the head is already signed)."""
        self._check_signer(signer)
        with self._write() as storage:
            size = storage.tree_size()
            signed = self._sign_head(size, self._tree.root_at(size), signer, format_utc(now),
                                     _signed_head(storage, size))
        return self._signed(*signed)

    # witnessing -------------------------------------------------------------------------------------------
    def add_cosignature(self, size: int, cosigner: Cosigner, cosignature: Cosignature, *, now: datetime) -> bool:
        """Store a witness's cosignature on the checkpoint of ``size`` after verifying it under ``cosigner``;
        returns whether it was new. Raises :class:`CheckpointError` for a cosignature that does not verify."""
        return self.add_cosignatures(size, [(cosigner, cosignature)], now=now) == 1

    def add_cosignatures(self, size: int, cosigned: Sequence[tuple[Cosigner, Cosignature]], *, now: datetime) -> int:
        """Verify every (witness, cosignature) on the checkpoint of ``size``, then store them in one transaction
        (one fsync for all witnesses); returns how many were new. Nothing is stored if one does not verify."""
        checkpoint = self.checkpoint_at(size)
        if checkpoint is None:
            raise LedgerUsageError(f"the ledger has no checkpoint of size {size}", size=size)
        for cosigner, cosignature in cosigned:
            cosignature.verify(checkpoint, cosigner)
        if not cosigned:
            return 0
        received = format_utc(now)
        # Not flushed on its own: losing a cosignature to a power cut costs nothing but a ``witness sync`` (the
        # next cosigned checkpoint covers this one), while a flush here is most of the latency witnessing adds to
        # an append. The next durable commit (the next append) flushes it.
        with self._write(durable=False) as storage:
            return storage.insert_cosignatures(
                [(size, c.name, c.key_id.hex(), s.timestamp, s.line, c.vkey, received) for c, s in cosigned])

    def cosignature_lines(self, size: int) -> list[str]:
        return self.storage.cosignature_lines(size)

    def cosigned_checkpoint(self, size: int | None = None) -> Checkpoint:
        """The signed checkpoint of ``size`` (default: the latest) with every stored cosignature line."""
        checkpoint = self.latest_checkpoint() if size is None else self.checkpoint_at(size)
        if checkpoint is None:
            raise LedgerUsageError(f"the ledger has no checkpoint of size {size}", size=size)
        lines = self.cosignature_lines(checkpoint.size)
        return with_cosignatures(checkpoint, lines) if lines else checkpoint

    def cosigned_checkpoints(self) -> list[Checkpoint]:
        """Every checkpoint, each with its stored cosignatures (what the export publishes)."""
        return [with_cosignatures(c, lines) if (lines := self.cosignature_lines(c.size)) else c
                for c in self.checkpoints()]

    def witness_sizes(self) -> dict[str, int]:
        """For each witness key (vkey) that cosigned: the largest size it cosigned."""
        return self.storage.witness_sizes()

    def witness_latest_times(self) -> dict[str, datetime]:
        """For each witness key (vkey) that cosigned: the latest time it cosigned any checkpoint, as stored (each
        cosignature was verified before it was stored; ``verify`` ties the stored columns to the signed lines)."""
        return {vkey: time_of(stamp) for vkey, stamp in self.storage.witness_latest_timestamps().items()}

    def witnessed_time(self, size: int | None = None) -> datetime | None:
        """The latest cosignature timestamp on a checkpoint of at most ``size`` entries (default: any): a time
        witnesses attest the log had reached. ``None`` before any cosignature."""
        limit = self.size if size is None else size
        stamp = self.storage.latest_cosignature_timestamp(limit)
        return None if stamp is None else time_of(stamp)

    # verifying --------------------------------------------------------------------------------------------
    def _verify_cosignatures(self) -> None:
        """Every stored cosignature verifies, under the witness key stored with it, on its checkpoint (both
        streamed by size and merged: nothing held per checkpoint)."""
        with closing_streams(self.storage.checkpoint_rows(), self.storage.cosignature_rows()) as (checkpoints, rows):
            self._verify_cosignature_rows(checkpoints, rows)

    def _verify_cosignature_rows(self, checkpoints: Iterator[CheckpointRow], rows: Iterator[Any]) -> None:
        current: CheckpointRow | None = None
        for size, witness, key_id, timestamp, line, vkey, _ in rows:
            while current is None or current[0] < size:
                current = next(checkpoints, None)
                if current is None:
                    break
            try:
                if current is None or current[0] != size:
                    raise LedgerIntegrityError("no checkpoint of that size", size=size)
                cosigner = Cosigner.from_vkey(str(vkey))
                cosignature = Cosignature.parse_line(str(line))
                cosignature.verify(self._checkpoint_row(current), cosigner)
                # The columns beside the signed line are what queries read (witnessed_time reads the timestamp):
                # each must be what the verified line and key say, or a time no witness signed would count.
                stated = (witness, key_id, timestamp)
                signed = (cosigner.name, cosigner.key_id.hex(), cosignature.timestamp)
                if stated != signed:
                    raise LedgerIntegrityError("its stored columns (witness, key id, timestamp) are not the signed "
                                               "line's", expected=list(signed), found=list(stated))
            except HeldoutError as exc:
                raise LedgerIntegrityError(f"a stored cosignature on checkpoint {size} does not verify: {exc}",
                                           checkpoint=int(size)) from None

    def verify(self, *, expected_id: str | None = None, progress: ProgressFn | None = None,
               on_entry: EntryFn | None = None, jobs: int | None = None) -> ReplayReport:
        """Replay the whole database in one streamed pass (``ledger.replay``): entry bytes against stored leaf
        hashes, every stored tree node against the replayed tree, every checkpoint's signature, root and
        consistency; then every cosignature. Reads one snapshot (a read transaction) so concurrent appends do
        not disturb it; holds O(log n) tree state. ``on_entry`` receives each entry as it is decoded (for a
        caller that needs per-entry data without a second pass). ``jobs``: processes that read, decode and
        hash entries (``ledger.replay.decoding_workers``; default: one per CPU for a long log), each from its
        own read-only connection to the file (``SqliteStorage.entry_ranges``)."""
        storage = self.storage
        with storage.snapshot():
            ranges = storage.entry_ranges()
            with closing_streams(storage.checkpoint_rows(), storage.data_and_leaves(),
                                 storage.stored_nodes()) as (rows, data, nodes):
                claims = (CheckpointClaim(size, note, root) for size, root, note, _ in rows)
                report = replay(data, self.size, claims, expected_id=expected_id, progress=progress,
                                stored_nodes=nodes, min_node_level=MIN_NODE_LEVEL, on_entry=on_entry, jobs=jobs,
                                ranges=ranges)
            self._verify_cosignatures()
            meta = storage.meta()
            broken = storage.broken_guards()
            if broken:
                # the bytes still replay (everything is recomputed from them), but the database no longer refuses
                # an UPDATE or DELETE: whoever dropped or defused the triggers could rewrite what comes next
                # unnoticed by it
                raise LedgerIntegrityError(f"the database's append-only triggers are gone or altered "
                                           f"({', '.join(broken)}): it no longer refuses changes to what was logged",
                                           found=broken)
            for member, expected in (("ledger_id", report.ledger_id), ("origin", report.origin)):
                if meta.get(member) != expected:
                    raise LedgerIntegrityError(f"the database's recorded {member} differs from its genesis entry's",
                                               field=member, expected=expected, found=meta.get(member))
        return report


def _time_regression(stamps: list[Any]) -> tuple[int, str, str] | None:
    """The first entry of a batch dated (``created_utc``) before the one before it, as (position, the earlier
    date, its date); ``None`` when the dates never go back (entries without a date are skipped)."""
    if set(map(type, stamps)) == {str} and stamps == sorted(stamps):
        return None
    previous: str | None = None
    for position, stamp in enumerate(stamps):
        if not isinstance(stamp, str):
            continue
        if previous is not None and stamp < previous:
            return position, previous, stamp
        previous = stamp
    return None


def ledger_meta(ledger_id: str, name: str, created: str) -> list[tuple[str, str]]:
    """The ``meta`` rows a new ledger records besides its schema's own (version, tree layout)."""
    return [("ledger_id", ledger_id), ("origin", origin_of(ledger_id)), ("name", name), ("created_utc", created)]
