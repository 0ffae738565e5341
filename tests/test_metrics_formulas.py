"""MedEval-1 formulas on small hand-computed cases, one group per dimension, with every not-scored and tie rule.

Expected values are worked out by hand in the comments beside them (not copied from the implementation).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import harness.metrics as m
from harness.metrics import core
from harness.metrics.dimensions import bootstrap_balanced_accuracy, expected_calibration_error
from keys.errors import MalformedInput


def present(dimension: dict[str, Any] | None) -> dict[str, Any]:
    """A dimension object that must not be null here."""
    assert dimension is not None
    return dimension


def probs_with_confidence(confidences, predicted, n_classes=2):
    """Rows whose max probability is ``confidence`` on class ``predicted``, the rest spread evenly."""
    rows = []
    for confidence, label in zip(confidences, predicted, strict=True):
        row = np.full(n_classes, (1.0 - confidence) / (n_classes - 1))
        row[label] = confidence
        rows.append(row)
    return np.array(rows)


def one_hot(predictions, n_classes):
    out = np.full((len(predictions), n_classes), 0.0)
    out[np.arange(len(predictions)), predictions] = 1.0
    return out


# --- building blocks --------------------------------------------------------------------------------------

def test_chance_correction_clips_at_zero_and_raw_does_not():
    assert core.chance_corrected(0.625, 4) == pytest.approx(0.5)  # (0.625 - 0.25) / 0.75
    assert core.chance_corrected(1.0, 4) == 1.0
    assert core.chance_corrected(0.25, 4) == 0.0
    assert core.chance_corrected(0.1, 4) == 0.0
    assert core.chance_corrected_raw(0.1, 4) == pytest.approx(-0.2)  # (0.1 - 0.25) / 0.75


def test_balanced_accuracy_leaves_absent_classes_out():
    labels = np.array([0, 0, 0, 1])
    predictions = np.array([0, 0, 1, 2])
    # class 0 recall 2/3, class 1 recall 0, class 2 has no case: mean of (2/3, 0) = 1/3
    assert core.balanced_accuracy(predictions, labels, 3) == pytest.approx(1 / 3)


def test_roc_auc_ties_count_half():
    # positives 0.5, 0.9 against negatives 0.1, 0.5: pairs 1 + 0.5 + 1 + 1 = 3.5 of 4
    auc = core.roc_auc(np.array([False, False, True, True]), np.array([0.1, 0.5, 0.5, 0.9]))
    assert auc == pytest.approx(0.875)
    assert core.roc_auc(np.array([False, True, True]), np.array([0.3, 0.3, 0.3])) == pytest.approx(0.5)
    assert core.roc_auc(np.array([True, True]), np.array([0.1, 0.2])) is None


def test_roc_auc_equals_pairwise_count_on_heavily_tied_scores():
    rng = np.random.default_rng(7)
    scores = rng.integers(0, 5, 300) / 4.0  # five distinct values: mostly ties
    positive = rng.random(300) < 0.4
    pos, neg = scores[positive], scores[~positive]
    pairwise = ((pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()) / (
        pos.size * neg.size)
    assert core.roc_auc(positive, scores) == pytest.approx(pairwise, abs=1e-15)


def test_macro_auc_matches_sklearn_ovr_and_binary_uses_class_one():
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 4, 500)
    probs = np.round(rng.dirichlet(np.ones(4), 500), 1)  # rounded: many ties
    probs /= probs.sum(axis=1, keepdims=True)
    expected = sklearn_metrics.roc_auc_score(labels, probs, multi_class="ovr", average="macro")
    assert core.macro_auc(probs, labels) == pytest.approx(expected, abs=1e-12)
    binary = np.array([[0.7, 0.3], [0.2, 0.8], [0.6, 0.4], [0.4, 0.6]])
    # class-1 scores 0.3, 0.8 | 0.4, 0.6 with labels 0, 1, 0, 1: positives (0.8, 0.6) beat both negatives
    assert core.macro_auc(binary, np.array([0, 1, 0, 1])) == 1.0


def test_macro_auc_skips_classes_without_positives():
    probs = np.array([[0.8, 0.1, 0.1], [0.2, 0.7, 0.1], [0.6, 0.3, 0.1], [0.3, 0.6, 0.1]])
    labels = np.array([0, 1, 0, 1])  # class 2 absent: its one-vs-rest AUC is undefined and left out
    # class 0: positives 0.8, 0.6 vs negatives 0.2, 0.3 -> 1; class 1: positives 0.7, 0.6 vs 0.1, 0.3 -> 1
    assert core.macro_auc(probs, labels) == 1.0


def test_cohen_kappa_hand_cases_and_undefined():
    clean = np.array([0, 0, 1, 0])
    # agreement 3/4, marginals (3, 1) and (4, 0): expected 12/16 -> kappa 0
    assert core.cohen_kappa(clean, np.array([0, 0, 0, 0]), 2) == 0.0
    # one agreement; marginals (3, 1), (2, 2): (4·1 - 8) / (16 - 8) = -0.5
    assert core.cohen_kappa(clean, np.array([1, 1, 0, 0]), 2) == -0.5
    assert core.cohen_kappa(clean, clean, 2) == 1.0
    assert math.isnan(core.cohen_kappa(np.array([1, 1, 1]), np.array([1, 1, 1]), 3))


def test_cohen_kappa_matches_sklearn():
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(11)
    first, second = rng.integers(0, 5, 400), rng.integers(0, 5, 400)
    second[:200] = first[:200]
    assert core.cohen_kappa(first, second, 5) == pytest.approx(sklearn_metrics.cohen_kappa_score(first, second))


def test_argmax_ties_go_to_lowest_class():
    assert core.predictions_from_probs(np.array([[0.4, 0.4, 0.2], [0.3, 0.35, 0.35]])).tolist() == [0, 1]


# --- subset -----------------------------------------------------------------------------------------------

def test_subset_is_everything_up_to_1200():
    assert m.subset_indices(1200, 5).tolist() == list(range(1200))
    assert m.subset_indices(7, 5).tolist() == list(range(7))


def test_subset_above_1200_is_sorted_seeded_choice():
    subset = m.subset_indices(3421, 20260727)
    expected = sorted(np.random.default_rng(20260727).choice(3421, 1200, replace=False).tolist())
    assert subset.tolist() == expected
    assert len(set(subset.tolist())) == 1200
    assert m.subset_indices(3421, 20260728).tolist() != expected


# --- accuracy ---------------------------------------------------------------------------------------------

def test_accuracy_hand_case():
    labels = np.array([0, 0, 0, 1, 1, 2])
    predictions = np.array([0, 0, 1, 1, 0, 2])
    result = m.accuracy(one_hot(predictions, 3) * 0.7 + 0.1, labels, seed=1)
    assert result["accuracy"] == pytest.approx(4 / 6)
    bacc = (2 / 3 + 1 / 2 + 1) / 3  # = 13/18
    assert result["balanced_accuracy"] == pytest.approx(bacc)
    assert result["score"] == pytest.approx(100 * (bacc - 1 / 3) / (2 / 3))
    assert result["n_test"] == 6
    low, high = result["ci95"]
    assert 0 <= low <= high <= 1


def test_accuracy_score_zero_below_chance():
    labels = np.array([0, 1, 0, 1])
    result = m.accuracy(one_hot(np.array([1, 0, 0, 1]), 2), labels, seed=0)
    assert result["balanced_accuracy"] == 0.5 and result["score"] == 0.0


def test_bootstrap_draws_the_spec_multinomial_cells():
    labels = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2])
    predictions = np.array([0, 1, 0, 1, 0, 2, 2, 0, 2])
    replicates = bootstrap_balanced_accuracy(predictions, labels, 3, seed=42)
    # cells in the spec's order: (class 0 correct, wrong, class 1 correct, wrong, class 2 correct, wrong)
    cell_counts = np.array([2, 1, 1, 1, 3, 1])
    draws = np.random.default_rng(42).multinomial(9, cell_counts / 9, size=1000)
    expected = []
    for draw in draws:
        recalls = [draw[2 * k] / (draw[2 * k] + draw[2 * k + 1]) for k in range(3) if draw[2 * k] + draw[2 * k + 1]]
        expected.append(sum(recalls) / len(recalls))
    np.testing.assert_allclose(replicates, expected, rtol=0, atol=1e-15)
    result = m.accuracy(one_hot(predictions, 3), labels, seed=42)
    assert result["ci95"] == pytest.approx(np.percentile(expected, [2.5, 97.5]).tolist(), abs=1e-15)


def test_bootstrap_leaves_a_class_absent_from_a_resample_out_of_its_mean():
    # two cases: class 0 correct, class 1 wrong. Resamples: both class 0 (bacc 1), both class 1 (bacc 0), one
    # of each (0.5). Counting an absent class as recall 0 would turn the first into 0.5.
    replicates = bootstrap_balanced_accuracy(np.array([0, 0]), np.array([0, 1]), 2, seed=3)
    assert set(replicates.tolist()) == {0.0, 0.5, 1.0}


def test_bootstrap_is_the_case_bootstrap_in_distribution():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, 150)
    predictions = np.where(rng.random(150) < 0.6, labels, rng.integers(0, 3, 150))
    fast = bootstrap_balanced_accuracy(predictions, labels, 3, seed=1, resamples=20000)
    case_rng = np.random.default_rng(2)
    slow = []
    for _ in range(20000):
        pick = case_rng.integers(0, 150, 150)
        slow.append(core.balanced_accuracy(predictions[pick], labels[pick], 3))
    for q in (2.5, 50, 97.5):
        assert np.percentile(fast, q) == pytest.approx(np.percentile(slow, q), abs=0.01)


def test_accuracy_bootstrap_is_degenerate_when_every_resample_agrees():
    # always predicting class 0 among 5 present classes: every resample has bacc 0.2 (as retinamnist_224)
    labels = np.repeat(np.arange(5), 40)
    result = m.accuracy(one_hot(np.zeros(200, dtype=int), 5), labels, seed=9)
    assert result["ci95"] == [0.2, 0.2] and result["balanced_accuracy"] == 0.2 and result["score"] == 0.0


# --- calibration ------------------------------------------------------------------------------------------

def test_calibration_hand_case():
    probs = np.array([[0.9, 0.1], [0.6, 0.4], [0.3, 0.7]])
    labels = np.array([0, 1, 1])
    result = m.calibration(probs, labels)
    assert result["accuracy"] == pytest.approx(2 / 3)
    assert result["mean_confidence"] == pytest.approx(2.2 / 3)
    assert result["overconfidence"] == pytest.approx(2.2 / 3 - 2 / 3)
    assert result["brier"] == pytest.approx((0.02 + 0.72 + 0.18) / 3)  # 2·0.1², 2·0.6², 2·0.3²
    # one case per bin: gaps 0.1, 0.6, 0.3 -> ECE 1/3 -> score clipped at 0
    assert result["ece"] == pytest.approx(1 / 3)
    assert result["score"] == 0.0


def test_calibration_score_and_no_overconfidence_when_underconfident():
    probs = probs_with_confidence([0.55] * 4, [0, 1, 0, 1])
    result = m.calibration(probs, np.array([0, 1, 0, 1]))
    # all correct at confidence 0.55: ECE 0.45 -> score 0; accuracy 1 > confidence -> overconfidence 0
    assert result["ece"] == pytest.approx(0.45) and result["overconfidence"] == 0.0 and result["score"] == 0.0
    probs = probs_with_confidence([0.95] * 20, [0] * 20)
    result = m.calibration(probs, np.array([0] * 19 + [1]))
    # accuracy 0.95 at confidence 0.95 in one bin: ECE 0 -> score 100
    assert result["ece"] == pytest.approx(0.0, abs=1e-12) and result["score"] == pytest.approx(100.0)


def test_ece_pools_cases_within_a_bin():
    # 0.61 and 0.65 share (0.6, 0.6667]: |0.5 - 0.63| = 0.13, not the per-case mean (0.39 + 0.65) / 2
    assert expected_calibration_error(np.array([0.61, 0.65]), np.array([True, False])) == pytest.approx(0.13)


def test_ece_bins_are_closed_on_the_right():
    # 0.2 = 3/15 is the top edge of bin 2, so it does not share a bin with 0.2000001:
    # separate bins give 0.5·|1 - 0.2| + 0.5·|0 - 0.2000001| ≈ 0.5; one bin would give ≈ 0.3
    ece = expected_calibration_error(np.array([0.2, 0.2000001]), np.array([True, False]))
    assert ece == pytest.approx(0.5, abs=1e-6)
    # confidence exactly 1.0 lands in the last bin, not past it
    assert expected_calibration_error(np.array([1.0, 1.0]), np.array([True, True])) == 0.0


# --- uncertainty ------------------------------------------------------------------------------------------

def test_uncertainty_hand_case():
    probs = probs_with_confidence([0.9, 0.8, 0.7, 0.6], [0, 0, 0, 0])
    labels = np.array([0, 1, 0, 0])  # sorted by confidence: correct, wrong, correct, correct
    result = m.uncertainty(probs, labels)
    auc = (1 + 1 / 2 + 2 / 3 + 3 / 4) / 4
    assert result["risk_coverage_auc"] == pytest.approx(auc)
    assert result["selective_acc_at_50"] == pytest.approx(1 / 2)  # first 2 cases
    assert result["selective_acc_at_80"] == pytest.approx(2 / 3)  # round(3.2) = 3 cases
    assert result["full_accuracy"] == pytest.approx(3 / 4)
    assert result["score"] == pytest.approx(100 * (auc - 0.5) / 0.5)


def test_uncertainty_treats_tied_confidences_as_one_unit():
    """Issue 12 section 5: the number must not depend on the order of tied cases. Within a block of equal
    confidence the cumulative correct count grows linearly (its expectation over every order)."""
    probs = probs_with_confidence([0.6, 0.6], [0, 0])
    wrong_first = m.uncertainty(probs, np.array([1, 0]))
    right_first = m.uncertainty(probs, np.array([0, 1]))
    assert wrong_first == right_first
    assert wrong_first["risk_coverage_auc"] == pytest.approx((0.5 / 1 + 1 / 2) / 2)


def test_uncertainty_of_an_all_tied_model_is_its_accuracy_in_any_case_order():
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 2, 624)
    probs = np.tile([0.62, 0.38], (624, 1))  # a majority model: every confidence tied
    results = {m.uncertainty(probs, labels[order])["score"] for order in
               (np.arange(624), np.argsort(labels), np.argsort(-labels), rng.permutation(624))}
    assert len(results) == 1


# A balanced accuracy of exactly 1/4 that computes as 1/4 + 7.4e-17 in float64 (found by search).
EXACT_CHANCE_SIZES = (18, 11, 21, 2772)
EXACT_CHANCE_CORRECT = (11, 2, 1, 442)


def exact_chance_case() -> tuple[np.ndarray, np.ndarray]:
    labels = np.repeat(np.arange(4), EXACT_CHANCE_SIZES)
    predictions = (labels + 1) % 4
    for k, hits in enumerate(EXACT_CHANCE_CORRECT):
        predictions[np.flatnonzero(labels == k)[:hits]] = k
    return predictions, labels


def test_exact_chance_is_decided_on_integers_not_on_the_float_cc():
    predictions, labels = exact_chance_case()
    assert core.chance_corrected_raw(core.balanced_accuracy(predictions, labels, 4), 4) > 0.0  # float says above
    assert core.above_chance(predictions, labels, 4) is False
    assert core.counts_above_chance([1, 1, 8], [3, 5, 15], 3) is True  # 16/15 > 1
    assert core.counts_above_chance([1, 1, 7], [3, 5, 15], 3) is False  # exactly 1


def test_robustness_spec_and_limited_data_are_not_scored_at_exact_chance():
    predictions, labels = exact_chance_case()
    n = labels.shape[0]
    perturbed = {name: np.stack([predictions] * 3) for name in m.CORRUPTIONS}
    assert m.corruption(predictions, perturbed, labels, 4)["score"] is None
    probs = np.full((n, 4), 0.1)
    probs[np.arange(n), predictions] = 0.7
    at_chance = m.spec_sensitivity(np.stack([probs] * 6), labels, 4)
    assert at_chance["scored"] is False and at_chance["best_chance_corrected"] == 0.0
    assert m.limited_data(np.stack([probs] * 3), labels, 4)["score"] is None


def test_uncertainty_selective_count_rounds_half_to_even():
    probs = probs_with_confidence([0.9, 0.8, 0.7, 0.6, 0.55], [0] * 5)
    result = m.uncertainty(probs, np.array([0, 0, 1, 1, 1]))
    # round(2.5) = 2 (half-even) keeps the two correct cases; half-up would give 2/3
    assert result["selective_acc_at_50"] == 1.0
    assert result["selective_acc_at_80"] == pytest.approx(2 / 4)  # round(4.0) = 4


def test_uncertainty_score_zero_at_chance():
    probs = probs_with_confidence([0.9, 0.8], [0, 0])
    assert m.uncertainty(probs, np.array([1, 0]))["score"] == 0.0  # auc (0 + 0.5)/2 = 0.25 < 0.5


# --- subgroup ---------------------------------------------------------------------------------------------

def test_subgroup_without_metadata_is_worst_class_recall():
    labels = np.array([0, 0, 1, 1, 1, 1, 2, 2])
    predictions = np.array([0, 0, 1, 1, 1, 0, 2, 1])
    result = m.subgroup(predictions, labels, 3)
    # recalls 1, 3/4, 1/2 -> worst 0.5; cc(0.5, K=3) = (0.5 - 1/3) / (2/3) = 0.25
    assert result == {
        "attributes": {},
        "basis": "worst diagnostic class (no demographic metadata in source)",
        "has_real_metadata": False,
        "score": pytest.approx(25.0),
        "worst_class_recall": 0.5,
    }


def test_subgroup_worst_class_ignores_absent_classes_and_clips():
    labels = np.array([0, 0, 1, 1])
    assert m.subgroup(np.array([0, 0, 1, 1]), labels, 4)["worst_class_recall"] == 1.0  # classes 2, 3 absent
    assert m.subgroup(np.array([0, 0, 0, 1]), labels, 2)["score"] == 0.0  # worst 0.5 = chance


def test_subgroup_with_metadata_scores_the_worst_group_of_the_worst_attribute():
    labels = np.array([0, 1, 0, 1, 0, 1, 0, 1])
    predictions = np.array([0, 1, 0, 1, 0, 0, 1, 1])
    sex = np.array(["f", "f", "f", "f", "m", "m", "m", "m"])
    site = np.array([1, 1, 2, 2, 1, 1, 2, 2])
    result = m.subgroup(predictions, labels, 2, {"sex": sex, "site": site})
    # sex f: all right (1.0); m: class 0 recall 1/2, class 1 recall 1/2 -> 0.5 -> cc 0
    # site 1: cases 0,1,4,5: class0 2/2, class1 1/2 -> 0.75; site 2: class0 1/2, class1 2/2 -> 0.75 -> cc 0.5
    assert result["has_real_metadata"] is True
    assert result["attributes"]["sex"]["groups"] == {"f": 1.0, "m": 0.5}
    assert result["attributes"]["sex"]["worst_group"] == "m" and result["attributes"]["sex"]["score"] == 0.0
    assert result["attributes"]["site"]["groups"] == {"1": 0.75, "2": 0.75}
    assert result["attributes"]["site"]["worst_group"] == "1"  # tie -> first group
    assert result["attributes"]["site"]["score"] == pytest.approx(50.0)
    assert result["score"] == 0.0


# --- corruption / acquisition -----------------------------------------------------------------------------

LABELS4 = np.array([0, 0, 1, 1])
CLEAN4 = np.array([0, 0, 1, 0])  # recalls 1, 1/2 -> bacc 0.75 -> cc 0.5
SEVERITIES4 = np.array([
    [0, 0, 1, 0],  # same as clean: retention 1, agreement 1, kappa 1
    [0, 0, 0, 0],  # bacc 0.5 -> cc 0 -> retention 0; agreement 0.75; kappa 0
    [1, 1, 0, 0],  # bacc 0 -> raw cc -1 -> ratio -2 -> clipped 0; agreement 0.25; kappa -0.5
])
PERFECT4 = np.array([[0, 0, 1, 1]] * 3)  # bacc 1 -> cc 1 -> ratio 2 -> clipped 1; agreement 0.75; kappa 0.5


def test_corruption_hand_case_retention_agreement_kappa():
    perturbed = {name: SEVERITIES4 for name in m.CORRUPTIONS}
    perturbed["pixelate"] = PERFECT4
    result = m.corruption(CLEAN4, perturbed, LABELS4, 2)
    brightness = result["per_perturbation"]["brightness"]
    assert brightness == {
        "agreement_by_severity": [1.0, 0.75, 0.25],
        "mean_kappa": pytest.approx((1 + 0 - 0.5) / 3),
        "mean_retention": pytest.approx(1 / 3),
        "retention_by_severity": [1.0, 0.0, 0.0],
        "scored": True,
    }
    # kappa with clean marginals (3, 1), perfect (2, 2): (4·3 - 8) / (16 - 8) = 0.5
    assert result["per_perturbation"]["pixelate"]["retention_by_severity"] == [1.0, 1.0, 1.0]
    assert result["per_perturbation"]["pixelate"]["mean_kappa"] == pytest.approx(0.5)
    assert result["clean_reference_cc"] == pytest.approx(0.5)
    assert result["mean_retention"] == pytest.approx((6 * (1 / 3) + 1) / 7)
    assert result["score"] == pytest.approx(100 * (6 * (1 / 3) + 1) / 7)
    assert result["worst_retention"] == 0.0
    assert result["mean_agreement"] == pytest.approx((6 * 2.0 + 3 * 0.75) / 21)
    assert result["mean_kappa"] == pytest.approx((6 * (0.5 / 3) + 0.5) / 7)
    assert result["n_cases"] == 4
    assert "basis" not in result and "not_scored_reason" not in result


def test_acquisition_has_its_basis_and_names():
    result = m.acquisition(CLEAN4, {name: SEVERITIES4 for name in m.ACQUISITIONS}, LABELS4, 2)
    assert result["basis"] == "simulated re-acquisition (gamma, window/level, resolution, FOV, detector noise)"
    assert list(result["per_perturbation"]) == list(m.ACQUISITIONS)
    with pytest.raises(MalformedInput):
        m.acquisition(CLEAN4, {name: SEVERITIES4 for name in m.CORRUPTIONS}, LABELS4, 2)


def test_robustness_rounds_the_severity_arrays_to_4dp():
    labels = np.array([0, 1, 2] * 3)
    clean = labels.copy()
    severity = labels.copy()
    severity[:2] = [1, 0]  # 7 of 9 agree: 0.777... -> 0.7778; class recalls 2/3, 2/3, 1 -> bacc 7/9
    perturbed = {name: np.stack([severity] * 3) for name in m.CORRUPTIONS}
    result = m.corruption(clean, perturbed, labels, 3)
    entry = result["per_perturbation"]["brightness"]
    assert entry["agreement_by_severity"] == [0.7778] * 3
    retention = ((7 / 9 - 1 / 3) / (2 / 3)) / 1.0  # clean cc is 1
    assert entry["retention_by_severity"] == [round(retention, 4)] * 3
    assert entry["mean_retention"] == pytest.approx(retention)  # unrounded
    assert result["mean_agreement"] == pytest.approx(7 / 9)  # unrounded


@pytest.mark.parametrize("clean", [np.array([0, 0, 0, 0]), np.array([1, 1, 0, 0])], ids=["at_chance", "below"])
def test_robustness_not_scored_when_clean_is_at_or_below_chance(clean):
    perturbed = {name: SEVERITIES4 for name in m.CORRUPTIONS}
    result = m.corruption(clean, perturbed, LABELS4, 2)
    reason = result["not_scored_reason"]
    assert "chance-corrected balanced accuracy 0.0000" in reason
    assert result["clean_reference_cc"] == 0.0
    for key in ("score", "mean_retention", "mean_kappa", "mean_agreement", "worst_retention"):
        assert result[key] is None
    entry = result["per_perturbation"]["contrast"]
    assert entry["scored"] is False and entry["not_applicable"] == reason
    assert entry["retention_by_severity"] == [0, 0, 0] and entry["mean_retention"] == 0
    agreements = [float(np.mean(SEVERITIES4[s] == clean)) for s in range(3)]
    assert entry["agreement_by_severity"] == agreements  # still reported
    assert entry["mean_kappa"] is None or math.isfinite(entry["mean_kappa"])


def test_robustness_kappa_null_only_when_all_three_undefined():
    clean = np.array([1, 1, 1, 1])  # constant: kappa undefined against any constant-1 perturbation
    perturbed = {name: np.ones((3, 4), dtype=int) for name in m.CORRUPTIONS}
    perturbed["quantise"] = np.array([[1, 1, 1, 1], [1, 1, 1, 1], [0, 1, 1, 1]])
    result = m.corruption(clean, perturbed, LABELS4, 2)
    assert result["per_perturbation"]["brightness"]["mean_kappa"] is None
    # quantise: two undefined, one defined: agreement 3/4, marginals (0,4),(1,3): (4·3 - 12)/(16 - 12) = 0
    assert result["per_perturbation"]["quantise"]["mean_kappa"] == 0.0


def test_robustness_refuses_wrong_shapes():
    with pytest.raises(MalformedInput, match="shape"):
        m.corruption(CLEAN4, {name: SEVERITIES4[:2] for name in m.CORRUPTIONS}, LABELS4, 2)
    with pytest.raises(MalformedInput, match=r"must lie in 0\.\.1"):
        m.corruption(CLEAN4, {name: SEVERITIES4 + 5 for name in m.CORRUPTIONS}, LABELS4, 2)


# --- spec sensitivity -------------------------------------------------------------------------------------

def templates_from_predictions(prediction_rows, n_classes):
    return np.stack([one_hot(np.array(row), n_classes) for row in prediction_rows])


def test_spec_sensitivity_hand_case_with_ties_to_first():
    labels = np.array([0, 0, 1, 1])
    rows = [
        [0, 0, 1, 0],  # bacc 0.75, cc 0.5
        [0, 0, 1, 1],  # bacc 1, cc 1 (best, first of two)
        [0, 1, 1, 0],  # bacc 0.5, cc 0 (worst, first of two)
        [0, 0, 1, 1],  # bacc 1, cc 1
        [1, 1, 0, 1],  # bacc 0.25, cc clipped 0
        [0, 0, 0, 1],  # bacc 0.75
    ]
    result = present(m.spec_sensitivity(templates_from_predictions(rows, 2), labels, 2))
    assert result["best_spec"] == "template_1" and result["worst_spec"] == "template_2"
    assert result["best_chance_corrected"] == 1.0 and result["worst_chance_corrected"] == 0.0
    assert result["retention"] == 0.0 and result["score"] == 0.0 and result["scored"] is True
    assert result["spread_balanced_accuracy"] == pytest.approx(0.75)  # raw 1 - 0.25
    assert result["per_spec"]["template_4"] == {"balanced_accuracy": 0.25, "chance_corrected": 0.0,
                                                "spec": "histology or clinical image, category: {c}"}
    assert [result["per_spec"][t]["spec"] for t, _ in m.TEMPLATES] == list(m.TEMPLATE_TEXTS)
    assert result["n_specs"] == 6


def test_spec_sensitivity_retention_ratio():
    labels = np.array([0, 0, 1, 1])
    rows = [[0, 0, 1, 0]] * 5 + [[0, 0, 1, 1]]  # five at cc 0.5, one at cc 1
    result = present(m.spec_sensitivity(templates_from_predictions(rows, 2), labels, 2))
    assert result["best_spec"] == "template_5" and result["worst_spec"] == "template_0"
    assert result["retention"] == 0.5 and result["score"] == 50.0


def test_spec_sensitivity_not_scored_when_best_is_at_chance():
    labels = np.array([0, 0, 1, 1])
    rows = [[0, 0, 0, 0]] * 3 + [[1, 1, 0, 0]] * 3
    result = present(m.spec_sensitivity(templates_from_predictions(rows, 2), labels, 2))
    assert result["scored"] is False and result["score"] is None and result["retention"] is None
    assert "not_scored_reason" in result
    assert result["best_spec"] == "template_0" and result["worst_spec"] == "template_0"


def test_spec_sensitivity_is_null_without_prompts():
    assert m.spec_sensitivity(None, np.array([0, 1]), 2) is None


# --- cost -------------------------------------------------------------------------------------------------

def test_cost_case_count_and_score():
    # n_cases = n_test = 100: 100 + 36·100 = 3700 cases; 74 s -> 0.02 s/case -> score 100·0.04/0.04 = 100
    result = m.cost(74.0, 100, 100, "cpu", 5_000_000)
    assert result["cases"] == 3700 and result["seconds_per_case"] == pytest.approx(0.02)
    assert result["score"] == pytest.approx(100.0)
    assert result["cases_per_second"] == 50.0 and result["parameters_millions"] == 5.0
    # twice as slow: 100·0.04/0.06
    assert m.cost(148.0, 100, 100, "cpu", None)["score"] == pytest.approx(200 / 3)
    assert m.cost(148.0, 100, 100, "cpu", None)["parameters_millions"] is None
    # a subset: 2000 + 36·1200 + 1200
    assert m.cost(10.0, 2000, 1200, "cuda", 1)["cases"] == 46400
    assert m.cost(0.001, 100, 100, "cpu", 1)["score"] == 100.0  # capped


def test_cost_keeps_seconds_at_4dp_before_deriving():
    result = m.cost(392.67184999, 3421, 1200, "mps", 195902721)
    assert result["seconds_total"] == 392.6718
    assert result["seconds_per_case"] == 392.6718 / 47821


def test_cost_refuses_non_positive_time():
    for bad in (0.0, -1.0, float("nan"), float("inf"), 0.00001):
        with pytest.raises(MalformedInput):
            m.cost(bad, 10, 10, "cpu", 1)


# --- limited data -----------------------------------------------------------------------------------------

def test_limited_data_hand_case():
    labels = np.array([0, 0, 1, 1])
    fractions = templates_from_predictions([[1, 1, 1, 0], [0, 0, 1, 0], [0, 0, 1, 1]], 2)
    result = present(m.limited_data(fractions, labels, 2))
    # 1%: bacc 0.25 -> cc 0 -> 0; 10%: bacc 0.75 -> cc 0.5 -> 0.5; 100%: cc 1 -> score 100·(0 + 0.5)/2
    assert result["per_fraction"] == {"0.01": 0.25, "0.1": 0.75, "1.0": 1.0}
    assert result["retention_by_fraction"] == {"0.01": 0.0, "0.1": 0.5}
    assert result["score"] == pytest.approx(25.0) and result["scored"] is True


def test_limited_data_clips_retention_at_one():
    labels = np.array([0, 0, 1, 1])
    fractions = templates_from_predictions([[0, 0, 1, 1], [0, 0, 1, 1], [0, 0, 1, 0]], 2)
    assert present(m.limited_data(fractions, labels, 2))["score"] == 100.0


def test_limited_data_not_scored_when_full_data_is_at_chance():
    labels = np.array([0, 0, 1, 1])
    fractions = templates_from_predictions([[0, 0, 1, 1], [0, 0, 1, 1], [0, 0, 0, 0]], 2)
    result = present(m.limited_data(fractions, labels, 2))
    assert result["scored"] is False and result["score"] is None and result["retention_by_fraction"] is None
    assert "not_scored_reason" in result


def test_limited_data_is_null_without_a_training_step():
    assert m.limited_data(None, np.array([0, 1]), 2) is None


# --- composite --------------------------------------------------------------------------------------------

def test_composite_hand_case():
    dimensions: dict[str, dict[str, Any] | None] = {name: None for name in m.DIMENSIONS}
    dimensions["accuracy"] = {"score": 50.0}
    dimensions["cost"] = {"score": 100.0}
    dimensions["calibration"] = {"score": 0.0}  # a score of 0 counts
    dimensions["corruption"] = {"score": None}  # not scored
    result = m.composite(dimensions)
    # coverage 0.22 + 0.03 + 0.13 = 0.38; index (11 + 3 + 0) / 0.38
    assert result["coverage"] == pytest.approx(0.38)
    assert result["index"] == pytest.approx(14 / 0.38)
    assert result["dimensions_scored"] == ["accuracy", "calibration", "cost"]


def test_composite_weights_sum_to_one_and_all_scored_is_the_weighted_mean():
    assert sum(m.COMPOSITE_WEIGHTS.values()) == pytest.approx(1.0)
    result = m.composite({name: {"score": 40.0} for name in m.DIMENSIONS})
    assert result["coverage"] == pytest.approx(1.0) and result["index"] == pytest.approx(40.0)


def test_composite_with_nothing_scored_has_no_index():
    assert m.composite({"accuracy": None}) == {"coverage": 0.0, "dimensions_scored": [], "index": None}
    with pytest.raises(MalformedInput):
        m.composite({"speed": {"score": 1.0}})


# --- constants --------------------------------------------------------------------------------------------

def test_spec_constants():
    assert m.SPEC_VERSION == "MedEval-1 v0.1"
    assert list(m.CORRUPTIONS) == sorted(m.CORRUPTIONS) and len(m.CORRUPTIONS) == 7
    assert list(m.ACQUISITIONS) == sorted(m.ACQUISITIONS) and len(m.ACQUISITIONS) == 5
    assert tuple(f"template_{i}" for i in range(6)) == m.TEMPLATE_IDS
    assert (m.SEVERITIES, m.ROBUSTNESS_SUBSET_MAX, m.B) == (3, 1200, 1000)
    assert m.LATENCY_REFERENCE_SECONDS == 0.02 and m.TRAINING_FRACTIONS == (0.01, 0.1, 1.0)
