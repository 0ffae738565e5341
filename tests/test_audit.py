"""``python audit.py <ledger-id>``: the operator's audit of its store, a third party's audit of an export,
the report document, the JSON output, the exit codes and usage errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import typer
from typer.testing import CliRunner, Result

from harness.bundle import bundle_entry
from harness.metrics import evaluation_bytes
from heldout.cli import app
from heldout.cli.audit_cmd import audit_command
from heldout.cli.common import handle_errors
from heldout.generations import charge_bits, generation_cases, ledger_signer, load_generations, open_ledger
from heldout.store import Store
from ledger import BlobStore
from seals import parse_utc
from tests.audit_support import TASK, AuditFixture, add_bundle, build_store, synthetic_result
from tests.conftest import REPO_ROOT

AUDIT_AT = "2026-09-02T00:00:00Z"
runner = CliRunner()

# ``python audit.py``'s command, built as audit.py builds it.
audit_app = typer.Typer(add_completion=False, pretty_exceptions_show_locals=False)
audit_app.command()(handle_errors(audit_command))


@pytest.fixture
def fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AuditFixture:
    built = build_store(tmp_path)
    monkeypatch.setenv("HELDOUT_NOW", AUDIT_AT)
    return built


def audit(*args: str) -> Result:
    result = runner.invoke(audit_app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"the audit crashed: {result.exception!r}\n{result.output}")
    return result


def heldout(*args: str, store: Path) -> Result:
    result = runner.invoke(app, [*args, "--store", str(store)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def export(fixture: AuditFixture, dest: Path) -> Path:
    heldout("ledger", "export", fixture.ledger_id, str(dest), store=fixture.store)
    return dest


def report_path(fixture: AuditFixture) -> Path:
    return fixture.store / "audit" / fixture.ledger_id / "audit_report.json"


def ledger_head(fixture: AuditFixture) -> tuple[int, str]:
    with open_ledger(Store.open(fixture.store)) as ledger:
        return ledger.size, ledger.root().hex()


def bundles_on(fixture: AuditFixture, generation: str) -> dict[int, dict[str, Any]]:
    with open_ledger(Store.open(fixture.store)) as ledger:
        return {i: e for i, e in ledger.entries() if e.get("type") == "bundle" and e.get("generation") == generation}


# --- operator mode ------------------------------------------------------------------------------------------

def test_operator_audit_is_clean_and_reports_the_passport_audit_fields(fixture: AuditFixture,
                                                                         reference_passport_path: Path) -> None:
    result = audit(fixture.ledger_id, "--store", str(fixture.store))
    assert result.exit_code == 0, result.output
    assert "clean" in result.output and "6 of 6 bundles re-derived" in result.output
    report = json.loads(report_path(fixture).read_text())
    reference = json.loads(reference_passport_path.read_text())["computed"]["audit"]
    for member, value in reference.items():
        assert type(report[member]) is type(value), member
    size, root = ledger_head(fixture)
    assert {k: report[k] for k in reference} == {
        "audit_command": f"python audit.py {fixture.ledger_id}",
        "bundles": 6,
        "ledger_entries": size,
        "ledger_head": root,
        "ledger_intact": True,
        "rederived": 6,
    }
    assert report["mode"] == "operator" and report["verdict"] == "clean" and report["exit_code"] == 0
    assert report["findings"] == [] and report["not_rederived"] == []
    assert report["checked"]["seals"] == 3 and report["checkpoints"] >= 1
    assert set(report["generations"]) == {"public", "gen1", "gen2"}


def test_operator_audit_takes_a_unique_prefix_and_out(fixture: AuditFixture, tmp_path: Path) -> None:
    out = tmp_path / "elsewhere" / "report.json"
    result = audit(fixture.ledger_id[:6], "--store", str(fixture.store), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["ledger_id"] == fixture.ledger_id
    assert not report_path(fixture).exists()


def test_operator_audit_json_output_is_the_report(fixture: AuditFixture) -> None:
    result = audit(fixture.ledger_id, "--store", str(fixture.store), "--json")
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    assert printed == json.loads(report_path(fixture).read_text())
    assert printed["verdict"] == "clean"


def test_operator_audit_after_more_bundles_follows_the_head(fixture: AuditFixture) -> None:
    assert audit(fixture.ledger_id, "--store", str(fixture.store)).exit_code == 0
    add_bundle(fixture.store, "gen2", "model_late", seed=999, at=AUDIT_AT, data_root=fixture.data_root)
    assert audit(fixture.ledger_id, "--store", str(fixture.store)).exit_code == 0
    report = json.loads(report_path(fixture).read_text())
    assert (report["ledger_entries"], report["ledger_head"]) == ledger_head(fixture)
    assert report["bundles"] == report["rederived"] == 7


def test_python_audit_py_in_a_subprocess(fixture: AuditFixture) -> None:
    done = subprocess.run([sys.executable, str(REPO_ROOT / "audit.py"), fixture.ledger_id, "--store",
                           str(fixture.store)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "clean" in done.stdout and fixture.ledger_id in done.stdout
    assert "Traceback" not in done.stderr
    assert json.loads(report_path(fixture).read_text())["exit_code"] == 0


# --- third-party mode ---------------------------------------------------------------------------------------

def test_third_party_audit_names_each_sealed_bundle_then_is_clean_once_revealed(fixture: AuditFixture,
                                                                                tmp_path: Path) -> None:
    heldout("retire", "gen1", "--reason", "leaked", "--reveal", store=fixture.store)
    folder = export(fixture, tmp_path / "export1")
    out = tmp_path / "report1.json"
    result = audit(fixture.ledger_id, "--from", str(folder), "--out", str(out))
    assert result.exit_code == 5, result.output
    report = json.loads(out.read_text())
    gen2 = bundles_on(fixture, "gen2")
    assert report["mode"] == "third-party" and report["verdict"] == "incomplete" and report["findings"] == []
    assert report["ledger_intact"] is True
    assert {u["index"]: u["generation"] for u in report["not_rederived"]} == dict.fromkeys(gen2, "gen2")
    for unrederived in report["not_rederived"]:
        assert "still sealed" in unrederived["reason"]
        assert unrederived["model_id"] == gen2[unrederived["index"]]["model_id"]
    assert report["rederived"] == report["bundles"] - len(gen2)
    assert "not re-derived" in result.output and "still sealed" in result.output
    for index in gen2:
        assert f"│ {index} " in result.output

    heldout("retire", "gen2", "--reason", "superseded", "--reveal", store=fixture.store)
    folder = export(fixture, tmp_path / "export2")
    out = tmp_path / "report2.json"
    result = audit(fixture.ledger_id, "--from", str(folder), "--out", str(out))
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["verdict"] == "clean" and report["not_rederived"] == []
    assert report["bundles"] == report["rederived"] == 6
    assert report["audit_command"] == f"python audit.py {fixture.ledger_id} --from {folder}"
    assert report["ledger_head"] == ledger_head(fixture)[1]


def test_third_party_audit_with_json(fixture: AuditFixture, tmp_path: Path) -> None:
    folder = export(fixture, tmp_path / "export")
    out = tmp_path / "report.json"
    result = audit(fixture.ledger_id, "--from", str(folder), "--out", str(out), "--json")
    assert result.exit_code == 5
    printed = json.loads(result.stdout)
    assert printed == json.loads(out.read_text())
    assert {u["generation"] for u in printed["not_rederived"]} == {"gen1", "gen2"}


def test_third_party_audit_of_another_ledgers_export_exits_1(fixture: AuditFixture, tmp_path: Path) -> None:
    folder = export(fixture, tmp_path / "export")
    other = "0" * 20 if fixture.ledger_id != "0" * 20 else "1" * 20
    out = tmp_path / "report.json"
    result = audit(other, "--from", str(folder), "--out", str(out))
    assert result.exit_code == 1, result.output
    report = json.loads(out.read_text())
    assert report["ledger_intact"] is False
    assert any(f["index"] == 0 and "not the ledger asked for" in f["message"] for f in report["findings"])


# --- usage errors -------------------------------------------------------------------------------------------

def test_both_store_and_from_is_a_usage_error(fixture: AuditFixture, tmp_path: Path) -> None:
    folder = export(fixture, tmp_path / "export")
    result = audit(fixture.ledger_id, "--store", str(fixture.store), "--from", str(folder), "--out",
                   str(tmp_path / "r.json"))
    assert result.exit_code == 2, result.output
    assert "not both" in result.output
    assert not (tmp_path / "r.json").exists()


def test_short_ledger_id_with_from_is_a_usage_error(fixture: AuditFixture, tmp_path: Path) -> None:
    folder = export(fixture, tmp_path / "export")
    result = audit(fixture.ledger_id[:8], "--from", str(folder), "--out", str(tmp_path / "r.json"))
    assert result.exit_code == 2, result.output
    assert "full 20-hex ledger id" in result.output
    assert not (tmp_path / "r.json").exists()


def test_from_a_folder_that_is_not_an_export_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = audit("0" * 20, "--from", str(tmp_path / "empty"), "--out", str(tmp_path / "r.json"))
    assert result.exit_code == 2, result.output
    assert "not a ledger export" in result.output
    assert not (tmp_path / "r.json").exists()


def test_unknown_ledger_in_the_store_is_a_usage_error(fixture: AuditFixture) -> None:
    result = audit("ffffffffff", "--store", str(fixture.store))
    unknown = result if not fixture.ledger_id.startswith("ffffffffff") else audit("0000000000", "--store",
                                                                                    str(fixture.store))
    assert unknown.exit_code == 2, unknown.output
    assert not report_path(fixture).exists()


# --- bundles that do not re-derive ----------------------------------------------------------------------------

def log_bundle(fixture: AuditFixture, generation: str, *, evaluation_blob: Any, change: Any = None) -> int:
    """Log a bundle the way ``record_bundle`` does, but with its evaluation changed by ``change(evaluation)``
    and its blob written by ``evaluation_blob(evaluation)``: an operator logging numbers it did not derive."""
    st = Store.open(fixture.store)
    now = parse_utc(AUDIT_AT)
    with open_ledger(st) as ledger:
        labels = generation_cases(st, generation, TASK, ledger=ledger, data_root=fixture.data_root).labels
        origin = load_generations(ledger, now)[generation].split_origin(TASK)
        result = synthetic_result("model_forged", np.asarray(labels, dtype=np.int64), generation=generation,
                                  seed=77, skill=0.5, now=now, split_origin=origin)
        evaluation = result.evaluation
        if change is not None:
            change(evaluation)
        blobs = BlobStore(st.blobs)
        entry = bundle_entry(result, generation=generation, created_utc=now)
        entry["evaluation_sha256"] = blobs.put(evaluation_blob(evaluation))
        entry["predictions_sha256"] = blobs.put(result.predictions_npz)
        entry["leakage_bits"] = round(charge_bits(evaluation), 6)
        return ledger.append(entry, signer=ledger_signer(st, ledger), now=now)


def bump_balanced_accuracy(evaluation: dict[str, Any]) -> None:
    evaluation["dimensions"]["accuracy"]["balanced_accuracy"] += 0.01


def test_a_logged_number_that_does_not_rederive_is_named(fixture: AuditFixture) -> None:
    index = log_bundle(fixture, "gen2", evaluation_blob=evaluation_bytes, change=bump_balanced_accuracy)
    result = audit(fixture.ledger_id, "--store", str(fixture.store))
    assert result.exit_code == 1, result.output
    report = json.loads(report_path(fixture).read_text())
    (finding,) = report["findings"]
    assert finding["check"] == "bundle" and finding["index"] == index
    assert "does not re-derive" in finding["message"]
    assert finding["evidence"]["path"] == "dimensions.accuracy.balanced_accuracy"
    assert report["rederived"] == report["bundles"] - 1


def test_a_non_canonical_evaluation_blob_is_named(fixture: AuditFixture) -> None:
    def spaced(evaluation: dict[str, Any]) -> bytes:
        return json.dumps(json.loads(evaluation_bytes(evaluation)), indent=1).encode()

    index = log_bundle(fixture, "public", evaluation_blob=spaced)
    result = audit(fixture.ledger_id, "--store", str(fixture.store))
    assert result.exit_code == 1, result.output
    (finding,) = json.loads(report_path(fixture).read_text())["findings"]
    assert finding["index"] == index and "not canonical JSON" in finding["message"]
    assert finding["file"].startswith("blobs/sha256/")
