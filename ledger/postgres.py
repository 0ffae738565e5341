"""The PostgreSQL backend (psycopg 3): each ledger is one schema ``ledger_<ledger id>`` of a database, holding
the same five tables as a SQLite ledger file (``ledger.db``) with the same append-only rules, enforced by the
server (contract: ``ledger.storage``).

Append-only, twice over:

* triggers on every table refuse UPDATE, DELETE and TRUNCATE, an entry at any index but the next, a tree node
  below the stored levels or of the wrong length, a checkpoint that does not grow or runs past the entries,
  and a cosignature on a size without a checkpoint;
* the role ``heldout_writer`` (NOLOGIN; made if missing when a ledger is created) holds only USAGE on the
  schema and SELECT and INSERT on its tables. Operators append through a login role that is a member of it
  (``CREATE ROLE app LOGIN IN ROLE heldout_writer``); only the schema's owner (the role that ran ``heldout
  init``) could drop a trigger, and that is the dishonest-operator case witnesses and audits exist for.

Appends serialize across processes and hosts on a transaction-scoped advisory lock keyed by the ledger id
(``pg_advisory_xact_lock``, open to any role, released by the commit), taken before the size is read, so the
``expected_size`` compare-and-swap holds; the commit (``synchronous_commit`` on, the server's default) is the
acknowledgement. Reads use autocommit statements, or one REPEATABLE READ transaction for a whole replay or
export. The operation lock (seal and retire) is a session-scoped advisory lock with a second key.

A database URL never carries a password here (``database_url`` refuses one): libpq takes it from
``~/.pgpass`` / ``PGPASSFILE``, a service file (``?service=``), ``PGPASSWORD``, or the server's peer/cert
authentication, so no file heldout writes ever holds it.
"""

from __future__ import annotations

import itertools
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.db import MIN_NODE_LEVEL, readable_schema
from ledger.entries import is_ledger_id, is_ledger_prefix
from ledger.errors import LedgerError, LedgerIntegrityError, LedgerStorageError, LedgerUsageError
from ledger.storage import NODE_ORDER, CheckpointRow, CosignatureRow, EntryRow, Fill, checkpoint_row, stored_hashes

WRITER_ROLE = "heldout_writer"
#: The PostgreSQL schema's version: 2, the tables and rules of SQLite's schema 2. (SQLite's schema 3 moved the
#: entries' index check to the checkpoint, to save a trigger program per row; here the row triggers stay.)
SCHEMA_VERSION = 2
SCHEMA_PREFIX = "ledger_"
URL_SCHEMES = ("postgresql", "postgres")
#: How long an append waits for another writer's transaction before giving up (as SQLite's busy timeout).
LOCK_TIMEOUT = "120s"
_CURSOR_NUMBERS = itertools.count()
_TABLES = ("meta", "entries", "nodes", "checkpoints", "cosignatures")
# pg_trigger.tgtype bits (PostgreSQL's catalog/pg_trigger.h): fires per row, BEFORE, and on which events.
_ROW, _BEFORE, _INSERT, _DELETE, _UPDATE, _TRUNCATE = 1, 2, 4, 8, 16, 32
_EVENTS = ((_INSERT, "INSERT"), (_UPDATE, "UPDATE"), (_DELETE, "DELETE"), (_TRUNCATE, "TRUNCATE"))


@dataclass(frozen=True)
class _Guard:
    """One append-only trigger as the schema creates it: on ``table``, of kind ``tgtype``, executing the PL/pgSQL
    function ``function`` of the ledger's schema, whose source is ``body``. What ``ledger verify`` requires the
    database to still hold, enabled and unconditional."""

    table: str
    trigger: str
    tgtype: int
    function: str
    body: str

    def create_trigger(self, schema: str) -> str:
        events = " OR ".join(name for bit, name in _EVENTS if self.tgtype & bit)
        level = "ROW" if self.tgtype & _ROW else "STATEMENT"
        return (f"CREATE TRIGGER {self.trigger} BEFORE {events} ON {schema}.{self.table} FOR EACH {level} "
                f"EXECUTE FUNCTION {schema}.{self.function}()")


