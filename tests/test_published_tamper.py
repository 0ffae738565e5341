"""Tampering with what a log publishes beside its entries: the key files of an export, the cosignature lines of
older checkpoint notes, the columns stored beside a signed cosignature, a seal file a tiles manifest lists. Each
was let through by one verifier (while another caught it, or none did); one named test per attack."""

from __future__ import annotations

import base64
import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

from ledger import LedgerIntegrityError
from ledger.cosignature import cosign
from ledger.tiles import open_tiles, write_tiles
from tests.conftest import seeded_signer
from tests.test_ledger_support import T0
from tests.witness_support import cli, cosigner, operator_store, witness_signer

OPERATOR = seeded_signer(1, name="lab-operator", key_id="lab-1")


def key_entry(i: int) -> dict[str, object]:
    public = seeded_signer(90 + i, name=f"k{i}", key_id=f"k{i}").public_key.b64
    return {"type": "key", "v": 1, "key": {"key_id": f"k{i}", "name": f"k{i}", "public_key_b64": public},
            "role": "auditor", "created_utc": "2026-03-01T12:00:00Z"}


@pytest.fixture
def witnessed(tmp_path: Path) -> tuple[Path, str, Path]:
    """A ledger of three entries whose checkpoints 2 and 3 witness 0 cosigned; its store, id and policy file."""
    store, ledger_id, ledger = operator_store(tmp_path)
    with ledger:
        for i in (1, 2):
            ledger.append(key_entry(i), signer=OPERATOR, now=T0)
            checkpoint = ledger.latest_checkpoint()
            stamp = int((T0 + timedelta(hours=i)).timestamp())
            ledger.add_cosignature(checkpoint.size, cosigner(0), cosign(checkpoint, witness_signer(0), stamp), now=T0)
        policy = tmp_path / "policy.txt"
        policy.write_text(f"log {ledger.verifier_key}\nwitness W0 {cosigner(0).vkey}\nquorum W0\n")
    return store, ledger_id, policy


def test_attack_an_export_without_the_file_of_a_key_its_ledger_declares(witnessed: tuple[Path, str, Path],
                                                                         tmp_path: Path) -> None:
    store, ledger_id, _ = witnessed
    export = tmp_path / "export"
    assert cli("ledger", "export", ledger_id, str(export), store=store).exit_code == 0
    assert cli("ledger", "verify", ledger_id, "--from", str(export)).exit_code == 0
    (export / "keys" / "k1.pub.json").unlink()
    result = cli("ledger", "verify", ledger_id, "--from", str(export))
    assert result.exit_code == 1 and "has no key file in the export" in result.output, result.output


@pytest.mark.parametrize("published", ["export", "tiles"])
def test_attack_a_broken_cosignature_on_an_older_published_checkpoint(witnessed: tuple[Path, str, Path],
                                                                      tmp_path: Path, published: str) -> None:
    """Only the latest checkpoint's quorum was evaluated by ledger verify --policy; a witness line whose
    signature was changed on an older note passed it (the audit with --policy refused it)."""
    store, ledger_id, policy = witnessed
    out = tmp_path / published
    command = ("export", ledger_id, str(out)) if published == "export" else ("tiles", ledger_id, str(out))
    assert cli("ledger", *command, store=store).exit_code == 0
    verify = ("ledger", "verify", ledger_id, "--from", str(out), "--policy", str(policy))
    assert cli(*verify).exit_code == 0
    note = out / "checkpoints" / "2.note"
    lines = note.read_text().split("\n")
    (at,) = [k for k, line in enumerate(lines) if line.startswith("\u2014 " + witness_signer(0).name + " ")]
    prefix, _, signature = lines[at].rpartition(" ")
    blob = bytearray(base64.b64decode(signature))
    blob[-1] ^= 1
    lines[at] = f"{prefix} {base64.b64encode(bytes(blob)).decode()}"
    note.write_text("\n".join(lines))
    result = cli(*verify)
    assert result.exit_code == 1 and "does not verify" in result.output, result.output


def test_attack_a_stored_cosignature_whose_columns_are_not_its_signed_line(witnessed: tuple[Path, str, Path]) -> None:
    """witnessed_time reads the timestamp column: a later time written there (the signed line unchanged) made
    evaluate say the witnesses attest a time none signed, and verify said nothing."""
    store, ledger_id, policy = witnessed
    database = next((store / "ledgers").glob(f"{ledger_id}*.sqlite"))
    with sqlite3.connect(database) as connection:
        connection.execute("DROP TRIGGER cosignatures_no_update")
        connection.execute("UPDATE cosignatures SET timestamp = timestamp + 86400 * 365 WHERE size = 3")
    result = cli("ledger", "verify", ledger_id, "--policy", str(policy), store=store)
    assert result.exit_code == 1 and "not the signed line's" in result.output, result.output


def test_attack_a_seal_file_the_tiles_manifest_lists_is_missing(tmp_path: Path) -> None:
    """A missing seal file the manifest names is an incomplete publication (exit 1), as in a local listing, not
    a usage error (exit 2): over HTTP there is no listing, so the reader meets it here."""
    _, _, ledger = operator_store(tmp_path)
    seals = tmp_path / "seals"
    seals.mkdir()
    (seals / "gen1.seal.json").write_text("{}")
    with ledger:
        write_tiles(ledger, tmp_path / "tiles", seals=seals)
    (tmp_path / "tiles" / "seals" / "gen1.seal.json").unlink()
    tiles = open_tiles(str(tmp_path / "tiles"))
    with pytest.raises(LedgerIntegrityError, match=r"lists seals/gen1\.seal\.json, which is missing"):
        tiles.seal_bytes("gen1.seal.json")


def test_a_damaged_working_copy_of_a_seal_manifest_is_published_from_its_logged_blob(tmp_path: Path) -> None:
    """The store's seals/gen2.seal.json damaged (its logged bytes intact in the blob store): the export left the
    file out, silently (the third-party audit then said the manifest was missing and the draw abandoned), and
    ledger tiles published the damaged copy. Both publish the bytes the seal entry logs."""
    from tests.audit_support import build_store

    fixture = build_store(tmp_path, bundles_per_generation=0, n_public=20, per_task=10)
    manifest = fixture.store / "seals" / "gen2.seal.json"
    logged = manifest.read_bytes()
    manifest.write_bytes(logged + b" ")
    export = tmp_path / "export"
    assert cli("ledger", "export", fixture.ledger_id, str(export), store=fixture.store).exit_code == 0
    assert (export / "seals" / "gen2.seal.json").read_bytes() == logged
    assert cli("ledger", "verify", fixture.ledger_id, "--from", str(export)).exit_code == 0
    tiles = tmp_path / "tiles"  # (a tiles directory published the damaged copy itself)
    assert cli("ledger", "tiles", fixture.ledger_id, str(tiles), store=fixture.store).exit_code == 0
    assert (tiles / "seals" / "gen2.seal.json").read_bytes() == logged
    assert cli("ledger", "verify", fixture.ledger_id, "--from", str(tiles)).exit_code == 0
