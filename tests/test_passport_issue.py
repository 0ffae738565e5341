"""``heldout passport issue``: only after a clean audit at the ledger head, only against a current generation,
never from a tampered blob (each refusal writes nothing); the issued passport verifies with the keyring or a
key, on its own and against its ledger (store or export); it lapses once its generation is retired; and a
forged inclusion proof or checkpoint note in it is refused."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from heldout.cli import app
from heldout.generations import open_ledger
from heldout.store import Store
from ledger import BlobStore
from seals import canonical_bytes, parse_utc, sha256_hex, sign_document
from tests.audit_support import AuditFixture, add_bundle, build_store
from tests.conftest import seeded_signer
from tests.generations_support import snapshot

ISSUE_AT = "2026-09-02T00:00:00Z"
AFTER_GEN1_EXPIRY = "2027-03-15T00:00:00Z"
runner = CliRunner()


def passport_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AuditFixture:
    """The audit fixture's store, with the clock at the issue time and no $HELDOUT_STORE."""
    built = build_store(tmp_path)
    monkeypatch.setenv("HELDOUT_NOW", ISSUE_AT)
    monkeypatch.delenv("HELDOUT_STORE", raising=False)
    return built


@pytest.fixture
def fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AuditFixture:
    return passport_store(tmp_path, monkeypatch)


def run(*args: str) -> Result:
    result = runner.invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"crashed: {result.exception!r}\n{result.output}")
    return result


def audit(fixture: AuditFixture, expected: int = 0) -> None:
    result = run("audit", fixture.ledger_id, "--store", str(fixture.store))
    assert result.exit_code == expected, result.output


def issue(fixture: AuditFixture, model: str = "model_0", generation: str | None = "gen2") -> Result:
    extra = ["--generation", generation] if generation else []
    return run("passport", "issue", model, *extra, "--store", str(fixture.store))


def verify(path: Path, *args: str) -> Result:
    return run("passport", "verify", str(path), *args)


def issued(fixture: AuditFixture) -> Path:
    audit(fixture)
    result = issue(fixture)
    assert result.exit_code == 0, result.output
    return fixture.store / "passports" / "model_0__gen2.passport.json"


def export(fixture: AuditFixture, dest: Path) -> Path:
    result = run("ledger", "export", fixture.ledger_id, str(dest), "--store", str(fixture.store))
    assert result.exit_code == 0, result.output
    return dest


def entries(fixture: AuditFixture) -> list[tuple[int, dict[str, Any]]]:
    with open_ledger(Store.open(fixture.store)) as ledger:
        return list(ledger.entries())


def assert_nothing_written(fixture: AuditFixture, before: dict[str, Any]) -> None:
    assert snapshot(fixture.store) == before  # every file (ledger size and root included) as it was
    passports = fixture.store / "passports"
    assert not passports.exists() or not any(passports.iterdir())


# --- issuing ------------------------------------------------------------------------------------------------

