"""The ledger's SQLite file: schema, migrations, pragmas and the append-only triggers.

One file per ledger (``<ledger id>.sqlite``), opened through sqlite-utils with strict tables. Durability:
WAL journal with ``synchronous=FULL``, so a commit returns only once the WAL is fsynced; a writer killed at any
instant leaves the last committed state. Writers serialize with ``BEGIN IMMEDIATE`` (``busy_timeout`` waits
for the lock). Schema changes are sqlite-utils migrations (recorded in ``_sqlite_migrations``) and the schema
version is kept in ``meta``; a file from a newer version is refused rather than guessed at. Readers open the
file read-only (``connect(read_only=True)``), so verify, audit and export work on a read-only copy of a store;
SQLite's errors leave here as the project's (``ledger.errors.database_error``): exit 2 for the environment (full
disk, I/O error, read-only, locked), exit 1 for a file that is not a readable ledger database.

Tables (all STRICT):

* ``meta(key, value)``: ledger_id, origin, name, created_utc, schema_version, min_node_level.
* ``entries(idx INTEGER PRIMARY KEY, type, data BLOB, leaf_hash BLOB, created_utc)``: the log.
* ``nodes(level, idx, hash) WITHOUT ROWID``: roots of complete perfect subtrees of 16 leaves or more
  (levels >= ``MIN_NODE_LEVEL``; see ``ledger.tree``).
* ``checkpoints(size INTEGER PRIMARY KEY, root BLOB, note, created_utc)``: signed notes.
* ``cosignatures(size, witness, key_id, timestamp, line, vkey, received_utc)`` (schema 2): witnesses'
  ``cosignature/v1`` lines on the checkpoint of that size, each verified under ``vkey`` before it is stored;
  one per (size, witness key id, timestamp); append-only like the rest.

Append-only in the database as well as in code: triggers refuse UPDATE and DELETE on entries, nodes and
checkpoints, a node that exists already, a checkpoint whose size is not larger than every earlier one (so never
two roots for one size, never a smaller size after a larger) and, since schema 3, a checkpoint that does not
cover exactly the entries before it (indices 0 to its size - 1, each with a 32-byte leaf hash).

Schema 3 moved the entries' index check from each entry row to the checkpoint that signs them (migration
``0003_checkpoint_covers_entries``). Schemas 1 and 2 refused, row by row, an entry at any index but the next:
a trigger program run for every row, 8% of a batched append's time (issue 11's benchmark). Checked once per
transaction at the checkpoint it writes, the same rows are refused from being signed: a row written into the
database directly (a gap, a negative index, a short leaf hash) stays unsigned, and so does everything after it
until it is removed, as a row at the next index already did (``ledger.ledger._signed_head``). ``verify`` names
such rows either way. Every earlier checkpoint was signed over contiguous entries (by the old row check, or by
this one), and an index below a checkpoint's size is taken, so counting the rows from the last checkpoint's
size on is enough.
"""

from __future__ import annotations

import functools
import importlib
import os
import sqlite3
import sys
import urllib.parse
from pathlib import Path


def _import_sqlite_utils_without_pandas() -> None:
    """Import sqlite-utils without letting it import pandas. sqlite-utils imports pandas whenever it is
    installed (about 0.2 s, more than the rest of a command's start-up) only to map ``pandas.Timestamp`` to
    TEXT in tables it creates from Python values, which the ledger never does. A None in ``sys.modules`` makes
    that one import fail at once (the language's documented way to block an import); it is removed again, so
    code that wants pandas later still gets it."""
    if "sqlite_utils.db" in sys.modules or "pandas" in sys.modules:
        return
    sys.modules["pandas"] = None  # type: ignore[assignment]
    try:
        importlib.import_module("sqlite_utils.db")
    finally:
        if sys.modules.get("pandas", False) is None:
            del sys.modules["pandas"]


_import_sqlite_utils_without_pandas()

