"""The SQLite backend: one ``<ledger id>.sqlite`` file per ledger (schema, pragmas and triggers in
``ledger.db``), rows read and written for :class:`ledger.ledger.Ledger` (contract: ``ledger.storage``).

Writers serialize with ``BEGIN IMMEDIATE`` (``busy_timeout`` waits for the lock); a commit is durable when it
returns (WAL, ``synchronous=FULL``). A new ledger is built under a temporary name and linked into place, so
it appears complete or not at all. The operation lock is a ``flock`` on ``.<ledger id>.generations.lock``
beside the file, never on the SQLite file itself: closing any descriptor of that file would drop SQLite's own
POSIX locks held by this process.
"""

from __future__ import annotations

import fcntl
import functools
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from keys.files import fsync_dir, remove_stale_leftovers
from ledger.db import MIN_NODE_LEVEL, SCHEMA_VERSION, connect, guard_definitions, readable_schema, schema_tables
from ledger.entries import is_ledger_id, is_ledger_prefix
from ledger.errors import LedgerIntegrityError, LedgerUsageError
from ledger.storage import NODE_ORDER, CheckpointRow, CosignatureRow, EntryRow, Fill, checkpoint_row, stored_hashes

if TYPE_CHECKING:  # ledger.db imports sqlite-utils its own way (without pandas)
    from sqlite_utils import Database

LEDGER_SUFFIX = ".sqlite"
# Columns as every reader here takes them (the replay, proofs, exports): each of its own type, or else a value
# that fails the checks at its row (an empty entry, leaf hash, root or note; a node at level 0 and index -1; a
# size of -1). A file whose tables are not the STRICT ones this code makes (a crafted one) may hold TEXT,
# numbers or NULL anywhere; the row is then named as damage instead of failing with a type error, and nothing
# is converted into a value that would pass (TEXT holding an entry's JSON is not that entry's bytes). Free for
# a real ledger.


def _blob(column: str) -> str:
    return f"CASE typeof({column}) WHEN 'blob' THEN {column} ELSE x'' END"


def _integer(column: str, otherwise: int = -1) -> str:
    return f"CASE typeof({column}) WHEN 'integer' THEN {column} ELSE {otherwise} END"


def _text(column: str) -> str:
    return f"CASE typeof({column}) WHEN 'text' THEN {column} ELSE '' END"


_DATA_AND_LEAF = f"{_blob('data')}, {_blob('leaf_hash')}"
_NODE = f"{_integer('level', 0)}, {_integer('idx')}, {_blob('hash')}"  # level 0: never a stored node
_CHECKPOINT = f"{_integer('size')}, {_blob('root')}, {_text('note')}, {_text('created_utc')}"
_COSIGNATURE = ", ".join([_integer("size"), _text("witness"), _text("key_id"), _integer("timestamp"), _text("line"),
                          _text("vkey"), _text("received_utc")])


