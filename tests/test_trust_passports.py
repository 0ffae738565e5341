"""Passports bound to the log (issue 10 section 4), and exports whose keys and manifest are checked.

Attack tests: a passport never logged (signed by the operator key), a passport re-signed by a foreign key that
is placed in the export's ``keys/`` and named with ``--key``, a passport whose expiry is beyond its generation's
(logged by the operator all the same), and exports whose manifest lies about its files.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from keys import TrustedKey
from seals import canonical_bytes, sign_document
from tests.audit_support import AuditFixture
from tests.conftest import seeded_signer
from tests.test_passport_issue import export, forge, issued, log_passport, passport_store, run, verify


@pytest.fixture
def fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AuditFixture:
    return passport_store(tmp_path, monkeypatch)


def third_party_audit(fixture: AuditFixture, folder: Path, tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / "report.json"
    result = run("audit", fixture.ledger_id, "--from", str(folder), "--out", str(out), "--json")
    return dict(json.loads(result.stdout))


def test_attack_a_passport_never_logged_is_refused(fixture: AuditFixture, tmp_path: Path) -> None:
    """Signed by the operator key with a nicer claim, never logged: it once passed ``--from``."""
    path = issued(fixture)
    folder = export(fixture, tmp_path / "export")

    def nicer(doc: dict[str, Any]) -> None:
        doc["declared_note"] = "Vendor claims: certified for every use."

    forged = forge(path, tmp_path / "forged.json", nicer, resign=True)
    for ledger in (["--store", str(fixture.store), "--from", str(folder)], ["--store", str(fixture.store)],
                   ["--key", fixture.key_b64, "--from", str(folder)]):
        result = verify(forged, *ledger)
        assert result.exit_code == 1, result.output
        assert "never logged" in result.output
    assert verify(path, "--key", fixture.key_b64, "--from", str(folder)).exit_code == 0  # the logged one passes


def test_attack_a_passport_and_export_trusted_only_by_their_own_say(fixture: AuditFixture, tmp_path: Path) -> None:
    """The passport names its ledger and the export's entry 0 declares its key: both are the stranger's to write.
    An auditor whose keyring lacks the issuer key, given no --key, refuses (as offline and verify-reveal do)."""
    path = issued(fixture)
    folder = export(fixture, tmp_path / "export")
    result = verify(path, "--from", str(folder))  # this test's default store: an empty keyring
    assert result.exit_code == 1 and "not in the keyring" in result.output, result.output
    assert verify(path, "--key", fixture.key_b64, "--from", str(folder)).exit_code == 0
    assert verify(path, "--store", str(fixture.store), "--from", str(folder)).exit_code == 0  # its keyring has it


def test_attack_a_foreign_key_in_the_exports_keys_is_not_trusted(fixture: AuditFixture, tmp_path: Path) -> None:
    path = issued(fixture)
    folder = export(fixture, tmp_path / "export")
    foreign = seeded_signer(66, name="test-operator", key_id="foreign-key")
    doc = json.loads(path.read_text())
    resigned = sign_document({k: v for k, v in doc.items() if k not in ("issuer", "signature")}, foreign)
    forged = tmp_path / "foreign.json"
    forged.write_bytes(canonical_bytes(resigned) + b"\n")
    key_file = folder / "keys" / "foreign-key.pub.json"
    key_file.write_bytes(canonical_bytes(TrustedKey("foreign-key", foreign.name, foreign.public_key).to_json())
                         + b"\n")
    result = verify(forged, "--key", str(key_file), "--from", str(folder))
    assert result.exit_code == 1, result.output
    assert "not declared by ledger" in result.output or "foreign-key.pub.json" in result.output
    # the export itself is refused by every verifier: a key file no entry declares
    assert "keys/foreign-key.pub.json" in run("ledger", "verify", fixture.ledger_id, "--from", str(folder)).output
    report = third_party_audit(fixture, folder, tmp_path)
    assert any(f["check"] == "export" and f["file"] == "keys/foreign-key.pub.json" for f in report["findings"])
    # and with the key file removed again, --key naming an undeclared key is still refused
    key_file.unlink()
    result = verify(forged, "--key", foreign.public_key.b64, "--from", str(folder))
    assert result.exit_code == 1 and "not declared by ledger" in result.output, result.output


def test_attack_a_passport_expiring_after_its_generation_is_refused(fixture: AuditFixture, tmp_path: Path) -> None:
    """The operator signs and even logs a passport valid years past its generation's expiry."""
    path = issued(fixture)

    def years_later(doc: dict[str, Any]) -> None:
        doc["expiry_utc"] = "2031-01-01T00:00:00Z"

    forged = forge(path, tmp_path / "late.json", years_later, resign=True)
    index = log_passport(fixture, forged)
    folder = export(fixture, tmp_path / "export")
    for ledger in (["--store", str(fixture.store)], ["--key", fixture.key_b64, "--from", str(folder)]):
        result = verify(forged, *ledger)
        assert result.exit_code == 1, result.output
        assert "after its generation's" in result.output
    report = third_party_audit(fixture, folder, tmp_path)
    assert any(f["check"] == "passport" and f["index"] == index and "after its generation's" in f["message"]
               for f in report["findings"])


def _rewrite_manifest(folder: Path, change: Any) -> None:
    manifest = json.loads((folder / "export.json").read_text())
    change(manifest)
    (folder / "export.json").write_bytes(canonical_bytes(manifest) + b"\n")


def _junk_blob(folder: Path) -> str:
    data = b"junk nobody references"
    digest = hashlib.sha256(data).hexdigest()
    (folder / "blobs" / "sha256" / digest[:2]).mkdir(parents=True, exist_ok=True)
    (folder / "blobs" / "sha256" / digest[:2] / digest).write_bytes(data)
    return f"blobs/sha256/{digest[:2]}/{digest}"


