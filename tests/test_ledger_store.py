"""The Ledger API and its SQLite file: creation, genesis, reading, appending, on-demand checkpoints, the
append-only rules enforced by the database itself, schema migrations, durability pragmas, and blobs. Tests
taking ``ledger_backend`` run on SQLite and on PostgreSQL (tests/test_ledger_postgres.py has the server's own
rules)."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from keys import UsageError
from ledger import (
    BlobMissing,
    BlobStore,
    CheckpointError,
    EntryRejected,
    Ledger,
    LedgerBackend,
    LedgerIntegrityError,
    LedgerUsageError,
    ledger_id_of,
    verify_checkpoint,
)
from ledger.db import guard_definitions
from ledger.errors import EntryAfterNow, TimeRegression
from ledger.rfc6962 import leaf_hash
from seals import canonical_bytes, parse_utc
from tests.test_ledger_attacks import tamper_database
from tests.test_ledger_support import T0, bundle_entry, ledger_signer, new_ledger, retire_entry


def raw(ledger: Ledger) -> sqlite3.Connection:
    """A second, plain connection to the ledger file: what someone with file access could do."""
    return sqlite3.connect(ledger.path, isolation_level=None)


def test_create_writes_genesis_and_first_checkpoint(tmp_path: Path) -> None:
    signer = ledger_signer()
    with Ledger.create(tmp_path, signer, name="demo", now=T0, nonce=bytes(range(32))) as ledger:
        assert ledger.path == tmp_path / f"{ledger.ledger_id}.sqlite"
        genesis = ledger.entry(0)
        assert genesis == {"type": "genesis", "v": 1, "name": "demo",
                           "key": {"key_id": signer.key_id, "name": signer.name,
                                   "public_key_b64": signer.public_key.b64},
                           "created_utc": "2026-03-01T12:00:00Z", "nonce": bytes(range(32)).hex()}
        assert ledger.entry_bytes(0) == canonical_bytes(genesis)
        assert ledger.ledger_id == hashlib.sha256(ledger.entry_bytes(0)).hexdigest()[:20]
        assert ledger.origin == f"heldout/ledger/{ledger.ledger_id}"
        first = ledger.latest_checkpoint()
        assert (first.size, first.root) == (1, leaf_hash(ledger.entry_bytes(0)))
        verify_checkpoint(first.note, name=signer.name, key=signer.public_key, origin=ledger.origin)
        assert not [p for p in tmp_path.iterdir() if ".tmp" in p.name]  # no temporary file left


def test_create_uses_a_fresh_nonce_by_default(ledger_backend: LedgerBackend) -> None:
    signer = ledger_signer()
    with ledger_backend.create(signer, name="a", now=T0) as one, ledger_backend.create(signer, name="a",
                                                                                 now=T0) as two:
        assert one.ledger_id != two.ledger_id


def test_create_refuses_an_existing_ledger(ledger_backend: LedgerBackend) -> None:
    new_ledger(ledger_backend).close()
    with pytest.raises(LedgerUsageError, match="already exists"):
        new_ledger(ledger_backend)


def test_locate_by_id_prefix_and_refusals(tmp_path: Path) -> None:
    with new_ledger(tmp_path) as ledger:
        assert Ledger.locate(tmp_path, ledger.ledger_id) == ledger.path
        assert Ledger.locate(tmp_path, ledger.ledger_id[:6]) == ledger.path
        other = "f" * 20 if not ledger.ledger_id.startswith("f") else "e" * 20
    (tmp_path / f"{other[:19]}0.sqlite").touch()
    (tmp_path / f"{other[:19]}1.sqlite").touch()
    with pytest.raises(LedgerUsageError, match="names 2 ledgers"):
        Ledger.locate(tmp_path, other[:4])
    with pytest.raises(LedgerUsageError, match="no ledger"):
        Ledger.locate(tmp_path, "0123456789abcdef0123"[: 20] if not ledger.ledger_id.startswith("0123") else "9999")
    with pytest.raises(LedgerUsageError, match="lowercase hex"):
        Ledger.locate(tmp_path, "../etc")


def test_append_returns_durable_indices_and_reads_back(ledger_backend: LedgerBackend) -> None:
    signer = ledger_signer()
    with new_ledger(ledger_backend) as ledger:
        assert ledger.append(bundle_entry(1), signer=signer, now=T0) == 1
        assert ledger.append_batch([bundle_entry(2), retire_entry(3)], signer=signer, now=T0) == [2, 3]
        assert ledger.size == 4
        assert ledger.entry(3) == retire_entry(3)
        assert [i for i, _ in ledger.entries(1)] == [1, 2, 3]
        assert [e["type"] for _, e in ledger.entries(0, 2)] == ["genesis", "bundle"]
        assert [c.size for c in ledger.checkpoints()] == [1, 2, 4]
    with ledger_backend.open(ledger.ledger_id) as reopened:  # committed, so visible anew
        assert reopened.size == 4 and reopened.entry(1) == bundle_entry(1)


def test_floats_are_stored_with_the_six_decimal_rule(ledger_backend: LedgerBackend) -> None:
    signer = ledger_signer()
    with new_ledger(ledger_backend) as ledger:
        index = ledger.append({**bundle_entry(1), "accuracy": 0.123456789}, signer=signer, now=T0)
        assert ledger.entry(index)["accuracy"] == 0.123457


def test_a_refused_entry_refuses_the_whole_batch(ledger_backend: LedgerBackend) -> None:
    signer = ledger_signer()
    with new_ledger(ledger_backend, entries=2) as ledger:
        before = (ledger.size, ledger.latest_checkpoint().note)
        bad = bundle_entry(9)
        del bad["predictions_sha256"]
        with pytest.raises(EntryRejected, match="predictions_sha256"):
            ledger.append_batch([bundle_entry(3), bad], signer=signer, now=T0)
        assert (ledger.size, ledger.latest_checkpoint().note) == before


@pytest.mark.parametrize("bad, error, position", [
    ({"evaluation_sha256": "ABC"}, EntryRejected, 2),            # a member at fault, in a batch of one type
    ({"type": "retire", "reason": ""}, EntryRejected, 2),         # ... of mixed types
    ({"type": "genesis"}, EntryRejected, 2),                      # genesis is written when a ledger is created
    ({"created_utc": "2026-02-28T00:00:00Z"}, TimeRegression, 2),  # dated before the entry it follows
    (None, EntryRejected, 2),                                     # not an object at all
])
def test_a_refused_batch_names_the_first_entry_at_fault(ledger_backend: LedgerBackend, bad: dict[str, Any] | None,
                                                        error: type[Exception], position: int) -> None:
    """The batch is validated a member at a time over all its entries; a refusal still names the entry at
    fault by its position in the batch, and writes nothing."""
    signer = ledger_signer()
    batch: list[Any] = [bundle_entry(3), retire_entry(4), ["not", "an", "entry"] if bad is None
                        else {**bundle_entry(5), **bad}, {**bundle_entry(6), "v": 0}]
    batch[1]["created_utc"] = batch[0]["created_utc"]
    with new_ledger(ledger_backend, entries=2) as ledger:
        before = (ledger.size, ledger.latest_checkpoint().note)
        with pytest.raises(error) as caught:
            ledger.append_batch(batch, signer=signer, now=T0)
        assert caught.value.evidence["position"] == position  # type: ignore[attr-defined]
        assert (ledger.size, ledger.latest_checkpoint().note) == before


def test_an_append_rereads_what_another_writer_or_a_tamperer_changed(ledger_backend: LedgerBackend) -> None:
    """An append reuses its own last reads (the latest checkpoint parsed, the last entry's time) only while the
    stored rows are byte for byte those: after another writer's append it checks against that writer's
    entry and checkpoint, and a latest checkpoint altered in the database is refused, not trusted."""
    signer = ledger_signer()
    later = "2026-03-05T00:00:00Z"
    now = parse_utc(later)
    with new_ledger(ledger_backend, entries=2) as ledger:
        with ledger_backend.open(ledger.ledger_id) as other:
            other.append({**bundle_entry(3), "created_utc": later}, signer=signer, now=now)
        with pytest.raises(TimeRegression) as caught:  # dated after this handle's last entry, before the other's
            ledger.append({**bundle_entry(4), "created_utc": "2026-03-02T00:00:00Z"}, signer=signer, now=now)
        assert caught.value.evidence["expected"] == f">= {later}"
        ledger.append({**bundle_entry(4), "created_utc": later}, signer=signer, now=now)
        assert ledger.checkpoint_at(4) is not None and ledger.verify().size == 5
        tamper_database(ledger, "UPDATE checkpoints SET root = (SELECT root FROM checkpoints WHERE size = 4) "
                                "WHERE size = 5")
        with pytest.raises(LedgerIntegrityError, match="does not match its row"):
            ledger.append({**bundle_entry(5), "created_utc": later}, signer=signer, now=now)
        assert ledger.size == 5


def test_attack_an_entry_dated_far_ahead_would_stop_every_later_append(ledger_backend: LedgerBackend) -> None:
    """The ledger's time only moves forward, so one entry dated in 9999 would refuse every later append for
    good: an entry dated more than a day after the append's own time is refused, nothing written, and the
    ledger goes on."""
    signer = ledger_signer()
    with new_ledger(ledger_backend, entries=1) as ledger:
        size = ledger.size
        for stamp in ("9999-12-31T23:59:59Z", "2026-03-02T12:00:01Z"):  # T0 is 2026-03-01T12:00:00Z
            with pytest.raises(EntryAfterNow) as caught:
                ledger.append_batch([bundle_entry(2), {**bundle_entry(3), "created_utc": stamp}], signer=signer,
                                    now=T0)
            assert caught.value.evidence["position"] == 1 and caught.value.evidence["found"] == stamp
            assert ledger.size == size
        ledger.append({**bundle_entry(2), "created_utc": "2026-03-02T12:00:00Z"}, signer=signer, now=T0)  # a day
        assert ledger.size == size + 1


@pytest.mark.parametrize("mutate, message", [
    (lambda e: e.update(v=0), "positive integer"),
    (lambda e: e.update(v=True), "positive integer"),
    (lambda e: e.update(created_utc="yesterday"), "UTC time"),
    (lambda e: e.update(evaluation_sha256="ABC"), "SHA-256"),
    (lambda e: e.update(model_id=""), "non-empty"),
])
def test_entry_members_are_validated(ledger_backend: LedgerBackend, mutate: Callable[[dict], None],
                                     message: str) -> None:
    entry = bundle_entry(1)
    mutate(entry)
    with new_ledger(ledger_backend) as ledger, pytest.raises(EntryRejected, match=message):
        ledger.append(entry, signer=ledger_signer(), now=T0)


def test_a_second_genesis_is_refused(ledger_backend: LedgerBackend) -> None:
    with new_ledger(ledger_backend) as ledger, pytest.raises(EntryRejected, match="genesis"):
        ledger.append(ledger.entry(0), signer=ledger_signer(), now=T0)


def test_extra_members_are_allowed(ledger_backend: LedgerBackend) -> None:
    with new_ledger(ledger_backend) as ledger:
        index = ledger.append({**retire_entry(1), "detail": {"by": "operator"}}, signer=ledger_signer(), now=T0)
        assert ledger.entry(index)["detail"] == {"by": "operator"}


def test_on_demand_checkpoint_never_signs_a_size_twice(ledger_backend: LedgerBackend) -> None:
    signer = ledger_signer()
    with new_ledger(ledger_backend, entries=3) as ledger:
        latest = ledger.latest_checkpoint()
        again = ledger.checkpoint(signer=signer, now=T0)
        assert again.note == latest.note and len(ledger.checkpoints()) == 4


def test_signing_rules_refuse_a_second_root_or_a_smaller_size(ledger_backend: LedgerBackend) -> None:
    signer = ledger_signer()
    with new_ledger(ledger_backend, entries=3) as ledger:
        with pytest.raises(CheckpointError, match="second root"), ledger._write() as storage:
            ledger._sign_head(4, hashlib.sha256(b"other").digest(), signer, "2026-03-01T12:00:00Z",
                              storage.latest_checkpoint_row())
        with pytest.raises(CheckpointError, match="smaller size"), ledger._write() as storage:
            ledger._sign_head(2, ledger.root(2), signer, "2026-03-01T12:00:00Z", storage.latest_checkpoint_row())
        assert [c.size for c in ledger.checkpoints()] == [1, 2, 3, 4]


@pytest.mark.parametrize("statement", [
    "UPDATE entries SET data = x'00' WHERE idx = 1",
    "DELETE FROM entries WHERE idx = 2",
    "UPDATE checkpoints SET note = 'x' WHERE size = 8",
    "DELETE FROM checkpoints WHERE size = 1",
    "UPDATE nodes SET hash = zeroblob(32)",
    "DELETE FROM nodes",
    "INSERT INTO entries (idx, type, data, leaf_hash, created_utc) VALUES (5, 'retire', x'00', zeroblob(32), 't')",
    "INSERT OR REPLACE INTO entries (idx, type, data, leaf_hash, created_utc) "
    "VALUES (1, 'x', x'00', zeroblob(32), 't')",
    "INSERT INTO checkpoints (size, root, note, created_utc) VALUES (2, zeroblob(32), 'n', 't')",
    "INSERT OR REPLACE INTO checkpoints (size, root, note, created_utc) VALUES (3, zeroblob(32), 'n', 't')",
    "INSERT INTO checkpoints (size, root, note, created_utc) VALUES (29, zeroblob(32), 'n', 't')",
    "INSERT INTO nodes (level, idx, hash) VALUES (4, 0, zeroblob(32))",
    "INSERT INTO nodes (level, idx, hash) VALUES (1, 0, zeroblob(32))",
])
def test_the_database_refuses_rewriting_history(tmp_path: Path, statement: str) -> None:
    with new_ledger(tmp_path, entries=20, batch=7) as ledger:  # 21 entries: a stored level-4 node exists
        assert ledger.db.conn.execute("SELECT COUNT(*) FROM nodes").fetchone()[0] == 1
        conn = raw(ledger)
        conn.execute("PRAGMA recursive_triggers = ON")
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute(statement)
        conn.close()
        ledger.verify()


_ROW = "INSERT INTO entries (idx, type, data, leaf_hash, created_utc) VALUES ({}, 'retire', x'00', zeroblob({}), 't')"
_UNSIGNABLE_ROWS = {  # 21 entries, 0 .. 20, signed
    "a gap": [_ROW.format(22, 32)],
    "far past the end": [_ROW.format(27, 32)],
    "a negative index": [_ROW.format(-1, 32)],
    "a negative index, then the next one": [_ROW.format(-1, 32), _ROW.format(21, 32)],
    "a short leaf hash": [_ROW.format(21, 31)],
    "a long leaf hash after a good row": [_ROW.format(21, 32), _ROW.format(22, 33)],
}


@pytest.mark.parametrize("rows", sorted(_UNSIGNABLE_ROWS))
def test_rows_written_into_the_database_are_never_signed(tmp_path: Path, rows: str) -> None:
    """Entry rows written into the file directly, past the signed entries: since schema 3 the database takes the
    row and refuses, once per transaction, any checkpoint that does not cover exactly the entries before it
    (indices 0 .. size - 1, each with a 32-byte leaf hash); schemas 1 and 2 refused the row itself. Either way
    nothing is signed over it: not a checkpoint inserted by hand (the trigger), not an append or a checkpoint
    of heldout's (which refuse entries past the last checkpoint), and ``verify`` names the ledger broken. (A row
    at the next index with a 32-byte leaf hash is well formed to the database; heldout's writers refuse it:
    tests/test_ledger_attacks.py.)"""
    signer = ledger_signer()
    with new_ledger(tmp_path, entries=20, batch=7) as ledger:
        conn = raw(ledger)
        for statement in _UNSIGNABLE_ROWS[rows]:
            conn.execute(statement)
        top = conn.execute("SELECT MAX(idx) FROM entries").fetchone()[0]
        for size in {top + 1, 22, 23}:
            with pytest.raises(sqlite3.IntegrityError, match="covers exactly the entries before it"):
                conn.execute("INSERT INTO checkpoints (size, root, note, created_utc) VALUES (?, zeroblob(32), "
                             "'n', 't')", (size,))
        conn.close()
        with pytest.raises(LedgerIntegrityError):
            ledger.append(bundle_entry(99), signer=signer, now=T0)
        if top > 20:  # rows past the signed head
            with pytest.raises(LedgerIntegrityError):
                ledger.checkpoint(signer=signer, now=T0)
        else:  # a row at -1 alone leaves the head at 21, signed already: nothing new to sign
            assert ledger.checkpoint(signer=signer, now=T0).size == 21
        assert ledger.latest_checkpoint().size == 21
        with pytest.raises(LedgerIntegrityError):
            ledger.verify()


def test_the_checkpoint_check_passes_honest_appends_of_every_shape(tmp_path: Path) -> None:
    """The checkpoint's own check, against what heldout writes: single entries, batches across a stored node's
    boundary, an on-demand checkpoint of a signed head (no new row), and a checkpoint inserted by hand over
    rows that are right (the trigger refuses what is wrong, not everything written by hand)."""
    signer = ledger_signer()
    with new_ledger(tmp_path, entries=3) as ledger:
        ledger.append_batch([bundle_entry(10 + k) for k in range(40)], signer=signer, now=T0)
        ledger.append(bundle_entry(60), signer=signer, now=T0)
        ledger.checkpoint(signer=signer, now=T0)
        size = ledger.size
        data = canonical_bytes(retire_entry(size))
        conn = raw(ledger)
        conn.execute("INSERT INTO entries (idx, type, data, leaf_hash, created_utc) VALUES (?, 'retire', ?, ?, 't')",
                     (size, data, leaf_hash(data)))
        conn.execute("INSERT INTO checkpoints (size, root, note, created_utc) VALUES (?, zeroblob(32), 'n', 't')",
                     (size + 1,))
        sizes = [row[0] for row in conn.execute("SELECT size FROM checkpoints ORDER BY size")]
        conn.close()
        assert sizes == [1, 2, 3, 4, 44, 45, 46]


def test_signing_checks_consistency_with_the_last_checkpoint(tmp_path: Path) -> None:
    """If the stored tree were altered under a signed checkpoint, the ledger refuses to sign anything new."""
    signer = ledger_signer()
    with new_ledger(tmp_path, entries=19, batch=5) as ledger:
        conn = raw(ledger)
        conn.execute("DROP TRIGGER nodes_no_update")
        conn.execute("UPDATE nodes SET hash = zeroblob(32) WHERE level = 4 AND idx = 0")  # entries 0..15
        conn.close()
        with pytest.raises(LedgerIntegrityError):
            ledger.append(bundle_entry(20), signer=signer, now=T0)
        assert ledger.size == 20 and ledger.latest_checkpoint().size == 20
        with pytest.raises(LedgerIntegrityError, match="tree node"):
            ledger.verify()


def test_schema_is_strict_wal_full_and_migrated(tmp_path: Path) -> None:
    with new_ledger(tmp_path) as ledger:
        conn = ledger.db.conn
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        tables = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall())
        for name in ("entries", "nodes", "checkpoints", "meta"):
            assert "STRICT" in tables[name].upper()
        assert "WITHOUT ROWID" in tables["nodes"].upper()
        applied = [r[0] for r in conn.execute("SELECT name FROM _sqlite_migrations WHERE migration_set = ?",
                                              ["heldout.ledger"])]
        assert applied == ["0001_initial", "0002_cosignatures", "0003_checkpoint_covers_entries"]
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "3"


def as_schema_2(path: Path) -> None:
    """Turn a ledger file of this schema into what schema 2 wrote: the same tables and rows, the row-by-row
    index trigger instead of the checkpoint's, no record of migration 0003, schema_version 2."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("DROP TRIGGER checkpoints_cover_entries")
    conn.execute(guard_definitions(2)["entries_next_index"])
    conn.execute("DELETE FROM _sqlite_migrations WHERE name = '0003_checkpoint_covers_entries'")
    conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    conn.close()