def _guards(s: str) -> list[_Guard]:
    """Every append-only trigger of the ledger schema ``s``: an insert check per table but meta (the next index
    only, a node once, checkpoints that grow, cosignatures on checkpoints) and, on every table, a refusal of
    UPDATE, DELETE and TRUNCATE (even by the owner)."""
    refuse = (" BEGIN RAISE EXCEPTION 'ledger % are append-only', TG_TABLE_NAME USING ERRCODE = '23000'; "
              "END ")
    checks = {
        "entries": ("NEW.idx IS DISTINCT FROM COALESCE((SELECT MAX(idx) FROM {s}.entries), -1) + 1 "
                    "OR length(NEW.leaf_hash) <> 32", "ledger entries are appended at the next index only"),
        "nodes": (f"length(NEW.hash) <> 32 OR NEW.level < {MIN_NODE_LEVEL}", "ledger tree nodes are written once"),
        "checkpoints": ("NEW.size <= COALESCE((SELECT MAX(size) FROM {s}.checkpoints), 0) "
                        "OR NEW.size > COALESCE((SELECT MAX(idx) FROM {s}.entries), -1) + 1 "
                        "OR length(NEW.root) <> 32",
                        "ledger checkpoints only grow, one per size, never past the entries"),
        "cosignatures": ("NOT EXISTS (SELECT 1 FROM {s}.checkpoints WHERE size = NEW.size)",
                         "a cosignature is on a signed checkpoint of the ledger"),
    }
    guards = [_Guard(table, f"{table}_insert_check", _ROW | _BEFORE | _INSERT, f"{table}_insert_check",
                     f" BEGIN IF {condition.replace('{s}', s)} THEN RAISE EXCEPTION '{message}' USING ERRCODE = "
                     "'23000'; END IF; RETURN NEW; END ")
              for table, (condition, message) in checks.items()]
    for table in _TABLES:
        guards += [_Guard(table, f"{table}_no_change", _ROW | _BEFORE | _UPDATE | _DELETE, "refuse_change", refuse),
                   _Guard(table, f"{table}_no_truncate", _BEFORE | _TRUNCATE, "refuse_change", refuse)]
    return guards


def is_database_url(text: str) -> bool:
    try:
        return urllib.parse.urlsplit(text).scheme in URL_SCHEMES
    except ValueError:  # a malformed URL with a database scheme is still one: database_url says what is wrong
        return text.strip().partition(":")[0].lower() in URL_SCHEMES


def _split(text: str, what: str) -> urllib.parse.SplitResult:
    """``urlsplit``, its ValueError (an unclosed ``[`` IPv6 host, a bracketed host that is no address, ...) as a
    usage error that names ``what`` and never echoes the URL (it could hold a password)."""
    try:
        return urllib.parse.urlsplit(text)
    except ValueError as exc:
        reason = str(exc) if "'" not in str(exc) else "its host cannot be parsed"  # (a quote: an echo of the URL)
        raise LedgerUsageError(f"{what} is a malformed URL: {reason}", field=what) from None


