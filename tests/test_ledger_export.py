"""Export and replay: the public directory's layout and determinism, the read API the audit uses, and
verification of the replay (manifest, blobs, expected ledger id)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from keys import Keyring, TrustedKey, verifier_key_string
from ledger import (
    BlobStore,
    Ledger,
    LedgerIntegrityError,
    LedgerUsageError,
    export_ledger,
    open_export,
    verify_checkpoint,
)
from tests.conftest import seeded_signer
from tests.test_ledger_support import T0, bundle_entry, ledger_signer, new_ledger

PRIVATE_MARKER = b"PRIVATE-SALT-DO-NOT-EXPORT-7f3a"


def populated_store(root: Path) -> tuple[Ledger, BlobStore]:
    """A store-like layout: a ledger whose bundle entries reference blobs (one missing), a seal manifest (and a
    stray one no entry names), a keyring with an extra key, and a private folder that must never be exported."""
    signer = ledger_signer()
    blobs = BlobStore(root / "blobs" / "sha256")
    ledger = new_ledger(root / "ledgers")
    entries = []
    seal_manifest = b'{"generation":"gen1"}'
    for i in range(1, 4):
        entry = bundle_entry(i)
        if i == 1:  # an entry naming the published seal manifest, as a seal entry does
            entry["manifest_sha256"] = blobs.put(seal_manifest)
        entry["predictions_sha256"] = blobs.put(f"predictions {i}".encode())
        entry["evaluation_sha256"] = blobs.put(f"evaluation {i}".encode()) if i != 3 else hashlib.sha256(
            b"never stored").hexdigest()
        entries.append(entry)
    ledger.append_batch(entries[:2], signer=signer, now=T0)
    ledger.append(entries[2], signer=signer, now=T0)
    ledger.append({"type": "key", "v": 1, "role": "passport-issuer", "created_utc": "2026-03-01T12:00:00Z",
                   "key": {"key_id": "issuer-1", "name": "issuer",
                           "public_key_b64": seeded_signer(20).public_key.b64}}, signer=signer, now=T0)
    (root / "seals").mkdir()
    (root / "seals" / "gen1.seal.json").write_bytes(seal_manifest)
    (root / "seals" / "gen2.seal.json").write_bytes(b'{"generation":"gen2"}')  # no entry names it
    Keyring(root / "keys").add(TrustedKey("auditor", "auditor", seeded_signer(21).public_key))
    (root / "private").mkdir(mode=0o700)
    (root / "private" / "salts.json").write_bytes(PRIVATE_MARKER)
    return ledger, blobs


def do_export(root: Path, ledger: Ledger, dest: Path) -> dict:
    return export_ledger(ledger, dest, blobs=BlobStore(root / "blobs" / "sha256"), seals=root / "seals")


def test_export_layout(tmp_path: Path) -> None:
    ledger, _ = populated_store(tmp_path / "store")
    with ledger:
        manifest = do_export(tmp_path / "store", ledger, tmp_path / "out")
        out = tmp_path / "out"
        lines = (out / "entries.jsonl").read_bytes().split(b"\n")
        assert lines[-1] == b"" and lines[:-1] == [ledger.entry_bytes(i) for i in range(ledger.size)]
        assert sorted(p.name for p in (out / "checkpoints").iterdir()) == sorted(
            f"{c.size}.note" for c in ledger.checkpoints())
        for checkpoint in ledger.checkpoints():
            assert (out / "checkpoints" / f"{checkpoint.size}.note").read_text() == checkpoint.note
        assert manifest["ledger_id"] == ledger.ledger_id and manifest["size"] == 5
        assert manifest["note_verifier_key"] == ledger.verifier_key
        assert len(manifest["blobs"]) == 6 and len(manifest["missing_blobs"]) == 1
        for digest in manifest["blobs"]:
            assert (out / "blobs" / "sha256" / digest[:2] / digest).is_file()
        assert manifest["keys"] == ["issuer-1", "ledger-op"]  # declared by entries; the keyring's stay home
        assert not (out / "keys" / "auditor.pub.json").exists()
        assert manifest["seals"] == ["gen1.seal.json"]  # not gen2: a file no entry vouches for stays home
        assert sorted(p.name for p in (out / "seals").iterdir()) == ["gen1.seal.json"]
        assert json.loads((out / "export.json").read_text()) == manifest


def test_nothing_private_is_exported(tmp_path: Path) -> None:
    ledger, _ = populated_store(tmp_path / "store")
    with ledger:
        do_export(tmp_path / "store", ledger, tmp_path / "out")
    for path in (tmp_path / "out").rglob("*"):
        assert "private" not in path.parts[len((tmp_path / "out").parts):]
        if path.is_file():
            assert PRIVATE_MARKER not in path.read_bytes()
            assert b"seed_b64" not in path.read_bytes()


def test_export_is_deterministic(tmp_path: Path) -> None:
    ledger, _ = populated_store(tmp_path / "store")
    with ledger:
        do_export(tmp_path / "store", ledger, tmp_path / "one")
        do_export(tmp_path / "store", ledger, tmp_path / "two")

    def files(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}

    assert files(tmp_path / "one") == files(tmp_path / "two")


def test_export_refuses_a_non_empty_destination_and_leaves_nothing_on_failure(tmp_path: Path) -> None:
    ledger, blobs = populated_store(tmp_path / "store")
    with ledger:
        (tmp_path / "busy").mkdir()
        (tmp_path / "busy" / "file").touch()
        with pytest.raises(LedgerUsageError, match="not an empty directory"):
            do_export(tmp_path / "store", ledger, tmp_path / "busy")
        digest = ledger.entry(1)["predictions_sha256"]
        blobs.path(digest).write_bytes(b"tampered")
        with pytest.raises(LedgerIntegrityError, match="altered"):
            do_export(tmp_path / "store", ledger, tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["busy", "store"]


def test_read_api_for_the_audit(tmp_path: Path) -> None:
    ledger, _ = populated_store(tmp_path / "store")
    with ledger:
        manifest = do_export(tmp_path / "store", ledger, tmp_path / "out")
        exported = open_export(tmp_path / "out")
        assert exported.ledger_id == ledger.ledger_id and exported.size == ledger.size
        assert [exported.entry_bytes(i) for i in range(exported.size)] == \
            [ledger.entry_bytes(i) for i in range(ledger.size)]
        assert list(exported.entries(4)) == list(ledger.entries(4))
        assert [c.note for c in exported.checkpoints()] == [c.note for c in ledger.checkpoints()]
        assert exported.latest_checkpoint().note == ledger.latest_checkpoint().note
        assert exported.blob(manifest["blobs"][0]) == BlobStore(tmp_path / "store" / "blobs" / "sha256").get(
            manifest["blobs"][0])
        assert not exported.has_blob(manifest["missing_blobs"][0])
        assert exported.ledger_key == ledger.key
        assert {k.key_id for k in exported.public_keys()} == {"issuer-1", "ledger-op"}
        assert exported.seal_bytes("gen1.seal.json") == b'{"generation":"gen1"}'
        assert [p.name for p in exported.seal_paths()] == ["gen1.seal.json"]
        assert exported.inclusion_proof(2, 5) == ledger.inclusion_proof(2, 5)
        assert exported.consistency_proof(2) == ledger.consistency_proof(2)
        report = exported.verify(expected_id=ledger.ledger_id[:8])
        assert report.to_json() == ledger.verify().to_json()
        checkpoint = exported.latest_checkpoint()
        verify_checkpoint(checkpoint.note, name=exported.ledger_key.name, key=exported.ledger_key.public_key)
        assert manifest["note_verifier_key"] == verifier_key_string(ledger.key.name, ledger.key.public_key)


def test_verify_refuses_an_export_of_another_ledger(tmp_path: Path) -> None:
    with new_ledger(tmp_path / "l", entries=2) as ledger:
        export_ledger(ledger, tmp_path / "out")
    other = "0" * 20 if not ledger.ledger_id.startswith("0") else "1" * 20
    with pytest.raises(LedgerIntegrityError, match="not the ledger asked for"):
        open_export(tmp_path / "out").verify(expected_id=other)


@pytest.mark.parametrize("member, value", [("size", 99), ("root", "AAAA"), ("checkpoints", [1])])
def test_verify_refuses_a_manifest_that_misdescribes_the_ledger(tmp_path: Path, member: str, value: Any) -> None:
    with new_ledger(tmp_path / "l", entries=2) as ledger:
        export_ledger(ledger, tmp_path / "out")
    path = tmp_path / "out" / "export.json"
    manifest = json.loads(path.read_text())
    manifest[member] = value
    path.write_text(json.dumps(manifest))
    with pytest.raises(LedgerIntegrityError, match=member):
        open_export(tmp_path / "out").verify()


def test_verify_refuses_a_tampered_exported_blob(tmp_path: Path) -> None:
    ledger, _ = populated_store(tmp_path / "store")
    with ledger:
        manifest = do_export(tmp_path / "store", ledger, tmp_path / "out")
    digest = manifest["blobs"][0]
    (tmp_path / "out" / "blobs" / "sha256" / digest[:2] / digest).write_bytes(b"swapped")
    with pytest.raises(LedgerIntegrityError, match="altered"):
        open_export(tmp_path / "out").verify()


def test_a_directory_without_manifest_is_not_an_export(tmp_path: Path) -> None:
    with pytest.raises(LedgerUsageError, match="not a ledger export"):
        open_export(tmp_path)
