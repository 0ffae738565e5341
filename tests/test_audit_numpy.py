"""A v0.1 bundle computed under another numpy version (issue 12 section 3): v0.1 draws its bootstrap and subset
from numpy ``Generator`` methods, which numpy keeps stable only within a version, so each v0.1 evaluation
records ``numpy_version``. When the auditor's numpy differs and only the members those draws decide differ, the
audit reports the bundle as not re-derived here (exit 5) naming both versions, not as tampering; any other
difference is still tampering (exit 1), and so is a stream difference under the same numpy version, under two
versions of the series shown to draw the same streams, or under a version the harness cannot run under."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from harness.metrics import composite
from harness.metrics.registry import metrics_for
from heldout.audit.rederive import require_numpy_explains
from heldout.cli import app
from keys import IncompleteError, VerificationError
from seals import parse_utc
from seals.canonical import prepare
from tests.audit_support import NOW, AuditFixture, add_bundle, build_store, command_clock, synthetic_result

# A numpy beyond the series shown to draw v0.1's streams alike (harness.metrics.registry.streams_verified): its
# streams may differ, so an evaluation made under it may not re-derive here.
OTHER_NUMPY = "3.0.0"
runner = CliRunner()


@pytest.fixture
def fixture(tmp_path: Path) -> AuditFixture:
    return build_store(tmp_path, bundles_per_generation=1)


def other_stream(numpy_version: str, *, also: str | None = None):
    """The evaluation as another numpy's bootstrap stream would have made it: another ci95."""
    def edit(evaluation: dict[str, Any]) -> dict[str, Any]:
        changed = copy.deepcopy(evaluation)
        changed["numpy_version"] = numpy_version
        low, high = changed["dimensions"]["accuracy"]["ci95"]
        changed["dimensions"]["accuracy"]["ci95"] = [low - 0.0123, high + 0.0045]
        if also == "score":
            changed["dimensions"]["accuracy"]["score"] += 7.0
        return changed
    return edit


def audit(fixture: AuditFixture) -> tuple[int, dict[str, Any]]:
    with command_clock(NOW):
        result = runner.invoke(app, ["audit", fixture.ledger_id, "--json", "--store", str(fixture.store)])
    return result.exit_code, json.loads(result.output)


def test_v01_evaluations_logged_here_record_the_numpy_version_and_audit_clean(fixture: AuditFixture) -> None:
    code, report = audit(fixture)
    assert code == 0 and report["rederived"] == report["bundles"] == 3
    blobs = list((fixture.store / "blobs").rglob("*"))
    evaluations = [json.loads(p.read_bytes()) for p in blobs if p.is_file() and p.read_bytes()[:1] == b"{"]
    recorded = [e["numpy_version"] for e in evaluations if "dimensions" in e]
    assert recorded and set(recorded) == {np.__version__}


def test_another_numpys_stream_is_reported_naming_both_versions_not_as_tampering(fixture: AuditFixture) -> None:
    index = add_bundle(fixture.store, "gen1", "model_other_numpy", seed=7, data_root=fixture.data_root,
                       edit=other_stream(OTHER_NUMPY))
    code, report = audit(fixture)
    print(json.dumps(report["not_rederived"], indent=1))
    assert code == 5 and report["findings"] == []
    (entry,) = report["not_rederived"]
    assert entry["index"] == index
    assert OTHER_NUMPY in entry["reason"] and np.__version__ in entry["reason"]
    assert entry["evidence"]["numpy_recorded"] == OTHER_NUMPY
    assert entry["evidence"]["numpy_auditor"] == np.__version__
    assert "dimensions.accuracy.ci95" in entry["reason"]


def test_another_numpy_does_not_excuse_a_changed_score(fixture: AuditFixture) -> None:
    index = add_bundle(fixture.store, "gen1", "model_forged", seed=7, data_root=fixture.data_root,
                       edit=other_stream(OTHER_NUMPY, also="score"))
    code, report = audit(fixture)
    assert code == 1
    assert any(f["index"] == index and "dimensions.accuracy.score" in f["message"] for f in report["findings"])


def test_a_different_stream_under_the_same_numpy_is_tampering(fixture: AuditFixture) -> None:
    index = add_bundle(fixture.store, "gen1", "model_same_numpy", seed=7, data_root=fixture.data_root,
                       edit=other_stream(np.__version__))
    code, report = audit(fixture)
    assert code == 1 and report["not_rederived"] == []
    assert any(f["index"] == index and "ci95" in f["message"] for f in report["findings"])