class SqliteStorage:
    """The rows of one ledger file (see ``ledger.storage.LedgerStorage``)."""

    min_stored_level = MIN_NODE_LEVEL

    def __init__(self, db: Database, path: Path) -> None:
        self.db = db
        self.conn: sqlite3.Connection = db.conn
        self.path: Path | None = path
        self.location = str(path)

    # the tree's node source ------------------------------------------------------------------------------
    def tree_size(self) -> int:
        row = self.conn.execute("SELECT MAX(idx) FROM entries").fetchone()
        return 0 if row[0] is None else int(row[0]) + 1

    def node(self, level: int, index: int) -> bytes:
        if level == 0:
            row = self.conn.execute(f"SELECT {_blob('leaf_hash')} FROM entries WHERE idx = ?", (index,)).fetchone()
        else:
            row = self.conn.execute(f"SELECT {_blob('hash')} FROM nodes WHERE level = ? AND idx = ?",
                                    (level, index)).fetchone()
        if row is None:
            raise LedgerIntegrityError("a tree node is missing from the ledger database", level=level, index=index)
        return stored_hashes([bytes(row[0])], level=level, index=index)[0]

    def leaf_range(self, offset: int, width: int) -> list[bytes]:
        rows = self.conn.execute(f"SELECT {_blob('leaf_hash')} FROM entries WHERE idx >= ? AND idx < ? ORDER BY idx",
                                 (offset, offset + width)).fetchall()
        if len(rows) != width:
            raise LedgerIntegrityError("leaf hashes are missing from the ledger database", index=offset)
        return stored_hashes([bytes(r[0]) for r in rows], index=offset)

    # reading ---------------------------------------------------------------------------------------------
    def meta(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in self.conn.execute("SELECT key, value FROM meta").fetchall()}

    def broken_guards(self) -> list[str]:
        """The append-only triggers of the schema (``ledger.db``) that the file no longer has (``name (gone)``)
        or has with other SQL than the schema's (``name (altered)``: the same name guarding nothing).
        ``sqlite_master`` is read as it is, whatever its columns hold."""
        rows = self.conn.execute("SELECT CAST(type AS TEXT), CAST(name AS TEXT), CAST(sql AS TEXT) FROM sqlite_master "
                                 "WHERE type IN ('trigger', 'table')").fetchall()
        tables = {name for kind, name, _ in rows if kind == "table"}
        triggers = {name: sql for kind, name, sql in rows if kind == "trigger"}
        stored = self.conn.execute(f"SELECT {_text('value')} FROM meta WHERE key = 'schema_version'").fetchone()
        # The triggers of the file's own schema: a file read without migrating keeps those it was written with
        # (a version out of range was refused when the file was opened). Whoever holds the file may write an
        # older version to be held to fewer triggers: a table of a later schema gives that away.
        version = int(stored[0]) if stored is not None and readable_schema(stored[0]) else SCHEMA_VERSION
        later = sorted(tables & (schema_tables() - schema_tables(version)))
        broken = [f"schema_version {version} (the file has the {', '.join(later)} table of a later schema)"] \
            if later else []
        expected = guard_definitions(version)
        for name in expected:
            if name not in triggers:
                broken.append(f"{name} (gone)")
            elif triggers[name] != expected[name]:
                broken.append(f"{name} (altered)")
        return broken

    def entry_data(self, index: int) -> bytes | None:
        row = self.conn.execute(f"SELECT {_blob('data')} FROM entries WHERE idx = ?", (index,)).fetchone()
        return None if row is None else bytes(row[0])

    def entry_time(self, index: int) -> str | None:
        row = self.conn.execute(f"SELECT {_text('created_utc')} FROM entries WHERE idx = ?", (index,)).fetchone()
        return None if row is None else str(row[0])

    def last_entry(self) -> tuple[int, bytes] | None:
        row = self.conn.execute(f"SELECT idx, {_blob('data')} FROM entries ORDER BY idx DESC LIMIT 1").fetchone()
        return None if row is None else (int(row[0]), bytes(row[1]))

    def entries_bytes(self, start: int, stop: int) -> Iterator[tuple[int, bytes]]:
        cursor = self.conn.execute(f"SELECT idx, {_blob('data')} FROM entries WHERE idx >= ? AND idx < ? ORDER BY idx",
                                   (start, stop))
        for index, data in cursor:
            yield int(index), bytes(data)

    def entry_rows(self, start: int, stop: int) -> Iterator[EntryRow]:
        cursor = self.conn.execute(f"SELECT idx, {_text('type')}, {_DATA_AND_LEAF}, {_text('created_utc')} "
                                   "FROM entries WHERE idx >= ? AND idx < ? ORDER BY idx", (start, stop))
        for index, kind, data, leaf, created in cursor:
            yield int(index), str(kind), bytes(data), bytes(leaf), str(created)

    def data_and_leaves(self) -> Iterator[tuple[bytes, bytes]]:
        # the cursor itself: SQLite steps it one row at a time (nothing accumulates), and the typed read makes
        # every value bytes, so no per-row generator stands between the replay and the database
        cursor: Iterator[tuple[bytes, bytes]] = self.conn.execute(f"SELECT {_DATA_AND_LEAF} FROM entries ORDER BY idx")
        return cursor

    def entry_ranges(self) -> SqliteEntryRanges | None:
        """The entries for a replay's decoding workers to read by index range, each from its own read-only
        connection (``ledger.replay.EntryRanges``): when the indices start at 0, where the replay's stream
        starts (missing indices above it are found by the workers, and the replay then reads on from the
        stream)."""
        low = self.conn.execute("SELECT MIN(idx) FROM entries").fetchone()[0]
        high = self.conn.execute("SELECT MAX(idx) FROM entries").fetchone()[0]
        if self.path is None or low != 0 or type(high) is not int:
            return None
        return SqliteEntryRanges(str(self.path), high + 1)

    def stored_nodes(self) -> Iterator[tuple[int, int, bytes]]:
        # the cursor itself, as for the entries: the typed read (_NODE) makes every row (int, int, bytes)
        cursor: Iterator[tuple[int, int, bytes]] = self.conn.execute(
            f"SELECT {_NODE} FROM nodes ORDER BY {NODE_ORDER}")
        return cursor

    def checkpoint_rows(self) -> Iterator[CheckpointRow]:
        for row in self.conn.execute(f"SELECT {_CHECKPOINT} FROM checkpoints ORDER BY size"):
            checkpoint = checkpoint_row(row)
            assert checkpoint is not None
            yield checkpoint

    def checkpoint_row(self, size: int) -> CheckpointRow | None:
        return checkpoint_row(self.conn.execute(
            f"SELECT {_CHECKPOINT} FROM checkpoints WHERE size = ?", (size,)).fetchone())

    def latest_checkpoint_row(self) -> CheckpointRow | None:
        return checkpoint_row(self.conn.execute(
            f"SELECT {_CHECKPOINT} FROM checkpoints ORDER BY size DESC LIMIT 1").fetchone())

    @functools.cached_property
    def _has_cosignatures(self) -> bool:
        """Whether the file has the cosignatures table: a schema-1 file read without migrating has none (and
        holds no cosignature), which is no reason to refuse reading it."""
        return self.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'cosignatures'"
                                 ).fetchone() is not None

    def cosignature_lines(self, size: int) -> list[str]:
        if not self._has_cosignatures:
            return []
        rows = self.conn.execute(f"SELECT {_text('line')} FROM cosignatures WHERE size = ? ORDER BY witness, key_id, "
                                 "timestamp", (size,)).fetchall()
        return [str(row[0]) for row in rows]

    def cosignature_rows(self) -> Iterator[CosignatureRow]:
        if not self._has_cosignatures:
            return
        for a, b, c, d, e, f, g in self.conn.execute(f"SELECT {_COSIGNATURE} FROM cosignatures ORDER BY size, "
                                                     "witness, key_id, timestamp"):
            yield int(a), str(b), str(c), int(d), str(e), str(f), str(g)

    def witness_sizes(self) -> dict[str, int]:
        if not self._has_cosignatures:
            return {}
        rows = self.conn.execute("SELECT vkey, MAX(size) FROM cosignatures GROUP BY vkey").fetchall()
        return {str(vkey): int(size) for vkey, size in rows}

    def witness_latest_timestamps(self) -> dict[str, int]:
        if not self._has_cosignatures:
            return {}
        rows = self.conn.execute("SELECT vkey, MAX(timestamp) FROM cosignatures GROUP BY vkey").fetchall()
        return {str(vkey): int(stamp) for vkey, stamp in rows}

    def latest_cosignature_timestamp(self, limit: int) -> int | None:
        if not self._has_cosignatures:
            return None
        row = self.conn.execute("SELECT MAX(timestamp) FROM cosignatures WHERE size <= ?", (limit,)).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    # transactions ----------------------------------------------------------------------------------------
    @contextmanager
    def write(self, *, durable: bool = True) -> Iterator[None]:
        conn = self.conn
        if not durable:
            conn.execute("PRAGMA synchronous = NORMAL")  # the WAL frames are synced by the next FULL commit
        try:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                raise LedgerUsageError(f"the ledger is busy ({exc}); try again", path=self.location) from None
            try:
                yield
                conn.execute("COMMIT")
            except BaseException as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.IntegrityError):
                    raise LedgerIntegrityError(f"the ledger database refused the write: {exc}",
                                               path=self.location) from None
                raise
        finally:
            if not durable:
                conn.execute("PRAGMA synchronous = FULL")

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        if self.conn.in_transaction:
            yield
            return
        self.conn.execute("BEGIN")  # deferred: the first read fixes the snapshot for the whole block
        try:
            yield
        finally:
            self.conn.execute("COMMIT")

    @contextmanager
    def operation_lock(self) -> Iterator[None]:
        fd = os.open(lock_path(self._file()), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the flock

    def _file(self) -> Path:
        assert self.path is not None  # always set for a SQLite ledger
        return self.path

    # writing ---------------------------------------------------------------------------------------------
    def insert_meta(self, rows: list[tuple[str, str]]) -> None:
        self.conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", rows)

    def insert_entries(self, rows: list[EntryRow]) -> None:
        self.conn.executemany("INSERT INTO entries (idx, type, data, leaf_hash, created_utc) VALUES (?, ?, ?, ?, ?)",
                              rows)

    def insert_nodes(self, nodes: list[tuple[int, int, bytes]]) -> None:
        self.conn.executemany("INSERT INTO nodes (level, idx, hash) VALUES (?, ?, ?)", nodes)

    def insert_checkpoint(self, row: CheckpointRow) -> None:
        self.conn.execute("INSERT INTO checkpoints (size, root, note, created_utc) VALUES (?, ?, ?, ?)", row)

    def insert_cosignatures(self, rows: list[CosignatureRow]) -> int:
        before = self.conn.total_changes
        self.conn.executemany(
            "INSERT OR IGNORE INTO cosignatures (size, witness, key_id, timestamp, line, vkey, received_utc) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        return self.conn.total_changes - before

    def close(self) -> None:
        self.db.close()


@dataclass(frozen=True)
class SqliteEntryRanges:
    """A ledger file's entries ``[0, size)``, read by range (``ledger.replay.EntryRanges``); picklable, so a
    decoding worker opens the file itself."""

    path: str
    size: int

    def open(self) -> SqliteRangeReader:
        return SqliteRangeReader(connect(Path(self.path), read_only=True))


class SqliteRangeReader:
    """A read-only connection of a decoding worker (``ledger.replay.RangeReader``)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def rows(self, start: int, stop: int) -> Iterator[tuple[bytes, bytes]]:
        cursor: Iterator[tuple[bytes, bytes]] = self.db.conn.execute(
            f"SELECT {_DATA_AND_LEAF} FROM entries WHERE idx >= ? AND idx < ? ORDER BY idx", (start, stop))
        return cursor

    def close(self) -> None:
        self.db.close()


def lock_path(ledger_file: Path) -> Path:
    """The operation lock file of a ledger file (``.<ledger id>.generations.lock`` beside it)."""
    return ledger_file.with_name(f".{ledger_file.name.removesuffix(LEDGER_SUFFIX)}.generations.lock")


def open_storage(path: Path, *, read_only: bool = False) -> SqliteStorage:
    """The rows of the ledger file at ``path``; ``read_only`` never writes (see ``ledger.db.connect``)."""
    path = Path(path)
    return SqliteStorage(connect(path, read_only=read_only), path)


def create_storage(folder: Path, ledger_id: str, fill: Fill) -> SqliteStorage:
    """Write ``<folder>/<ledger id>.sqlite`` holding what ``fill`` inserts (in one transaction, under a
    temporary name, then linked into place); refused when the ledger exists there already."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{ledger_id}{LEDGER_SUFFIX}"
    _remove_stale_builds(folder, ledger_id)  # (first: a build killed after its link is refused below, for good)
    if path.exists():
        raise LedgerUsageError(f"a ledger {ledger_id} already exists in {folder}", path=str(path))
    tmp = folder / f".{ledger_id}{LEDGER_SUFFIX}.tmp{os.getpid()}"
    storage: SqliteStorage | None = None
    try:
        storage = SqliteStorage(connect(tmp, create=True), tmp)
        with storage.write():
            fill(storage)
    except BaseException:  # a full disk, a refused copy: no half-built file is left behind
        if storage is not None:
            storage.close()
        for leftover in (Path(f"{tmp}{suffix}") for suffix in _BUILD_SUFFIXES):
            leftover.unlink(missing_ok=True)
        raise
    storage.close()
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise LedgerUsageError(f"a ledger {ledger_id} already exists in {folder}", path=str(path)) from None
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(folder)
    return open_storage(path)


#: A ledger file and SQLite's companions of it.
_BUILD_SUFFIXES = ("", "-wal", "-shm", "-journal")


def _remove_stale_builds(folder: Path, ledger_id: str) -> None:
    """Half-built files of this ledger that a killed build left (``.<id>.sqlite.tmp<pid>`` and its -wal, -shm
    and -journal: the build's first statements run before WAL mode is set), unless the process that named them
    still runs (:func:`keys.files.remove_stale_leftovers`), and those under this process's own name: never a
    ledger, so nothing to keep (a journal left under a reused process id would be read as a hot journal)."""
    name = f"{ledger_id}{LEDGER_SUFFIX}"
    remove_stale_leftovers(folder, name, tags=("tmp",), suffixes=_BUILD_SUFFIXES)
    own = folder / f".{name}.tmp{os.getpid()}"
    for leftover in (Path(f"{own}{suffix}") for suffix in _BUILD_SUFFIXES):
        leftover.unlink(missing_ok=True)


def locate(folder: Path, ledger_id_or_prefix: str) -> Path:
    """``<folder>/<id>.sqlite`` for a ledger id or a unique prefix of one."""
    text = ledger_id_or_prefix.strip()
    if not is_ledger_prefix(text):
        raise LedgerUsageError("a ledger is named by its id (20 lowercase hex characters) or a prefix of it",
                               found=ledger_id_or_prefix[:80])
    found = sorted(folder.glob(f"{text}*{LEDGER_SUFFIX}")) if Path(folder).is_dir() else []
    found = [p for p in found if is_ledger_id(p.name[: -len(LEDGER_SUFFIX)])]
    if not found:
        raise LedgerUsageError(f"no ledger {text!r} in {folder}", path=str(folder), found=text)
    if len(found) > 1:
        raise LedgerUsageError(f"{text!r} names {len(found)} ledgers in {folder}; give more of the id",
                               found=[p.name[: -len(LEDGER_SUFFIX)] for p in found])
    return found[0]


def list_ids(folder: Path) -> list[str]:
    if not Path(folder).is_dir():
        return []
    return sorted(p.name[: -len(LEDGER_SUFFIX)] for p in Path(folder).glob(f"*{LEDGER_SUFFIX}")
                  if is_ledger_id(p.name[: -len(LEDGER_SUFFIX)]))