def test_issue_after_a_clean_audit_and_verify_every_way(fixture: AuditFixture, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    audit(fixture)
    report = json.loads((fixture.store / "audit" / fixture.ledger_id / "audit_report.json").read_text())
    size_before = len(entries(fixture))
    result = issue(fixture, generation=None)  # the most recent current generation with its bundles: gen2
    assert result.exit_code == 0, result.output
    path = fixture.store / "passports" / "model_0__gen2.passport.json"
    doc = json.loads(path.read_text())
    logged = entries(fixture)
    assert len(logged) == size_before + 1
    index, entry = logged[-1]
    assert entry["type"] == "passport" and entry["model_id"] == "model_0" and entry["generation"] == "gen2"
    assert f"issued at entry {index}" in result.output
    assert doc["computed"]["audit"] == {k: report[k] for k in doc["computed"]["audit"]}
    heldout = doc["computed"]["heldout"]
    model_bundles = [i for i, e in logged if e.get("type") == "bundle" and e.get("generation") == "gen2"
                     and e.get("model_id") == "model_0"]
    assert [b["index"] for b in heldout["bundles"]] == model_bundles
    assert heldout["checkpoint"]["size"] == size_before and doc["expiry_utc"] == "2027-04-01T00:00:00Z"

    # $HELDOUT_STORE names the store: its copy of the ledger is checked (it was once silently ignored)
    monkeypatch.setenv("HELDOUT_STORE", str(fixture.store))
    result = verify(path, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ledger_checked"] is True
    monkeypatch.delenv("HELDOUT_STORE")
    result = verify(path, "--key", fixture.key_b64, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ledger_checked"] is False
    # against the ledger: the store's, and an export's
    result = verify(path, "--store", str(fixture.store), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ledger_checked"] is True
    folder = export(fixture, tmp_path / "export")
    result = verify(path, "--key", fixture.key_b64, "--from", str(folder), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ledger_checked"] is True
    # and the passport entry itself passes the next audit
    audit(fixture)
    report = json.loads((fixture.store / "audit" / fixture.ledger_id / "audit_report.json").read_text())
    assert report["checked"]["passports"] == 1


def test_issue_refused_after_a_retire_exit_4(fixture: AuditFixture) -> None:
    result = run("retire", "gen2", "--reason", "leaked", "--reveal", "--store", str(fixture.store))
    assert result.exit_code == 0, result.output
    audit(fixture)  # clean at the new head: the refusal is the generation's
    before = snapshot(fixture.store)
    result = issue(fixture)
    assert result.exit_code == 4, result.output
    assert "retired" in result.output
    assert_nothing_written(fixture, before)


def test_issue_refused_on_an_expired_generation_exit_3(fixture: AuditFixture,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELDOUT_NOW", AFTER_GEN1_EXPIRY)
    audit(fixture)
    before = snapshot(fixture.store)
    result = issue(fixture, generation="gen1")
    assert result.exit_code == 3, result.output
    assert "expired" in result.output
    assert_nothing_written(fixture, before)


def test_issue_refused_with_a_tampered_blob_exit_1(fixture: AuditFixture) -> None:
    audit(fixture)
    entry = next(e for _, e in entries(fixture) if e.get("type") == "bundle" and e.get("generation") == "gen2"
                 and e.get("model_id") == "model_0")
    digest = entry["evaluation_sha256"]
    blob = fixture.store / "blobs" / "sha256" / digest[:2] / digest
    blob.write_bytes(blob.read_bytes().replace(b'"device":"cpu"', b'"device":"gpu"'))
    before = snapshot(fixture.store)
    result = issue(fixture)
    assert result.exit_code == 1, result.output
    assert "altered" in result.output and digest in result.output
    assert_nothing_written(fixture, before)


@pytest.mark.parametrize(("audit_state", "code", "words"), [
    ("none", 2, "no audit of ledger"), ("behind the head", 2, "the latest audit is not at the ledger head"),
    ("not clean", 1, "the latest audit is not clean (failed: ")])
def test_issue_refused_without_a_clean_audit_at_the_head(fixture: AuditFixture, audit_state: str, code: int,
                                                         words: str) -> None:
    """No audit yet, or none at the head: nothing failed, the audit is to run first (exit 2). An audit that is not
    clean: what it found failed (exit 1), said as such (an honest failed report was called "altered or damaged
    since" because it is not among the clean reports the audit recorded)."""
    if audit_state == "behind the head":
        audit(fixture)
        add_bundle(fixture.store, "gen2", "model_0", seed=4242, at=ISSUE_AT, data_root=fixture.data_root)
    elif audit_state == "not clean":
        entry = next(e for _, e in entries(fixture) if e.get("type") == "bundle")
        blob = fixture.store / "blobs" / "sha256" / entry["predictions_sha256"][:2] / entry["predictions_sha256"]
        original = blob.read_bytes()
        blob.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
        audit(fixture, expected=1)
        blob.write_bytes(original)  # the store is whole again, but its latest audit is not clean
    before = snapshot(fixture.store)
    result = issue(fixture)
    assert result.exit_code == code, result.output
    assert words in " ".join(result.output.split()), result.output
    assert_nothing_written(fixture, before)


# --- lapse and expiry ---------------------------------------------------------------------------------------

def test_passport_lapses_once_its_generation_is_retired(fixture: AuditFixture, tmp_path: Path) -> None:
    path = issued(fixture)
    assert verify(path, "--store", str(fixture.store), "--at", "2027-04-02T00:00:00Z").exit_code == 3
    result = run("retire", "gen2", "--reason", "leaked", "--reveal", "--store", str(fixture.store))
    assert result.exit_code == 0, result.output
    result = verify(path, "--store", str(fixture.store))
    assert result.exit_code == 4, result.output
    assert "gen2 retired (leaked)" in result.output
    folder = export(fixture, tmp_path / "export")
    result = verify(path, "--key", fixture.key_b64, "--from", str(folder), "--json")
    assert result.exit_code == 4, result.output
    verdict = json.loads(result.stdout)
    assert verdict["ledger_checked"] is True and "retired" in json.dumps(verdict)
    # without a ledger the passport cannot know: it is still valid on its own (and says it was not checked)
    assert verify(path, "--key", fixture.key_b64).exit_code == 0


# --- forged passports ---------------------------------------------------------------------------------------

def forge(path: Path, dest: Path, change: Any, *, resign: bool) -> Path:
    """``dest``: the passport at ``path`` changed by ``change(doc)``, re-signed with the operator's own key
    when ``resign`` (an operator forging its own evidence), else with its old signature."""
    doc = json.loads(path.read_text())
    change(doc)
    if resign:
        doc = sign_document(doc, seeded_signer(1, name="test-operator", key_id="test-key-1"))
    dest.write_bytes(canonical_bytes(doc) + b"\n")
    return dest


def log_passport(fixture: AuditFixture, path: Path) -> int:
    """The dishonest operator, holding the ledger key, logs a passport entry for the file at ``path``."""
    doc = json.loads(path.read_text())
    data = canonical_bytes(doc)
    st = Store.open(fixture.store)
    BlobStore(st.blobs).put(data)
    with open_ledger(st) as ledger:
        return ledger.append({"type": "passport", "v": 1, "model_id": doc["subject"]["model_id"],
                              "generation": doc["computed"]["heldout"]["generation"],
                              "passport_sha256": sha256_hex(data), "created_utc": doc["issued_utc"]},
                             signer=seeded_signer(1, name="test-operator", key_id="test-key-1"),
                             now=parse_utc(doc["issued_utc"]))


def flip_proof_hash(doc: dict[str, Any]) -> None:
    proof = doc["computed"]["heldout"]["bundles"][0]["inclusion_proof"]
    assert proof, "the fixture's bundles have non-empty inclusion proofs"
    raw = bytearray(base64.b64decode(proof[0]))
    raw[0] ^= 1
    proof[0] = base64.b64encode(bytes(raw)).decode()


def change_note_root(doc: dict[str, Any]) -> None:
    checkpoint = doc["computed"]["heldout"]["checkpoint"]
    origin, size, root, *rest = checkpoint["note"].split("\n")
    raw = bytearray(base64.b64decode(root))
    raw[0] ^= 1
    checkpoint["note"] = "\n".join([origin, size, base64.b64encode(bytes(raw)).decode(), *rest])


@pytest.mark.parametrize("change", [flip_proof_hash, change_note_root], ids=["inclusion proof", "checkpoint note"])
def test_forged_passport_is_refused(fixture: AuditFixture, tmp_path: Path, change: Any) -> None:
    path = issued(fixture)
    folder = export(fixture, tmp_path / "export")
    unsigned = forge(path, tmp_path / "unsigned.json", change, resign=False)
    result = verify(unsigned, "--store", str(fixture.store))
    assert result.exit_code == 1 and "signature does not verify" in result.output, result.output
    resigned = forge(path, tmp_path / "resigned.json", change, resign=True)
    assert verify(resigned, "--key", fixture.key_b64).exit_code == 0  # on its own it cannot tell
    for ledger in (["--store", str(fixture.store)], ["--key", fixture.key_b64, "--from", str(folder)]):
        result = verify(resigned, *ledger)
        assert result.exit_code == 1 and "never logged" in result.output, result.output
    # the operator logs its forgery too: the ledger's own evidence still refuses it
    log_passport(fixture, resigned)
    folder = export(fixture, tmp_path / "export-2")
    expected = "inclusion proof" if change is flip_proof_hash else "checkpoint signature does not verify"
    for ledger in (["--store", str(fixture.store)], ["--key", fixture.key_b64, "--from", str(folder)]):
        result = verify(resigned, *ledger)
        assert result.exit_code == 1, result.output
        assert expected in result.output
