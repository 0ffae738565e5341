"""Named attacks on the ledger, each against the operator's database and/or a public export: tampered entry
bytes, reordered entries, a truncated ledger, a replaced checkpoint signature, rollback, fork, the wrong key,
an entry over 64 KiB, malformed JSON, an unknown entry type. Each must be refused with exit code 1 (tampered
data) or 2 (a refused request, nothing written)."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from heldout.cli import app
from keys import HeldoutError, note_key_hash
from ledger import (
    MAX_ENTRY_BYTES,
    CheckpointClient,
    EntryRejected,
    ForkError,
    Ledger,
    LedgerBackend,
    LedgerIntegrityError,
    LedgerKeyError,
    RollbackError,
    export_ledger,
    open_export,
    sign_checkpoint,
)
from ledger.entries import blob_references
from ledger.postgres import PostgresStorage
from seals import canonical_bytes
from tests.conftest import seeded_signer
from tests.test_ledger_support import (
    T0,
    bundle_entry,
    ledger_signer,
    new_ledger,
    refusal_alike_with_and_without_workers,
    retire_entry,
)

SIZE = 9  # genesis + 8 entries


@pytest.fixture
def ledger(ledger_backend: LedgerBackend) -> Iterator[Ledger]:
    """The attacked ledger, on SQLite (in tmp_path/ledgers, as in a store) and on PostgreSQL."""
    with new_ledger(ledger_backend, entries=SIZE - 1, batch=3) as opened:
        yield opened


@pytest.fixture
def exported(ledger: Ledger, tmp_path: Path) -> Path:
    export_ledger(ledger, tmp_path / "export")
    return tmp_path / "export"


def lines_of(folder: Path) -> list[bytes]:
    return (folder / "entries.jsonl").read_bytes().split(b"\n")[:-1]


def write_lines(folder: Path, lines: list[bytes]) -> None:
    (folder / "entries.jsonl").write_bytes(b"".join(line + b"\n" for line in lines))


def refused(folder: Path, match: str) -> LedgerIntegrityError:
    with pytest.raises(LedgerIntegrityError, match=match) as caught:
        open_export(folder).verify()
    assert caught.value.exit_code == 1
    return caught.value


def tamper_database(ledger: Ledger, *statements: str) -> None:
    """What someone with write access to the file (or the database's administrator) can do once the
    triggers are out of the way."""
    if ledger.path is None:
        tamper_postgres(ledger, *statements)
        return
    conn = sqlite3.connect(ledger.path, isolation_level=None)
    for trigger in ("entries_no_update", "entries_no_delete", "checkpoints_no_update", "checkpoints_no_delete",
                    "entries_next_index", "nodes_no_delete", "nodes_no_update"):
        conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    for statement in statements:
        conn.execute(statement)
    conn.close()


def tamper_postgres(ledger: Ledger, *statements: str) -> None:
    """The same statements on the ledger's PostgreSQL schema, run by its administrator with triggers off
    (``session_replication_role = replica``); SQLite's ``x'..'`` blob literals become ``bytea`` ones."""
    import psycopg

    storage = ledger.storage
    assert isinstance(storage, PostgresStorage)
    with psycopg.connect(storage.url, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")
        conn.execute(f"SET search_path = {storage.schema}")
        for statement in statements:
            conn.execute(re.sub(r"x'([0-9a-f]*)'", r"'\\x\1'::bytea", statement))


def test_attack_the_append_only_triggers_dropped(ledger: Ledger) -> None:
    """Whoever holds the database drops the triggers that refuse UPDATE and DELETE, changing nothing yet: every
    byte still replays, but the database no longer keeps the ledger append-only (red-team round 14: accepted
    by every command). ``verify`` names the missing triggers."""
    if ledger.path is None:
        import psycopg

        storage = ledger.storage
        assert isinstance(storage, PostgresStorage)
        with psycopg.connect(storage.url, autocommit=True) as conn:
            conn.execute(f"DROP TRIGGER entries_no_change ON {storage.schema}.entries")
        gone = "entries_no_change"
    else:
        conn = sqlite3.connect(ledger.path, isolation_level=None)
        conn.execute("DROP TRIGGER entries_no_update")
        conn.close()
        gone = "entries_no_update"
    with pytest.raises(LedgerIntegrityError, match=f"append-only triggers are gone or altered \\({gone} \\(gone\\)\\)"):
        ledger.verify()


_SQLITE_DEFUSINGS = {
    # the same name, guarding nothing (red-team round 15: verify checked names only)
    "a no-op of the same name": ("entries_no_update", [
        "DROP TRIGGER entries_no_update",
        "CREATE TRIGGER entries_no_update BEFORE UPDATE ON entries WHEN 0 BEGIN SELECT 1; END"]),
    "moved to another table": ("checkpoints_no_delete", [
        "DROP TRIGGER checkpoints_no_delete",
        "CREATE TRIGGER checkpoints_no_delete BEFORE DELETE ON meta "
        "BEGIN SELECT RAISE(ABORT, 'ledger checkpoints are append-only'); END"]),
    "a checkpoint check that lets a gap through": ("checkpoints_cover_entries", [
        "DROP TRIGGER checkpoints_cover_entries",
        "CREATE TRIGGER checkpoints_cover_entries BEFORE INSERT ON checkpoints "
        "WHEN NEW.size IS NOT (SELECT MAX(idx) FROM entries) + 1 "
        "BEGIN SELECT RAISE(ABORT, 'a ledger checkpoint covers exactly the entries before it, each with a "
        "32-byte leaf hash'); END"]),
}


@pytest.mark.parametrize("defusing", sorted(_SQLITE_DEFUSINGS))
def test_attack_the_append_only_triggers_defused_under_their_names(tmp_path: Path, defusing: str) -> None:
    """Whoever holds the file keeps every trigger's name but makes it guard nothing (red-team round 15:
    ``verify`` read the names alone, so these passed). A SQLite trigger is its SQL text: ``verify`` compares it
    with what the schema's migrations create. (PostgreSQL's ways: tests/test_ledger_postgres.py.)"""
    name, statements = _SQLITE_DEFUSINGS[defusing]
    with new_ledger(tmp_path, entries=5) as ledger:
        ledger.verify()
        conn = sqlite3.connect(ledger.path, isolation_level=None)
        for statement in statements:
            conn.execute(statement)
        conn.close()
        with pytest.raises(LedgerIntegrityError,
                           match=f"append-only triggers are gone or altered \\({name} \\(altered\\)\\)"):
            ledger.verify()


# --- tampered entry bytes --------------------------------------------------------------------------------------

def test_attack_tampered_entry_bytes_in_export(exported: Path) -> None:
    lines = lines_of(exported)
    lines[4] = lines[4].replace(b"model-4", b"model-X")  # still valid canonical JSON of a valid entry
    write_lines(exported, lines)
    refused(exported, "signed root does not match the entries")


def test_attack_tampered_entry_bytes_in_database(ledger: Ledger) -> None:
    forged = canonical_bytes({**bundle_entry(4), "model_id": "model-X"})
    tamper_database(ledger, f"UPDATE entries SET data = x'{forged.hex()}' WHERE idx = 4")
    with pytest.raises(LedgerIntegrityError, match="stored leaf hash does not match") as caught:
        ledger.verify()
    assert caught.value.evidence["index"] == 4


def test_attack_tampered_entry_bytes_and_leaf_hash_in_database(ledger: Ledger) -> None:
    from ledger.rfc6962 import leaf_hash

    forged = canonical_bytes({**bundle_entry(4), "model_id": "model-X"})
    tamper_database(ledger, f"UPDATE entries SET data = x'{forged.hex()}', leaf_hash = x'{leaf_hash(forged).hex()}'"
                            " WHERE idx = 4")
    with pytest.raises(LedgerIntegrityError, match="signed root does not match"):
        ledger.verify()


# --- reordered entries -----------------------------------------------------------------------------------------

def test_attack_reordered_entries_in_export(exported: Path) -> None:
    lines = lines_of(exported)
    lines[5], lines[6] = lines[6], lines[5]
    write_lines(exported, lines)
    refused(exported, "signed root does not match the entries")


def test_attack_reordered_entries_in_database(ledger: Ledger) -> None:
    five, six = ledger.entry_bytes(5), ledger.entry_bytes(6)
    tamper_database(ledger, f"UPDATE entries SET data = x'{six.hex()}' WHERE idx = 5",
                    f"UPDATE entries SET data = x'{five.hex()}' WHERE idx = 6")
    with pytest.raises(LedgerIntegrityError, match="entry 5"):
        ledger.verify()


def test_attack_genesis_moved_away_from_index_zero(exported: Path) -> None:
    lines = lines_of(exported)
    lines[0], lines[1] = lines[1], lines[0]
    write_lines(exported, lines)
    refused(exported, "entry 0")


# --- truncated ledger ------------------------------------------------------------------------------------------

def test_attack_truncated_export(exported: Path) -> None:
    write_lines(exported, lines_of(exported)[:-2])
    error = refused(exported, "truncated")
    assert error.evidence["found"] == SIZE - 2


def test_attack_truncated_database(ledger: Ledger) -> None:
    tamper_database(ledger, f"DELETE FROM entries WHERE idx >= {SIZE - 2}")
    with pytest.raises(LedgerIntegrityError, match="truncated"):
        ledger.verify()


def test_attack_truncated_export_with_its_checkpoints_is_caught_by_a_client(ledger: Ledger, exported: Path,
                                                                            tmp_path: Path) -> None:
    """Cutting the entries *and* the later checkpoints yields a consistent older ledger: only a verifier that
    remembers a later checkpoint can tell, and the rollback-proof client does."""
    client = CheckpointClient(tmp_path / "state.json", origin=ledger.origin, name=ledger.key.name,
                              key=ledger.key.public_key)
    client.update(ledger.latest_checkpoint().note)
    write_lines(exported, lines_of(exported)[:4])
    for note in (exported / "checkpoints").iterdir():
        if int(note.stem) > 4:
            note.unlink()
    manifest = json.loads((exported / "export.json").read_text())
    entries = (exported / "entries.jsonl").read_bytes()
    kept = {ref for line in entries.splitlines() for ref in blob_references(json.loads(line))}
    for blob in (exported / "blobs" / "sha256").glob("*/*"):
        if blob.name not in kept:
            blob.unlink()
    manifest.update(size=4, root=base64.b64encode(ledger.root(4)).decode(),
                    checkpoints=[c for c in manifest["checkpoints"] if c <= 4],
                    blobs=[b for b in manifest["blobs"] if b in kept],
                    missing_blobs=[b for b in manifest["missing_blobs"] if b in kept],
                    entries={**manifest["entries"], "count": 4, "sha256": hashlib.sha256(entries).hexdigest()})
    (exported / "export.json").write_bytes(canonical_bytes(manifest) + b"\n")
    assert open_export(exported).verify().size == 4  # on its own, a valid older ledger
    with pytest.raises(RollbackError):
        client.update(open_export(exported).latest_checkpoint().note)


# --- replaced checkpoint signature -----------------------------------------------------------------------------

def _replace_signature(note: str, signature_b64: str) -> str:
    head, _, _ = note.rstrip("\n").rpartition(" ")
    return f"{head} {signature_b64}\n"


def test_attack_replaced_checkpoint_signature_by_another_key(ledger: Ledger, exported: Path) -> None:
    latest = ledger.latest_checkpoint()
    impostor = seeded_signer(13, name=ledger.key.name)  # same name, other key
    forged = sign_checkpoint(ledger.origin, latest.size, latest.root, impostor)
    (exported / "checkpoints" / f"{latest.size}.note").write_text(
        _replace_signature(latest.note, forged.note.rstrip("\n").rpartition(" ")[2]))
    error = refused(exported, "not signed by the ledger key")
    assert error.evidence["checkpoint"] == latest.size


def test_attack_replaced_checkpoint_signature_bytes(ledger: Ledger, exported: Path) -> None:
    latest = ledger.latest_checkpoint()
    garbage = note_key_hash(ledger.key.name, ledger.key.public_key) + bytes(64)  # right key hash, bogus signature
    (exported / "checkpoints" / f"{latest.size}.note").write_text(
        _replace_signature(latest.note, base64.b64encode(garbage).decode()))
    refused(exported, "does not verify")


def test_attack_replaced_checkpoint_signature_in_database(ledger: Ledger) -> None:
    latest = ledger.latest_checkpoint()
    garbage = note_key_hash(ledger.key.name, ledger.key.public_key) + bytes(64)
    note = _replace_signature(latest.note, base64.b64encode(garbage).decode()).replace("'", "''")
    tamper_database(ledger, f"UPDATE checkpoints SET note = '{note}' WHERE size = {latest.size}")
    with pytest.raises(LedgerIntegrityError, match="does not verify"):
        ledger.verify()


# --- rollback and fork -----------------------------------------------------------------------------------------

def test_attack_rollback(ledger: Ledger, tmp_path: Path) -> None:
    client = CheckpointClient(tmp_path / "state.json", origin=ledger.origin, name=ledger.key.name,
                              key=ledger.key.public_key)
    client.update(ledger.latest_checkpoint().note)
    with pytest.raises(RollbackError) as caught:
        client.update(ledger.checkpoints()[1].note)
    assert caught.value.exit_code == 1 and Path(caught.value.evidence["evidence"]).is_dir()


def test_attack_fork(ledger: Ledger, tmp_path: Path) -> None:
    """The operator signs a second history from the same genesis: both the export replay (mixing notes of the
    two histories) and the client (seeing the other head) refuse it."""
    signer = ledger_signer()
    with new_ledger(tmp_path / "fork") as fork:
        assert fork.ledger_id == ledger.ledger_id
        while fork.size < ledger.size:
            fork.append(retire_entry(fork.size), signer=signer, now=T0)
        client = CheckpointClient(tmp_path / "state.json", origin=ledger.origin, name=ledger.key.name,
                                  key=ledger.key.public_key)
        client.update(ledger.checkpoints()[1].note)
        with pytest.raises(ForkError):
            client.update(fork.latest_checkpoint().note, fork.consistency_proof(ledger.checkpoints()[1].size).path)
        export_ledger(ledger, tmp_path / "export")
        fork_note = fork.latest_checkpoint()
        (tmp_path / "export" / "checkpoints" / f"{fork_note.size}.note").write_text(fork_note.note)
        refused(tmp_path / "export", "signed root does not match")


# --- wrong key -------------------------------------------------------------------------------------------------

def test_attack_wrong_key_cannot_append(ledger: Ledger) -> None:
    before = ledger.latest_checkpoint().note
    for wrong in (seeded_signer(14, name=ledger.key.name), seeded_signer(1, name="renamed", key_id="x")):
        with pytest.raises(LedgerKeyError) as caught:
            ledger.append(bundle_entry(99), signer=wrong, now=T0)
        assert caught.value.exit_code == 1
        with pytest.raises(LedgerKeyError):
            ledger.checkpoint(signer=wrong, now=T0)
    assert ledger.size == SIZE and ledger.latest_checkpoint().note == before


def test_attack_wrong_key_resigned_export(ledger: Ledger, exported: Path) -> None:
    """An attacker re-signs every checkpoint with their key: the genesis key does not verify them."""
    impostor = seeded_signer(15, name="attacker")
    for checkpoint in ledger.checkpoints():
        forged = sign_checkpoint(ledger.origin, checkpoint.size, checkpoint.root, impostor)
        (exported / "checkpoints" / f"{checkpoint.size}.note").write_text(forged.note)
    refused(exported, "not signed by the ledger key")


def test_attack_wrong_key_rebuilt_ledger(ledger: Ledger, tmp_path: Path) -> None:
    """Rebuilding the whole ledger under another genesis key gives another ledger id."""
    impostor = seeded_signer(16, name=ledger.key.name, key_id=ledger.key.key_id)
    with new_ledger(tmp_path / "rebuilt", impostor, entries=SIZE - 1, batch=3) as rebuilt:
        export_ledger(rebuilt, tmp_path / "rebuilt-export")
    with pytest.raises(LedgerIntegrityError, match="not the ledger asked for"):
        open_export(tmp_path / "rebuilt-export").verify(expected_id=ledger.ledger_id)


# --- entries that must never be appended -----------------------------------------------------------------------

def test_attack_entry_over_64_kib(ledger: Ledger) -> None:
    signer = ledger_signer()
    base = len(canonical_bytes(bundle_entry(1, pad=1))) - 1
    exact = bundle_entry(1, pad=MAX_ENTRY_BYTES - base)
    assert len(canonical_bytes(exact)) == MAX_ENTRY_BYTES
    index = ledger.append(exact, signer=signer, now=T0)  # the limit itself is allowed
    over = bundle_entry(2, pad=MAX_ENTRY_BYTES - base + 1)
    with pytest.raises(EntryRejected, match="over the 65536-byte limit") as caught:
        ledger.append(over, signer=signer, now=T0)
    assert caught.value.exit_code == 2 and ledger.size == index + 1
    with pytest.raises(EntryRejected, match="over the 65536-byte limit") as caught:  # in a batch: named by position
        ledger.append_batch([bundle_entry(3), over, bundle_entry(4)], signer=signer, now=T0)
    assert caught.value.evidence["position"] == 1 and ledger.size == index + 1


def test_attack_entry_over_64_kib_in_export(exported: Path) -> None:
    lines = lines_of(exported)
    lines.append(canonical_bytes(bundle_entry(50, pad=MAX_ENTRY_BYTES)))
    write_lines(exported, lines)
    refused(exported, "over the limit")


def test_attack_malformed_json_append(ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path  # the ledger lives in tmp_path/ledgers, as in a store, or in HELDOUT_DATABASE
    if isinstance(ledger.storage, PostgresStorage):
        monkeypatch.setenv("HELDOUT_DATABASE", ledger.storage.url)
    ledger_signer().save(tmp_path / "private" / "keys" / "ledger-op.key")
    bad = tmp_path / "bad.json"
    for content in (b'{"generation": "gen1", ', b'{"a": 1, "a": 2}', b"[1, 2]", b"\xff\xfe"):
        bad.write_bytes(content)
        result = CliRunner().invoke(app, ["ledger", "append", ledger.ledger_id, "--type", "note",
                                          "--json-file", str(bad), "--store", str(store)])
        assert result.exit_code == 2, result.output
        assert "Traceback" not in result.output
    assert ledger.size == SIZE


def test_attack_malformed_json_in_export(exported: Path) -> None:
    lines = lines_of(exported)
    lines[3] = lines[3][:-1]  # no closing brace
    write_lines(exported, lines)
    refused(exported, "entry 3")


def test_attack_non_canonical_json_in_export(exported: Path) -> None:
    lines = lines_of(exported)
    lines[3] = lines[3].replace(b'","', b'", "', 1)
    write_lines(exported, lines)
    refused(exported, "not in canonical form")


def test_attack_unknown_entry_type(ledger: Ledger) -> None:
    with pytest.raises(EntryRejected, match="unknown entry type") as caught:
        ledger.append({**retire_entry(1), "type": "backdoor"}, signer=ledger_signer(), now=T0)
    assert caught.value.exit_code == 2 and ledger.size == SIZE


def test_attack_unknown_entry_type_in_export(exported: Path) -> None:
    lines = lines_of(exported)
    lines[2] = canonical_bytes({**retire_entry(1), "type": "backdoor"})
    write_lines(exported, lines)
    refused(exported, "unknown entry type")


# --- a crafted database file: values of another type, or NULL, where the verify reads -------------------------

_LOOSE_COLUMNS = {  # table -> (columns a replay reads, the row to alter)
    "entries": (("data", "leaf_hash"), "idx = 5"),
    "nodes": (("level", "idx", "hash"), "level = 4 AND idx = 0"),
    "checkpoints": (("root", "note"), "size = 10"),  # size is the rowid: integers only, in any file
}
_LOOSE_VALUES = ("NULL", "'text'", "7", "x'00'", "'{\"type\":\"bundle\"}'")
#: What even a loose table cannot hold: NULL in a WITHOUT ROWID table's primary key.
_IMPOSSIBLE = {("nodes", "level", "NULL"), ("nodes", "idx", "NULL")}


def _loosen(conn: sqlite3.Connection, table: str) -> None:
    """Rebuild ``table`` without STRICT, NOT NULL or triggers, as a crafted file may have it (same rows)."""
    for (trigger,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        conn.execute(f"DROP TRIGGER {trigger}")
    sql = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()[0]
    loose = re.sub(r"\)\s*WITHOUT ROWID,\s*STRICT\s*$", ") WITHOUT ROWID", sql)
    loose = re.sub(r"\)\s*STRICT\s*$", ")", loose).replace("NOT NULL", "")
    loose = re.sub(r"^CREATE TABLE \S+", "CREATE TABLE loose", loose)
    conn.executescript(f"{loose}; INSERT INTO loose SELECT * FROM {table}; DROP TABLE {table}; "
                       f"ALTER TABLE loose RENAME TO {table};")


@pytest.mark.parametrize("table, column, value", [
    (table, column, value) for table, (columns, _) in _LOOSE_COLUMNS.items() for column in columns
    for value in _LOOSE_VALUES if (table, column, value) not in _IMPOSSIBLE])
def test_attack_crafted_sqlite_file_with_values_of_another_type(tmp_path: Path, table: str, column: str, value: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A SQLite file whose tables are not STRICT, holding TEXT, a number, NULL or a blob where ``ledger verify``
    reads an entry, a leaf hash, a tree node or a checkpoint: refused as a damaged ledger naming the row, with
    and without decoding workers reading the file themselves, never a crash on the value's type, and never
    taken for the value it would convert to."""
    with new_ledger(tmp_path, entries=39, batch=3) as built:  # 40 entries: stored nodes at level 4
        path = built.path
    assert path is not None
    conn = sqlite3.connect(path, isolation_level=None)
    _loosen(conn, table)
    _, where = _LOOSE_COLUMNS[table]
    assert conn.execute(f"UPDATE {table} SET {column} = {value} WHERE {where}").rowcount == 1
    conn.close()
    message, _ = refusal_alike_with_and_without_workers(path, 4, monkeypatch)
    assert message.startswith(("entry 5", "a stored tree node", "the database holds a tree node",
                               "tree nodes are missing", "checkpoint 10", "checkpoint filed under size 10")), message


@pytest.mark.parametrize("table, column", [("entries", "data"), ("entries", "leaf_hash"), ("nodes", "hash"),
                                           ("checkpoints", "root"), ("checkpoints", "note")])
def test_attack_null_where_postgresql_had_not_null(postgres_url: str, table: str, column: str) -> None:
    """The database's owner drops a NOT NULL and empties a value the verify reads: refused as a damaged ledger
    by the verify and by the reads that touch it, never a crash on the missing value."""
    with new_ledger(LedgerBackend(database=postgres_url), entries=39, batch=3) as ledger:
        _, where = _LOOSE_COLUMNS[table]
        tamper_database(ledger, f"ALTER TABLE {table} ALTER COLUMN {column} DROP NOT NULL",
                        f"UPDATE {table} SET {column} = NULL WHERE {where}")
        with pytest.raises(LedgerIntegrityError):
            ledger.verify()
        # every other read refuses what it touches (no entry, root or proof touches a checkpoint), or serves
        assert bool(_refused_reads(ledger)) == (table != "checkpoints")


def _refused_reads(opened: Ledger) -> list[str]:
    """Every entry, root and proof of ``opened`` read; the names of the reads refused with the project's error
    (any other exception fails the test that calls this)."""
    calls: list[tuple[str, Callable[[], object]]] = [("entry 5", lambda: opened.entry(5)),
                                                     ("entries", lambda: list(opened.entries()))]
    calls += [(f"inclusion {i}", lambda i=i: opened.inclusion_proof(i)) for i in range(opened.size)]
    calls += [(f"root {n}", lambda n=n: opened.root(n)) for n in range(1, opened.size + 1)]
    calls += [(f"consistency {m}", lambda m=m: opened.consistency_proof(m)) for m in range(1, opened.size)]
    refused = []
    for name, call in calls:
        try:
            call()
        except HeldoutError:
            refused.append(name)
    return refused


def test_attack_crafted_sqlite_file_read_by_proofs_and_entries(tmp_path: Path) -> None:
    """The same crafted file read by the other readers: an entry stored as TEXT, a leaf hash as TEXT and a tree
    node as NULL make ``entry``, the roots and the proofs that touch them fail as damage naming the row; no
    reader fails on a value's type, and every proof that does not touch them is still served."""
    with new_ledger(tmp_path, entries=39, batch=3) as built:
        path = built.path
    assert path is not None
    conn = sqlite3.connect(path, isolation_level=None)
    for table in ("entries", "nodes"):
        _loosen(conn, table)
    conn.execute("UPDATE entries SET data = CAST(data AS TEXT) WHERE idx = 5")
    conn.execute("UPDATE entries SET leaf_hash = 'abc' WHERE idx = 6")
    conn.execute("UPDATE nodes SET hash = NULL WHERE level = 4 AND idx = 1")
    conn.close()
    with Ledger.open(path, read_only=True) as opened:
        refused = _refused_reads(opened)
    # what touches leaf 6 or node (4, 1) is refused: the proofs in [0, 16), those from sizes up to 16, and every
    # root up to 16 (each is checked against the signed head by a consistency path through one or the other);
    # the rest is served from the stored nodes around them
    touched = {"entry 5", "entries", *(f"inclusion {i}" for i in range(16)), *(f"root {n}" for n in range(1, 17)),
               *(f"consistency {m}" for m in range(1, 17))}
    assert set(refused) == touched, sorted(set(refused) ^ touched)


# --- the operator who holds the database (red-team round 10) ------------------------------------------------------

def test_attack_a_ledger_id_that_holds_another_ledgers_rows(ledger_backend: LedgerBackend, tmp_path: Path) -> None:
    """Two ledgers in one backend, their rows swapped (SQLite files renamed, PostgreSQL schemas renamed): asked for
    A, every command answered with B's history and exit 0. The id is the genesis hash: opening A refuses."""
    first = new_ledger(ledger_backend, entries=2)
    second = new_ledger(ledger_backend, entries=1, name="other lab")
    a, b = first.ledger_id, second.ledger_id
    first.close()
    second.close()
    if ledger_backend.database is None:
        assert ledger_backend.folder is not None
        folder = ledger_backend.folder
        (folder / f"{a}.sqlite").rename(folder / "swap")
        (folder / f"{b}.sqlite").rename(folder / f"{a}.sqlite")
        (folder / "swap").rename(folder / f"{b}.sqlite")
    else:
        import psycopg

        with psycopg.connect(ledger_backend.database, autocommit=True) as conn:
            conn.execute(f"ALTER SCHEMA ledger_{a} RENAME TO swap")
            conn.execute(f"ALTER SCHEMA ledger_{b} RENAME TO ledger_{a}")
            conn.execute(f"ALTER SCHEMA swap RENAME TO ledger_{b}")
    with pytest.raises(LedgerIntegrityError, match=f"the ledger stored as {a} is ledger {b}") as caught:
        ledger_backend.open(a)
    assert caught.value.exit_code == 1


def test_attack_rows_inserted_past_the_last_checkpoint_are_never_signed(ledger: Ledger) -> None:
    """An entry row written into the database at the next index (by a role with INSERT alone, the triggers
    satisfied) was signed by the next ordinary append: a random leaf hash under a signed root, or an entry dated
    2020 that the append itself refuses. Entries past the last checkpoint are refused by every writer."""
    data = canonical_bytes(bundle_entry(99))
    tamper_database(ledger, f"INSERT INTO entries (idx, type, data, leaf_hash, created_utc) VALUES ({SIZE}, 'bundle', "
                            f"x'{data.hex()}', x'{'ab' * 32}', '2020-01-01T00:00:00Z')")
    signer = ledger_signer()
    for write in (lambda: ledger.append(bundle_entry(100), signer=signer, now=T0),
                  lambda: ledger.checkpoint(signer=signer, now=T0)):
        with pytest.raises(LedgerIntegrityError, match="entries past its last signed checkpoint") as caught:
            write()
        assert caught.value.exit_code == 1
    assert ledger.latest_checkpoint().size == SIZE


def test_a_schema_version_that_is_not_a_number_is_a_usage_error(ledger: Ledger,
                                                                 ledger_backend: LedgerBackend) -> None:
    """Whoever holds the database may write anything in meta: 'abc' or '2.0' gave a traceback, where '3' gave
    "has ledger schema 3"."""
    tamper_database(ledger, "UPDATE meta SET value = '2.0' WHERE key = 'schema_version'")
    ledger.close()
    with pytest.raises(HeldoutError, match=r"has ledger schema 2\.0; this heldout reads up to") as caught:
        ledger_backend.open(ledger.ledger_id)
    assert caught.value.exit_code == 2


def test_attack_an_export_of_a_ledger_whose_stored_tree_disagrees_with_its_entries(
        ledger: Ledger, ledger_backend: LedgerBackend, tmp_path: Path) -> None:
    """A stored node changed: ``ledger verify`` said so, ``ledger export`` published a manifest root taken from
    the bad node (exit 0), and the third-party audit then blamed the export. The export publishes the root the
    entries give, and only when it is the signed one: here it is (the entries are intact), and the export
    verifies; with an entry rewritten (its leaf hash too), nothing is published."""
    ledger.append_batch([bundle_entry(i) for i in range(20, 40)], signer=ledger_signer(), now=T0)
    tamper_database(ledger, f"UPDATE nodes SET hash = x'{'cd' * 32}' WHERE level = 4 AND idx = 0")
    ledger.close()
    with ledger_backend.open(ledger.ledger_id) as damaged:
        export_ledger(damaged, tmp_path / "export")
        assert open_export(tmp_path / "export").verify().root == damaged.latest_checkpoint().root
        data = canonical_bytes(bundle_entry(77))
        leaf = hashlib.sha256(bytes(1) + data).hexdigest()  # RFC 6962: H(0x00 || entry)
        tamper_database(damaged, f"UPDATE entries SET data = x'{data.hex()}', leaf_hash = x'{leaf}' WHERE idx = 3")
    with ledger_backend.open(ledger.ledger_id) as rewritten, \
            pytest.raises(LedgerIntegrityError, match="nothing was published"):
        export_ledger(rewritten, tmp_path / "second")
    assert not (tmp_path / "second").exists()


def test_attack_tiles_republished_over_a_checkpoint_the_ledger_re_signed(ledger: Ledger,
                                                                         tmp_path: Path) -> None:
    """An entry rewritten and its checkpoint re-signed under the same key, the stored hashes left: ``ledger
    tiles`` compared the stored tree with the published checkpoint, found them equal, and rewrote the folder's
    checkpoint with the new root (exit 0). The ledger's own signed checkpoint of the published size decides."""
    from ledger.tiles import write_tiles

    out = tmp_path / "tiles"
    write_tiles(ledger, out)
    published = ledger.latest_checkpoint()
    forged = sign_checkpoint(ledger.origin, published.size, b"\x07" * 32, ledger_signer(),
                             created_utc=published.created_utc)
    tamper_database(ledger, f"UPDATE checkpoints SET root = x'{forged.root.hex()}', note = "
                            f"'{forged.note}' WHERE size = {published.size}")
    # (the ledger's own root check refuses first: its stored tree disagrees with the re-signed checkpoint)
    with pytest.raises(LedgerIntegrityError, match="publishes a history this ledger does not extend|stored tree "
                       f"disagrees with signed checkpoint {published.size} at size {published.size}"):
        write_tiles(ledger, out)
