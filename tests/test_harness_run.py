"""End-to-end evaluations of the trained models on synthetic data: cnn_small well above chance (its wall time
is measured by bench/harness_bench.py, not asserted here: a loaded machine must not fail a test), the stored
predictions and the evaluation object as the audit will re-derive them, the
not-scored paths (majority), the linear probe, the bundle entry and the code fingerprint."""

from __future__ import annotations

import importlib.util
import shutil
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.harness,
              pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch (harness extra)")]

from harness.bundle import bundle_entry, evaluation_bytes, labels_bytes  # noqa: E402
from harness.data import TaskData, load_task  # noqa: E402
from harness.fingerprint import HARNESS_ROOT, code_fingerprint, fingerprint_of  # noqa: E402
from harness.metrics import PERTURBATIONS, StoredPredictions, check_rederived  # noqa: E402
from harness.models import MODEL_IDS, create_model  # noqa: E402
from harness.run import EvaluationResult, evaluate, fraction_subsets  # noqa: E402
from harness.synth import write_synth  # noqa: E402
from harness.tasks import task_spec  # noqa: E402
from keys.errors import UsageError  # noqa: E402
from seals.canonical import parse_json_object, sha256_hex  # noqa: E402

SEED = 20260727
FIXED_NOW = datetime(2026, 8, 1, 19, 59, 26, tzinfo=UTC)


def fixed_clock() -> datetime:
    return FIXED_NOW


@pytest.fixture(scope="module")
def blood(tmp_path_factory: pytest.TempPathFactory) -> TaskData:
    root = tmp_path_factory.mktemp("synth")
    spec = task_spec("bloodmnist")
    write_synth(spec, root, seed=11)  # the default sizes: 2000 / 300 / 600
    return load_task(spec, root)


CnnRun = tuple[EvaluationResult, list[tuple[str, int, int]]]


@pytest.fixture(scope="module")
def cnn_run(blood: TaskData) -> CnnRun:
    calls: list[tuple[str, int, int]] = []
    model = create_model("cnn_small")
    result = evaluate(model, blood, task_spec("bloodmnist"), seed=SEED, progress=lambda *a: calls.append(a),
                      clock=fixed_clock)
    return result, calls


def assert_rederives(result: EvaluationResult) -> None:
    recorded = parse_json_object(evaluation_bytes(result.evaluation))
    stored = StoredPredictions.from_npz_bytes(result.predictions_npz)
    check_rederived(recorded, stored, result.labels)


def test_cnn_small_is_well_above_chance(cnn_run: CnnRun) -> None:
    result, _ = cnn_run
    accuracy = result.evaluation["dimensions"]["accuracy"]
    assert accuracy["balanced_accuracy"] > 0.6  # chance is 1/8
    assert accuracy["score"] > 50


def test_cnn_small_evaluation_object(cnn_run: CnnRun) -> None:
    result, _ = cnn_run
    evaluation = result.evaluation
    assert evaluation["task"] == "bloodmnist" and evaluation["kind"] == "image" and evaluation["n_test"] == 600
    assert evaluation["timestamp"] == "2026-08-01T19:59:26+00:00" and evaluation["seed"] == SEED
    assert evaluation["split_origin"] == "official released split" and evaluation["device"] == "cpu"
    assert evaluation["code_fingerprint"] == code_fingerprint()
    assert evaluation["spec_version"] == "MedEval-1 v0.1" and evaluation["numpy_version"] == np.__version__
    assert evaluation["limitations"]["n_train_available"] == 2000
    assert evaluation["limitations"]["train_capped"] is False
    dimensions = evaluation["dimensions"]
    assert dimensions["spec_sensitivity"] is None  # no prompt
    assert dimensions["limited_data"]["score"] is not None
    assert dimensions["corruption"]["n_cases"] == 600 and dimensions["cost"]["cases"] == 600 + 36 * 600
    assert dimensions["cost"]["parameters"] == result.model.parameters
    assert evaluation["composite"]["coverage"] == pytest.approx(0.92)
    assert result.timings["inference_s"] == pytest.approx(dimensions["cost"]["seconds_total"], abs=1e-4)


def test_cnn_small_stored_predictions_rederive_exactly(cnn_run: CnnRun) -> None:
    result, _ = cnn_run
    stored = result.predictions
    assert stored.clean_probs.shape == (600, 8) and stored.template_probs is None
    assert stored.fraction_probs is not None and stored.fraction_probs.shape == (3, 600, 8)
    assert np.array_equal(stored.fraction_probs[2], stored.clean_probs)  # the 100% fit is the evaluated model
    assert set(stored.perturbed_labels) == set(PERTURBATIONS)
    assert StoredPredictions.from_npz_bytes(result.predictions_npz) == stored
    assert_rederives(result)