def test_a_schema_2_file_is_read_as_it_is_and_migrated_when_written(tmp_path: Path) -> None:
    """A schema 2 ledger (an older heldout's) verifies read-only against schema 2's triggers, unchanged; opened
    for writing it is migrated to schema 3 in one transaction and goes on being appended to."""
    signer = ledger_signer()
    with new_ledger(tmp_path, entries=20, batch=7) as ledger:
        path = ledger.path
        root = ledger.root(21)
    assert path is not None
    as_schema_2(path)
    with Ledger.open(path, read_only=True) as old:
        assert old.verify().size == 21
        assert old.db.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "2"
        with pytest.raises(sqlite3.OperationalError):  # (read-only: no migration either)
            old.db.conn.execute("DROP TRIGGER entries_next_index")
    with Ledger.open(path) as ledger:
        conn = ledger.db.conn
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "3"
        triggers = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'").fetchall())
        assert triggers == guard_definitions()
        assert ledger.root(21) == root
        ledger.append_batch([bundle_entry(30 + k) for k in range(5)], signer=signer, now=T0)
        assert ledger.verify().size == 26


def test_a_schema_1_file_is_read_as_it_is(tmp_path: Path) -> None:
    """A schema 1 ledger (no cosignatures table) verifies read-only against schema 1's triggers: reading it
    asked for its cosignatures table and refused the file (red-team round 21)."""
    with new_ledger(tmp_path, entries=5) as ledger:
        path = ledger.path
    assert path is not None
    as_schema_2(path)
    conn = sqlite3.connect(path, isolation_level=None)
    for trigger in ("cosignatures_no_update", "cosignatures_no_delete", "cosignatures_on_checkpoints"):
        conn.execute(f"DROP TRIGGER {trigger}")
    conn.execute("DROP TABLE cosignatures")
    conn.execute("DELETE FROM _sqlite_migrations WHERE name != '0001_initial'")
    conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    conn.close()
    with Ledger.open(path, read_only=True) as old:
        assert old.verify().size == 6 and old.witness_sizes() == {} and old.cosignature_lines(6) == []


