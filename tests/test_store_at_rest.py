"""The operator's store damaged at rest (a bit flip, a truncation, a lost file) between two commands: the next
command gives no verdict on what it cannot read (exit 2) or names the damage (exit 1), never passes on it, never
writes over it, and never turns one damaged file into findings about other entries. One named test per class
found by the store-at-rest campaign (round 12)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.audit_support import AuditFixture, build_store, copy_fixture
from tests.conftest import REPO_ROOT
from tests.test_operator_attacks import LATER, cli_at


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> AuditFixture:
    return build_store(tmp_path_factory.mktemp("at-rest"))  # public, gen1, gen2 with two bundles each


@pytest.fixture
def fixture(stored: AuditFixture, tmp_path: Path) -> AuditFixture:
    return copy_fixture(stored, tmp_path / "copy")  # damaged by one test


def listing(root: Path) -> dict[str, str]:
    """Every file under ``root`` with the SHA-256 of its bytes (what a command must leave as it found it); not
    SQLite's own companions of an intact database (``-wal``, ``-shm``: made and removed by any reader)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()
            and not p.name.endswith(("-wal", "-shm"))}


def ledger_file(fx: AuditFixture) -> Path:
    return fx.store / "ledgers" / f"{fx.ledger_id}.sqlite"


def test_attack_an_audit_report_altered_at_rest_is_not_cited_by_a_passport(fixture: AuditFixture) -> None:
    """The operator's clean report is altered after the audit wrote it (still valid JSON, still "clean at the
    head"): the passport would cite its digest as the audit's. Issuing requires the report the audit recorded
    writing, byte for byte."""
    assert cli_at("audit", fixture.ledger_id, "--store", fixture.store, "--jobs", "1").exit_code == 0
    report_path = fixture.store / "audit" / fixture.ledger_id / "audit_report.json"
    report = json.loads(report_path.read_bytes())
    report_path.write_text(json.dumps({**report, "tool": "altered"}, sort_keys=True, separators=(",", ":")))
    before = listing(fixture.store)
    result = cli_at("passport", "issue", "model_0", "--generation", "gen2", "--store", fixture.store)
    assert result.exit_code == 1, result.output
    assert "not a clean report the audit recorded writing" in result.output, result.output
    assert listing(fixture.store) == before
    # the audit run again writes (and records) a clean report: the passport is issued on it
    assert cli_at("audit", fixture.ledger_id, "--store", fixture.store, "--jobs", "1").exit_code == 0
    assert cli_at("passport", "issue", "model_0", "--generation", "gen2", "--store", fixture.store).exit_code == 0


def test_a_store_that_lost_the_ledger_a_passport_names_gives_no_verdict(fixture: AuditFixture) -> None:
    """With the store's ledger file gone, ``passport verify --store`` fell back to the offline check and passed
    a passport its ledger would lapse. A store that holds (its default) or audited the ledger must have it."""
    assert cli_at("audit", fixture.ledger_id, "--store", fixture.store, "--jobs", "1").exit_code == 0
    assert cli_at("passport", "issue", "model_0", "--generation", "gen2", "--store", fixture.store).exit_code == 0
    passport = next((fixture.store / "passports").glob("model_0__gen2*.json"))
    assert cli_at("passport", "verify", passport, "--store", fixture.store).exit_code == 0
    ledger_file(fixture).unlink()
    result = cli_at("passport", "verify", passport, "--store", fixture.store)
    assert result.exit_code == 2, result.output
    assert "not checked against its ledger" not in result.output


def with_note(fixture: AuditFixture, command: tuple[str, ...]) -> list[str]:
    """``command`` with ``NOTE`` standing for a file (outside the store) holding one note entry to append."""
    note = fixture.store.parent / "note.json"
    note.write_text(json.dumps({"text": "an operator's annotation"}))
    return [str(note) if part == "NOTE" else part for part in command]


def foreign_database(path: Path) -> None:
    """Another program's SQLite file in the ledger's place, with a table named like the ledger's."""
    import sqlite3

    path.unlink()
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE meta (key TEXT, value TEXT)")
    connection.close()


@pytest.mark.parametrize("damage", ["emptied", "foreign"])
@pytest.mark.parametrize("command", [
    ("passport", "issue", "model_0", "--generation", "gen2"),
    ("retire", "gen1", "--reason", "expired"),
    ("ledger", "append", "--type", "note", "--json-file", "NOTE"),
    ("status",),
    ("ledger", "verify"),
])
def test_a_ledger_file_that_is_not_a_ledger_is_reported_and_never_written(fixture: AuditFixture,
                                                                         command: tuple[str, ...],
                                                                         damage: str) -> None:
    """A ledger file truncated to 0 bytes: every writer created the ledger schema in it (0 bytes became 45 KB)
    before a check refused it, writing over the evidence; another SQLite file was switched to WAL first. A file
    without the ledger's schema is not a new ledger, and is refused before anything is written to it."""
    if damage == "emptied":
        ledger_file(fixture).write_bytes(b"")
    else:
        foreign_database(ledger_file(fixture))
    before = listing(fixture.store)
    result = cli_at(*with_note(fixture, command), "--store", fixture.store)
    assert result.exit_code in (1, 2), result.output
    assert "Usage:" not in result.output  # (refused for the damage, not for the command line)
    assert "Traceback" not in result.output
    assert listing(fixture.store) == before
    assert not Path(f"{ledger_file(fixture)}-wal").exists()