def test_progress_reaches_its_total(cnn_run: CnnRun) -> None:
    _, calls = cnn_run
    totals = {total for _, _, total in calls}
    assert totals == {3 + 1 + 36}
    assert calls[-1][1] == calls[-1][2]
    assert any("train on 1%" in description for description, _, _ in calls)


def test_cnn_small_training_is_reproducible(blood: TaskData) -> None:
    spec = task_spec("bloodmnist")
    probs = []
    for _ in range(2):
        model = create_model("cnn_small")
        model.prepare(spec, blood.train_images[:128], blood.train_labels[:128], seed=3)
        probs.append(model.predict_proba(blood.test_images[:64]))
    assert np.array_equal(probs[0], probs[1])


def test_fraction_subsets_are_nested_and_seeded() -> None:
    one, ten, full = fraction_subsets(1000, SEED)
    assert (one.shape[0], ten.shape[0], full.shape[0]) == (10, 100, 1000)
    assert set(one) <= set(ten) <= set(full)
    assert np.array_equal(one, fraction_subsets(1000, SEED)[0])
    assert fraction_subsets(50, SEED)[0].shape == (1,)  # never empty


def test_majority_reaches_the_not_scored_paths(blood: TaskData) -> None:
    result = evaluate(create_model("majority"), blood, task_spec("bloodmnist"), seed=SEED, clock=fixed_clock)
    dimensions = result.evaluation["dimensions"]
    assert dimensions["accuracy"]["score"] == 0
    assert dimensions["corruption"]["score"] is None and dimensions["acquisition"]["score"] is None
    assert dimensions["limited_data"]["score"] is None
    assert result.model.parameters == 8
    assert_rederives(result)


def test_linear_probe_on_random_features_says_so(tmp_path: Path) -> None:
    spec = task_spec("pneumoniamnist")
    write_synth(spec, tmp_path, seed=4, n_train=400, n_val=10, n_test=60)
    result = evaluate(create_model("linear_probe"), load_task(spec, tmp_path), spec, seed=SEED, clock=fixed_clock)
    assert "random-feature" in result.model.model_name and "random-feature" in result.model.params
    assert "random-feature" in result.evaluation["limitations"]["notes"]
    assert result.evaluation["dimensions"]["accuracy"]["balanced_accuracy"] > 0.7  # chance is 1/2
    assert_rederives(result)


def test_bundle_entry_carries_the_blob_hashes(cnn_run: CnnRun) -> None:
    result, _ = cnn_run
    created = datetime(2026, 8, 2, 10, 0, 0, tzinfo=UTC)
    entry = bundle_entry(result, generation="gen1", created_utc=created)
    assert entry["type"] == "bundle" and entry["v"] == 1 and entry["generation"] == "gen1"
    assert entry["model_id"] == "cnn_small" and entry["task"] == "bloodmnist" and entry["seed"] == SEED
    assert entry["evaluation_sha256"] == sha256_hex(evaluation_bytes(result.evaluation))
    assert entry["predictions_sha256"] == sha256_hex(result.predictions_npz)
    assert entry["labels_hash"] == sha256_hex(labels_bytes(result.labels))
    assert entry["code_fingerprint"] == result.evaluation["code_fingerprint"]
    assert entry["created_utc"] == "2026-08-02T10:00:00Z"
    assert entry == bundle_entry(result, generation="gen1", created_utc=created)  # pure
    assert len(evaluation_bytes(entry)) < 64 * 1024
    with pytest.raises(UsageError):
        bundle_entry(result, generation="", created_utc=created)


def test_code_fingerprint_follows_the_harness_source(tmp_path: Path) -> None:
    copy = tmp_path / "harness"
    shutil.copytree(HARNESS_ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert fingerprint_of(copy) == code_fingerprint()
    assert len(code_fingerprint()) == 12 and int(code_fingerprint(), 16) >= 0
    (copy / "notes.txt").write_text("not source")
    assert fingerprint_of(copy) == code_fingerprint()
    with (copy / "run.py").open("a") as handle:
        handle.write("\n# an edit\n")
    assert fingerprint_of(copy) != code_fingerprint()


def test_registry_refuses_unknown_models() -> None:
    assert set(MODEL_IDS) == {"biomedclip_zeroshot", "clip_zeroshot", "linear_probe", "cnn_small", "majority"}
    with pytest.raises(UsageError, match="unknown model"):
        create_model("gpt_vision")


def test_task_data_must_match_the_spec(blood: TaskData) -> None:
    with pytest.raises(UsageError, match="task data is for bloodmnist"):
        evaluate(create_model("majority"), blood, task_spec("bloodmnist_224"), seed=SEED)
