"""Each v0.1 dimension score of the reference passport's twelve evaluations, recomputed by the dimension
functions from inputs rebuilt from the reference (issue 12, must show).

The passport holds evaluations, not predictions, so the test rebuilds predictions and labels whose underlying
statistics are the recorded ones (a balanced accuracy, an ECE, a risk-coverage AUC, a worst class recall, the
per-template and per-perturbation balanced accuracies), runs the real v0.1 functions on them, and requires the
recorded score, within the recorded rounding (6 dp, 4 dp for the early-rounded retentions) propagated through
the score's formula plus the rebuild's own error. The scores are never fed back: each is computed by the
function from labels and predictions. The composite is then recomputed from those scores; best/worst template
names follow from the rebuilt predictions.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import harness.metrics as m
from tests.test_metrics_reference import EVALUATIONS, TASK_IDS

#: distinct primes: class k has PRIMES[k] cases, so sums of c_k/n_k are fine-grained (spacing ~1e-6)
PRIMES = (1009, 1013, 1019, 1021, 1031, 1033, 1039, 1049, 1051, 1061, 1063)
ROUND6 = 0.5e-6


def class_labels(k: int) -> np.ndarray:
    return np.repeat(np.arange(k), PRIMES[:k])


def predictions_with_bacc(target: float, k: int) -> tuple[np.ndarray, float]:
    """Predictions on :func:`class_labels` whose balanced accuracy is as close to ``target`` as two free
    classes allow; returns them and the exact balanced accuracy reached."""
    sizes = PRIMES[:k]
    target = min(max(target, 0.0), 1.0)
    correct = [round(target * n) for n in sizes]
    rest = k * target - sum(c / n for c, n in zip(correct[2:], sizes[2:], strict=True))
    best = (math.inf, 0, 0)
    for c0 in range(sizes[0] + 1):
        c1 = min(max(round((rest - c0 / sizes[0]) * sizes[1]), 0), sizes[1])
        error = abs(c0 / sizes[0] + c1 / sizes[1] - rest)
        if error < best[0]:
            best = (error, c0, c1)
    correct[0], correct[1] = best[1], best[2]
    labels = class_labels(k)
    predictions = (labels + 1) % k
    start = 0
    for c, n in zip(correct, sizes, strict=True):
        predictions[start:start + c] = labels[start:start + c]
        start += n
    reached = sum(c / n for c, n in zip(correct, sizes, strict=True)) / k
    return predictions, reached


def probs_for(predictions: np.ndarray, k: int, confidence: float = 0.9) -> np.ndarray:
    probs = np.full((predictions.size, k), (1 - confidence) / (k - 1))
    probs[np.arange(predictions.size), predictions] = confidence
    return probs


def bacc_from_cc(cc: float, k: int) -> float:
    return 1.0 / k + cc * (1.0 - 1.0 / k)


def cc_tolerance(k: int, bacc_error: float) -> float:
    """Score tolerance of 100·cc(bacc) for a bacc known to within ``bacc_error``, plus emit rounding."""
    return 100 * bacc_error / (1 - 1 / k) + ROUND6


# --- one rebuild per dimension ----------------------------------------------------------------------------

def rebuilt_accuracy(evaluation: dict[str, Any]) -> tuple[float, float]:
    k = evaluation["n_classes"]
    recorded = evaluation["dimensions"]["accuracy"]
    predictions, reached = predictions_with_bacc(recorded["balanced_accuracy"], k)
    labels = class_labels(k)
    score = m.accuracy(probs_for(predictions, k), labels, seed=evaluation["seed"])["score"]
    return score, cc_tolerance(k, ROUND6 + abs(reached - recorded["balanced_accuracy"]))


def rebuilt_subgroup(evaluation: dict[str, Any]) -> tuple[float, float]:
    k = evaluation["n_classes"]
    target = evaluation["dimensions"]["subgroup"]["worst_class_recall"]
    n = max(range(1, evaluation["n_test"] + 1), key=lambda size: -abs(round(target * size) / size - target))
    hits = round(target * n)  # the recorded worst recall is some c/n with n <= n_test: recover it
    labels = np.concatenate([np.zeros(n, dtype=np.int64), np.repeat(np.arange(1, k), 5)])
    predictions = labels.copy()
    predictions[hits:n] = 1  # class 0's recall is hits/n; every other class is recalled perfectly
    score = m.subgroup(predictions, labels, k)["score"]
    return score, cc_tolerance(k, ROUND6 + abs(hits / n - target))


def rebuilt_calibration(evaluation: dict[str, Any]) -> tuple[float, float]:
    """Every case at one confidence 0.5 + ece with half of them right: ECE = |0.5 - confidence| = ece."""
    k = evaluation["n_classes"]
    ece = evaluation["dimensions"]["calibration"]["ece"]
    n = 2000
    confidence = float(np.float32(0.5 + ece))
    labels = np.zeros(n, dtype=np.int64)
    predictions = np.where(np.arange(n) < n // 2, 0, 1)
    score = m.calibration(probs_for(predictions, k, confidence), labels)["score"]
    return score, 100 / m.spec.ECE_ZERO_SCORE * (ROUND6 + abs(confidence - 0.5 - ece)) + ROUND6


def rebuilt_uncertainty(evaluation: dict[str, Any]) -> tuple[float, float]:
    """A correct/wrong sequence over max(n_test, 4,000) cases with the recorded accuracy, ordered by distinct
    confidences so that its risk-coverage AUC is the recorded one (correct cases moved right from all-first,
    greedily; each move changes n·AUC by a harmonic difference, so the AUC lands within 1/n² of the target)."""
    k = evaluation["n_classes"]
    recorded = evaluation["dimensions"]["uncertainty"]
    n = max(evaluation["n_test"], 4000)
    total = round(recorded["full_accuracy"] * n)
    harmonic = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, n + 1))])
    positions = list(range(1, total + 1))  # 1-based positions of the correct cases, all first
    auc_max = (total + total * (harmonic[n] - harmonic[total])) / n
    deficit = (auc_max - recorded["risk_coverage_auc"]) * n  # moving a correct case from p to q costs H[q-1]-H[p-1]
    limit = n
    for i in range(total - 1, -1, -1):
        p = positions[i]
        q = int(np.searchsorted(harmonic, harmonic[p - 1] + deficit, side="right"))  # largest q-1 with cost <= D
        q = min(q, limit)
        deficit -= harmonic[q - 1] - harmonic[p - 1]
        positions[i] = q
        limit = q - 1
        if deficit < 1.0 / n:
            break
    correct = np.zeros(n, dtype=bool)
    correct[np.array(positions) - 1] = True
    labels = np.zeros(n, dtype=np.int64)
    predictions = np.where(correct, 0, 1)
    confidence = np.linspace(0.99, 0.6, n)  # strictly decreasing: case order is confidence order
    probs = np.zeros((n, k))
    probs[np.arange(n), predictions] = confidence
    probs[np.arange(n), np.where(predictions == 0, 1, 0)] = 1 - confidence
    result = m.uncertainty(probs, labels)
    auc_error = abs(result["risk_coverage_auc"] - recorded["risk_coverage_auc"])
    assert auc_error < 1e-6 + ROUND6, auc_error
    return result["score"], cc_tolerance(k, ROUND6 + auc_error)


def robustness_cells(evaluation: dict[str, Any], name: str) -> dict[str, Any] | None:
    """Clean and perturbed subset predictions reproducing the recorded clean cc and retentions."""
    k = evaluation["n_classes"]
    recorded = evaluation["dimensions"][name]
    labels = class_labels(k)
    if recorded["score"] is None:
        clean, _ = predictions_with_bacc(1.0 / k - 0.01, k)  # the recorded clean model is not above chance
        return {"labels": labels, "clean": clean, "perturbed": {p: np.stack([clean] * 3)
                                                                for p in recorded["per_perturbation"]},
                "error": 0.0}
    clean_cc = recorded["clean_reference_cc"]
    clean, clean_bacc = predictions_with_bacc(bacc_from_cc(clean_cc, k), k)
    reached_cc = (clean_bacc - 1 / k) / (1 - 1 / k)
    perturbed = {}
    worst_error = abs(reached_cc - clean_cc) / clean_cc
    for perturbation, entry in recorded["per_perturbation"].items():
        rounded = entry["retention_by_severity"]
        shift = entry["mean_retention"] - sum(rounded) / 3  # within the 4-dp rounding of each
        rows = []
        for r in rounded:
            retention = min(max(r + shift, 0.0), 1.0)
            target_cc = retention * reached_cc if retention > 0 else -0.05
            predictions, bacc = predictions_with_bacc(bacc_from_cc(target_cc, k), k)
            if retention > 0:
                worst_error = max(worst_error, abs((bacc - 1 / k) / (1 - 1 / k) / reached_cc - retention))
            rows.append(predictions)
        perturbed[perturbation] = np.stack(rows)
    return {"labels": labels, "clean": clean, "perturbed": perturbed, "error": worst_error}


def rebuilt_robustness(evaluation: dict[str, Any], name: str) -> tuple[float | None, float]:
    cells = robustness_cells(evaluation, name)
    assert cells is not None
    function = m.corruption if name == "corruption" else m.acquisition
    score = function(cells["clean"], cells["perturbed"], cells["labels"], evaluation["n_classes"])["score"]
    # per retention: 0.5e-6 on the recorded mean plus the rebuild's error; the score is 100 x their mean
    return score, 100 * (ROUND6 + 2 * cells["error"]) + ROUND6


def rebuilt_spec_sensitivity(evaluation: dict[str, Any]) -> tuple[dict[str, Any], float]:
    k = evaluation["n_classes"]
    recorded = evaluation["dimensions"]["spec_sensitivity"]
    # a template at or below chance (cc 0) is rebuilt strictly below chance: only that property matters
    baccs = [entry["balanced_accuracy"] if entry["chance_corrected"] > 0 else
             min(entry["balanced_accuracy"], 1 / k - 1e-3)
             for entry in (recorded["per_spec"][template_id] for template_id in m.TEMPLATE_IDS)]
    built = [predictions_with_bacc(b, k) for b in baccs]
    probs = np.stack([probs_for(p, k) for p, _ in built])
    result = m.spec_sensitivity(probs, class_labels(k), k)
    error = max(abs(reached - b) for (_, reached), b in zip(built, baccs, strict=True)) + ROUND6
    assert all(abs(reached - b) < 1e-6 for (_, reached), b in zip(built, baccs, strict=True))
    best = max(recorded["best_chance_corrected"], 1e-9)
    cc_error = error / (1 - 1 / k)
    return result, 100 * (cc_error / best + recorded["worst_chance_corrected"] * cc_error / best ** 2) + ROUND6


# --- the tests --------------------------------------------------------------------------------------------

def close(found: float | None, recorded: float | None, tolerance: float) -> bool:
    if found is None or recorded is None:
        return found is None and recorded is None
    return abs(found - recorded) <= tolerance


@pytest.mark.parametrize("evaluation", EVALUATIONS, ids=TASK_IDS)
def test_each_v01_dimension_score_recomputed_from_rebuilt_inputs(evaluation):
    recorded = evaluation["dimensions"]
    scores: dict[str, float | None] = {}
    report = []
    for name, (found, tolerance) in {
        "accuracy": rebuilt_accuracy(evaluation),
        "calibration": rebuilt_calibration(evaluation),
        "uncertainty": rebuilt_uncertainty(evaluation),
        "subgroup": rebuilt_subgroup(evaluation),
        "corruption": rebuilt_robustness(evaluation, "corruption"),
        "acquisition": rebuilt_robustness(evaluation, "acquisition"),
    }.items():
        scores[name] = found
        report.append((name, found, recorded[name]["score"], tolerance))
        assert close(found, recorded[name]["score"], tolerance), report[-1]
    spec_result, spec_tolerance = rebuilt_spec_sensitivity(evaluation)
    if recorded["spec_sensitivity"]["scored"]:
        assert close(spec_result["score"], recorded["spec_sensitivity"]["score"], spec_tolerance)
    assert spec_result["best_spec"] == recorded["spec_sensitivity"]["best_spec"]
    assert spec_result["worst_spec"] == recorded["spec_sensitivity"]["worst_spec"]
    assert m.limited_data(None, class_labels(2), 2) is None and recorded["limited_data"] is None  # zero-shot
    scores["spec_sensitivity"] = spec_result["score"]
    rebuilt_dimensions = {name: {"score": score} for name, score in scores.items()}
    rebuilt_dimensions["cost"] = {"score": recorded["cost"]["score"]}  # measured, not re-derivable
    rebuilt_dimensions["limited_data"] = None
    composite = m.composite(rebuilt_dimensions)
    assert composite["dimensions_scored"] == evaluation["composite"]["dimensions_scored"]
    assert composite["coverage"] == pytest.approx(evaluation["composite"]["coverage"], abs=ROUND6)
    worst = max(t for _, _, _, t in report) + spec_tolerance
    assert abs(composite["index"] - evaluation["composite"]["index"]) <= worst + ROUND6
