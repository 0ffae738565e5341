"""The MedEval-1 v0.2 dimensions and composite (docs/MEDEVAL-1.2.md), each computed for every bootstrap row.

Every statistic is computed from a *weights* matrix ``W`` of shape (R, n): row 0 is all ones (the point
estimate), rows 1..B the per-case multiplicities of the stratified bootstrap (``draws``). So the point
estimate and its ci95 come from the same code. Arithmetic is chosen so that the result does not depend on
the numpy version or the BLAS: weighted counts are integer-valued (a float64 product of 0/1 masks and
integer weights is exact whatever the summation order), confidence sums are exact int64 at scale 2^40, sums
of non-integer floats are sequential left to right (:func:`ordered_sum`), and the one division at the end
of each exact quantity is Python's correctly rounded ``int / int``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from keys.errors import MalformedInput

from . import spec, spec_v02
from .core import FloatArray, IntArray, cohen_kappa, counts_above_chance, roc_auc

Dimension = dict[str, Any]
Rows = NDArray[np.float64]  # one value per weights row (NaN where undefined)


# --- arithmetic -------------------------------------------------------------------------------------------

def ordered_sum(columns: FloatArray) -> FloatArray:
    """Row sums of a (R, m) array added left to right (column 0 + column 1, then + column 2, ...)."""
    if columns.shape[1] == 0:
        return np.zeros(columns.shape[0])
    return np.cumsum(columns, axis=1)[:, -1].copy()


def scalar_sum(values: list[float]) -> float:
    """Left-to-right float64 sum of a list (the spec's order for short lists)."""
    total = 0.0
    for value in values:
        total += value
    return total


def ci95(rows: Rows) -> list[float] | None:
    """Percentile interval of the bootstrap rows (1..B) that are defined: with m of them sorted ascending
    (ties by row number), the ``ceil(0.025 m)``-th and ``ceil(0.975 m)``-th (1-based); null when m = 0."""
    values = rows[1:]
    values = values[np.isfinite(values)]
    m = int(values.shape[0])
    if m == 0:
        return None
    ordered = np.sort(values, kind="stable")
    low = math.ceil((1 - spec_v02.CI_LEVEL) / 2 * m)
    high = math.ceil((1 + spec_v02.CI_LEVEL) / 2 * m)
    return [float(ordered[max(low, 1) - 1]), float(ordered[min(high, m) - 1])]


def lower_order_index(rows: Rows) -> int:
    """The row number (1..B) holding the lower ci95 bound of ``rows`` (all defined)."""
    values = rows[1:]
    ordered = np.argsort(values, kind="stable")
    low = math.ceil((1 - spec_v02.CI_LEVEL) / 2 * values.shape[0])
    return int(ordered[low - 1]) + 1


def above_chance(correct: IntArray, totals: IntArray, n_classes: int) -> NDArray[np.bool_]:
    """Per row: is the balanced accuracy over the classes present (``totals > 0``) strictly above 1/K?
    Decided on integers: ``K · Σ_k c_k / n_k > P`` (P classes present), exactly. A float evaluation settles
    every row farther than 1e-9 from the boundary; the rest are settled with Python fractions."""
    correct = np.asarray(correct, dtype=np.int64)
    totals = np.asarray(totals, dtype=np.int64)
    present = totals > 0
    ratio = np.divide(correct, totals, out=np.zeros(correct.shape), where=present)
    margin = n_classes * ordered_sum(ratio) - present.sum(axis=1)
    out = margin > 0
    for row in np.flatnonzero(np.abs(margin) <= 1e-9):
        out[row] = counts_above_chance(correct[row].tolist(), totals[row].tolist(), n_classes)
    return out


def balanced_rows(correct: FloatArray, totals: FloatArray) -> Rows:
    """Balanced accuracy per row: the mean of c_k / n_k over the classes present in that row (NaN if none)."""
    present = totals > 0
    ratio = np.divide(correct, totals, out=np.zeros(correct.shape), where=present)
    count = present.sum(axis=1)
    return np.divide(ordered_sum(ratio), count, out=np.full(count.shape, np.nan), where=count > 0)


def cc_raw(value: Rows, n_classes: int) -> Rows:
    chance = 1.0 / n_classes
    return (value - chance) / (1.0 - chance)


def cc(value: Rows, n_classes: int) -> Rows:
    return np.maximum(0.0, cc_raw(value, n_classes))


def one_hot(labels: IntArray, n_classes: int) -> FloatArray:
    out = np.zeros((labels.shape[0], n_classes))
    out[np.arange(labels.shape[0]), labels] = 1.0
    return out


def class_counts(weights: FloatArray, predictions: IntArray, labels: IntArray,
                 n_classes: int) -> tuple[FloatArray, FloatArray]:
    """(correct, totals) per row and class: integer-valued float64, exact."""
    correct, totals = class_counts_many(weights, [predictions], labels, n_classes)
    return correct[0], totals


def class_counts_many(weights: FloatArray, predictions: list[IntArray], labels: IntArray,
                      n_classes: int) -> tuple[list[FloatArray], FloatArray]:
    """Correct counts per row and class for each prediction vector, and the class totals, in one product
    (integer-valued float64: exact whatever order the BLAS sums in)."""
    members = one_hot(labels, n_classes)
    blocks = [members] + [members * (p == labels)[:, None] for p in predictions]
    product = weights @ np.concatenate(blocks, axis=1)
    totals = product[:, :n_classes]
    return [product[:, (i + 1) * n_classes:(i + 2) * n_classes] for i in range(len(predictions))], totals


def _point(rows: Rows) -> float | None:
    value = float(rows[0])
    return value if math.isfinite(value) else None


# --- accuracy ---------------------------------------------------------------------------------------------

def macro_auc(probs: FloatArray, labels: IntArray) -> float | None:
    """v0.1's AUC (rank-sum, average ranks), the one-vs-rest mean taken left to right over classes."""
    n_classes = probs.shape[1]
    if n_classes == 2:
        return roc_auc(labels == 1, probs[:, 1])
    aucs = [auc for k in range(n_classes) if (auc := roc_auc(labels == k, probs[:, k])) is not None]
    return scalar_sum(aucs) / len(aucs) if aucs else None


def quadratic_weighted_kappa(confusion: IntArray) -> float | None:
    """``1 - n Σ (i-j)² O_ij / Σ (i-j)² r_i c_j`` on integers (one division); null when undefined."""
    k = confusion.shape[0]
    distance = (np.arange(k)[:, None] - np.arange(k)[None, :]) ** 2
    rows = confusion.sum(axis=1)
    columns = confusion.sum(axis=0)
    n = int(confusion.sum())
    observed = int((distance * confusion).sum())
    expected = int((distance * np.outer(rows, columns)).sum())
    if expected == 0:
        return None
    return 1.0 - (n * observed) / expected


def accuracy(weights: FloatArray, probs: FloatArray, predictions: IntArray, labels: IntArray, *,
             ordinal: bool) -> tuple[Dimension, Rows, bool]:
    """Accuracy, per-class recall/precision, confusion matrix; **score = 100·cc(bacc)** with ci95s. Also
    returns the score rows and the skill gate (lower ci95 bound of bacc above chance, exactly)."""
    n_classes = probs.shape[1]
    correct, totals = class_counts(weights, predictions, labels, n_classes)
    bacc = balanced_rows(correct, totals)
    score = 100.0 * cc(bacc, n_classes)
    low_row = lower_order_index(bacc)
    skilled = bool(above_chance(correct[[low_row]].astype(np.int64), totals[[low_row]].astype(np.int64),
                                n_classes)[0])
    confusion = np.zeros((n_classes, n_classes), dtype=np.int64)
    np.add.at(confusion, (labels, predictions), 1)
    predicted = confusion.sum(axis=0)
    per_class = [{
        "class": k,
        "n": int(confusion[k].sum()),
        "precision": float(confusion[k, k] / predicted[k]) if predicted[k] else None,
        "predicted": int(predicted[k]),
        "recall": float(confusion[k, k] / confusion[k].sum()) if confusion[k].sum() else None,
    } for k in range(n_classes)]
    out: Dimension = {
        "accuracy": int(np.trace(confusion)) / int(labels.shape[0]),
        "auc": macro_auc(probs, labels),
        "balanced_accuracy": float(bacc[0]),
        "balanced_accuracy_ci95": ci95(bacc),
        "confusion_matrix": confusion.tolist(),
        "n_test": int(labels.shape[0]),
        "per_class": per_class,
        "score": float(score[0]),
        "score_ci95": ci95(score),
    }
    if ordinal:
        out["quadratic_weighted_kappa"] = quadratic_weighted_kappa(confusion)
    return out, score, skilled


# --- calibration ------------------------------------------------------------------------------------------

def confidence_units(confidence: FloatArray) -> IntArray:
    """``conf · 2^40`` as exact int64; refuses confidences that are not multiples of 2^-40."""
    scaled = np.ldexp(confidence, spec_v02.CONFIDENCE_SCALE_BITS)
    units = scaled.astype(np.int64)
    if not np.array_equal(units.astype(np.float64), scaled):
        raise MalformedInput("v0.2 needs float32 confidences of at least 2^-16 (exact at scale 2^-40)")
    return units


def calibration_bins(confidence: FloatArray) -> IntArray:
    """Bin of each confidence: ``clamp(ceil(15·conf) - 1, 0, 14)`` (bins (b/15, (b+1)/15], 0 in bin 0)."""
    return np.clip(np.ceil(spec.ECE_BINS * confidence).astype(np.int64) - 1, 0, spec.ECE_BINS - 1)


def calibration(weights: FloatArray, probs: FloatArray, predictions: IntArray, labels: IntArray) -> tuple[
        Dimension, Rows]:
    """ECE (exact, 15 bins), reliability bins, Brier, mean confidence; **score = 100·max(0, 1 - ece/0.2)**."""
    n = int(labels.shape[0])
    confidence = probs.max(axis=1)
    units = confidence_units(confidence)
    correct = predictions == labels
    bins = calibration_bins(confidence)
    integer_weights = weights.astype(np.int64)
    scale = 1 << spec_v02.CONFIDENCE_SCALE_BITS
    gap_total = np.zeros(weights.shape[0], dtype=np.int64)
    reliability = []
    for b in range(spec.ECE_BINS):
        members = bins == b
        count = integer_weights[:, members].sum(axis=1)
        hits = integer_weights[:, members & correct].sum(axis=1)
        confidence_sum = integer_weights[:, members] @ units[members]
        gap_total += np.abs(hits * scale - confidence_sum)
        filled = int(count[0]) > 0
        reliability.append({
            "accuracy": int(hits[0]) / int(count[0]) if filled else None,
            "lower": b / spec.ECE_BINS,
            "mean_confidence": int(confidence_sum[0]) / (int(count[0]) * scale) if filled else None,
            "n": int(count[0]),
            "upper": (b + 1) / spec.ECE_BINS,
        })
    ece = np.array([int(g) / (n * scale) for g in gap_total.tolist()])
    score = 100.0 * np.maximum(0.0, 1.0 - ece / spec.ECE_ZERO_SCORE)
    top1 = int(np.count_nonzero(correct)) / n
    mean_confidence = int(units.sum()) / (n * scale)
    squared = (probs - one_hot(labels, probs.shape[1])) ** 2
    brier = scalar_sum(ordered_sum(squared).tolist()) / n
    return {
        "accuracy": top1,
        "brier": brier,
        "ece": float(ece[0]),
        "mean_confidence": mean_confidence,
        "overconfidence": max(0.0, mean_confidence - top1),
        "reliability_bins": reliability,
        "score": float(score[0]),
        "score_ci95": ci95(score),
    }, score


# --- uncertainty ------------------------------------------------------------------------------------------

@cache
def harmonic_table(n: int) -> tuple[float, ...]:
    """H[0..n], H[k] = H[k-1] + 1/k in float64, sequentially."""
    table = [0.0]
    for k in range(1, n + 1):
        table.append(table[-1] + 1.0 / k)
    return tuple(table)


ROW_CHUNK = 64


def _tie_block_curve(weights: FloatArray, order: IntArray, correct: IntArray, starts: IntArray,
                     harmonic: FloatArray) -> tuple[Rows, IntArray, tuple[Any, Any, Any, Any]]:
    """For a chunk of weight rows: the tie-block risk-coverage AUC, the total correct, and the first row's
    (blocks' cumulative weight after, before, correct before, rate) for the selective accuracies."""
    n = int(order.shape[0])
    w = weights[:, order].astype(np.int64)
    block_weight = np.add.reduceat(w, starts, axis=1)
    block_correct = np.add.reduceat(w * correct[None, :], starts, axis=1)
    after = np.cumsum(block_weight, axis=1)
    before = after - block_weight
    correct_after = np.cumsum(block_correct, axis=1)
    correct_before = correct_after - block_correct
    rate = np.divide(block_correct, block_weight, out=np.zeros(block_weight.shape), where=block_weight > 0)
    terms = block_correct + (correct_before - before * rate) * (harmonic[after] - harmonic[before])
    terms = np.where(block_weight > 0, terms, 0.0)
    return ordered_sum(terms) / n, correct_after[:, -1], (after[0], before[0], correct_before[0], rate[0])


def uncertainty(weights: FloatArray, probs: FloatArray, predictions: IntArray, labels: IntArray) -> tuple[
        Dimension, Rows]:
    """Selective prediction with ties as units: cases sorted by confidence, each block of equal confidence
    taken in its expected order (E[correct among the first k] linear inside a block). ``risk_coverage_auc`` =
    (1/n) Σ_k E[C(k)]/k; **score = 100·clip((AUC - acc) / (oracle - acc), 0, 1)**, not applicable when no
    case or every case is correct."""
    n = int(labels.shape[0])
    confidence = probs.max(axis=1)
    order = np.argsort(-confidence, kind="stable")
    ordered = confidence[order]
    starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
    correct = (predictions == labels)[order].astype(np.int64)
    harmonic = np.asarray(harmonic_table(n))
    # Rows are independent: worked through in chunks so the (rows, blocks) temporaries stay small.
    chunks = [_tie_block_curve(weights[start:start + ROW_CHUNK], order, correct, starts, harmonic)
              for start in range(0, weights.shape[0], ROW_CHUNK)]
    auc = np.concatenate([chunk[0] for chunk in chunks])
    total_correct = np.concatenate([chunk[1] for chunk in chunks])
    after, before, correct_before, rate = chunks[0][2]
    acc = total_correct / n
    oracle = (total_correct + total_correct * (harmonic[n] - harmonic[total_correct])) / n
    applicable = (total_correct > 0) & (total_correct < n)
    ratio = np.divide(auc - acc, oracle - acc, out=np.full(auc.shape, np.nan), where=applicable)
    score = 100.0 * np.clip(ratio, 0.0, 1.0)
    point_correct = int(total_correct[0])
    out: Dimension = {
        "full_accuracy": float(acc[0]),
        "oracle_auc": float(oracle[0]),
        "risk_coverage_auc": float(auc[0]),
    }
    for suffix, coverage in spec.SELECTIVE_COVERAGES:
        kept = max(1, round(coverage * n))
        j = int(np.searchsorted(after, kept, side="left"))
        expected = correct_before[j] + (kept - before[j]) * rate[j]
        out[f"selective_acc_at_{suffix}"] = float(expected / kept)
    applies = bool(applicable[0])
    if not applies:
        out["not_applicable"] = spec_v02.uncertainty_not_applicable_reason(point_correct, n)
    out.update({"score": _point(score), "score_ci95": ci95(score) if applies else None, "scored": applies,
                "tie_blocks": int(starts.shape[0])})
    return out, score


# --- subgroup ---------------------------------------------------------------------------------------------

def subgroup(correct: FloatArray, totals: FloatArray, n_classes: int) -> tuple[Dimension, Rows]:
    """Worst per-class recall over the classes with at least :data:`spec_v02.MIN_SUBGROUP_SIZE` cases;
    **score = 100·cc(worst recall)**; not applicable with fewer than two such classes."""
    sizes = totals[0].astype(np.int64)
    eligible = np.flatnonzero(sizes >= spec_v02.MIN_SUBGROUP_SIZE)
    small = [int(k) for k in np.flatnonzero((sizes > 0) & (sizes < spec_v02.MIN_SUBGROUP_SIZE))]
    out: Dimension = {
        "attributes": {},
        "basis": spec.SUBGROUP_BASIS_NO_METADATA,
        "classes_below_minimum": small,
        "has_real_metadata": False,
        "min_subgroup_size": spec_v02.MIN_SUBGROUP_SIZE,
    }
    if eligible.shape[0] < 2:
        out.update({"not_applicable": spec_v02.subgroup_not_applicable_reason(int(eligible.shape[0])),
                    "score": None, "score_ci95": None, "scored": False, "worst_class": None,
                    "worst_class_recall": None})
        return out, np.full(totals.shape[0], np.nan)
    recall = correct[:, eligible] / totals[:, eligible]
    worst = recall.min(axis=1)
    score = 100.0 * cc(worst, n_classes)
    out.update({"score": float(score[0]), "score_ci95": ci95(score), "scored": True,
                "worst_class": int(eligible[int(np.argmin(recall[0]))]), "worst_class_recall": float(worst[0])})
    return out, score


# --- corruption and acquisition ---------------------------------------------------------------------------

def _baccs(weights: FloatArray, predictions: list[IntArray], labels: IntArray,
           n_classes: int) -> list[tuple[Rows, NDArray[np.bool_]]]:
    """Balanced accuracy rows and the exact above-chance test of each prediction vector."""
    corrects, totals = class_counts_many(weights, predictions, labels, n_classes)
    whole = totals.astype(np.int64)
    return [(balanced_rows(correct, totals), above_chance(correct.astype(np.int64), whole, n_classes))
            for correct in corrects]


def _argmax_baccs(weights: FloatArray, stacked_probs: NDArray[Any], labels: IntArray,
                  n_classes: int) -> tuple[list[Rows], list[NDArray[np.bool_]]]:
    """Balanced accuracy rows and above-chance tests of the top-1 predictions of each probability table."""
    scored = _baccs(weights, [np.argmax(np.asarray(probs, dtype=np.float64), axis=1) for probs in stacked_probs],
                    labels, n_classes)
    return [bacc for bacc, _ in scored], [bacc_above for _, bacc_above in scored]


def robustness(weights: FloatArray, clean: IntArray, perturbed: Mapping[str, NDArray[Any]], labels: IntArray,
               n_classes: int, names: tuple[str, ...], kind: str) -> tuple[Dimension, Rows]:
    """Retention of chance-corrected bacc under each perturbation and severity, on the subset;
    **score = 100·mean over perturbations of the mean over severities of clip(cc_raw(p)/cc_raw(clean), 0, 1)**.
    Not scored (counts 0 in the index) when the clean subset bacc is not above chance (integer test)."""
    n_cases = int(labels.shape[0])
    cells = [np.asarray(perturbed[name]).astype(np.int64)[severity] for name in names
             for severity in range(spec.SEVERITIES)]
    scored_cells = iter(_baccs(weights, [clean, *cells], labels, n_classes))
    clean_bacc, clean_above = next(scored_cells)
    clean_cc = cc_raw(clean_bacc, n_classes)
    scored = bool(clean_above[0])
    per_perturbation: dict[str, Any] = {}
    perturbation_means: list[Rows] = []
    kappas: list[float] = []
    agreements: list[float] = []
    cell_retentions: list[float] = []
    for name in names:
        by_severity = np.asarray(perturbed[name]).astype(np.int64)
        retentions: list[Rows] = []
        severity_agreements = []
        severity_kappas = []
        for severity in range(spec.SEVERITIES):
            labels_s = by_severity[severity]
            bacc, _ = next(scored_cells)
            ratio = np.divide(cc_raw(bacc, n_classes), clean_cc, out=np.zeros(bacc.shape),
                              where=clean_above & np.isfinite(bacc))
            retentions.append(np.where(clean_above, np.clip(ratio, 0.0, 1.0), 0.0))
            severity_agreements.append(int(np.count_nonzero(labels_s == clean)) / n_cases)
            severity_kappas.append(cohen_kappa(clean, labels_s, n_classes))
        mean_rows = ordered_sum(np.stack(retentions, axis=1)) / spec.SEVERITIES
        perturbation_means.append(mean_rows)
        finite = [k for k in severity_kappas if math.isfinite(k)]
        kappa = scalar_sum(finite) / len(finite) if finite else None
        if kappa is not None:
            kappas.append(kappa)
        agreements.extend(severity_agreements)
        cell_retentions.extend(float(r[0]) for r in retentions)
        per_perturbation[name] = {
            "agreement_by_severity": severity_agreements,
            "mean_kappa": kappa,
            "mean_retention": float(mean_rows[0]) if scored else None,
            "retention_by_severity": [float(r[0]) for r in retentions] if scored else None,
        }
    mean_retention = ordered_sum(np.stack(perturbation_means, axis=1)) / len(names)
    score = 100.0 * mean_retention
    out: Dimension = {"basis": spec.ACQUISITION_BASIS} if kind == "acquisition" else {}
    out.update({
        "clean_reference_cc": max(0.0, float(clean_cc[0])),
        "mean_agreement": scalar_sum(agreements) / len(agreements),
        "mean_kappa": scalar_sum(kappas) / len(kappas) if kappas else None,
        "mean_retention": float(mean_retention[0]) if scored else None,
        "n_cases": n_cases,
        "per_perturbation": per_perturbation,
        "score": float(score[0]) if scored else None,
        "score_ci95": ci95(score),
        "scored": scored,
        "worst_retention": min(cell_retentions) if scored else None,
    })
    if not scored:
        out["not_scored_reason"] = spec.robustness_not_scored_reason(max(0.0, float(clean_cc[0])))
    return out, score


# --- spec sensitivity -------------------------------------------------------------------------------------

def spec_sensitivity(weights: FloatArray, template_probs: NDArray[Any] | None, labels: IntArray,
                     n_classes: int) -> tuple[Dimension | None, Rows | None]:
    """Worst/best clipped cc over the six templates on the subset; **score = 100·worst/best**; not scored
    (counts 0) when no template is above chance (integer test)."""
    if template_probs is None:
        return None, None
    baccs, above = _argmax_baccs(weights, template_probs, labels, n_classes)
    ccs = np.stack([np.where(a, cc(b, n_classes), 0.0) for a, b in zip(above, baccs, strict=True)], axis=1)
    best = ccs.max(axis=1)
    worst = ccs.min(axis=1)
    any_above: NDArray[np.bool_] = np.asarray(np.stack(above, axis=1).any(axis=1))
    retention = np.divide(worst, best, out=np.zeros(best.shape), where=any_above)
    score = 100.0 * retention
    scored = bool(any_above[0])
    point = ccs[0]
    best_index, worst_index = int(np.argmax(point)), int(np.argmin(point))
    out: Dimension = {
        "basis": spec.SPEC_SENSITIVITY_BASIS,
        "best_chance_corrected": float(point[best_index]),
        "best_spec": spec.TEMPLATE_IDS[best_index],
        "n_specs": len(spec.TEMPLATES),
        "per_spec": {template_id: {"balanced_accuracy": float(baccs[i][0]), "chance_corrected": float(point[i]),
                                   "spec": text} for i, (template_id, text) in enumerate(spec.TEMPLATES)},
        "retention": float(retention[0]) if scored else None,
        "score": float(score[0]) if scored else None,
        "score_ci95": ci95(score),
        "scored": scored,
        "spread_balanced_accuracy": float(max(b[0] for b in baccs) - min(b[0] for b in baccs)),
        "worst_chance_corrected": float(point[worst_index]),
        "worst_spec": spec.TEMPLATE_IDS[worst_index],
    }
    if not scored:
        out["not_scored_reason"] = spec.spec_sensitivity_not_scored_reason(float(point[best_index]))
    return out, score


# --- limited data -----------------------------------------------------------------------------------------

def limited_data(weights: FloatArray, fraction_probs: NDArray[Any] | None, labels: IntArray,
                 n_classes: int) -> tuple[Dimension | None, Rows | None]:
    """**score = 100·mean over {1%, 10%} of clip(cc(bacc_f)/cc(bacc_100%), 0, 1)**; not scored (counts 0)
    when the 100% model is not above chance (integer test)."""
    if fraction_probs is None:
        return None, None
    baccs, above = _argmax_baccs(weights, fraction_probs, labels, n_classes)
    full = cc(baccs[-1], n_classes)
    full_above = above[-1]
    retentions = [np.where(full_above, np.clip(np.divide(cc(b, n_classes), full, out=np.zeros(full.shape),
                                                         where=full_above), 0.0, 1.0), 0.0) for b in baccs[:-1]]
    score = 100.0 * ordered_sum(np.stack(retentions, axis=1)) / len(retentions)
    scored = bool(full_above[0])
    out: Dimension = {
        "basis": spec.LIMITED_DATA_BASIS,
        "full_data_chance_corrected": float(full[0]),
        "per_fraction": {str(f): float(b[0]) for f, b in zip(spec.TRAINING_FRACTIONS, baccs, strict=True)},
        "retention_by_fraction": {str(f): float(r[0]) for f, r in zip(spec.TRAINING_FRACTIONS, retentions,
                                                                       strict=False)} if scored else None,
        "score": float(score[0]) if scored else None,
        "score_ci95": ci95(score),
        "scored": scored,
    }
    if not scored:
        out["not_scored_reason"] = spec.limited_data_not_scored_reason(float(full[0]))
    return out, score


# --- composite --------------------------------------------------------------------------------------------

def composite(dimensions: Mapping[str, Dimension | None], rows: Mapping[str, Rows | None], *, skilled: bool,
              accuracy_lower: float | None, n_classes: int, cost_score: float) -> dict[str, Any]:
    """The skill-gated index: over the dimensions that apply (present and not ``not_applicable``), weights
    renormalised; accuracy always counts; every other dimension counts its score only when ``skilled`` and
    scored, else 0. Computed for every row with the point's gate; ``index_ci95`` from the rows."""
    applied: dict[str, float] = {}
    counted: list[str] = []
    zeroed: list[str] = []
    total: Rows | None = None
    for name, weight in spec_v02.COMPOSITE_WEIGHTS.items():
        dimension = dimensions.get(name)
        if dimension is None or "not_applicable" in dimension:
            continue
        applied[name] = weight
        dimension_rows = rows.get(name)
        counts = name == "accuracy" or (skilled and dimension.get("score") is not None)
        if counts and dimension_rows is not None:
            counted.append(name)
            contribution = weight * np.nan_to_num(dimension_rows, nan=0.0)
        else:
            zeroed.append(name)
            contribution = np.zeros(next(iter(r for r in rows.values() if r is not None)).shape)
        total = contribution if total is None else total + contribution
    coverage = scalar_sum(list(applied.values()))
    if total is None:
        raise MalformedInput("v0.2 composite: no dimension applies")
    index = total / coverage
    return {
        "cost_score": cost_score,
        "coverage": coverage,
        "dimensions_counted": sorted(counted),
        "dimensions_zeroed": sorted(zeroed),
        "index": float(index[0]),
        "index_ci95": ci95(index),
        "note": spec_v02.COST_BESIDE_INDEX,
        "skill_gate": {
            "accuracy_balanced_lower_ci95": accuracy_lower,
            "basis": spec_v02.SKILL_GATE_BASIS,
            "chance": 1.0 / n_classes,
            "passed": skilled,
        },
        "weights": dict(sorted(applied.items())),
    }
