"""MedEval-1 v0.2 formulas (docs/MEDEVAL-1.2.md) against hand-worked cases, and its properties: point values do
not depend on case order, cost is beside the index, the skill gate zeroes the other dimensions, the minimum
subgroup size, not-applicable dimensions leave the index's weights, and every score and interval is in range."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import harness.metrics as m
from harness.metrics import dimensions_v02 as d2
from harness.metrics.registry import metrics_for
from seals.canonical import prepare

V02 = metrics_for("MedEval-1 v0.2")


def meta(n: int, k: int, *, task: str = "bloodmnist", seconds: float = 3.0) -> m.EvaluationMeta:
    return m.EvaluationMeta(
        code_fingerprint="v02test", device="cpu", domain="medicine", kind="image",
        limitations={"n_train_available": None, "notes": None, "train_capped": False}, modality="test",
        n_classes=k, n_test=n, runtime_s=1.0, seed=11, split_origin="test", task=task, task_name=task,
        timestamp="2026-12-01T00:00:00+00:00", seconds_total=seconds, parameters=None)


def stored(probs: np.ndarray, perturbed_from: np.ndarray | None = None) -> m.StoredPredictions:
    n = probs.shape[0]
    clean = np.argmax(probs, axis=1)[: min(n, 1200)] if perturbed_from is None else perturbed_from
    return m.StoredPredictions(probs, {p: np.stack([clean] * 3) for p in m.PERTURBATIONS})


def ones(n: int) -> np.ndarray:
    return np.ones((1, n))


def test_uncertainty_hand_case_with_a_tie_block():
    # confidences 0.9, 0.7, 0.7, 0.5; correct, wrong, right, wrong (the two 0.7 cases are one unit)
    probs = np.array([[0.9, 0.1], [0.3, 0.7], [0.7, 0.3], [0.5, 0.5]])
    labels = np.array([0, 0, 0, 1])
    predictions = np.argmax(probs, axis=1)
    out, _ = d2.uncertainty(ones(4), probs, predictions, labels)
    auc = (1 / 1 + 1.5 / 2 + 2 / 3 + 2 / 4) / 4
    oracle = (1 + 1 + 2 / 3 + 2 / 4) / 4
    assert out["risk_coverage_auc"] == pytest.approx(auc)
    assert out["oracle_auc"] == pytest.approx(oracle)
    assert out["score"] == pytest.approx(100 * (auc - 0.5) / (oracle - 0.5))
    assert out["selective_acc_at_50"] == pytest.approx(1.5 / 2) and out["tie_blocks"] == 3
    swapped = probs[[0, 2, 1, 3]]
    assert d2.uncertainty(ones(4), swapped, np.argmax(swapped, axis=1), labels[[0, 2, 1, 3]])[0] == out


def test_uncertainty_not_applicable_for_a_perfect_model():
    probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])
    out, rows = d2.uncertainty(ones(3), probs, np.argmax(probs, axis=1), np.array([0, 1, 0]))
    assert out["scored"] is False and out["score"] is None and "not applicable" in out["not_applicable"]
    assert np.isnan(rows[0])


def test_ece_is_exact_on_integers_and_bins_are_reported():
    probs = np.array([[0.75, 0.25], [0.75, 0.25], [0.5, 0.5], [0.25, 0.75]], dtype=np.float32).astype(np.float64)
    labels = np.array([0, 1, 0, 1])
    out, _ = d2.calibration(ones(4), probs, np.argmax(probs, axis=1), labels)
    # bins: 0.75 (two cases, one right) -> |0.5 - 0.75|; 0.5 (right) -> |1 - 0.5|; 0.75 (right) in the 0.75 bin
    # bin of 0.75 = ceil(11.25) - 1 = 11: three cases, two right, confidence 2.25 -> |2 - 2.25| = 0.25
    # bin of 0.5 = ceil(7.5) - 1 = 7: one right case -> 0.5. ECE = (0.25 + 0.5) / 4
    assert out["ece"] == 0.1875 and out["score"] == pytest.approx(100 * (1 - 0.1875 / 0.2))
    filled = {b["lower"]: (b["n"], b["accuracy"], b["mean_confidence"]) for b in out["reliability_bins"] if b["n"]}
    assert filled == {11 / 15: (3, 2 / 3, 0.75), 7 / 15: (1, 1.0, 0.5)}


def test_quadratic_weighted_kappa_hand_case():
    confusion = np.array([[3, 1, 0], [0, 2, 1], [1, 0, 2]])
    rows, columns, n = confusion.sum(1), confusion.sum(0), confusion.sum()
    weights = np.array([[(i - j) ** 2 for j in range(3)] for i in range(3)])
    expected = 1 - (weights * confusion).sum() / (weights * np.outer(rows, columns) / n).sum()
    assert d2.quadratic_weighted_kappa(confusion) == pytest.approx(expected)
    assert d2.quadratic_weighted_kappa(np.array([[4, 0], [0, 0]])) is None


def test_ordinal_tasks_report_quadratic_kappa_others_do_not():
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 5, 200)
    probs = np.full((200, 5), 0.1)
    probs[np.arange(200), labels] = 0.6
    retina = V02.build_evaluation(meta(200, 5, task="retinamnist_224"), stored(probs), labels)
    blood = V02.build_evaluation(meta(200, 5, task="dermamnist"), stored(probs), labels)
    assert retina["dimensions"]["accuracy"]["quadratic_weighted_kappa"] == pytest.approx(1.0)
    assert "quadratic_weighted_kappa" not in blood["dimensions"]["accuracy"]


def test_skill_gate_zeroes_every_other_dimension_of_a_majority_model():
    labels = np.repeat([0, 1, 2], [60, 30, 30])
    probs = np.tile([0.5, 0.25, 0.25], (120, 1))
    evaluation = prepare(V02.build_evaluation(meta(120, 3), stored(probs), labels))
    composite = evaluation["composite"]
    assert composite["skill_gate"]["passed"] is False and composite["index"] == 0
    assert composite["dimensions_counted"] == ["accuracy"]
    assert evaluation["dimensions"]["calibration"]["score"] > 50  # it is calibrated, and counts for nothing
    assert composite["index_ci95"] == [0, 0]


def test_cost_is_beside_the_index_not_in_it():
    rng = np.random.default_rng(2)
    labels = rng.integers(0, 4, 300)
    probs = rng.dirichlet(np.ones(4), 300)
    probs[np.arange(300), labels] += 1.0
    probs /= probs.sum(axis=1, keepdims=True)
    fast = V02.build_evaluation(meta(300, 4, seconds=0.01), stored(probs), labels)["composite"]
    slow = V02.build_evaluation(meta(300, 4, seconds=5000.0), stored(probs), labels)["composite"]
    assert fast["index"] == slow["index"] and fast["cost_score"] > slow["cost_score"]
    assert "cost" not in fast["weights"]


def test_classes_below_the_minimum_subgroup_size_are_reported_not_scored():
    sizes = [50, 40, 5]
    labels = np.repeat([0, 1, 2], sizes)
    predictions = labels.copy()
    predictions[-5:] = 0  # the 5-case class is never recalled; it is too small to be the worst subgroup
    correct, totals = d2.class_counts(ones(95), predictions, labels, 3)
    out, _ = d2.subgroup(correct, totals, 3)
    assert out["classes_below_minimum"] == [2] and out["worst_class_recall"] == 1.0 and out["score"] == 100.0
    correct, totals = d2.class_counts(ones(60), np.zeros(60, dtype=np.int64), np.repeat([0, 1], [55, 5]), 2)
    assert "not_applicable" in d2.subgroup(correct, totals, 2)[0]


def test_a_perfect_model_scores_100_without_uncertainty_in_the_weights():
    labels = np.random.default_rng(3).integers(0, 4, 400)
    probs = np.zeros((400, 4))
    probs[np.arange(400), labels] = 1.0
    composite = V02.build_evaluation(meta(400, 4), stored(probs), labels)["composite"]
    assert composite["index"] == pytest.approx(100.0) and "uncertainty" not in composite["weights"]


def test_exact_chance_is_not_above_chance_in_v02():
    labels = np.repeat(np.arange(4), (18, 11, 21, 2772))
    predictions = (labels + 1) % 4
    for k, hits in enumerate((11, 2, 1, 442)):
        predictions[np.flatnonzero(labels == k)[:hits]] = k
    correct, totals = d2.class_counts(ones(labels.size), predictions, labels, 4)
    assert not d2.above_chance(correct.astype(np.int64), totals.astype(np.int64), 4)[0]


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 5), st.integers(30, 120), st.integers(0, 2**32 - 1))
def test_point_values_do_not_depend_on_case_order(k, n, seed):
    """Confidences drawn from a few levels (many ties): permuting the cases leaves every point score equal."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n)
    level = rng.choice([0.5, 0.6, 0.8], n)
    predicted = np.where(rng.random(n) < 0.6, labels, rng.integers(0, k, n))
    probs = np.tile(((1 - level) / (k - 1))[:, None], (1, k))
    probs[np.arange(n), predicted] = level
    order = rng.permutation(n)

    def points(p: np.ndarray, y: np.ndarray) -> dict[str, object]:
        evaluation = prepare(V02.build_evaluation(meta(n, k), stored(p), y))
        return {name: (dim or {}).get("score") for name, dim in evaluation["dimensions"].items()} | {
            "uncertainty_auc": evaluation["dimensions"]["uncertainty"]["risk_coverage_auc"],
            "ece": evaluation["dimensions"]["calibration"]["ece"]}

    assert points(probs, labels) == points(probs[order], labels[order])


@settings(max_examples=15, deadline=None)
@given(st.integers(2, 6), st.integers(20, 200), st.floats(0.0, 3.0), st.integers(0, 2**32 - 1))
def test_every_score_and_interval_is_in_range(k, n, skill, seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k))
    logits[np.arange(n), labels] += skill
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    evaluation = prepare(V02.build_evaluation(meta(n, k), stored(probs), labels))
    for name, dimension in evaluation["dimensions"].items():
        if dimension is None or dimension.get("score") is None or name == "cost":
            continue
        assert 0 <= dimension["score"] <= 100
        if dimension.get("score_ci95") is not None:
            low, high = dimension["score_ci95"]
            assert 0 <= low <= high <= 100
    composite = evaluation["composite"]
    assert 0 <= composite["index"] <= 100
    low, high = composite["index_ci95"]
    assert 0 <= low <= high <= 100