@pytest.mark.parametrize("lie", ["non-canonical", "entries.sha256", "keys", "seals", "junk blob", "blobs"])
def test_attack_an_export_manifest_that_lies_about_its_files_is_reported(fixture: AuditFixture, tmp_path: Path,
                                                                         lie: str) -> None:
    clean = export(fixture, tmp_path / "clean")
    folder = tmp_path / "export"
    shutil.copytree(clean, folder)
    expected_file = "export.json"
    if lie == "non-canonical":
        manifest = json.loads((folder / "export.json").read_text())
        (folder / "export.json").write_text(json.dumps(manifest, indent=2))
    elif lie == "entries.sha256":
        _rewrite_manifest(folder, lambda m: m["entries"].update(sha256="0" * 64))
    elif lie == "keys":
        _rewrite_manifest(folder, lambda m: m["keys"].append("zz-undeclared"))
    elif lie == "seals":
        _rewrite_manifest(folder, lambda m: m["seals"].append("gen9.seal.json"))
    elif lie == "junk blob":
        expected_file = _junk_blob(folder)
    else:
        _rewrite_manifest(folder, lambda m: m["blobs"].pop())
    report = third_party_audit(fixture, folder, tmp_path)
    export_findings = [f for f in report["findings"] if f["check"] == "export"]
    assert [f["file"] for f in export_findings] == [expected_file], export_findings
    result = run("ledger", "verify", fixture.ledger_id, "--from", str(folder))
    assert result.exit_code == 1, result.output
    clean_report = third_party_audit(fixture, clean, tmp_path)
    assert not [f for f in clean_report["findings"] if f["check"] == "export"]


# --- keys declared by key entries ----------------------------------------------------------------------------

ROGUE = seeded_signer(67, name="test-operator", key_id="rogue-key")


def _declare(fixture: AuditFixture, signer: Any, key_id: str, when: str) -> int:
    """The operator logs a key entry declaring ``signer``'s public key under ``key_id`` (straight to the ledger)."""
    from heldout.generations import open_ledger
    from heldout.store import Store
    from seals import parse_utc

    entry = {"type": "key", "v": 1, "key": {"key_id": key_id, "name": signer.name,
                                            "public_key_b64": signer.public_key.b64},
             "role": "operator", "created_utc": when}
    with open_ledger(Store.open(fixture.store)) as ledger:
        return ledger.append(entry, signer=seeded_signer(1, name="test-operator", key_id="test-key-1"),
                             now=parse_utc(when))


def _signed_by(path: Path, dest: Path, signer: Any) -> Path:
    doc = json.loads(path.read_text())
    resigned = sign_document({k: v for k, v in doc.items() if k not in ("issuer", "signature")}, signer)
    dest.write_bytes(canonical_bytes(resigned) + b"\n")
    return dest


def test_attack_a_pinned_key_does_not_vouch_for_a_passport_another_key_signed(fixture: AuditFixture,
                                                                             tmp_path: Path) -> None:
    """Both keys are declared by the ledger; the auditor pins the genesis key with --key. A passport signed by
    the other one is not the pinned key's."""
    path = issued(fixture)
    _declare(fixture, ROGUE, "rogue-key", "2026-09-02T00:00:00Z")
    rogue = _signed_by(path, tmp_path / "rogue.json", ROGUE)
    log_passport(fixture, rogue)
    folder = export(fixture, tmp_path / "export")
    result = verify(rogue, "--key", fixture.key_b64, "--from", str(folder))
    assert result.exit_code == 1 and "signed by another key" in result.output, result.output
    assert verify(rogue, "--key", ROGUE.public_key.b64, "--from", str(folder)).exit_code == 0


def test_attack_a_key_declared_after_the_passport_does_not_make_it_valid(fixture: AuditFixture,
                                                                        tmp_path: Path) -> None:
    """Logged while no entry declared its key, the passport could not verify then; declaring the key later
    does not make it valid after the fact."""
    path = issued(fixture)
    rogue = _signed_by(path, tmp_path / "rogue.json", ROGUE)
    index = log_passport(fixture, rogue)
    declared = _declare(fixture, ROGUE, "rogue-key", "2026-09-02T00:00:00Z")
    assert declared > index
    folder = export(fixture, tmp_path / "export")
    for ledger in (["--store", str(fixture.store)], ["--key", ROGUE.public_key.b64, "--from", str(folder)]):
        result = verify(rogue, *ledger)
        assert result.exit_code == 1 and "before the passport" in result.output, result.output
    report = third_party_audit(fixture, folder, tmp_path)
    assert any(f["check"] == "passport" and f["index"] == index for f in report["findings"]), report["findings"]


def test_attack_a_key_entry_naming_the_genesis_key_id_for_another_key(fixture: AuditFixture,
                                                                     tmp_path: Path) -> None:
    """One key id, two keys: the audit names the later entry (an export of such a log is refused), and a
    passport signed by the second key is not trusted under that id."""
    path = issued(fixture)
    index = _declare(fixture, ROGUE, "test-key-1", "2026-09-02T00:00:00Z")
    rogue = _signed_by(path, tmp_path / "rogue.json", seeded_signer(67, name="test-operator", key_id="test-key-1"))
    log_passport(fixture, rogue)
    result = run("audit", fixture.ledger_id, "--store", str(fixture.store), "--json")
    findings = json.loads(result.stdout)["findings"]
    assert result.exit_code == 1
    assert any(f["check"] == "keys" and f["index"] == index and "one key id names one key" in f["message"]
               for f in findings), findings
    assert verify(rogue, "--store", str(fixture.store)).exit_code == 1