@pytest.mark.parametrize("command", [("status",), ("ledger", "verify"), ("audit", "--jobs", "1")])
def test_a_ledger_whose_schema_text_is_not_utf8_is_one_line(fixture: AuditFixture, command: tuple[str, ...]) -> None:
    """Bytes that are not UTF-8 written into the schema's own text: SQLite's message quotes them, Python's
    sqlite3 cannot decode the message and raised UnicodeDecodeError, a traceback from every command (red-team
    round 14). The file is not a readable ledger: exit 1, one line, nothing written."""
    path = ledger_file(fixture)
    data = bytearray(path.read_bytes())
    at = data.index(b"CREATE TABLE")
    data[at + 7:at + 15] = b"\xbe\xff\xfe\xbe\xff\xfe\xbe\xff"
    path.write_bytes(bytes(data))
    before = listing(fixture.store)
    result = cli_at(*command, "--store", fixture.store)
    assert result.exit_code == 1 and "not a readable ledger database" in result.output, result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1, result.output
    assert listing(fixture.store) == before


@pytest.mark.parametrize("damage", [b"x" * 4096, b"", b"\xff\xfe not an id", "folder", "link"])
@pytest.mark.parametrize("setting", ["DEFAULT", "DATABASE"])
def test_a_damaged_store_setting_is_a_setup_fault(fixture: AuditFixture, setting: str, damage: bytes | str) -> None:
    """``ledgers/DEFAULT`` points at a ledger, ``ledgers/DATABASE`` at the server holding them: whatever their
    damage (oversized, a folder, a link), exit 2; a folder at DATABASE was read as "no server", so appends went to
    a local file instead."""
    path = fixture.store / "ledgers" / setting
    path.unlink(missing_ok=True)
    if damage == "folder":
        path.mkdir()
    elif damage == "link":
        path.symlink_to(fixture.store / "ledgers" / f"{fixture.ledger_id}.sqlite")
    else:
        assert isinstance(damage, bytes)
        path.write_bytes(damage)
    before = listing(fixture.store)
    for command in (("status",), ("ledger", "append", "--type", "note", "--json-file", "NOTE")):
        result = cli_at(*with_note(fixture, command), "--store", fixture.store)
        assert result.exit_code == 2, (command, result.output)
        assert "Usage:" not in result.output
        assert listing(fixture.store) == before


@pytest.mark.parametrize("damage", ["truncated", "deleted", "folder"])
def test_a_damaged_seal_manifest_is_named_alone(fixture: AuditFixture, tmp_path: Path, damage: str) -> None:
    """gen2's manifest file damaged in ``seals/``: the audit names the manifest, and does not also call gen2's
    intent abandoned ("never sealed"), which its seal entry contradicts."""
    manifest = fixture.store / "seals" / "gen2.seal.json"
    if damage == "truncated":
        manifest.write_bytes(manifest.read_bytes()[:100])
    else:
        manifest.unlink()
        if damage == "folder":
            manifest.mkdir()
    result = cli_at("audit", fixture.ledger_id, "--store", fixture.store, "--jobs", "1", "--json", "--out",
                    tmp_path / "r.json")
    assert result.exit_code in (1, 2), result.output
    if result.exit_code == 1:
        messages = [f["message"] for f in json.loads(result.output)["findings"]]
        assert any("seal" in m for m in messages), messages
        assert not any("never sealed" in m for m in messages), messages