def database_url(text: str, *, what: str = "the ledger database URL") -> str:
    """``text`` checked as a PostgreSQL URL that names no password (a usage error otherwise, naming ``what``:
    the option or variable it came from)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # bytes a non-UTF-8 environment gave (surrogate escapes): libpq takes UTF-8 only
        raise LedgerUsageError(f"{what} is not UTF-8 text", field=what) from None
    parts = _split(text.strip(), what)
    if parts.scheme not in URL_SCHEMES:
        raise LedgerUsageError(f"{what} is not a postgresql:// URL", found=display_url(text)[:80])
    query = urllib.parse.parse_qs(parts.query)
    if parts.password is not None or "password" in query:
        raise LedgerUsageError(f"{what} holds a password; give it through ~/.pgpass, PGPASSFILE, a "
                               "service file or PGPASSWORD instead (heldout never writes one to a file)",
                               found=display_url(text))
    return text.strip()


def display_url(text: str) -> str:
    """The URL with any password (in the authority or a ``password=`` parameter) replaced by ``***``; a URL
    that cannot be parsed is not shown at all."""
    try:
        parts = urllib.parse.urlsplit(text)
    except ValueError:
        return "(a malformed URL)"
    if parts.password is not None:
        parts = parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@"))
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    if any(key == "password" for key, _ in query):
        masked = [(key, "***" if key == "password" else value) for key, value in query]
        parts = parts._replace(query=urllib.parse.urlencode(masked, safe="/*"))
    shown = urllib.parse.urlunsplit(parts)
    if not parts.netloc and text.strip().startswith(f"{parts.scheme}://"):
        # a socket URL (postgresql:///db?host=/run/...): urlunsplit drops the empty authority's "//", and
        # "postgresql:/db" is no URL libpq reads
        shown = f"{parts.scheme}://{shown[len(parts.scheme) + 1:]}"
    return shown


def schema_of(ledger_id: str) -> str:
    if not is_ledger_id(ledger_id):
        raise LedgerUsageError("a ledger id is 20 lowercase hex characters", found=ledger_id[:80])
    return SCHEMA_PREFIX + ledger_id


def _lock_keys(ledger_id: str) -> tuple[int, int]:
    """Advisory lock keys of a ledger: the append lock and the operation lock (60 bits of the id each)."""
    base = int(ledger_id[:15], 16)
    return base, base ^ (1 << 62)


#: Seconds to wait for a server to answer a connection (unless the URL sets ``connect_timeout``): a listener that
#: accepts and never answers held every command for ever.
CONNECT_TIMEOUT_S = 10


def _connect(url: str) -> Any:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    try:
        options: dict[str, Any] = {} if "connect_timeout" in conninfo_to_dict(database_url(url)) else {
            "connect_timeout": CONNECT_TIMEOUT_S}
        conn = psycopg.connect(database_url(url), autocommit=True, **options)
    except psycopg.Error as exc:
        raise LedgerStorageError(f"cannot connect to the ledger database {display_url(url)}: "
                               f"{str(exc).strip().splitlines()[0] if str(exc).strip() else exc}",
                               database=display_url(url)) from None
    conn.execute(f"SET lock_timeout = '{LOCK_TIMEOUT}'")
    return conn


def server_error(exc: BaseException) -> LedgerError:
    """The project's error for a psycopg error that escaped a command: the server refusing data (a trigger, a
    constraint) is an integrity failure (exit 1); anything else (connection lost, server down, privileges,
    timeouts) is the environment (exit 2)."""
    import psycopg

    words = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, (psycopg.errors.IntegrityError, psycopg.errors.RaiseException, psycopg.DataError)):
        return LedgerIntegrityError(f"the ledger database refused the data: {words}")
    return LedgerStorageError(f"the ledger database cannot be used: {words}")


# The columns are typed, but NOT NULL can be dropped by the database's owner: a missing value reads as empty,
# which fails the replay's checks at its row (instead of failing the replay with a type error).
_HASH = "coalesce(hash, ''::bytea)"
_DATA = "coalesce(data, ''::bytea)"
_LEAF = "coalesce(leaf_hash, ''::bytea)"
_CHECKPOINT_COLUMNS = "SELECT size, coalesce(root, ''::bytea), coalesce(note, ''), coalesce(created_utc, '')"


class PostgresStorage:
    """The rows of one ledger schema (see ``ledger.storage.LedgerStorage``)."""

    min_stored_level = MIN_NODE_LEVEL

    def __init__(self, conn: Any, url: str, ledger_id: str) -> None:
        self.conn = conn
        self.url = url
        self.ledger_id = ledger_id
        self.schema = schema_of(ledger_id)
        self.path: Path | None = None
        self.location = f"{display_url(url)}#{self.schema}"
        self.append_lock_key, self._operation_key = _lock_keys(ledger_id)

    def _q(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> Any:
        return self.conn.execute(sql.replace("{s}", self.schema), params)

    # the tree's node source ------------------------------------------------------------------------------
    def tree_size(self) -> int:
        row = self._q("SELECT MAX(idx) FROM {s}.entries").fetchone()
        return 0 if row[0] is None else int(row[0]) + 1

    def node(self, level: int, index: int) -> bytes:
        if level == 0:
            row = self._q(f"SELECT {_LEAF} FROM {{s}}.entries WHERE idx = %s", (index,)).fetchone()
        else:
            row = self._q(f"SELECT {_HASH} FROM {{s}}.nodes WHERE level = %s AND idx = %s", (level, index)).fetchone()
        if row is None:
            raise LedgerIntegrityError("a tree node is missing from the ledger database", level=level, index=index)
        return stored_hashes([bytes(row[0])], level=level, index=index)[0]

    def leaf_range(self, offset: int, width: int) -> list[bytes]:
        rows = self._q(f"SELECT {_LEAF} FROM {{s}}.entries WHERE idx >= %s AND idx < %s ORDER BY idx",
                       (offset, offset + width)).fetchall()
        if len(rows) != width:
            raise LedgerIntegrityError("leaf hashes are missing from the ledger database", index=offset)
        return stored_hashes([bytes(r[0]) for r in rows], index=offset)

    # reading ---------------------------------------------------------------------------------------------
    def meta(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in self._q("SELECT key, value FROM {s}.meta").fetchall()}

    def broken_guards(self) -> list[str]:
        """The append-only triggers of the schema (:func:`_guards`) that the database no longer has as created:
        gone, disabled (``ALTER TABLE ... DISABLE TRIGGER``, or firing only for replicas), made conditional or
        column-bound, on other events, or executing another function or a function rewritten (``CREATE OR
        REPLACE FUNCTION`` with a body that lets everything through); and a role or database set to skip
        triggers altogether (``session_replication_role``), which only a superuser can set."""
        rows = self.conn.execute(
            "SELECT c.relname, t.tgname, t.tgenabled::text, t.tgtype, t.tgqual IS NULL, t.tgattr::text, "
            "pn.nspname, p.proname, l.lanname, p.prosrc "
            "FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
            "JOIN pg_proc p ON p.oid = t.tgfoid JOIN pg_namespace pn ON pn.oid = p.pronamespace "
            "JOIN pg_language l ON l.oid = p.prolang WHERE n.nspname = %s AND NOT t.tgisinternal",
            (self.schema,)).fetchall()
        present = {(str(row[0]), str(row[1])): row[2:] for row in rows}
        broken = []
        for guard in _guards(self.schema):
            found = present.get((guard.table, guard.trigger))
            if found is None:
                broken.append(f"{guard.trigger} (gone)")
                continue
            enabled, tgtype, unconditional, columns, namespace, function, language, body = found
            if enabled not in ("O", "A"):
                broken.append(f"{guard.trigger} (disabled)")
            elif tgtype != guard.tgtype or not unconditional or columns:
                broken.append(f"{guard.trigger} (altered)")
            elif (namespace, function) != (self.schema, guard.function):
                broken.append(f"{guard.trigger} (executes {namespace}.{function}, not {self.schema}.{guard.function})")
            elif (language, body) != ("plpgsql", guard.body):
                broken.append(f"{guard.trigger} (its function {namespace}.{function} altered)")
        skipping = self.conn.execute(
            "SELECT count(*) FROM pg_db_role_setting WHERE setdatabase IN (0, (SELECT oid FROM pg_database WHERE "
            "datname = current_database())) AND array_to_string(setconfig, ',') LIKE '%%session_replication_role%%'"
        ).fetchone()
        if skipping and skipping[0]:
            broken.append("all (a role or the database sets session_replication_role)")
        return broken

    def entry_data(self, index: int) -> bytes | None:
        row = self._q(f"SELECT {_DATA} FROM {{s}}.entries WHERE idx = %s", (index,)).fetchone()
        return None if row is None else bytes(row[0])

    def entry_time(self, index: int) -> str | None:
        row = self._q("SELECT coalesce(created_utc, '') FROM {s}.entries WHERE idx = %s", (index,)).fetchone()
        return None if row is None else str(row[0])

    def last_entry(self) -> tuple[int, bytes] | None:
        row = self._q(f"SELECT idx, {_DATA} FROM {{s}}.entries ORDER BY idx DESC LIMIT 1").fetchone()
        return None if row is None else (int(row[0]), bytes(row[1]))

    def _stream(self, sql: str, params: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
        """Rows of a large result without holding them all (a server-side cursor inside a transaction)."""
        with self.snapshot():
            cursor = self.conn.cursor(name=f"stream_{next(_CURSOR_NUMBERS)}")
            try:
                cursor.itersize = 2000
                cursor.execute(sql.replace("{s}", self.schema), params)
                yield from cursor
            finally:
                # A stream abandoned by an exception lives on in its traceback and is closed by the garbage
                # collector whenever it runs: in the middle of another statement on this connection, whose lock
                # closing would wait for, for good (a hung test, red-team round 19's CI). Then it is left to
                # the server, which drops the cursor at its transaction's end.
                lock = getattr(self.conn, "lock", None)
                if lock is None or not lock.locked():
                    cursor.close()

    def entries_bytes(self, start: int, stop: int) -> Iterator[tuple[int, bytes]]:
        for index, data in self._stream(f"SELECT idx, {_DATA} FROM {{s}}.entries WHERE idx >= %s AND idx < %s "
                                        "ORDER BY idx", (start, stop)):
            yield int(index), bytes(data)

    def entry_rows(self, start: int, stop: int) -> Iterator[EntryRow]:
        for index, kind, data, leaf, created in self._stream(
                f"SELECT idx, coalesce(type, ''), {_DATA}, {_LEAF}, coalesce(created_utc, '') FROM {{s}}.entries "
                "WHERE idx >= %s AND idx < %s ORDER BY idx", (start, stop)):
            yield int(index), str(kind), bytes(data), bytes(leaf), str(created)

    def data_and_leaves(self) -> Iterator[tuple[bytes, bytes]]:
        for data, leaf in self._stream(f"SELECT {_DATA}, {_LEAF} FROM {{s}}.entries ORDER BY idx"):
            yield bytes(data), bytes(leaf)

    def entry_ranges(self) -> None:
        # Workers would each need a connection to the server and the same snapshot (an exported snapshot in a
        # repeatable-read transaction); not done: the replay streams the entries to them.
        return None

    def stored_nodes(self) -> Iterator[tuple[int, int, bytes]]:
        for level, index, digest in self._stream(f"SELECT level, idx, {_HASH} FROM {{s}}.nodes ORDER BY {NODE_ORDER}"):
            yield int(level), int(index), bytes(digest)

    def checkpoint_rows(self) -> Iterator[CheckpointRow]:
        for row in self._stream(_CHECKPOINT_COLUMNS + " FROM {s}.checkpoints ORDER BY size"):
            checkpoint = checkpoint_row(row)
            assert checkpoint is not None
            yield checkpoint

    def checkpoint_row(self, size: int) -> CheckpointRow | None:
        return checkpoint_row(self._q(
            _CHECKPOINT_COLUMNS + " FROM {s}.checkpoints WHERE size = %s", (size,)).fetchone())

    def latest_checkpoint_row(self) -> CheckpointRow | None:
        return checkpoint_row(self._q(
            _CHECKPOINT_COLUMNS + " FROM {s}.checkpoints ORDER BY size DESC LIMIT 1").fetchone())

    def cosignature_lines(self, size: int) -> list[str]:
        rows = self._q("SELECT line FROM {s}.cosignatures WHERE size = %s ORDER BY witness, key_id, timestamp",
                       (size,)).fetchall()
        return [str(row[0]) for row in rows]

    def cosignature_rows(self) -> Iterator[CosignatureRow]:
        for a, b, c, d, e, f, g in self._stream("SELECT size, witness, key_id, timestamp, line, vkey, received_utc "
                                                "FROM {s}.cosignatures ORDER BY size, witness, key_id, timestamp"):
            yield int(a), str(b), str(c), int(d), str(e), str(f), str(g)

    def witness_sizes(self) -> dict[str, int]:
        rows = self._q("SELECT vkey, MAX(size) FROM {s}.cosignatures GROUP BY vkey").fetchall()
        return {str(vkey): int(size) for vkey, size in rows}

    def witness_latest_timestamps(self) -> dict[str, int]:
        rows = self._q("SELECT vkey, MAX(timestamp) FROM {s}.cosignatures GROUP BY vkey").fetchall()
        return {str(vkey): int(stamp) for vkey, stamp in rows}

    def latest_cosignature_timestamp(self, limit: int) -> int | None:
        row = self._q("SELECT MAX(timestamp) FROM {s}.cosignatures WHERE size <= %s", (limit,)).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    # transactions ----------------------------------------------------------------------------------------
    @contextmanager
    def write(self, *, durable: bool = True) -> Iterator[None]:
        import psycopg

        try:
            with self.conn.transaction():
                if not durable:  # this transaction only: a lost cosignature costs a ``witness sync``
                    self.conn.execute("SET LOCAL synchronous_commit = off")
                self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (self.append_lock_key,))
                yield
        except psycopg.errors.LockNotAvailable as exc:
            raise LedgerUsageError(f"the ledger is busy ({str(exc).strip()}); try again",
                                   path=self.location) from None
        except psycopg.errors.InsufficientPrivilege as exc:
            raise LedgerUsageError(f"the database role may not write this ledger: {str(exc).strip()}",
                                   path=self.location) from None
        except (psycopg.errors.IntegrityError, psycopg.errors.RaiseException) as exc:
            raise LedgerIntegrityError(f"the ledger database refused the write: {str(exc).strip()}",
                                       path=self.location) from None

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        from psycopg.pq import TransactionStatus

        if self.conn.info.transaction_status != TransactionStatus.IDLE:
            yield
            return
        with self.conn.transaction():
            self.conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield

    @contextmanager
    def operation_lock(self) -> Iterator[None]:
        self.conn.execute("SELECT pg_advisory_lock(%s)", (self._operation_key,))
        try:
            yield
        finally:
            self.conn.execute("SELECT pg_advisory_unlock(%s)", (self._operation_key,))

    # writing ---------------------------------------------------------------------------------------------
    def _many(self, sql: str, rows: list[Any]) -> None:
        if rows:
            with self.conn.cursor() as cursor:
                cursor.executemany(sql.replace("{s}", self.schema), rows)

    def insert_meta(self, rows: list[tuple[str, str]]) -> None:
        self._many("INSERT INTO {s}.meta (key, value) VALUES (%s, %s)", rows)

    def insert_entries(self, rows: list[EntryRow]) -> None:
        self._many("INSERT INTO {s}.entries (idx, type, data, leaf_hash, created_utc) VALUES (%s, %s, %s, %s, %s)",
                   rows)

    def insert_nodes(self, nodes: list[tuple[int, int, bytes]]) -> None:
        self._many("INSERT INTO {s}.nodes (level, idx, hash) VALUES (%s, %s, %s)", nodes)

    def insert_checkpoint(self, row: CheckpointRow) -> None:
        self._q("INSERT INTO {s}.checkpoints (size, root, note, created_utc) VALUES (%s, %s, %s, %s)", row)

    def insert_cosignatures(self, rows: list[CosignatureRow]) -> int:
        added = 0
        for row in rows:
            added += self._q("INSERT INTO {s}.cosignatures (size, witness, key_id, timestamp, line, vkey, "
                             "received_utc) VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                             row).rowcount
        return added

    def close(self) -> None:
        self.conn.close()


def _schema_sql(schema: str) -> list[str]:
    """The DDL of one ledger schema: tables, append-only triggers, the writer role's grants."""
    s = schema
    guards = _guards(s)
    statements = [
        f"CREATE SCHEMA {s}",
        f"CREATE TABLE {s}.meta (key text PRIMARY KEY, value text NOT NULL)",
        f"CREATE TABLE {s}.entries (idx bigint PRIMARY KEY, type text NOT NULL, data bytea NOT NULL, "
        "leaf_hash bytea NOT NULL, created_utc text NOT NULL)",
        f"CREATE TABLE {s}.nodes (level integer NOT NULL, idx bigint NOT NULL, hash bytea NOT NULL, "
        "PRIMARY KEY (level, idx))",
        f"CREATE TABLE {s}.checkpoints (size bigint PRIMARY KEY, root bytea NOT NULL, note text NOT NULL, "
        "created_utc text NOT NULL)",
        f"CREATE TABLE {s}.cosignatures (size bigint NOT NULL, witness text NOT NULL, key_id text NOT NULL, "
        "timestamp bigint NOT NULL, line text NOT NULL, vkey text NOT NULL, received_utc text NOT NULL, "
        "PRIMARY KEY (size, witness, key_id, timestamp))",
    ]
    functions = {guard.function: guard.body for guard in guards}
    statements += [f"CREATE FUNCTION {s}.{name}() RETURNS trigger LANGUAGE plpgsql AS $${body}$$"
                   for name, body in functions.items()]
    statements += [guard.create_trigger(s) for guard in guards]
    statements += [
        "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '" + WRITER_ROLE + "') THEN "
        f"CREATE ROLE {WRITER_ROLE} NOLOGIN; END IF; END $$",
        f"REVOKE ALL ON SCHEMA {s} FROM PUBLIC",
        f"GRANT USAGE ON SCHEMA {s} TO {WRITER_ROLE}",
        f"GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA {s} TO {WRITER_ROLE}",
        f"INSERT INTO {s}.meta (key, value) VALUES ('schema_version', '{SCHEMA_VERSION}'), "
        f"('min_node_level', '{MIN_NODE_LEVEL}')",
    ]
    return statements


