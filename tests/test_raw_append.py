"""One raw append cannot break the log (issue 9, section 4).

``heldout ledger append`` writes only generic ``note`` entries and ``key`` declarations (checked: one key id
names one key, once): every domain type (genesis, seal, bundle, retire, reveal, passport, spec) is refused with
exit 2 and nothing is written, so the raw command cannot bypass the checks and the lock of the operations. A
dishonest operator can still write a contradiction straight into the database with the ledger key (a second
retire, a second seal of a name, a retire of nothing): then status, seal and the audit keep working, on the
first entry, and report the contradiction.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from heldout.generations import ledger_signer, open_ledger
from heldout.store import Store
from seals import parse_utc
from tests.audit_support import NOW, build_store, command_clock
from tests.generations_support import cli

RETIRE = {"generation": "gen1", "reason": "leaked"}
DOMAIN_ENTRIES: dict[str, dict[str, Any]] = {
    "genesis": {"name": "x", "nonce": "0" * 64},
    "seal": {"generation": "gen9", "manifest_sha256": "a" * 64, "set_hash": "b" * 64,
             "expiry_utc": "2027-01-01T00:00:00Z"},
    "bundle": {"generation": "gen1", "model_id": "m", "task": "bloodmnist", "evaluation_sha256": "c" * 64,
               "predictions_sha256": "d" * 64},
    "retire": RETIRE,
    "reveal": {"generation": "gen1", "reveal_sha256": "e" * 64},
    "passport": {"model_id": "m", "generation": "gen1", "passport_sha256": "f" * 64},
    "spec": {"spec_version": "MedEval-1 v0.1", "superseded_by": "MedEval-1 v0.2",
             "effective_utc": "2027-01-01T00:00:00Z"},
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    fx = build_store(tmp_path_factory.mktemp("raw"), bundles_per_generation=1, n_public=30, per_task=20)
    return fx.store, fx.ledger_id


def size_of(store: Path) -> int:
    with open_ledger(Store.open(store)) as ledger:
        return ledger.size


def append(store: Path, tmp_path: Path, kind: str, body: dict[str, Any]) -> Any:
    path = tmp_path / f"{kind}.json"
    path.write_text(json.dumps(body))
    with command_clock(NOW):
        return cli("ledger", "append", Store.open(store).default_ledger_id(), "--type", kind, "--json-file",
                   str(path), store=store)


@pytest.mark.parametrize("kind", sorted(DOMAIN_ENTRIES))
def test_raw_append_of_a_domain_entry_is_refused(built: tuple[Path, str], tmp_path: Path, kind: str) -> None:
    store, _ = built
    before = size_of(store)
    result = append(store, tmp_path, kind, DOMAIN_ENTRIES[kind])
    assert result.exit_code == 2, result.output
    assert "ledger append writes only generic entries" in result.output
    assert size_of(store) == before


def test_two_raw_retires_cannot_break_status(built: tuple[Path, str], tmp_path: Path) -> None:
    """The reported attack: two raw retire entries for one generation made status fail forever."""
    store, _ = built
    for _ in range(2):
        assert append(store, tmp_path, "retire", RETIRE).exit_code == 2
    with command_clock(NOW):
        status = cli("status", "--json", store=store)
    assert status.exit_code == 0, status.output
    assert {g["generation"]: g["state"] for g in json.loads(status.output)["generations"]}["gen1"] == "current"


@pytest.mark.parametrize("body", [
    {"text": "pool re-scanned after a disk error"},
    {"text": "erratum to the gen1 announcement", "blob_sha256": "9" * 64},
])
def test_raw_append_writes_a_note(built: tuple[Path, str], tmp_path: Path, body: dict[str, Any]) -> None:
    store, _ = built
    before = size_of(store)
    result = append(store, tmp_path, "note", body)
    assert result.exit_code == 0, result.output
    with open_ledger(Store.open(store)) as ledger:
        assert ledger.size == before + 1
        assert ledger.entry(before) == {"type": "note", "v": 1, "created_utc": NOW, **body}


@pytest.mark.parametrize("body", [{}, {"text": ""}, {"text": "   "}, {"text": 7}, {"text": "x" * 20000},
                                  {"text": "ok", "blob_sha256": "not-a-hash"},
                                  {"text": "ok", "blob_sha256": "A" * 64}])
def test_a_malformed_note_is_refused(built: tuple[Path, str], tmp_path: Path, body: dict[str, Any]) -> None:
    store, _ = built
    before = size_of(store)
    result = append(store, tmp_path, "note", body)
    assert result.exit_code == 2, result.output
    assert size_of(store) == before


# --- a dishonest operator writes contradictions with the ledger key, bypassing every command --------------------

FORGED: dict[str, list[dict[str, Any]]] = {
    "second retire": [{"type": "retire", "v": 1, "generation": "gen1", "reason": "leaked"},
                      {"type": "retire", "v": 1, "generation": "gen1", "reason": "expired"}],
    "retire of nothing": [{"type": "retire", "v": 1, "generation": "gen8", "reason": "leaked"}],
    "second reveal of nothing revealed": [{"type": "reveal", "v": 1, "generation": "gen7",
                                           "reveal_sha256": "1" * 64}],
    "second seal of a name": [{"type": "seal", "v": 1, "generation": "gen2", "manifest_sha256": "2" * 64,
                               "set_hash": "3" * 64, "expiry_utc": "2027-05-01T00:00:00Z"}],
    "second supersession of a spec": [
        {"type": "spec", "v": 1, "spec_version": "MedEval-1 v0.1", "superseded_by": "MedEval-1 v0.2",
         "effective_utc": "2027-06-01T00:00:00Z"},
        {"type": "spec", "v": 1, "spec_version": "MedEval-1 v0.1", "superseded_by": "MedEval-1 v0.3",
         "effective_utc": "2027-01-01T00:00:00Z"}],
    "malformed seal": [{"type": "seal", "v": 1, "generation": "gen6", "manifest_sha256": "2" * 64,
                        "set_hash": "3" * 64, "expiry_utc": "2027-05-01T00:00:00Z"}],
}


def forge(store: Path, entries: list[dict[str, Any]]) -> list[int]:
    st = Store.open(store)
    with open_ledger(st) as ledger:
        signer = ledger_signer(st, ledger)
        return [ledger.append({**e, "created_utc": NOW}, signer=signer, now=parse_utc(NOW)) for e in entries]


@pytest.mark.parametrize("case", sorted(FORGED))
def test_forged_contradictions_are_reported_and_commands_keep_working(tmp_path: Path, case: str) -> None:
    fx = build_store(tmp_path, bundles_per_generation=1, n_public=30, per_task=20)
    indices = forge(fx.store, FORGED[case])
    with command_clock("2026-09-02T00:00:00Z"):
        status = cli("status", "--json", store=fx.store)
        assert status.exit_code == 0, status.output
        body = json.loads(status.output)
        if not case.startswith("second supersession"):  # status shows generations; the audit sees both
            assert {a["index"] for a in body["anomalies"]} & set(indices), body["anomalies"]
        states = {g["generation"]: g for g in body["generations"]}
        assert set(states) >= {"public", "gen1", "gen2"}
        if case == "second retire":  # the first retire counts
            assert states["gen1"]["state"] == "retired" and states["gen1"]["retired"]["reason"] == "leaked"
        if case == "second seal of a name":
            assert states["gen2"]["seal_index"] < indices[0]
        table = cli("status", store=fx.store)
        assert table.exit_code == 0
        assert "contradicts itself" in table.output or case.startswith("second supersession")
        sealed = cli("seal", "gen5", "--tasks", "bloodmnist", "--per-task", "5", "--expires", "2027-02-01",
                     "--budget-bits", "5000", store=fx.store)
        assert sealed.exit_code == 0, sealed.output
        audit = cli("audit", fx.ledger_id, "--json", "--out", str(tmp_path / "report.json"), store=fx.store)
    assert audit.exit_code == 1, audit.output
    report = json.loads(audit.output)
    assert any(f.get("index") in indices for f in report["findings"]), report["findings"]
    assert report["rederived"] == report["bundles"] >= 3, report  # the audit went on past the contradiction


def test_a_key_id_is_declared_once(built: tuple[Path, str], tmp_path: Path) -> None:
    from tests.conftest import seeded_signer

    store, _ = built
    other = seeded_signer(7, name="second-key", key_id="second-key-7")
    body = {"role": "passport-issuer", "key": {"key_id": other.key_id, "name": other.name,
                                               "public_key_b64": other.public_key.b64}}
    assert append(store, tmp_path, "key", body).exit_code == 0
    before = size_of(store)
    again = append(store, tmp_path, "key", body)
    assert again.exit_code == 2 and "already declared" in again.output, again.output
    genesis_id = Store.open(store).keyring.list()[0].key_id
    clash = append(store, tmp_path, "key", {**body, "key": {**body["key"], "key_id": genesis_id}})
    assert clash.exit_code == 2 and "already declared" in clash.output, clash.output
    assert size_of(store) == before
