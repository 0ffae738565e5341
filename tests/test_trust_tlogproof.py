"""C2SP tlog-proof conformance (built from the specification text) and passports' offline proofs."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from keys import MalformedInput, Signer, VerificationError
from ledger import Ledger
from ledger.tlogproof import TLOG_PROOF_HEADER, TlogProof, parse_tlog_proof, verify_tlog_proof
from tests.audit_support import AuditFixture
from tests.conftest import REPO_ROOT, seeded_signer
from tests.test_ledger_support import new_ledger
from tests.test_passport_issue import forge, issued, passport_store, verify

EXAMPLE = REPO_ROOT / "tests" / "data" / "c2sp" / "tlog-proof-example.txt"
T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)


def test_the_specifications_example_parses() -> None:
    proof = parse_tlog_proof(EXAMPLE.read_text(encoding="utf-8"))
    assert proof.index == 73894 and len(proof.path) == 5
    assert proof.path[0] == base64.b64decode("gSKyXoYZUgZ6jduWYrkDOARinOMGJveXjgMkBTcdPlQ=")
    assert proof.extra == base64.b64decode("YWdlLXYxLjIuMS1kYXJ3aW4tYXJtNjQudGFyLmd6kYXJ3aW4tYXJ")
    assert proof.checkpoint.startswith("example.com/fancylog\n109482\n")
    assert proof.text() == EXAMPLE.read_text(encoding="utf-8")  # byte for byte back


def small_ledger(folder: Path, entries: int) -> tuple[Ledger, Signer]:
    signer = seeded_signer(1, name="log-op")
    ledger = new_ledger(folder, signer)
    for i in range(entries):
        ledger.append({"type": "retire", "v": 1, "generation": f"gen{i + 1}", "reason": "test",
                       "created_utc": "2026-03-01T12:00:00Z"}, signer=signer, now=T0)
    return ledger, signer


def test_proof_bytes_follow_the_specification_line_by_line(tmp_path: Path) -> None:
    """Assembled here from the spec's rules, not from our formatter: header line; "extra " + base64 (only
    with extra data); "index " + decimal; one base64 hash per line, sibling first; an empty line; the checkpoint
    verbatim."""
    ledger, signer = small_ledger(tmp_path, 6)
    checkpoint = ledger.latest_checkpoint()
    for index in range(ledger.size):
        inclusion = ledger.inclusion_proof(index, checkpoint.size)
        entry = ledger.entry_bytes(index)
        expected = (b"c2sp.org/tlog-proof@v1\n" + b"extra " + base64.b64encode(entry) + b"\n"
                    + b"index " + str(index).encode() + b"\n"
                    + b"".join(base64.b64encode(h) + b"\n" for h in inclusion.path)
                    + b"\n" + checkpoint.note.encode("utf-8"))
        proof = TlogProof(index=index, path=tuple(inclusion.path), checkpoint=checkpoint.note, extra=entry)
        assert proof.text().encode("utf-8") == expected
        assert parse_tlog_proof(expected.decode("utf-8")) == proof
        verified = verify_tlog_proof(proof, name="log-op", key=signer.public_key, origin=ledger.origin)
        assert verified.size == checkpoint.size and verified.root == checkpoint.root
        bare = TlogProof(index=index, path=tuple(inclusion.path), checkpoint=checkpoint.note)
        assert bare.text().split("\n")[1] == f"index {index}"  # no extra line without extra data
        verify_tlog_proof(bare, name="log-op", key=signer.public_key, origin=ledger.origin, record=entry)


@pytest.mark.parametrize("broken", [
    lambda t: t.replace(TLOG_PROOF_HEADER, "c2sp.org/tlog-proof@v2"),
    lambda t: t.replace("index 73894", "index 073894"),
    lambda t: t.replace("index 73894", "index -1"),
    lambda t: t.replace("index 73894\n", ""),
    lambda t: t.replace("gSKyXoYZUgZ6jduWYrkDOARinOMGJveXjgMkBTcdPlQ=", "gSKyXoYZUgZ6jduWYrkDOARinOMGJveX"),
    lambda t: t.replace("\n\nexample.com", "\nexample.com"),
    lambda t: t.replace("extra YWdl", "extra !Wdl"),
], ids=["version", "leading zero", "negative", "no index", "short hash", "no empty line", "bad base64"])
def test_malformed_proofs_are_refused(broken: Any) -> None:
    with pytest.raises(MalformedInput):
        parse_tlog_proof(broken(EXAMPLE.read_text(encoding="utf-8")))


def test_a_proof_fails_for_another_record_index_or_key(tmp_path: Path) -> None:
    ledger, signer = small_ledger(tmp_path, 4)
    checkpoint = ledger.latest_checkpoint()
    inclusion = ledger.inclusion_proof(2, checkpoint.size)
    good = TlogProof(index=2, path=tuple(inclusion.path), checkpoint=checkpoint.note, extra=ledger.entry_bytes(2))
    for bad in (TlogProof(2, good.path, good.checkpoint, ledger.entry_bytes(3)),
                TlogProof(3, good.path, good.checkpoint, good.extra)):
        with pytest.raises(VerificationError):
            verify_tlog_proof(bad, name="log-op", key=signer.public_key, origin=ledger.origin)
    with pytest.raises(VerificationError):
        verify_tlog_proof(good, name="log-op", key=seeded_signer(2).public_key, origin=ledger.origin)


# --- passports carry their proofs ------------------------------------------------------------------------------

@pytest.fixture
def fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AuditFixture:
    built = passport_store(tmp_path, monkeypatch)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no default store: nothing but the passport file
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    return built


def test_a_passport_proves_its_seal_and_bundles_offline(fixture: AuditFixture) -> None:
    path = issued(fixture)
    doc = json.loads(path.read_text())
    proofs = doc["computed"]["heldout"]["proofs"]
    assert len(proofs["bundles"]) == len(doc["computed"]["evaluations"])
    assert all(p.startswith(TLOG_PROOF_HEADER + "\n") for p in [proofs["seal"], *proofs["bundles"]])
    result = verify(path, "--key", fixture.key_b64, "--json")
    assert result.exit_code == 0, result.output
    verdict = json.loads(result.stdout)
    assert verdict["ledger_checked"] is False and verdict["qualification"] == "not checked against its ledger"
    assert verdict["offline_proofs"]["checkpoint_size"] == doc["computed"]["heldout"]["checkpoint"]["size"]


def test_offline_proofs_refuse_an_expiry_beyond_the_logged_seal(fixture: AuditFixture, tmp_path: Path) -> None:
    path = issued(fixture)

    def years_later(doc: dict[str, Any]) -> None:
        doc["expiry_utc"] = "2031-01-01T00:00:00Z"

    result = verify(forge(path, tmp_path / "late.json", years_later, resign=True), "--key", fixture.key_b64)
    assert result.exit_code == 1 and "after its generation's" in result.output, result.output


def test_offline_proofs_refuse_a_swapped_record(fixture: AuditFixture, tmp_path: Path) -> None:
    path = issued(fixture)

    def other_seal_record(doc: dict[str, Any]) -> None:
        proofs = doc["computed"]["heldout"]["proofs"]
        proofs["seal"] = proofs["bundles"][0]  # a genuine proof, of another entry

    result = verify(forge(path, tmp_path / "swapped.json", other_seal_record, resign=True), "--key",
                    fixture.key_b64)
    assert result.exit_code == 1 and "seal proof" in result.output, result.output

    def flipped(doc: dict[str, Any]) -> None:
        text = doc["computed"]["heldout"]["proofs"]["bundles"][0]
        head, _, rest = text.partition("\nindex ")
        extra = base64.b64decode(head.split("extra ")[1])
        changed = extra.replace(b'"model_0"', b'"model_9"')
        doc["computed"]["heldout"]["proofs"]["bundles"][0] = (
            head.split("extra ")[0] + "extra " + base64.b64encode(changed).decode() + "\nindex " + rest)

    result = verify(forge(path, tmp_path / "flipped.json", flipped, resign=True), "--key", fixture.key_b64)
    assert result.exit_code == 1 and "inclusion" in result.output.lower(), result.output