from sqlite_utils import Database  # noqa: E402  (after the import above, which decides how it loads)
from sqlite_utils.migrations import Migrations  # noqa: E402

from keys.names import ASCII_DIGITS  # noqa: E402
from ledger.errors import LedgerIntegrityError, LedgerStorageError, LedgerUsageError, database_error  # noqa: E402

SCHEMA_VERSION = 3
#: Interior tree levels below this are not stored (rehashed from at most 15 leaf hashes when needed).
MIN_NODE_LEVEL = 4
BUSY_TIMEOUT_MS = 120_000
MIGRATIONS = Migrations("heldout.ledger")


@MIGRATIONS(name="0001_initial")
def _initial_schema(db: Database) -> None:
    db["meta"].create({"key": str, "value": str}, pk="key", not_null={"value"})  # type: ignore[union-attr]
    db["entries"].create(  # type: ignore[union-attr]
        {"idx": int, "type": str, "data": bytes, "leaf_hash": bytes, "created_utc": str},
        pk="idx", not_null={"type", "data", "leaf_hash", "created_utc"},
    )
    db.execute(
        "CREATE TABLE nodes (level INTEGER NOT NULL, idx INTEGER NOT NULL, hash BLOB NOT NULL, "
        "PRIMARY KEY (level, idx)) WITHOUT ROWID, STRICT"
    )
    db["checkpoints"].create(  # type: ignore[union-attr]
        {"size": int, "root": bytes, "note": str, "created_utc": str},
        pk="size", not_null={"root", "note", "created_utc"},
    )
    for table in ("entries", "nodes", "checkpoints"):
        for action in ("UPDATE", "DELETE"):
            db.execute(
                f"CREATE TRIGGER {table}_no_{action.lower()} BEFORE {action} ON {table} "
                f"BEGIN SELECT RAISE(ABORT, 'ledger {table} are append-only'); END"
            )
    db.execute(
        "CREATE TRIGGER entries_next_index BEFORE INSERT ON entries "
        "WHEN NEW.idx IS NOT COALESCE((SELECT MAX(idx) FROM entries), -1) + 1 OR length(NEW.leaf_hash) != 32 "
        "BEGIN SELECT RAISE(ABORT, 'ledger entries are appended at the next index only'); END"
    )
    db.execute(
        "CREATE TRIGGER nodes_write_once BEFORE INSERT ON nodes "
        f"WHEN length(NEW.hash) != 32 OR NEW.level < {MIN_NODE_LEVEL} "
        "OR EXISTS (SELECT 1 FROM nodes WHERE level = NEW.level AND idx = NEW.idx) "
        "BEGIN SELECT RAISE(ABORT, 'ledger tree nodes are written once'); END"
    )
    db.execute(
        "CREATE TRIGGER checkpoints_grow BEFORE INSERT ON checkpoints "
        "WHEN NEW.size <= COALESCE((SELECT MAX(size) FROM checkpoints), 0) "
        "OR NEW.size > COALESCE((SELECT MAX(idx) FROM entries), -1) + 1 OR length(NEW.root) != 32 "
        "BEGIN SELECT RAISE(ABORT, 'ledger checkpoints only grow, one per size, never past the entries'); END"
    )
    db.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '1')")
    db.execute("INSERT INTO meta (key, value) VALUES ('min_node_level', ?)", [str(MIN_NODE_LEVEL)])


@MIGRATIONS(name="0002_cosignatures")
def _cosignatures(db: Database) -> None:
    db.execute(
        "CREATE TABLE cosignatures (size INTEGER NOT NULL, witness TEXT NOT NULL, key_id TEXT NOT NULL, "
        "timestamp INTEGER NOT NULL, line TEXT NOT NULL, vkey TEXT NOT NULL, received_utc TEXT NOT NULL, "
        "PRIMARY KEY (size, witness, key_id, timestamp)) STRICT"
    )
    for action in ("UPDATE", "DELETE"):
        db.execute(
            f"CREATE TRIGGER cosignatures_no_{action.lower()} BEFORE {action} ON cosignatures "
            "BEGIN SELECT RAISE(ABORT, 'ledger cosignatures are append-only'); END"
        )
    db.execute(
        "CREATE TRIGGER cosignatures_on_checkpoints BEFORE INSERT ON cosignatures "
        "WHEN NOT EXISTS (SELECT 1 FROM checkpoints WHERE size = NEW.size) "
        "BEGIN SELECT RAISE(ABORT, 'a cosignature is on a signed checkpoint of the ledger'); END"
    )
    db.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")


