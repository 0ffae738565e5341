"""Spec supersession: a ``spec`` entry on the ledger; passports on the old spec record the earlier expiry and
lapse (exit 4) once it is in force; new evaluations use its successor; bad requests write nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from heldout.cli import app
from tests.audit_support import AuditFixture, build_store
from tests.generations_support import snapshot

SPEC = "MedEval-1 v0.1"
runner = CliRunner()


@pytest.fixture
def fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AuditFixture:
    built = build_store(tmp_path)
    monkeypatch.setenv("HELDOUT_NOW", "2026-09-02T00:00:00Z")
    return built


def run(fixture: AuditFixture, *args: str) -> Result:
    return runner.invoke(app, [*args, "--store", str(fixture.store)])


def supersede(fixture: AuditFixture, effective: str) -> Result:
    return run(fixture, "spec", "supersede", SPEC, "--by", "MedEval-1 v0.2", "--effective", effective)


def test_supersession_is_logged_and_listed(fixture: AuditFixture) -> None:
    result = supersede(fixture, "2026-12-01T00:00:00Z")
    assert result.exit_code == 0, result.output
    listed = json.loads(run(fixture, "spec", "list", "--json").output)
    assert listed == [{"spec_version": SPEC, "superseded_by": "MedEval-1 v0.2",
                       "effective_utc": "2026-12-01T00:00:00Z", "index": listed[0]["index"]}]
    assert run(fixture, "audit", fixture.ledger_id).exit_code == 0


@pytest.mark.parametrize(("effective", "by", "phrase", "version"), [
    ("2026-08-01T00:00:00Z", "MedEval-1 v0.2", "now or later", SPEC),
    ("2026-12-01T00:00:00Z", SPEC, "cannot supersede itself", SPEC),
    ("soon", "MedEval-1 v0.2", "ISO 8601", SPEC),
    # a supersession is logged for good: a version this code does not implement (a typo, a case variant) would
    # end every evaluation, or supersede nothing that is ever in force
    ("2026-12-01T00:00:00Z", "MedEval-1 v0.3", "--by 'MedEval-1 v0.3' is not a spec version this code", SPEC),
    ("2026-12-01T00:00:00Z", "nonsense", "is not a spec version this code implements", SPEC),
    ("2026-12-01T00:00:00Z", "MedEval-1 v0.2", "'medeval-1 v0.1' is not a spec version", "medeval-1 v0.1"),
])
def test_bad_supersessions_are_refused_and_write_nothing(fixture: AuditFixture, effective: str, by: str,
                                                          phrase: str, version: str) -> None:
    before = snapshot(fixture.store)
    result = run(fixture, "spec", "supersede", version, "--by", by, "--effective", effective)
    assert result.exit_code == 2 and phrase in " ".join(result.output.split()), result.output
    assert snapshot(fixture.store) == before


def test_a_supersession_that_closes_a_cycle_is_refused_and_the_replay_reports_one_logged_anyway(
        fixture: AuditFixture, tmp_path: Path) -> None:
    """v0.1 -> v0.2 is logged; "v0.2 superseded by v0.1" would lead back (every verifier ignores such an entry and
    reports it, for good): the command refuses it; logged anyway, the audit and the independent replay name it
    (the replay passed it before: two verdicts on one log)."""
    from heldout.generations import ledger_signer, open_ledger
    from heldout.store import Store
    from seals import parse_utc
    from tests.independent.replay import ReplayFailure, replay_export

    assert supersede(fixture, "2026-12-01T00:00:00Z").exit_code == 0
    before = snapshot(fixture.store)
    back = run(fixture, "spec", "supersede", "MedEval-1 v0.2", "--by", SPEC, "--effective", "2026-12-05T00:00:00Z")
    assert back.exit_code == 2 and "leads back to MedEval-1 v0.2" in " ".join(back.output.split()), back.output
    assert snapshot(fixture.store) == before
    st = Store.open(fixture.store)
    with open_ledger(st) as ledger:
        index = ledger.append({"type": "spec", "v": 1, "spec_version": "MedEval-1 v0.2", "superseded_by": SPEC,
                               "effective_utc": "2026-12-05T00:00:00Z", "created_utc": "2026-09-02T00:00:00Z"},
                              signer=ledger_signer(st, ledger), now=parse_utc("2026-09-02T00:00:00Z"))
    audit = run(fixture, "audit", fixture.ledger_id, "--json")
    assert audit.exit_code == 1 and any(f["index"] == index and "cycle" in f["message"]
                                        for f in json.loads(audit.stdout)["findings"]), audit.output
    export = tmp_path / "export"
    assert run(fixture, "ledger", "export", fixture.ledger_id, str(export)).exit_code == 0
    with pytest.raises(ReplayFailure, match=f"entry {index} supersedes MedEval-1 v0.2 by MedEval-1 v0.1, which "
                                            "leads back"):
        replay_export(export, fixture.ledger_id)


def test_second_supersession_refused(fixture: AuditFixture) -> None:
    assert supersede(fixture, "2026-12-01T00:00:00Z").exit_code == 0
    before = snapshot(fixture.store)
    again = supersede(fixture, "2026-12-02T00:00:00Z")
    assert again.exit_code == 2 and "already superseded" in again.output
    assert snapshot(fixture.store) == before


def test_passport_expiry_is_the_earlier_supersession_and_it_lapses(fixture: AuditFixture,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    assert supersede(fixture, "2026-12-01T00:00:00Z").exit_code == 0
    assert run(fixture, "audit", fixture.ledger_id).exit_code == 0
    assert run(fixture, "passport", "issue", "model_0", "--generation", "gen2").exit_code == 0
    path = fixture.store / "passports" / "model_0__gen2.passport.json"
    doc = json.loads(path.read_text())
    assert doc["expiry_utc"] == "2026-12-01T00:00:00Z"  # before gen2's 2027-04-01
    assert "superseded by MedEval-1 v0.2" in doc["expiry_basis"]
    before = run(fixture, "passport", "verify", str(path), "--at", "2026-11-01T00:00:00Z")
    assert before.exit_code == 0, before.output
    after = run(fixture, "passport", "verify", str(path), "--at", "2026-12-01T00:00:00Z")
    assert after.exit_code == 4, after.output
    assert "lapsed: spec MedEval-1 v0.1 superseded by MedEval-1 v0.2" in after.output
    # The independent replay, written from FORMATS.md alone, gives the same expiry basis (section 12).
    from tests.independent.replay import replay_export

    export = fixture.store.parent / "spec-export"
    assert run(fixture, "ledger", "export", fixture.ledger_id, str(export)).exit_code == 0
    assert replay_export(export, fixture.ledger_id).passports


def test_issue_refused_once_superseded(fixture: AuditFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    assert supersede(fixture, "2026-09-03T00:00:00Z").exit_code == 0
    monkeypatch.setenv("HELDOUT_NOW", "2026-09-04T00:00:00Z")
    assert run(fixture, "audit", fixture.ledger_id).exit_code == 0
    before = snapshot(fixture.store)
    result = run(fixture, "passport", "issue", "model_0", "--generation", "gen2")
    assert result.exit_code == 4 and "superseded" in result.output
    assert snapshot(fixture.store) == before


@pytest.mark.harness
def test_evaluation_uses_the_successor_once_superseded(fixture: AuditFixture,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """New evaluations use the current spec as the ledger's spec entries say: v0.2 once v0.1 is superseded,
    and the audit re-derives the v0.1 and the v0.2 bundles each under its own version."""
    pytest.importorskip("torch")
    assert supersede(fixture, "2026-09-03T00:00:00Z").exit_code == 0
    monkeypatch.setenv("HELDOUT_NOW", "2026-09-04T00:00:00Z")
    result = run(fixture, "evaluate", "majority", "--generation", "gen2", "--tasks", "bloodmnist",
                 "--data-root", str(fixture.data_root), "--json")
    assert result.exit_code == 0, result.output
    (outcome,) = json.loads(result.output)
    assert outcome["entry"]["spec_version"] == outcome["evaluation"]["spec_version"] == "MedEval-1 v0.2"
    assert "numpy_version" not in outcome["evaluation"]
    gate = outcome["evaluation"]["composite"]["skill_gate"]
    # A constant prediction has no skill: balanced accuracy is exactly chance when every class is in the drawn
    # test set. The draw is seeded by the ledger's checkpoint (a fresh genesis nonce each build), and a tiny
    # draw can miss a class, which lifts balanced accuracy over the present classes above 1/k: then the gate
    # must follow its rule (lower ci95 bound above chance), whichever way it goes.
    per_class = outcome["evaluation"]["dimensions"]["accuracy"]["per_class"]
    assert gate["passed"] is (gate["accuracy_balanced_lower_ci95"] > gate["chance"])
    if all(row["n"] > 0 for row in per_class):
        assert gate["passed"] is False and outcome["evaluation"]["composite"]["index"] == 0
    audit = run(fixture, "audit", fixture.ledger_id, "--json")
    assert audit.exit_code == 0, audit.output
    report = json.loads(audit.output)
    assert report["rederived"] == report["bundles"]
    issued = run(fixture, "passport", "issue", "majority", "--generation", "gen2")
    assert issued.exit_code == 0, issued.output
    path = fixture.store / "passports" / "majority__gen2.passport.json"
    assert json.loads(path.read_text())["spec_version"] == "MedEval-1 v0.2"
    assert run(fixture, "passport", "verify", str(path)).exit_code == 0


@pytest.mark.harness
def test_evaluation_refused_when_the_current_spec_is_not_implemented(fixture: AuditFixture,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from heldout.generations import ledger_signer, open_ledger
    from heldout.store import Store
    from seals import parse_utc

    pytest.importorskip("torch")
    # (the command refuses a version it does not implement: this ledger was written by a later heldout)
    st = Store.open(fixture.store)
    with open_ledger(st) as ledger:
        ledger.append({"type": "spec", "v": 1, "spec_version": SPEC, "superseded_by": "MedEval-1 v9",
                       "effective_utc": "2026-09-03T00:00:00Z", "created_utc": "2026-09-02T00:00:00Z"},
                      signer=ledger_signer(st, ledger), now=parse_utc("2026-09-02T00:00:00Z"))
    monkeypatch.setenv("HELDOUT_NOW", "2026-09-04T00:00:00Z")
    before = snapshot(fixture.store)
    result = run(fixture, "evaluate", "majority", "--generation", "gen2", "--tasks", "bloodmnist",
                 "--data-root", str(fixture.data_root))
    assert result.exit_code == 2 and "MedEval-1 v9" in result.output
    assert snapshot(fixture.store) == before


def test_audit_flags_a_bundle_logged_under_a_superseded_spec(fixture: AuditFixture,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from heldout.generations import ledger_signer, open_ledger
    from heldout.store import Store
    from seals import parse_utc

    assert supersede(fixture, "2026-09-03T00:00:00Z").exit_code == 0
    st = Store.open(fixture.store)
    with open_ledger(st) as ledger:
        # What the evaluate command refuses to do, forged straight onto the ledger: a copy of an earlier
        # bundle, dated after the supersession took effect.
        bundle = next(e for _, e in ledger.entries() if e["type"] == "bundle" and e["generation"] == "gen2")
        forged = {**bundle, "created_utc": "2026-09-04T00:00:00Z"}
        index = ledger.append(forged, signer=ledger_signer(st, ledger), now=parse_utc("2026-09-04T00:00:00Z"))
    monkeypatch.setenv("HELDOUT_NOW", "2026-09-05T00:00:00Z")
    result = run(fixture, "audit", fixture.ledger_id, "--json")
    assert result.exit_code == 1
    findings = json.loads(result.output)["findings"]
    assert any(f["index"] == index and "superseded" in f["message"] for f in findings), findings
