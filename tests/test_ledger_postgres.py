"""The PostgreSQL backend on a real private server (tests/postgres_support.py): the server itself refuses
rewriting history (triggers against UPDATE, DELETE and TRUNCATE, even by the owner; the writer role holds
INSERT and SELECT only), appends as the writer role, URLs without passwords, tampering under a signed
checkpoint, ``ledger migrate`` both ways with the same root at every checkpoint size, ``heldout init
--database`` / ``HELDOUT_DATABASE`` through the CLI, and ``heldout demo --database`` end to end. The ledger
tests that are not SQLite-specific run on both backends in their own files (``ledger_backend``)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import psycopg
import pytest
from typer.testing import CliRunner

from heldout.cli import app
from ledger import (
    Ledger,
    LedgerBackend,
    LedgerIntegrityError,
    LedgerUsageError,
    LogReader,
    LogWriter,
    export_ledger,
    migrate,
    open_export,
)
from ledger.cosignature import Cosigner, cosign, time_of
from ledger.postgres import WRITER_ROLE, PostgresStorage, database_url, display_url
from ledger.tiles import open_tiles, write_tiles
from tests.conftest import seeded_signer
from tests.postgres_support import APPENDER, PostgresCluster
from tests.test_ledger_support import T0, bundle_entry, ledger_signer, new_ledger, retire_entry


def storage_of(ledger: Ledger) -> PostgresStorage:
    assert isinstance(ledger.storage, PostgresStorage)
    return ledger.storage


def appender_url(cluster: PostgresCluster, admin_url: str) -> str:
    """The same database as the writer role's member (made a member once the first ledger made the role)."""
    database = admin_url.split("///", 1)[1].split("?", 1)[0]
    cluster.grant_writer()
    return cluster.url(database, user=APPENDER)


@pytest.fixture
def pg_ledger(postgres_url: str) -> Any:
    """21 entries (so a stored level-4 node exists) and a witness's cosignature on the latest checkpoint."""
    with new_ledger(LedgerBackend(database=postgres_url), entries=20, batch=7) as ledger:
        witness = seeded_signer(32, name="witness.example")
        ledger.add_cosignature(21, Cosigner.of(witness), cosign(ledger.latest_checkpoint(), witness, 1_780_000_000),
                               now=T0)
        yield ledger


# --- the server enforces append-only -----------------------------------------------------------------------

REWRITES = [
    "UPDATE {s}.entries SET data = '\\x00'::bytea WHERE idx = 1",
    "DELETE FROM {s}.entries WHERE idx = 2",
    "TRUNCATE {s}.entries",
    "UPDATE {s}.checkpoints SET note = 'x' WHERE size = 8",
    "DELETE FROM {s}.checkpoints WHERE size = 1",
    "TRUNCATE {s}.checkpoints",
    "UPDATE {s}.nodes SET hash = '\\x00'::bytea",
    "DELETE FROM {s}.nodes",
    "TRUNCATE {s}.nodes",
    "UPDATE {s}.meta SET value = 'ffffffffffffffffffff' WHERE key = 'ledger_id'",
    "TRUNCATE {s}.meta",
    "DELETE FROM {s}.cosignatures",
    "TRUNCATE {s}.cosignatures CASCADE",
]
BAD_INSERTS = [
    "INSERT INTO {s}.entries (idx, type, data, leaf_hash, created_utc) VALUES (27, 'retire', '\\x00', "
    "'\\x" + "00" * 32 + "', 't')",
    "INSERT INTO {s}.entries (idx, type, data, leaf_hash, created_utc) VALUES (21, 'retire', '\\x00', '\\x00', 't')",
    "INSERT INTO {s}.entries (idx, type, data, leaf_hash, created_utc) VALUES (1, 'x', '\\x00', "
    "'\\x" + "00" * 32 + "', 't') ON CONFLICT (idx) DO UPDATE SET data = EXCLUDED.data",
    "INSERT INTO {s}.checkpoints (size, root, note, created_utc) VALUES (2, '\\x" + "00" * 32 + "', 'n', 't')",
    "INSERT INTO {s}.checkpoints (size, root, note, created_utc) VALUES (29, '\\x" + "00" * 32 + "', 'n', 't')",
    "INSERT INTO {s}.nodes (level, idx, hash) VALUES (4, 0, '\\x" + "00" * 32 + "')",
    "INSERT INTO {s}.nodes (level, idx, hash) VALUES (1, 0, '\\x" + "00" * 32 + "')",
    "INSERT INTO {s}.cosignatures VALUES (5, 'w', 'k', 1, 'line', 'vkey', 't')",
]


