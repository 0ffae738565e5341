"""The checkpoint client that cannot be rolled back: it accepts only signed checkpoints that extend what it
accepted before (with a verified consistency proof) and keeps both signed notes as evidence of a fork."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from ledger import (
    CheckpointClient,
    ForkError,
    Ledger,
    LedgerIntegrityError,
    LedgerKeyError,
    LedgerUsageError,
    RollbackError,
    sign_checkpoint,
    verify_checkpoint,
)
from tests.conftest import seeded_signer
from tests.test_ledger_support import T0, bundle_entry, ledger_signer, new_ledger, retire_entry


def client_for(ledger: Ledger, tmp_path: Path) -> CheckpointClient:
    return CheckpointClient(tmp_path / "client" / "state.json", origin=ledger.origin, name=ledger.key.name,
                            key=ledger.key.public_key)


def accepted_note(client: CheckpointClient) -> str:
    accepted = client.accepted()
    assert accepted is not None
    return accepted.note


def accepted_size(client: CheckpointClient) -> int:
    accepted = client.accepted()
    assert accepted is not None
    return accepted.size


def evidence_notes(client: CheckpointClient) -> list[Path]:
    return sorted(client.evidence_dir.rglob("*.note"))


def test_follows_a_growing_ledger(tmp_path: Path) -> None:
    signer = ledger_signer()
    with new_ledger(tmp_path / "log", entries=2) as ledger:
        client = client_for(ledger, tmp_path)
        assert client.accepted() is None
        first = client.update(ledger.latest_checkpoint().note)
        assert first.size == 3 and client.accepted() == first
        ledger.append_batch([bundle_entry(3), bundle_entry(4)], signer=signer, now=T0)
        proof = ledger.consistency_proof(3)
        accepted = client.update(ledger.latest_checkpoint().note, proof.path)
        assert accepted.size == 5 and accepted_note(client) == ledger.latest_checkpoint().note
        assert client.update(ledger.latest_checkpoint().note).size == 5  # same head again: nothing to prove
        state = json.loads(client.state_path.read_text())
        assert state["note"] == ledger.latest_checkpoint().note
        assert not client.evidence_dir.exists()


def test_rollback_is_refused_with_evidence(tmp_path: Path) -> None:
    with new_ledger(tmp_path / "log", entries=4) as ledger:
        client = client_for(ledger, tmp_path)
        client.update(ledger.latest_checkpoint().note)
        older = ledger.checkpoint_at(3)
        assert older is not None
        with pytest.raises(RollbackError) as caught:
            client.update(older.note)
        assert caught.value.exit_code == 1
        notes = evidence_notes(client)
        assert [p.name for p in notes] == ["accepted.note", "presented.note"]
        assert Path(caught.value.evidence["evidence"]) == notes[0].parent
        for note in notes:  # evidence anyone can check with the public key alone
            verify_checkpoint(note.read_bytes(), name=ledger.key.name, key=ledger.key.public_key)
        assert accepted_size(client) == 5


def forked_pair(tmp_path: Path) -> tuple[Ledger, Ledger]:
    """Two copies of one ledger (same genesis, same key) that diverge after entry 2."""
    signer = ledger_signer()
    left, right = new_ledger(tmp_path / "left", entries=2), new_ledger(tmp_path / "right", entries=2)
    assert left.ledger_id == right.ledger_id
    left.append_batch([bundle_entry(10), bundle_entry(11)], signer=signer, now=T0)
    right.append_batch([retire_entry(1), retire_entry(2)], signer=signer, now=T0)
    return left, right


def test_two_roots_for_one_size_are_a_fork(tmp_path: Path) -> None:
    left, right = forked_pair(tmp_path)
    with left, right:
        client = client_for(left, tmp_path)
        client.update(left.latest_checkpoint().note)
        with pytest.raises(ForkError, match="two signed roots") as caught:
            client.update(right.latest_checkpoint().note)
        evidence = {p.name: p.read_text() for p in evidence_notes(client)}
        assert evidence == {"accepted.note": left.latest_checkpoint().note,
                            "presented.note": right.latest_checkpoint().note}
        summary = json.loads((Path(caught.value.evidence["evidence"]) / "evidence.json").read_text())
        assert summary["kind"] == "fork" and summary["accepted"]["size"] == summary["presented"]["size"] == 5


def test_a_larger_size_needs_a_valid_consistency_proof(tmp_path: Path) -> None:
    signer = ledger_signer()
    left, right = forked_pair(tmp_path)
    with left, right:
        client = client_for(left, tmp_path)
        client.update(left.latest_checkpoint().note)
        right.append(bundle_entry(12, when=T0 + timedelta(days=1)), signer=signer, now=T0)  # dated after its retires
        with pytest.raises(ForkError, match="not proven"):
            client.update(right.latest_checkpoint().note)  # no proof at all
        with pytest.raises(ForkError, match="not proven"):
            client.update(right.latest_checkpoint().note, right.consistency_proof(5).path)  # right's own proof
        assert accepted_note(client) == left.latest_checkpoint().note
        assert len(evidence_notes(client)) == 2  # both attempts presented the same note: one evidence folder


def test_unsigned_or_foreign_checkpoints_change_nothing(tmp_path: Path) -> None:
    with new_ledger(tmp_path / "log", entries=1) as ledger:
        client = client_for(ledger, tmp_path)
        client.update(ledger.latest_checkpoint().note)
        forged = sign_checkpoint(ledger.origin, 9, ledger.root(), seeded_signer(9, name=ledger.key.name))
        with pytest.raises(LedgerKeyError):
            client.update(forged.note)
        assert accepted_size(client) == 2 and not client.evidence_dir.exists()


def test_an_edited_state_file_is_not_trusted(tmp_path: Path) -> None:
    with new_ledger(tmp_path / "log", entries=3) as ledger:
        client = client_for(ledger, tmp_path)
        client.update(ledger.latest_checkpoint().note)
        state = json.loads(client.state_path.read_text())
        state["note"] = state["note"].replace("\n4\n", "\n1\n")  # "rewind" the client by editing its state
        client.state_path.write_text(json.dumps(state))
        with pytest.raises(LedgerIntegrityError, match="does not verify"):
            client.update(ledger.checkpoint_at(1).note)  # type: ignore[union-attr]


def test_state_of_another_ledger_is_refused(tmp_path: Path) -> None:
    with new_ledger(tmp_path / "a", entries=1) as first, \
            new_ledger(tmp_path / "b", seeded_signer(3, name="other-op", key_id="other")) as second:
        client_for(first, tmp_path).update(first.latest_checkpoint().note)
        with pytest.raises(LedgerUsageError, match="another ledger"):
            client_for(second, tmp_path).update(second.latest_checkpoint().note)