def test_a_schema_version_of_thousands_of_digits_is_a_usage_error(tmp_path: Path) -> None:
    """int() of 5,000 digits raises (Python's limit): the version was read as a number before its length."""
    with new_ledger(tmp_path) as ledger:
        conn = raw(ledger)
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", ("9" * 5000,))
        conn.close()
        path = ledger.path
    for read_only in (True, False):
        with pytest.raises(LedgerUsageError, match="this heldout reads up to"):
            Ledger.open(path, read_only=read_only)


@pytest.mark.parametrize("claimed", ["1", "2"])
def test_attack_an_older_schema_version_written_to_be_held_to_fewer_triggers(tmp_path: Path, claimed: str) -> None:
    """Whoever holds the file writes an older schema_version into meta, so that ``verify`` would hold it to that
    schema's triggers (schema 1 had none on cosignatures; schema 2 checked rows, not checkpoints) while the
    triggers stay those of schema 3 (or are dropped). Named either way: the triggers of the claimed schema are
    missing, or the file has a table of a later one."""
    with new_ledger(tmp_path, entries=4) as ledger:
        conn = raw(ledger)
        conn.execute(f"UPDATE meta SET value = '{claimed}' WHERE key = 'schema_version'")
        if claimed == "1":
            for action in ("update", "delete"):
                conn.execute(f"DROP TRIGGER cosignatures_no_{action}")
            conn.execute("DROP TRIGGER cosignatures_on_checkpoints")
            conn.execute("DROP TRIGGER checkpoints_cover_entries")
            conn.execute(guard_definitions(2)["entries_next_index"])
        conn.close()
        found = "the file has the cosignatures table of a later schema" if claimed == "1" \
            else "entries_next_index \\(gone\\)"
        with pytest.raises(LedgerIntegrityError, match=f"append-only triggers are gone or altered .*{found}"):
            ledger.verify()


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    with new_ledger(tmp_path) as ledger:
        conn = raw(ledger)
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
        conn.close()
        path = ledger.path
    with pytest.raises(LedgerUsageError, match="schema 99"):
        Ledger.open(path)