#: The last checkpoint's size: every entry below it was checked when that checkpoint was inserted.
_SIGNED = "COALESCE((SELECT MAX(size) FROM checkpoints), 0)"


@MIGRATIONS(name="0003_checkpoint_covers_entries")
def _checkpoint_covers_entries(db: Database) -> None:
    db.execute("DROP TRIGGER entries_next_index")
    # The rows from the last checkpoint's size on, each with a 32-byte leaf hash, are as many as the new size
    # adds, the highest is the new size - 1 and the lowest entry is 0: with the indices unique (the primary
    # key), the entries are then exactly 0 .. size - 1. One range count per transaction.
    db.execute(
        "CREATE TRIGGER checkpoints_cover_entries BEFORE INSERT ON checkpoints "
        "WHEN NEW.size IS NOT (SELECT MAX(idx) FROM entries) + 1 OR (SELECT MIN(idx) FROM entries) IS NOT 0 "
        f"OR (SELECT COUNT(*) FROM entries WHERE idx >= {_SIGNED} AND length(leaf_hash) = 32) "
        f"IS NOT NEW.size - {_SIGNED} "
        "BEGIN SELECT RAISE(ABORT, 'a ledger checkpoint covers exactly the entries before it, each with a "
        "32-byte leaf hash'); END"
    )
    db.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")


@functools.cache
def schema_definitions(version: int = SCHEMA_VERSION) -> dict[tuple[str, str], str]:
    """The tables and triggers the migrations up to schema ``version`` create, ``(type, name) -> SQL`` (SQLite
    keeps a ``CREATE`` text verbatim in ``sqlite_master``), read from a database built in memory by the same
    migrations rather than written out a second time."""
    if not 1 <= version <= SCHEMA_VERSION:
        raise LedgerUsageError(f"no ledger schema {version}", expected=f"1 to {SCHEMA_VERSION}", found=version)
    db = Database(sqlite3.connect(":memory:"), strict=True)
    try:
        MIGRATIONS.apply(db, stop_before=[migration.name for migration in MIGRATIONS.pending(db)[version:]])
        rows = db.conn.execute("SELECT type, name, sql FROM sqlite_master WHERE type IN ('table', 'trigger')")
        return {(str(kind), str(name)): str(sql) for kind, name, sql in rows.fetchall()}
    finally:
        db.close()


def guard_definitions(version: int = SCHEMA_VERSION) -> dict[str, str]:
    """Each append-only trigger's SQL in schema ``version``: what a ledger file of that schema must still say
    (a file read without migrating keeps its own schema's triggers). A trigger of the right name that says
    anything else (``WHEN 0``, another table, no RAISE) guards nothing."""
    return {name: sql for (kind, name), sql in schema_definitions(version).items() if kind == "trigger"}


def schema_tables(version: int = SCHEMA_VERSION) -> frozenset[str]:
    """The tables of schema ``version``."""
    return frozenset(name for kind, name in schema_definitions(version) if kind == "table")