@pytest.mark.parametrize("claimed", ["1.26.4", "2.0.2", "2.4.6"])
def test_attack_a_changed_ci_excused_by_a_numpy_whose_streams_are_the_same(fixture: AuditFixture,
                                                                           claimed: str) -> None:
    """numpy 1.26 through 2.4 draw v0.1's streams alike (the numpy matrix shows it on the v0.1 corpus): naming
    another version of that series excuses nothing, and a changed ci95 is tampering (it was exit 5)."""
    if claimed == np.__version__:
        claimed = "2.1.3"
    index = add_bundle(fixture.store, "gen1", "model_excused", seed=7, data_root=fixture.data_root,
                       edit=other_stream(claimed))
    code, report = audit(fixture)
    assert code == 1 and report["not_rederived"] == []
    assert any(f["index"] == index and "ci95" in f["message"] for f in report["findings"]), report["findings"]


@pytest.mark.parametrize("claimed", ["0.0.0-never-released", "1.17.0", "2.5.0.dev0+git20261201", "latest"])
def test_attack_a_numpy_version_no_one_can_run_makes_nothing_unverifiable(fixture: AuditFixture,
                                                                         claimed: str) -> None:
    """A made-up or unsupported numpy version would leave the stream-dependent members unverifiable for good
    (any lie about them "incomplete"): it is a finding."""
    index = add_bundle(fixture.store, "gen1", "model_unrunnable", seed=7, data_root=fixture.data_root,
                       edit=other_stream(claimed))
    code, report = audit(fixture)
    assert code == 1 and report["not_rederived"] == []
    assert any(f["index"] == index and "not a numpy release this harness runs under" in f["message"]
               for f in report["findings"]), report["findings"]


def test_above_1200_cases_the_subset_members_are_set_aside_and_the_composite_still_checked() -> None:
    """n_test > 1200: the robustness subset is a numpy draw too, so corruption, acquisition, spec_sensitivity
    and the composite are set aside; the composite must still follow from the recorded dimension scores."""
    labels = np.random.default_rng(5).integers(0, 8, 1500)
    result = synthetic_result("m", labels, generation="gen1", seed=3, skill=0.6, now=parse_utc(NOW))
    rederived = result.evaluation
    elsewhere = copy.deepcopy(rederived)  # what another numpy's subset would have given
    elsewhere["numpy_version"] = OTHER_NUMPY
    elsewhere["dimensions"]["corruption"]["score"] += 1.2345678
    elsewhere["dimensions"]["accuracy"]["ci95"] = [0.1, 0.2]
    elsewhere["composite"] = composite(elsewhere["dimensions"])
    recorded = prepare(elsewhere)
    rederived_here = {**rederived, "numpy_version": OTHER_NUMPY}
    metrics = metrics_for("MedEval-1 v0.1")
    with pytest.raises(IncompleteError, match=r"dimensions\.corruption") as caught:
        require_numpy_explains(metrics, 9, recorded, rederived_here)
    assert caught.value.evidence["numpy_recorded"] == OTHER_NUMPY
    forged = {**recorded, "composite": {**recorded["composite"], "index": recorded["composite"]["index"] + 0.01}}
    with pytest.raises(VerificationError, match=r"composite\.index"):
        require_numpy_explains(metrics, 9, forged, rederived_here)
    forged_score = copy.deepcopy(recorded)
    forged_score["dimensions"]["calibration"]["score"] += 3.0  # not subset-dependent: tampering
    with pytest.raises(VerificationError, match=r"dimensions\.calibration\.score"):
        require_numpy_explains(metrics, 9, forged_score, rederived_here)


@pytest.mark.parametrize("installed", ["2.5.0.dev0+git20261201", "1.25.2"])
def test_no_v01_evaluation_is_recorded_under_a_numpy_no_auditor_can_install(monkeypatch: pytest.MonkeyPatch,
                                                                            installed: str) -> None:
    from keys import UsageError

    monkeypatch.setattr(np, "__version__", installed)
    with pytest.raises(UsageError, match="not a release an auditor can install"):
        metrics_for("MedEval-1 v0.1").numpy_version_for_new_evaluation()
    assert metrics_for("MedEval-1 v0.2").numpy_version_for_new_evaluation() is None