def test_a_file_that_is_not_a_ledger_is_refused(tmp_path: Path) -> None:
    path = tmp_path / ("ab" * 10 + ".sqlite")
    path.write_bytes(b"not a database at all" * 100)
    with pytest.raises(LedgerIntegrityError, match="not a readable ledger"):
        Ledger.open(path)
    with pytest.raises(LedgerUsageError, match="no ledger file"):
        Ledger.open(tmp_path / "missing.sqlite")


def test_reading_outside_the_ledger_is_a_usage_error(ledger_backend: LedgerBackend) -> None:
    with new_ledger(ledger_backend, entries=2) as ledger:
        for call in (lambda: ledger.entry_bytes(3), lambda: ledger.inclusion_proof(2, 2),
                     lambda: ledger.root(4), lambda: ledger.consistency_proof(0),
                     lambda: ledger.consistency_proof(3, 2), lambda: ledger.entry(-1)):
            with pytest.raises(LedgerUsageError) as caught:
                call()
            assert caught.value.exit_code == 2


def test_genesis_id_is_checked_on_open(tmp_path: Path) -> None:
    with new_ledger(tmp_path) as ledger:
        conn = raw(ledger)
        conn.execute("UPDATE meta SET value = 'ffffffffffffffffffff' WHERE key = 'ledger_id'")
        conn.close()
        path = ledger.path
    with pytest.raises(LedgerIntegrityError, match="genesis"):
        Ledger.open(path)
    assert ledger_id_of(b"x") == hashlib.sha256(b"x").hexdigest()[:20]