def _schemas(conn: Any) -> list[str]:
    rows = conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE %s ORDER BY nspname",
                        (SCHEMA_PREFIX + "%",)).fetchall()
    return [str(r[0])[len(SCHEMA_PREFIX):] for r in rows if is_ledger_id(str(r[0])[len(SCHEMA_PREFIX):])]


def list_ids(url: str) -> list[str]:
    conn = _connect(url)
    try:
        return _schemas(conn)
    finally:
        conn.close()


def locate(url: str, ledger_id_or_prefix: str) -> str:
    """The id of the one ledger in the database that ``ledger_id_or_prefix`` names."""
    text = ledger_id_or_prefix.strip()
    if not is_ledger_prefix(text):
        raise LedgerUsageError("a ledger is named by its id (20 lowercase hex characters) or a prefix of it",
                               found=ledger_id_or_prefix[:80])
    found = [i for i in list_ids(url) if i.startswith(text)]
    where = display_url(url)
    if not found:
        raise LedgerUsageError(f"no ledger {text!r} in {where}", database=where, found=text)
    if len(found) > 1:
        raise LedgerUsageError(f"{text!r} names {len(found)} ledgers in {where}; give more of the id", found=found)
    return found[0]


def open_storage(url: str, ledger_id: str, *, read_only: bool = False) -> PostgresStorage:
    """The rows of ``ledger_id`` in the database; ``read_only``: the session refuses every write."""
    conn = _connect(url)
    try:
        if read_only:
            conn.execute("SET default_transaction_read_only = on")
        if ledger_id not in _schemas(conn):
            raise LedgerUsageError(f"no ledger {ledger_id} in {display_url(url)}", database=display_url(url),
                                   found=ledger_id)
        storage = PostgresStorage(conn, url, ledger_id)
        version = storage.meta().get("schema_version")
    except BaseException:
        conn.close()
        raise
    if not readable_schema(version, SCHEMA_VERSION):
        conn.close()
        shown = str(version)[:20] if version is not None else "?"
        raise LedgerUsageError(f"{storage.location} has ledger schema {shown}; this heldout reads up to "
                               f"{SCHEMA_VERSION}", expected=SCHEMA_VERSION, found=shown)
    return storage


def create_storage(url: str, ledger_id: str, fill: Fill) -> PostgresStorage:
    """Create the schema of ``ledger_id`` with what ``fill`` inserts, in one transaction (the ledger appears
    complete or not at all); refused when the database holds that ledger already."""
    import psycopg

    conn = _connect(url)
    storage = PostgresStorage(conn, url, ledger_id)
    try:
        with conn.transaction():
            if ledger_id in _schemas(conn):
                raise LedgerUsageError(f"a ledger {ledger_id} already exists in {display_url(url)}",
                                       database=display_url(url), found=ledger_id)
            for statement in _schema_sql(storage.schema):
                conn.execute(statement)
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (storage.append_lock_key,))
            fill(storage)
    except psycopg.Error as exc:
        conn.close()
        raise LedgerUsageError(f"cannot create the ledger in {display_url(url)}: {str(exc).strip()}",
                               database=display_url(url)) from None
    except BaseException:
        conn.close()
        raise
    return storage