def _connect_read_only(path: Path) -> sqlite3.Connection:
    """A connection that cannot write. ``mode=ro`` first (it sees concurrent writers' commits); when that
    fails because the file or its folder is not writable (SQLite then cannot create the WAL index), the file
    is opened ``immutable``: nobody here can change it, so it is read as a still file."""
    quoted = urllib.parse.quote(os.fsencode(path.resolve()))  # (bytes: a folder name need not be UTF-8)
    try:
        conn = sqlite3.connect(f"file:{quoted}?mode=ro", uri=True)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError:
        if os.access(path, os.W_OK) and os.access(path.parent, os.W_OK):
            raise
    wal = Path(f"{path}-wal")
    if wal.is_file() and wal.stat().st_size > 0:
        # An immutable open would not see the commits still in the WAL: refuse rather than show an old state.
        raise LedgerStorageError(f"{path} is read-only and has commits in {wal.name} that SQLite cannot read "
                                 "without writing; copy the store with its ledger closed", path=str(path))
    return sqlite3.connect(f"file:{quoted}?immutable=1", uri=True)


def connect(path: Path, *, create: bool = False, read_only: bool = False) -> Database:
    """Open (or, with ``create``, make) a ledger file with the durability pragmas, applying any pending
    migrations under the write lock. ``read_only`` never writes (no pragma change, no migration), so a
    read-only copy of a store can be verified, audited and exported."""
    if not create and not path.is_file():
        raise LedgerUsageError(f"no ledger file at {path}", path=str(path))
    if read_only:
        try:
            db = Database(_connect_read_only(path), strict=True)
            version = db.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.Error as exc:
            raise database_error(exc, path) from None
        except UnicodeDecodeError:
            raise _undecodable_schema(path) from None
        return _checked_version(db, path, version)
    db = Database(path, strict=True)
    conn = db.conn
    try:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not create and not {"meta", "entries", "nodes", "checkpoints"} <= tables:
            # An existing file with no ledger schema (emptied, or another database) is damage or a mistake to
            # report, not a new ledger to build: the migrations below would write a schema into it, over the
            # evidence, before any check refused it.
            db.close()
            raise LedgerIntegrityError(f"{path} is not a ledger database: it has no ledger schema (an empty or "
                                       "foreign file)", path=str(path))
        if not create:  # a schema this code does not read is refused before the pragmas below rewrite its header
            stored = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if stored is None or not readable_schema(stored[0]):
                return _checked_version(db, path, stored)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        if str(mode).lower() != "wal":
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        if MIGRATIONS.pending(db):
            conn.execute("BEGIN IMMEDIATE")
            try:
                MIGRATIONS.apply(db)  # nested in our transaction: sqlite-utils uses savepoints
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.DatabaseError as exc:
        db.close()
        raise database_error(exc, path) from None
    except UnicodeDecodeError:
        db.close()
        raise _undecodable_schema(path) from None
    return _checked_version(db, path, version)


def _undecodable_schema(path: Path) -> LedgerIntegrityError:
    # SQLite's message about a damaged schema quotes the damaged bytes; Python's sqlite3 then fails to decode
    # the message itself and raises UnicodeDecodeError instead of an sqlite3 error. The schema is read on a
    # connection's first statement, which is here: every later query of the file sees the same schema.
    return LedgerIntegrityError(f"{path}: not a readable ledger database (its schema is damaged: SQLite's "
                                "message about it is not even text)", path=str(path))


def readable_schema(version: object, newest: int = SCHEMA_VERSION) -> bool:
    """Whether a stored ``schema_version`` is one this code reads: a decimal number (ASCII digits: whoever holds
    the database may write anything there) from 1 to ``newest`` (:data:`SCHEMA_VERSION` for a SQLite file)."""
    return isinstance(version, str) and len(version) <= 9 and ASCII_DIGITS.fullmatch(version) is not None \
        and 1 <= int(version) <= newest  # (the length first: int() of thousands of digits is refused, a trace)


def _checked_version(db: Database, path: Path, version: tuple[str] | None) -> Database:
    if version is None or not readable_schema(version[0]):
        db.close()
        raise LedgerUsageError(
            f"{path} has ledger schema {str(version[0])[:20] if version else '?'}; this heldout reads up to "
            f"{SCHEMA_VERSION}", path=str(path), expected=SCHEMA_VERSION,
            found=str(version[0])[:20] if version else None)
    return db