def test_a_stray_file_named_like_a_package_does_not_break_the_audits_workers(fixture: AuditFixture,
                                                                            tmp_path: Path) -> None:
    """A user's ``harness.py`` in the folder the audit runs from was imported by the workers' server in place of
    heldout's package (Python puts the working folder first on a ``python -c`` path): every worker died and the
    audit ended in a traceback. The server now starts without that folder on its path: the same verdict as
    from anywhere else."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "harness.py").write_text("# a user's own file that happens to be called harness.py\n")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HELDOUT_NOW": LATER, "HF_HUB_OFFLINE": "1"}
    result = subprocess.run([sys.executable, str(REPO_ROOT / "audit.py"), fixture.ledger_id, "--store",
                             str(fixture.store), "--jobs", "2", "--out", str(tmp_path / "r.json")],
                            cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr


def _worker_that_dies(*_: object) -> None:
    os._exit(3)  # a worker killed mid-batch (out of memory, a signal): no answer, no exception


def test_a_dead_audit_worker_is_no_verdict(fixture: AuditFixture, tmp_path: Path) -> None:
    """A re-derivation worker that ends without answering is an environment failure, not evidence: one line and
    exit 2, where a traceback and exit 1 (the code of a failed verification) came before."""
    import heldout.audit.rederive as rederive

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rederive, "rederive_bundles", _worker_that_dies)  # (sent to the workers by reference)
        result = cli_at("audit", fixture.ledger_id, "--store", fixture.store, "--jobs", "2", "--out",
                        tmp_path / "r.json")
    assert result.exit_code == 2, result.output
    assert "a re-derivation worker of the audit ended without answering" in result.output
    assert "findings" not in result.output and not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("damage", ["truncated", "flipped"])
def test_a_seal_manifest_damaged_at_rest_is_not_cited_by_a_passport(fixture: AuditFixture, damage: str) -> None:
    """``passport issue`` re-hashes every blob it cites, but named the seal manifest in ``seals/`` by whatever
    hash it had: a passport citing a damaged manifest was signed and logged. The manifest must be the one its
    seal entry logs; nothing is written otherwise."""
    assert cli_at("audit", fixture.ledger_id, "--store", fixture.store, "--jobs", "1").exit_code == 0
    manifest = fixture.store / "seals" / "public.seal.json"
    data = manifest.read_bytes()
    manifest.write_bytes(data[: len(data) // 2] if damage == "truncated" else data.replace(b'"', b"'", 1))
    before = listing(fixture.store)
    result = cli_at("passport", "issue", "model_0", "--generation", "public", "--store", fixture.store)
    assert result.exit_code == 1, result.output
    assert "is not the seal manifest of public that seal entry" in result.output
    assert listing(fixture.store) == before


def test_an_opening_of_the_wrong_kind_is_a_store_fault(fixture: AuditFixture, tmp_path: Path) -> None:
    """gen2's private opening replaced by a folder was "not in this store" (exit 5 everywhere, as if the store
    never held it): present in the wrong form, it is named: the audit's finding (exit 1), a writer's store fault
    (exit 2, nothing written), as for a damaged pool."""
    openings = list((fixture.store / "private" / "generations").glob("*/gen2/*.reveal.json"))
    assert len(openings) == 1
    openings[0].unlink()
    openings[0].mkdir()
    result = cli_at("audit", fixture.ledger_id, "--store", fixture.store, "--jobs", "1", "--json", "--out",
                    tmp_path / "r.json")
    assert result.exit_code == 1, result.output
    assert any("is not a plain file" in f["message"] for f in json.loads(result.output)["findings"])
    before = listing(fixture.store)
    retired = cli_at("retire", "gen2", "--reason", "expired", "--reveal", "--store", fixture.store)
    assert retired.exit_code == 2 and "is not a plain file" in retired.output, retired.output
    assert listing(fixture.store) == before


@pytest.mark.parametrize("shape", ["fifo", "device"])
def test_a_site_folder_whose_manifest_is_not_a_file_is_refused_without_waiting(fixture: AuditFixture,
                                                                               tmp_path: Path, shape: str) -> None:
    """Rebuilding into a site folder whose ``manifest.json`` is a FIFO hung (it was read as a file), and a link to
    /dev/zero read without end: a folder that is not a site of ours is refused (exit 2), nothing read."""
    out = tmp_path / "site"
    out.mkdir()
    (out / "index.html").write_text("<html></html>")
    if shape == "fifo":
        os.mkfifo(out / "manifest.json")
    else:
        (out / "manifest.json").symlink_to("/dev/zero")
    result = cli_at("site", "build", out, "--store", fixture.store)
    assert result.exit_code == 2, result.output


@pytest.mark.parametrize("damage", [b"", b"quorum \xff\xfe", "folder", "fifo"])
@pytest.mark.parametrize("name", ["policy", "witnesses.json"])
def test_a_damaged_witness_file_is_said_never_taken_as_absent(fixture: AuditFixture, name: str,
                                                              damage: bytes | str) -> None:
    """The store's witness policy or list damaged (a folder, a FIFO) read as "none": the store silently stopped
    answering to its witnesses (a seal drew a seed the operator can grind, the audit applied no quorum), and
    ``witness policy`` printed a damaged policy as the one in force. Either is an error now (exit 2)."""
    path = fixture.store / "witnesses" / name
    path.parent.mkdir(exist_ok=True)
    if damage == "folder":
        path.mkdir()
    elif damage == "fifo":
        os.mkfifo(path)
    else:
        assert isinstance(damage, bytes)
        path.write_bytes(damage)
    for command in (("witness", "policy"), ("witness", "status")):
        result = cli_at(*command, "--store", fixture.store)
        assert result.exit_code == 2, (command, result.output)