@pytest.mark.parametrize("statement", REWRITES)
@pytest.mark.parametrize("role", ["writer", "owner"])
def test_the_server_refuses_rewriting_history(pg_ledger: Ledger, postgres_cluster: PostgresCluster,
                                              postgres_url: str, statement: str, role: str) -> None:
    """The writer role lacks UPDATE/DELETE/TRUNCATE privileges; the owner (who has them) meets the triggers."""
    storage = storage_of(pg_ledger)
    url = appender_url(postgres_cluster, storage.url) if role == "writer" else storage.url
    root, size = pg_ledger.root(), pg_ledger.size
    with psycopg.connect(url, autocommit=True) as conn:
        expected = psycopg.errors.InsufficientPrivilege if role == "writer" else psycopg.errors.IntegrityError
        with pytest.raises(expected):
            conn.execute(statement.replace("{s}", storage.schema))
    assert pg_ledger.root() == root and pg_ledger.size == size
    pg_ledger.verify()


@pytest.mark.parametrize("statement", BAD_INSERTS)
def test_the_server_refuses_inserts_that_break_the_log(pg_ledger: Ledger, postgres_cluster: PostgresCluster,
                                                       statement: str) -> None:
    storage = storage_of(pg_ledger)
    refusals = (psycopg.errors.IntegrityError, psycopg.errors.InsufficientPrivilege)
    with psycopg.connect(appender_url(postgres_cluster, storage.url), autocommit=True) as conn, \
            pytest.raises(refusals):
        conn.execute(statement.replace("{s}", storage.schema))
    pg_ledger.verify()


def test_the_writer_role_holds_insert_and_select_only(pg_ledger: Ledger) -> None:
    storage = storage_of(pg_ledger)
    with psycopg.connect(storage.url, autocommit=True) as conn:
        rows = conn.execute("SELECT table_name, privilege_type FROM information_schema.role_table_grants "
                            "WHERE grantee = %s AND table_schema = %s", (WRITER_ROLE, storage.schema)).fetchall()
        login = conn.execute("SELECT rolcanlogin FROM pg_roles WHERE rolname = %s", (WRITER_ROLE,)).fetchone()
    privileges = {(table, kind) for table, kind in rows}
    tables = {"meta", "entries", "nodes", "checkpoints", "cosignatures"}
    assert privileges == {(t, k) for t in tables for k in ("INSERT", "SELECT")}
    assert login == (False,)


def test_the_writer_role_cannot_drop_the_triggers(pg_ledger: Ledger, postgres_cluster: PostgresCluster) -> None:
    storage = storage_of(pg_ledger)
    with psycopg.connect(appender_url(postgres_cluster, storage.url), autocommit=True) as conn:
        for statement in (f"ALTER TABLE {storage.schema}.entries DISABLE TRIGGER USER",
                          f"DROP TRIGGER entries_no_change ON {storage.schema}.entries",
                          f"DROP TABLE {storage.schema}.entries",
                          "SET session_replication_role = replica"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)


