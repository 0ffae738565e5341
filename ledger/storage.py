"""What a ledger backend stores and how: the contract between :class:`ledger.ledger.Ledger` (all the log's
logic: validation, tree, proofs, checkpoint signing and checks, cosignature verification, replay) and a
database that only keeps rows.

Two backends implement it: ``ledger.sqlite`` (one SQLite file per ledger, the embedded default) and
``ledger.postgres`` (one schema per ledger in a PostgreSQL database). Both hold the same five tables with the
same columns and the same append-only rules enforced by the database itself (``meta``, ``entries``,
``nodes``, ``checkpoints``, ``cosignatures``; see ``ledger.db`` and ``ledger.postgres``), so a log copied from
one to the other is the same log, byte for byte (``ledger.migrate``).

Writes happen only inside :meth:`LedgerStorage.write`, which serializes writers across processes (SQLite's
write lock; a PostgreSQL advisory lock on the ledger) and commits on a clean exit: the commit is the
acknowledgement. Reads outside a transaction may see a newer state between two calls; :meth:`snapshot`
gives one consistent state for a whole read (verify, export).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ledger.errors import LedgerIntegrityError
from ledger.rfc6962 import HASH_SIZE

if TYPE_CHECKING:
    from ledger.replay import EntryRanges

#: ``(index, type, canonical bytes, leaf hash, created_utc)``: one row of the ``entries`` table.
EntryRow = tuple[int, str, bytes, bytes, str]
#: ``(size, root, note, created_utc)``: one row of the ``checkpoints`` table.
CheckpointRow = tuple[int, bytes, str, str]
#: ``(size, witness, key id hex, timestamp, line, vkey, received_utc)``: one row of ``cosignatures``.
CosignatureRow = tuple[int, str, str, int, str, str, str]
#: The order of ``nodes`` rows that a streamed replay meets them in: by the size whose last leaf completes the
#: node (``(idx + 1) << level``), lower levels first among nodes completed by the same leaf. The same SQL on
#: both backends.
NODE_ORDER = "(idx + 1) << level, level"


class LedgerStorage(Protocol):
    """The rows of one ledger. ``min_stored_level``, ``tree_size``, ``node`` and ``leaf_range`` make it the
    tree's :class:`ledger.tree.NodeSource`."""

    min_stored_level: int
    #: Where the ledger lives, for messages and reports (a file path, or a database URL without password).
    location: str
    #: The SQLite file, or ``None`` for a ledger in a database server.
    path: Path | None

    # the tree's node source ------------------------------------------------------------------------------
    def tree_size(self) -> int: ...

    def node(self, level: int, index: int) -> bytes: ...

    def leaf_range(self, offset: int, width: int) -> list[bytes]: ...

    # reading ---------------------------------------------------------------------------------------------
    def meta(self) -> dict[str, str]: ...

    def broken_guards(self) -> list[str]:
        """The append-only triggers the backend's schema creates that the database no longer has, or has
        altered, disabled or made conditional, each as ``name (what is wrong)``: the database then no longer
        refuses changes to what was logged."""
        ...

    def entry_data(self, index: int) -> bytes | None: ...

    def entry_time(self, index: int) -> str | None: ...

    def last_entry(self) -> tuple[int, bytes] | None: ...

    def entries_bytes(self, start: int, stop: int) -> Iterator[tuple[int, bytes]]: ...

    def entry_rows(self, start: int, stop: int) -> Iterator[EntryRow]: ...

    def data_and_leaves(self) -> Iterator[tuple[bytes, bytes]]: ...

    def entry_ranges(self) -> EntryRanges | None:
        """The entries for a replay's decoding workers to read themselves, by index range, or ``None`` (they
        are then sent the entries :meth:`data_and_leaves` streams)."""
        ...

    def stored_nodes(self) -> Iterator[tuple[int, int, bytes]]:
        """Every stored tree node, in the order appends complete them (``NODE_ORDER``), streamed."""
        ...

    def checkpoint_rows(self) -> Iterator[CheckpointRow]:
        """Every checkpoint by size, streamed (a log signed per append has as many as entries)."""
        ...

    def checkpoint_row(self, size: int) -> CheckpointRow | None: ...

    def latest_checkpoint_row(self) -> CheckpointRow | None: ...

    def cosignature_lines(self, size: int) -> list[str]: ...

    def cosignature_rows(self) -> Iterator[CosignatureRow]:
        """Every cosignature by size (then witness, key id, timestamp), streamed."""
        ...

    def witness_sizes(self) -> dict[str, int]: ...

    def latest_cosignature_timestamp(self, limit: int) -> int | None: ...

    def witness_latest_timestamps(self) -> dict[str, int]:
        """For each witness key (vkey) that cosigned: its latest cosignature timestamp, on any checkpoint."""
        ...

    # transactions ----------------------------------------------------------------------------------------
    def write(self, *, durable: bool = True) -> AbstractContextManager[None]:
        """One write transaction under the ledger's writer lock; committed on a clean exit, rolled back (and
        the database's refusals raised as :class:`ledger.errors.LedgerIntegrityError`) otherwise.
        ``durable=False`` lets the backend skip flushing this commit (for cosignatures: a lost one costs only
        a ``witness sync``)."""
        ...

    def snapshot(self) -> AbstractContextManager[None]:
        """One consistent read state (re-entrant: inside a transaction it is that transaction's state)."""
        ...

    def operation_lock(self) -> AbstractContextManager[None]:
        """An exclusive lock held across transactions, for an operation that checks the log and then appends
        (heldout's seal and retire); it does not block plain appends."""
        ...

    # writing (inside ``write``) --------------------------------------------------------------------------
    def insert_meta(self, rows: list[tuple[str, str]]) -> None: ...

    def insert_entries(self, rows: list[EntryRow]) -> None: ...

    def insert_nodes(self, nodes: list[tuple[int, int, bytes]]) -> None: ...

    def insert_checkpoint(self, row: CheckpointRow) -> None: ...

    def insert_cosignatures(self, rows: list[CosignatureRow]) -> int:
        """Insert the rows not stored yet; returns how many were new."""
        ...

    def close(self) -> None: ...


#: Fills a new, empty ledger inside its creation transaction (genesis and first checkpoint, or a whole copy).
Fill = Callable[[LedgerStorage], None]


def checkpoint_row(row: tuple[Any, ...] | None) -> CheckpointRow | None:
    """A ``checkpoints`` row as the database driver returned it, in Python types (``None`` stays ``None``)."""
    if row is None:
        return None
    size, root, note, created = row
    return int(size), bytes(root), str(note), str(created)


def stored_hashes(hashes: list[bytes], **where: int) -> list[bytes]:
    """Tree hashes as a backend read them (``node``, ``leaf_range``), refused unless each is a SHA-256 hash: a
    crafted row's value of another type reads as empty (the backends' typed reads), and must not be served as
    a hash."""
    if hashes and set(map(len, hashes)) != {HASH_SIZE}:
        raise LedgerIntegrityError("a stored tree hash is not a SHA-256 hash", **where)
    return hashes