# --- blobs -----------------------------------------------------------------------------------------------------

def test_blob_store_round_trip_and_idempotence(tmp_path: Path) -> None:
    blobs = BlobStore(tmp_path / "blobs" / "sha256")
    digest = blobs.put(b"predictions")
    assert digest == hashlib.sha256(b"predictions").hexdigest()
    assert blobs.put(b"predictions") == digest
    assert blobs.path(digest) == tmp_path / "blobs" / "sha256" / digest[:2] / digest
    assert blobs.has(digest) and blobs.get(digest) == b"predictions"
    assert [p.name for p in blobs.path(digest).parent.iterdir()] == [digest]


def test_blob_store_refuses_tampered_missing_and_misnamed_blobs(tmp_path: Path) -> None:
    blobs = BlobStore(tmp_path)
    digest = blobs.put(b"content")
    blobs.path(digest).write_bytes(b"altered")
    with pytest.raises(LedgerIntegrityError, match="altered") as caught:
        blobs.get(digest)
    assert caught.value.exit_code == 1
    with pytest.raises(BlobMissing) as missing:
        blobs.get(hashlib.sha256(b"never stored").hexdigest())
    assert missing.value.exit_code == 5
    with pytest.raises(UsageError):
        blobs.path("../../etc/passwd")


def test_append_with_expected_size_is_a_compare_and_swap(ledger_backend: LedgerBackend) -> None:
    from ledger import AppendConflict

    with new_ledger(ledger_backend) as ledger:
        signer = ledger_signer()
        size = ledger.size
        assert ledger.append_batch([retire_entry(1)], signer=signer, now=T0, expected_size=size) == [size]
        root = ledger.root()
        with pytest.raises(AppendConflict) as info:
            ledger.append_batch([retire_entry(2)], signer=signer, now=T0, expected_size=size)
        assert info.value.exit_code == 2 and info.value.evidence == {"expected": size, "found": size + 1}
        assert ledger.size == size + 1 and ledger.root() == root and ledger.latest_checkpoint().size == size + 1