def test_appends_as_the_writer_role(pg_ledger: Ledger, postgres_cluster: PostgresCluster) -> None:
    """What an operator runs day to day: a login role that is a member of heldout_writer appends, signs
    checkpoints, stores cosignatures and verifies."""
    url = appender_url(postgres_cluster, storage_of(pg_ledger).url)
    witness = seeded_signer(30, name="witness.example")
    with LedgerBackend(database=url).open(pg_ledger.ledger_id) as ledger:
        indices = ledger.append_batch([bundle_entry(30), retire_entry(31)], signer=ledger_signer(), now=T0,
                                      expected_size=21)
        assert indices == [21, 22]
        checkpoint = ledger.latest_checkpoint()
        cosigner = Cosigner.of(witness)
        assert ledger.add_cosignature(23, cosigner, cosign(checkpoint, witness, 1_780_000_000), now=T0)
        assert ledger.cosignature_lines(23) and ledger.witness_sizes()[cosigner.vkey] == 23
        assert ledger.witness_latest_times()[cosigner.vkey] == time_of(1_780_000_000)
        assert ledger.verify().size == 23
    assert pg_ledger.size == 23  # committed: visible to the other connection at once


def test_a_tampered_tree_under_a_signed_checkpoint_stops_signing(pg_ledger: Ledger) -> None:
    storage = storage_of(pg_ledger)
    with psycopg.connect(storage.url, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")  # the administrator, triggers out of the way
        conn.execute(f"UPDATE {storage.schema}.nodes SET hash = %s WHERE level = 4 AND idx = 0", (bytes(32),))
    with pytest.raises(LedgerIntegrityError):
        pg_ledger.append(bundle_entry(40), signer=ledger_signer(), now=T0)
    assert pg_ledger.size == 21 and pg_ledger.latest_checkpoint().size == 21
    with pytest.raises(LedgerIntegrityError, match="tree node"):
        pg_ledger.verify()


def test_genesis_id_and_schema_version_are_checked_on_open(pg_ledger: Ledger) -> None:
    storage = storage_of(pg_ledger)
    backend = LedgerBackend(database=storage.url)
    with psycopg.connect(storage.url, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")
        conn.execute(f"UPDATE {storage.schema}.meta SET value = '9' WHERE key = 'schema_version'")
    with pytest.raises(LedgerUsageError, match="schema 9"):
        backend.open(pg_ledger.ledger_id)
    with psycopg.connect(storage.url, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")
        conn.execute(f"UPDATE {storage.schema}.meta SET value = '2' WHERE key = 'schema_version'")
        conn.execute(f"UPDATE {storage.schema}.meta SET value = 'ffffffffffffffffffff' WHERE key = 'ledger_id'")
    with pytest.raises(LedgerIntegrityError, match="genesis"):
        backend.open(pg_ledger.ledger_id)


def test_urls_with_a_password_are_refused_and_never_shown() -> None:
    for url in ("postgresql://app:s3cret@db.example/heldout", "postgresql:///heldout?password=s3cret&host=/tmp"):
        with pytest.raises(LedgerUsageError, match="password") as caught:
            database_url(url)
        assert "s3cret" not in caught.value.message and "s3cret" not in json.dumps(caught.value.evidence)
    assert display_url("postgresql://app:s3cret@db/x") == "postgresql://app:***@db/x"
    # a socket URL keeps its empty authority's "//" (shown as "postgresql:/db", it was no URL libpq reads)
    assert display_url("postgresql:///heldout?host=/run/pg") == "postgresql:///heldout?host=/run/pg"
    assert display_url("postgresql:///heldout?host=/run/pg&password=s3cret") == \
        "postgresql:///heldout?host=/run/pg&password=***"
    assert database_url("postgresql://app@db.example/heldout?service=ledger") == \
        "postgresql://app@db.example/heldout?service=ledger"


def test_unknown_ledger_and_unreachable_server_are_usage_errors(postgres_url: str, tmp_path: Path) -> None:
    with pytest.raises(LedgerUsageError, match="no ledger"):
        LedgerBackend(database=postgres_url).open("abcdef")
    with pytest.raises(LedgerUsageError, match="cannot connect") as caught:
        LedgerBackend(database=f"postgresql:///x?host={tmp_path}&connect_timeout=2").list_ids()
    assert caught.value.exit_code == 2


def test_ledgers_implement_the_log_interface(ledger_backend: LedgerBackend, tmp_path: Path) -> None:
    with new_ledger(ledger_backend, entries=3) as ledger:
        assert isinstance(ledger, LogReader) and isinstance(ledger, LogWriter)
        export_ledger(ledger, tmp_path / "export")
        exported = open_export(tmp_path / "export")
        assert isinstance(exported, LogReader) and not isinstance(exported, LogWriter)
        write_tiles(ledger, tmp_path / "tiles")
        tiled = open_tiles(tmp_path / "tiles")
        assert isinstance(tiled, LogReader) and not isinstance(tiled, LogWriter)
        assert [e for _, e in tiled.entries()] == [e for _, e in ledger.entries()]
        for reader in (ledger, exported, tiled):
            assert [reader.leaf_hash(i) for i in range(4)] == [ledger.inclusion_proof(i).leaf_hash for i in range(4)]
            assert reader.root(3) == ledger.root(3)
            # one set of bounds rules (ledger/proving.py) for every log that proves
            for method, args in (("root", (True,)), ("root", (5,)), ("entry_bytes", (4,)),
                                 ("inclusion_proof", (True,)), ("inclusion_proof", (3, 3)),
                                 ("consistency_proof", (0, 2)), ("consistency_proof", (3, 2)),
                                 ("consistency_proof", (2, 5))):
                with pytest.raises(LedgerUsageError):
                    getattr(reader, method)(*args)


# --- migrate -----------------------------------------------------------------------------------------------

def _roots(ledger: Ledger) -> list[tuple[int, bytes, str]]:
    return [(c.size, ledger.root(c.size), c.note) for c in ledger.checkpoints()]


def test_migrate_sqlite_to_postgresql_and_back(tmp_path: Path, postgres_url: str) -> None:
    witness = seeded_signer(31, name="witness.example")
    with new_ledger(tmp_path / "a", entries=40, batch=3) as original:
        original.add_cosignature(original.size, Cosigner.of(witness),
                                 cosign(original.latest_checkpoint(), witness, 1_780_000_000), now=T0)
        expected = _roots(original)
        cosigned = original.cosigned_checkpoint().note
        entries = [d for _, d in original.entries_bytes()]
        to_pg = migrate(original, LedgerBackend(database=postgres_url))
        assert (to_pg.size, to_pg.checkpoints, to_pg.cosignatures) == (41, len(expected), 1)
        with pytest.raises(LedgerUsageError, match="already holds"):
            migrate(original, LedgerBackend(database=postgres_url))
    with LedgerBackend(database=postgres_url).open(original.ledger_id) as copy:
        assert _roots(copy) == expected
        assert copy.cosigned_checkpoint().note == cosigned
        heard: list[tuple[str, int, int]] = []
        back = migrate(copy, LedgerBackend(folder=tmp_path / "b"), progress=lambda *tick: heard.append(tick))
        assert back.size == 41
        # each phase is reported, and each ends at the ledger's size
        phases = ["verifying the source", "copying", "proving the copy"]
        assert [phase for phase in phases if phase in {p for p, _, _ in heard}] == phases
        assert [p for p, _, _ in heard] == sorted((p for p, _, _ in heard), key=phases.index)
        assert all(max(d for p, d, _ in heard if p == phase) == 41 for phase in phases)
    with Ledger.open(tmp_path / "b" / f"{original.ledger_id}.sqlite") as again:
        assert _roots(again) == expected
        assert [d for _, d in again.entries_bytes()] == entries
        assert again.cosigned_checkpoint().note == cosigned
        # the copy is a live ledger: appends continue the same history
        again.append(bundle_entry(99), signer=ledger_signer(), now=T0)
        again.consistency_proof(41).verify(expected[-1][1], again.root())


def test_migrate_cli_both_ways_and_refusals(tmp_path: Path, postgres_url: str) -> None:
    with new_ledger(tmp_path / "src", entries=30, batch=4) as original:
        expected = _roots(original)
    runner = CliRunner()
    result = runner.invoke(app, ["ledger", "migrate", str(tmp_path / "src"), postgres_url, "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert body["identical"] is True and body["size"] == 31 and "heldout_admin" in body["destination"]
    again = runner.invoke(app, ["ledger", "migrate", str(tmp_path / "src"), postgres_url])
    assert again.exit_code == 2 and "already holds" in again.output and "Traceback" not in again.output
    result = runner.invoke(app, ["ledger", "migrate", postgres_url, str(tmp_path / "back"),
                                 "--ledger", original.ledger_id[:6]])
    assert result.exit_code == 0, result.output
    with Ledger.open(tmp_path / "back" / f"{original.ledger_id}.sqlite") as back:
        assert _roots(back) == expected
    bad = runner.invoke(app, ["ledger", "migrate", str(tmp_path / "src"), "postgresql://u:pw@h/db"])
    assert bad.exit_code == 2 and "password" in bad.output and "pw@" not in bad.output


def test_migrate_refuses_a_broken_source(tmp_path: Path, postgres_url: str) -> None:
    import sqlite3

    with new_ledger(tmp_path / "src", entries=5) as original:
        conn = sqlite3.connect(original.path, isolation_level=None)  # type: ignore[arg-type]
        conn.execute("DROP TRIGGER entries_no_update")
        conn.execute("UPDATE entries SET data = x'7b7d' WHERE idx = 3")
        conn.close()
        with pytest.raises(LedgerIntegrityError):
            migrate(original, LedgerBackend(database=postgres_url))
    assert LedgerBackend(database=postgres_url).list_ids() == []  # nothing written


# --- the CLI on PostgreSQL -----------------------------------------------------------------------------------

def test_init_database_records_the_url_and_every_command_uses_it(store_dir: Path, postgres_url: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELDOUT_NOW", "2026-03-01T12:00:00Z")  # before the appended entry's time
    runner = CliRunner()
    result = runner.invoke(app, ["init", "--database", postgres_url, "--json"])
    assert result.exit_code == 0, result.output
    ledger_id = json.loads(result.output)["ledger_id"]
    assert (store_dir / "ledgers" / "DATABASE").read_text().strip() == postgres_url
    assert not list((store_dir / "ledgers").glob("*.sqlite"))
    entry = store_dir / "entry.json"
    entry.write_text(json.dumps({"text": "incident report: none", "created_utc": "2026-03-01T12:00:00Z"}))
    for args in (["status"], ["ledger", "append", ledger_id[:6], "--type", "note", "--json-file", str(entry)],
                 ["ledger", "verify", ledger_id], ["ledger", "head", ledger_id],
                 ["ledger", "prove", ledger_id, "--index", "1"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, (args, result.output)
    with LedgerBackend(database=postgres_url).open(ledger_id) as ledger:
        assert ledger.size == 2 and ledger.entry(1)["text"] == "incident report: none"
    # HELDOUT_DATABASE overrides the recorded URL (another role, a moved server): here, an empty database
    monkeypatch.setenv("HELDOUT_DATABASE", postgres_url.replace("heldout_admin", "nobody_here"))
    result = runner.invoke(app, ["ledger", "verify", ledger_id])
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_init_from_heldout_database_and_password_refusal(store_dir: Path, postgres_url: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    monkeypatch.setenv("HELDOUT_DATABASE", "postgresql://app:hunter2@localhost/heldout")
    refused = runner.invoke(app, ["init"])
    assert refused.exit_code == 2 and "password" in refused.output and "hunter2" not in refused.output
    assert not (store_dir / "ledgers" / "DEFAULT").exists()
    monkeypatch.setenv("HELDOUT_DATABASE", postgres_url)
    result = runner.invoke(app, ["init", "--json"])
    assert result.exit_code == 0, result.output
    assert (store_dir / "ledgers" / "DATABASE").read_text().strip() == postgres_url
    for path in store_dir.rglob("*"):
        if path.is_file():
            assert b"hunter2" not in path.read_bytes()


@pytest.mark.slow
def test_demo_end_to_end_on_postgresql(tmp_path: Path, postgres_url: str,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HELDOUT_DATABASE", raising=False)
    store = tmp_path / "demo-store"
    result = CliRunner().invoke(app, ["demo", "--fast", "--store", str(store), "--database", postgres_url])
    assert result.exit_code == 0, result.output[-3000:]
    assert "demo complete" in result.output
    assert not list((store / "ledgers").glob("*.sqlite"))  # the log lives in the server only
    ledger_id = (store / "ledgers" / "DEFAULT").read_text().strip()
    with LedgerBackend(database=postgres_url).open(ledger_id) as ledger:
        report = ledger.verify()
        assert report.size > 10 and report.checkpoints > 5
        kinds = {e["type"] for _, e in ledger.entries()}
        assert {"genesis", "seal", "bundle", "retire"} <= kinds
    assert os.environ.get("HELDOUT_DATABASE") is None


_DEFUSINGS = {
    "disabled": ("checkpoints_no_change (disabled)", ["ALTER TABLE {s}.checkpoints DISABLE TRIGGER USER"]),
    "firing for replicas only": ("entries_no_change (disabled)",
                                 ["ALTER TABLE {s}.entries ENABLE REPLICA TRIGGER entries_no_change"]),
    "its function made a no-op": ("entries_no_change (its function {s}.refuse_change altered)", [
        "CREATE OR REPLACE FUNCTION {s}.refuse_change() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RETURN NULL; END $$"]),
    "its insert check made a no-op": ("entries_insert_check (its function {s}.entries_insert_check altered)", [
        "CREATE OR REPLACE FUNCTION {s}.entries_insert_check() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RETURN NEW; END $$"]),
    "made conditional": ("entries_no_change (altered)", [
        "DROP TRIGGER entries_no_change ON {s}.entries",
        "CREATE TRIGGER entries_no_change BEFORE UPDATE OR DELETE ON {s}.entries FOR EACH ROW WHEN (false) "
        "EXECUTE FUNCTION {s}.refuse_change()"]),
    "bound to one column": ("entries_no_change (altered)", [
        "DROP TRIGGER entries_no_change ON {s}.entries",
        "CREATE TRIGGER entries_no_change BEFORE UPDATE OF data OR DELETE ON {s}.entries FOR EACH ROW "
        "EXECUTE FUNCTION {s}.refuse_change()"]),
    "on fewer events": ("checkpoints_no_change (altered)", [
        "DROP TRIGGER checkpoints_no_change ON {s}.checkpoints",
        "CREATE TRIGGER checkpoints_no_change BEFORE DELETE ON {s}.checkpoints FOR EACH ROW "
        "EXECUTE FUNCTION {s}.refuse_change()"]),
    "executing another function": ("nodes_no_change (executes {s}.let_through, not {s}.refuse_change)", [
        "CREATE FUNCTION {s}.let_through() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$",
        "DROP TRIGGER nodes_no_change ON {s}.nodes",
        "CREATE TRIGGER nodes_no_change BEFORE UPDATE OR DELETE ON {s}.nodes FOR EACH ROW "
        "EXECUTE FUNCTION {s}.let_through()"]),
    "skipped by every session of the database": ("all (a role or the database sets session_replication_role)", [
        "ALTER DATABASE {database} SET session_replication_role = replica"]),
}


@pytest.mark.parametrize("defusing", sorted(_DEFUSINGS))
def test_attack_the_append_only_triggers_defused_under_their_names(pg_ledger: Ledger, defusing: str) -> None:
    """The database's owner keeps every trigger's name but makes it guard nothing (red-team round 15: ``verify``
    read the names alone; disabling a trigger, running the UPDATE and enabling it again left no trace, and
    disabled ones passed). ``verify`` names each way: by the trigger's state, kind, condition, columns, function
    and that function's source, and a database or role set to skip triggers."""
    named, statements = _DEFUSINGS[defusing]
    storage = storage_of(pg_ledger)
    pg_ledger.verify()
    with psycopg.connect(storage.url, autocommit=True) as conn:
        database = conn.info.dbname
        try:
            for statement in statements:
                conn.execute(statement.format(s=storage.schema, database=database))
            with pytest.raises(LedgerIntegrityError, match="append-only triggers are gone or altered") as caught:
                pg_ledger.verify()
        finally:
            conn.execute(f"ALTER DATABASE {database} RESET session_replication_role")
    assert named.format(s=storage.schema) in caught.value.evidence["found"]
