"""The nine MedEval-1 dimensions and the composite, one pure function each.

Each function returns exactly the dict shape of the reference passport's evaluation objects (same keys,
nulls, ``basis`` strings and ``scored`` flags). Floats are left unrounded: they are rounded once, at emit,
by ``seals.canonical.prepare``. The only exceptions are the arrays the spec rounds early to 4 decimals
(``retention_by_severity``, ``agreement_by_severity``) and the measured cost inputs whose recorded precision
the reference fixes (``seconds_total`` 4 dp, ``cases_per_second`` 3 dp, ``parameters_millions`` 1 dp).
Every derived score is computed from unrounded inputs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from keys.errors import MalformedInput

from . import spec
from .core import (
    IntArray,
    above_chance,
    accuracy_top1,
    agreement_counts,
    as_labels,
    as_probs,
    balanced_accuracy,
    chance_corrected,
    chance_corrected_raw,
    check_n_classes,
    class_recalls,
    float_mean,
    kappa_of_counts,
    macro_auc,
    mean_or_none,
    predictions_from_probs,
    row_recalls,
)

Dimension = dict[str, Any]


def subset_indices(n_test: int, seed: int) -> IntArray:
    """The robustness subset: all cases when ``n_test <= 1200``, else
    ``sorted(default_rng(seed).choice(n_test, 1200, replace=False))``."""
    if isinstance(n_test, bool) or n_test < 1:
        raise MalformedInput(f"n_test must be a positive integer (found {n_test!r})", found=repr(n_test))
    if n_test <= spec.ROBUSTNESS_SUBSET_MAX:
        return np.arange(n_test, dtype=np.int64)
    chosen = np.random.default_rng(seed).choice(n_test, spec.ROBUSTNESS_SUBSET_MAX, replace=False)
    return np.sort(chosen).astype(np.int64)


def n_cases_for(n_test: int) -> int:
    """``n_cases = min(n_test, 1200)``."""
    return min(int(n_test), spec.ROBUSTNESS_SUBSET_MAX)


# --- accuracy ---------------------------------------------------------------------------------------------

def bootstrap_balanced_accuracy(predictions: IntArray, labels: IntArray, n_classes: int, *,
                                seed: int, resamples: int = spec.B) -> np.ndarray:
    """The B bootstrap replicates of balanced accuracy, drawn as multinomial counts of the 2K cells
    (class 0 correct, class 0 wrong, class 1 correct, ...) with ``default_rng(seed)``. A class absent from a
    resample is left out of that resample's mean of recalls."""
    n = labels.shape[0]
    correct = np.bincount(labels[predictions == labels], minlength=n_classes)
    totals = np.bincount(labels, minlength=n_classes)
    cells = np.stack([correct, totals - correct], axis=1).reshape(-1)
    draws = np.random.default_rng(seed).multinomial(n, cells / n, size=resamples)
    draws = draws.reshape(resamples, n_classes, 2)
    drawn_totals = draws.sum(axis=2)
    present = drawn_totals > 0
    recalls = np.divide(draws[:, :, 0], drawn_totals, out=np.zeros(drawn_totals.shape), where=present)
    return recalls.sum(axis=1) / present.sum(axis=1)


def accuracy(probs: ArrayLike, labels: ArrayLike, *, seed: int) -> Dimension:
    """Top-1 accuracy, macro one-vs-rest AUC, balanced accuracy with its bootstrap ``ci95``;
    **score = 100·cc(bacc)**. ``auc`` is null only when no class has both positives and negatives."""
    p = as_probs(probs)
    n_classes = p.shape[1]
    y = as_labels(labels, n_classes=n_classes, n=p.shape[0])
    predictions = predictions_from_probs(p)
    bacc = balanced_accuracy(predictions, y, n_classes)
    replicates = bootstrap_balanced_accuracy(predictions, y, n_classes, seed=seed)
    low, high = np.percentile(replicates, spec.BOOTSTRAP_PERCENTILES)
    return {
        "accuracy": accuracy_top1(predictions, y),
        "auc": macro_auc(p, y),
        "balanced_accuracy": bacc,
        "ci95": [float(low), float(high)],
        "n_test": int(y.shape[0]),
        "score": 100.0 * chance_corrected(bacc, n_classes),
    }


# --- calibration ------------------------------------------------------------------------------------------

def _calibration_bin_sums(confidence: np.ndarray, correct: np.ndarray
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The ECE binning: 15 equal-width bins over (0, 1]; bin b holds ``edges[b] < conf <= edges[b+1]`` with
    ``edges = numpy.linspace(0, 1, 16)`` (a confidence of exactly 0 falls in the first bin). Returns the edges
    and, per bin, the count, the sum of confidences and the number correct."""
    edges = np.linspace(0.0, 1.0, spec.ECE_BINS + 1)
    bins = np.clip(np.searchsorted(edges, confidence, side="left") - 1, 0, spec.ECE_BINS - 1)
    counts = np.bincount(bins, minlength=spec.ECE_BINS)
    confidence_sums = np.bincount(bins, weights=confidence, minlength=spec.ECE_BINS)
    correct_sums = np.bincount(bins, weights=correct.astype(np.float64), minlength=spec.ECE_BINS)
    return edges, counts, confidence_sums, correct_sums


def expected_calibration_error(confidence: np.ndarray, correct: np.ndarray) -> float:
    """ECE over the bins of :func:`_calibration_bin_sums`, weighted by bin count:
    ``Σ_b (n_b / n) · |acc_b - conf_b|``."""
    _, counts, confidence_sums, correct_sums = _calibration_bin_sums(confidence, correct)
    filled = counts > 0
    gaps = np.abs(correct_sums[filled] / counts[filled] - confidence_sums[filled] / counts[filled])
    return float(np.sum(counts[filled] / confidence.shape[0] * gaps))


def calibration(probs: ArrayLike, labels: ArrayLike) -> Dimension:
    """Accuracy, multi-class Brier (0..2), ECE, mean confidence and overconfidence;
    **score = 100·max(0, 1 - ece/0.2)**."""
    p = as_probs(probs)
    n, n_classes = p.shape
    y = as_labels(labels, n_classes=n_classes, n=n)
    predictions = predictions_from_probs(p)
    confidence = p.max(axis=1)
    correct = predictions == y
    one_hot = np.zeros_like(p)
    one_hot[np.arange(n), y] = 1.0
    top1 = accuracy_top1(predictions, y)
    mean_confidence = float(np.mean(confidence))
    ece = expected_calibration_error(confidence, correct)
    return {
        "accuracy": top1,
        "brier": float(np.mean(np.sum((p - one_hot) ** 2, axis=1))),
        "ece": ece,
        "mean_confidence": mean_confidence,
        "overconfidence": max(0.0, mean_confidence - top1),
        "score": 100.0 * max(0.0, 1.0 - ece / spec.ECE_ZERO_SCORE),
    }


def calibration_bins(probs: ArrayLike, labels: ArrayLike) -> list[dict[str, Any]]:
    """The reliability diagram behind the ECE: per bin ``lo``, ``hi``, ``count``, mean ``confidence`` and
    ``accuracy`` (null for an empty bin). Not part of the evaluation object (per-bin accuracies are
    label-dependent releases); drawn where the labels are public (a revealed generation)."""
    p = as_probs(probs)
    n, n_classes = p.shape
    y = as_labels(labels, n_classes=n_classes, n=n)
    confidence = p.max(axis=1)
    edges, counts, confidence_sums, correct_sums = _calibration_bin_sums(confidence, predictions_from_probs(p) == y)
    return [{"lo": float(edges[b]), "hi": float(edges[b + 1]), "count": int(counts[b]),
             "confidence": float(confidence_sums[b] / counts[b]) if counts[b] else None,
             "accuracy": float(correct_sums[b] / counts[b]) if counts[b] else None} for b in range(len(counts))]


# --- uncertainty ------------------------------------------------------------------------------------------

def expected_cumulative_correct(confidence: np.ndarray, correct: np.ndarray) -> np.ndarray:
    """For k = 1..n, the number of correct cases among the k most confident, each block of tied confidences
    taken as one unit: inside a block the count grows linearly (its expectation over every order of the
    tied cases), so the result never depends on the order of cases. Without ties this is the plain
    cumulative count, as exact integers in float64."""
    order = np.argsort(-confidence, kind="stable")
    ordered = confidence[order]
    hits = correct[order].astype(np.int64)
    n = int(hits.shape[0])
    starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
    sizes = np.diff(np.append(starts, n))
    block_hits = np.add.reduceat(hits, starts)
    hits_before = np.cumsum(block_hits) - block_hits
    block = np.repeat(np.arange(starts.shape[0]), sizes)
    position = np.arange(1, n + 1) - starts[block]  # 1..size inside each block
    return hits_before[block] + position * (block_hits[block] / sizes[block])


def uncertainty(probs: ArrayLike, labels: ArrayLike) -> Dimension:
    """Selective prediction by confidence (sorted descending; tied confidences as one unit, see
    :func:`expected_cumulative_correct`). ``selective_acc_at_c`` is the accuracy
    of the first ``round(c·n)`` cases (half-even; at least 1 case, which only matters for n = 1);
    ``risk_coverage_auc`` is the mean over k = 1..n of the accuracy of the first k cases;
    **score = 100·cc(risk_coverage_auc)**."""
    p = as_probs(probs)
    n, n_classes = p.shape
    y = as_labels(labels, n_classes=n_classes, n=n)
    predictions = predictions_from_probs(p)
    cumulative_correct = expected_cumulative_correct(p.max(axis=1), predictions == y)
    accuracy_at_k = cumulative_correct / np.arange(1, n + 1)
    risk_coverage_auc = float(np.mean(accuracy_at_k))
    out: Dimension = {"full_accuracy": accuracy_top1(predictions, y), "risk_coverage_auc": risk_coverage_auc,
                      "score": 100.0 * chance_corrected(risk_coverage_auc, n_classes)}
    for suffix, coverage in spec.SELECTIVE_COVERAGES:
        kept = max(1, round(coverage * n))
        out[f"selective_acc_at_{suffix}"] = float(cumulative_correct[kept - 1] / kept)
    return dict(sorted(out.items()))


# --- subgroup ---------------------------------------------------------------------------------------------

def subgroup(predictions: ArrayLike, labels: ArrayLike, n_classes: int,
             metadata: Mapping[str, ArrayLike] | None = None) -> Dimension:
    """Without metadata (every MedMNIST set): the worst per-class recall, **score = 100·cc(worst recall)**.

    With metadata (attribute name -> one group value per case): for each attribute, the balanced accuracy
    of every group (keys are ``str(value)``, sorted); the attribute's worst group (ties to the first key) and
    its score ``100·cc(worst bacc)``; the dimension score is the lowest attribute score (decided)."""
    n_classes = check_n_classes(n_classes)
    y = as_labels(labels, n_classes=n_classes)
    pred = as_labels(predictions, n_classes=n_classes, n=y.shape[0], what="predictions")
    worst_class_recall = float(np.min(class_recalls(pred, y, n_classes)))
    if not metadata:
        return {
            "attributes": {},
            "basis": spec.SUBGROUP_BASIS_NO_METADATA,
            "has_real_metadata": False,
            "score": 100.0 * chance_corrected(worst_class_recall, n_classes),
            "worst_class_recall": worst_class_recall,
        }
    attributes: dict[str, Any] = {}
    for name in sorted(metadata):
        values = np.asarray(metadata[name])
        if values.ndim != 1 or values.shape[0] != y.shape[0]:
            raise MalformedInput(f"subgroup metadata {name!r} must have one value per case ({y.shape[0]})",
                                 expected=[int(y.shape[0])], found=list(values.shape))
        keys = np.array([str(value) for value in values.tolist()])
        groups = {key: balanced_accuracy(pred[keys == key], y[keys == key], n_classes)
                  for key in sorted(set(keys.tolist()))}
        worst_group = min(groups, key=lambda key: groups[key])  # min() keeps the first of equal values
        attributes[name] = {
            "groups": groups,
            "n_groups": len(groups),
            "score": 100.0 * chance_corrected(groups[worst_group], n_classes),
            "worst_balanced_accuracy": groups[worst_group],
            "worst_group": worst_group,
        }
    return {
        "attributes": attributes,
        "basis": spec.SUBGROUP_BASIS_METADATA,
        "has_real_metadata": True,
        "score": min(attribute["score"] for attribute in attributes.values()),
        "worst_class_recall": worst_class_recall,
    }


# --- corruption and acquisition -----------------------------------------------------------------------

def _checked_cells(given: ArrayLike, name: str, kind: str, n_cases: int, n_classes: int) -> IntArray:
    """One perturbation's (3, n_cases) predicted labels as int64, refused as :func:`as_labels` refuses a row
    (the first bad severity named)."""
    labels_by_severity = np.asarray(given)
    if labels_by_severity.ndim != 2 or labels_by_severity.shape != (spec.SEVERITIES, n_cases):
        raise MalformedInput(f"{kind} predictions {name!r} must have shape "
                             f"({spec.SEVERITIES}, {n_cases})", expected=[spec.SEVERITIES, n_cases],
                             found=list(labels_by_severity.shape))
    if labels_by_severity.dtype.kind in "iu" and labels_by_severity.min() >= 0 \
            and labels_by_severity.max() < n_classes:
        return labels_by_severity.astype(np.int64)
    return np.stack([as_labels(labels_by_severity[severity], n_classes=n_classes, n=n_cases,
                               what=f"{kind} predictions {name!r} severity {severity}")
                     for severity in range(spec.SEVERITIES)])


def _robustness(clean_pred_subset: ArrayLike, perturbed: Mapping[str, ArrayLike], labels_subset: ArrayLike,
                n_classes: int, names: tuple[str, ...], kind: str) -> Dimension:
    n_classes = check_n_classes(n_classes)
    y = as_labels(labels_subset, n_classes=n_classes, what="labels_subset")
    n_cases = int(y.shape[0])
    clean = as_labels(clean_pred_subset, n_classes=n_classes, n=n_cases, what="clean_pred_subset")
    if set(perturbed) != set(names):
        raise MalformedInput(f"{kind} needs predictions for exactly {list(names)} "
                             f"(found {sorted(perturbed)})", expected=list(names), found=sorted(perturbed))
    clean_raw_cc = chance_corrected_raw(balanced_accuracy(clean, y, n_classes), n_classes)
    scored = above_chance(clean, y, n_classes)  # on integer counts, not on the float cc
    clean_reference_cc = max(0.0, clean_raw_cc) if scored else 0.0
    reason = None if scored else spec.robustness_not_scored_reason(clean_reference_cc)

    # The 3 x len(names) cells are checked, then counted in one pass each (agreements, kappa terms, recalls);
    # every float below is computed from those counts exactly as the per-cell formulas do.
    cells = np.concatenate([_checked_cells(perturbed[name], name, kind, n_cases, n_classes) for name in names])
    agreements_count, marginal_products = agreement_counts(clean, cells, n_classes)
    recalls = row_recalls(cells, y, n_classes) if scored else None

    per_perturbation: dict[str, Any] = {}
    perturbation_retentions: list[float] = []
    perturbation_kappas: list[float] = []
    cell_retentions: list[float] = []
    cell_agreements: list[float] = []
    for position, name in enumerate(names):
        retentions: list[float] = []
        agreements: list[float] = []
        kappas: list[float] = []
        for cell in range(position * spec.SEVERITIES, (position + 1) * spec.SEVERITIES):
            agreements.append(agreements_count[cell] / n_cases)
            kappas.append(kappa_of_counts(n_cases, agreements_count[cell], marginal_products[cell]))
            if recalls is not None:
                raw_cc = chance_corrected_raw(float_mean(recalls[cell]), n_classes)
                retentions.append(min(1.0, max(0.0, raw_cc / clean_reference_cc)))
        kappa = mean_or_none(kappas)
        entry: dict[str, Any] = {
            "agreement_by_severity": [round(a, spec.EARLY_ROUND_DECIMALS) for a in agreements],
            "mean_kappa": kappa,
        }
        if scored:
            mean_retention = float_mean(retentions)
            entry["mean_retention"] = mean_retention
            entry["retention_by_severity"] = [round(r, spec.EARLY_ROUND_DECIMALS) for r in retentions]
            entry["scored"] = True
            perturbation_retentions.append(mean_retention)
            cell_retentions.extend(retentions)
        else:
            entry["mean_retention"] = 0.0
            entry["not_applicable"] = reason
            entry["retention_by_severity"] = [0.0] * spec.SEVERITIES
            entry["scored"] = False
        per_perturbation[name] = entry
        if kappa is not None:
            perturbation_kappas.append(kappa)
        cell_agreements.extend(agreements)

    out: Dimension = {}
    if kind == "acquisition":
        out["basis"] = spec.ACQUISITION_BASIS
    out["clean_reference_cc"] = clean_reference_cc
    if scored:
        mean_retention = float_mean(perturbation_retentions)
        out.update({
            "mean_agreement": float_mean(cell_agreements),
            "mean_kappa": mean_or_none(perturbation_kappas),
            "mean_retention": mean_retention,
            "n_cases": n_cases,
            "per_perturbation": per_perturbation,
            "score": 100.0 * mean_retention,
            "worst_retention": float(min(cell_retentions)),
        })
    else:
        out.update({
            "mean_agreement": None,
            "mean_kappa": None,
            "mean_retention": None,
            "n_cases": n_cases,
            "not_scored_reason": reason,
            "per_perturbation": per_perturbation,
            "score": None,
            "worst_retention": None,
        })
    return out


def corruption(clean_pred_subset: ArrayLike, perturbed: Mapping[str, ArrayLike], labels_subset: ArrayLike,
               n_classes: int) -> Dimension:
    """Retention of chance-corrected balanced accuracy under the 7 corruptions x 3 severities, on the subset.

    ``perturbed`` maps each name of :data:`spec.CORRUPTIONS` to an int array (3, n_cases) of predicted labels.
    **score = 100·mean_retention**; not scored (nulls, per-perturbation ``scored: false``) when the clean
    raw cc is at or below 0. Per-perturbation ``mean_kappa`` is null when all three kappas are undefined."""
    return _robustness(clean_pred_subset, perturbed, labels_subset, n_classes, spec.CORRUPTIONS, "corruption")


def acquisition(clean_pred_subset: ArrayLike, perturbed: Mapping[str, ArrayLike], labels_subset: ArrayLike,
                n_classes: int) -> Dimension:
    """Same machinery as :func:`corruption` over the 5 acquisition perturbations, with its ``basis``."""
    return _robustness(clean_pred_subset, perturbed, labels_subset, n_classes, spec.ACQUISITIONS,
                       "acquisition")


# --- spec sensitivity -------------------------------------------------------------------------------------

def spec_sensitivity(template_probs: ArrayLike | None, labels_subset: ArrayLike,
                     n_classes: int) -> Dimension | None:
    """Worst/best clipped cc over the six templates on the subset; **score = 100·worst_cc/best_cc**.

    ``template_probs`` is (6, n_cases, K) in template order, or None for a model that takes no prompt (then
    the dimension is null). Best/worst ties go to the first template. Not scored when best_cc = 0 (decided):
    ``retention``/``score`` null, ``scored: false`` and a ``not_scored_reason``."""
    if template_probs is None:
        return None
    n_classes = check_n_classes(n_classes)
    stacked = np.asarray(template_probs)
    y = as_labels(labels_subset, n_classes=n_classes, what="labels_subset")
    expected_shape = (len(spec.TEMPLATES), y.shape[0], n_classes)
    if stacked.shape != expected_shape:
        raise MalformedInput(f"template_probs must have shape {expected_shape} (found {stacked.shape})",
                             expected=list(expected_shape), found=list(stacked.shape))
    baccs: list[float] = []
    ccs: list[float] = []
    per_spec: dict[str, Any] = {}
    for index, (template_id, text) in enumerate(spec.TEMPLATES):
        p = as_probs(stacked[index], what=f"template_probs[{index}]", n_classes=n_classes)
        template_predictions = predictions_from_probs(p)
        bacc = balanced_accuracy(template_predictions, y, n_classes)
        cc = chance_corrected(bacc, n_classes) if above_chance(template_predictions, y, n_classes) else 0.0
        baccs.append(bacc)
        ccs.append(cc)
        per_spec[template_id] = {"balanced_accuracy": bacc, "chance_corrected": cc, "spec": text}
    best = int(np.argmax(ccs))
    worst = int(np.argmin(ccs))
    scored = ccs[best] > 0.0
    retention = ccs[worst] / ccs[best] if scored else None
    out: Dimension = {
        "basis": spec.SPEC_SENSITIVITY_BASIS,
        "best_chance_corrected": ccs[best],
        "best_spec": spec.TEMPLATE_IDS[best],
        "n_specs": len(spec.TEMPLATES),
    }
    if not scored:
        out["not_scored_reason"] = spec.spec_sensitivity_not_scored_reason(ccs[best])
    out.update({
        "per_spec": per_spec,
        "retention": retention,
        "score": None if retention is None else 100.0 * retention,
        "scored": scored,
        "spread_balanced_accuracy": max(baccs) - min(baccs),
        "worst_chance_corrected": ccs[worst],
        "worst_spec": spec.TEMPLATE_IDS[worst],
    })
    return out


# --- cost -------------------------------------------------------------------------------------------------

def evaluated_cases(n_test: int, n_cases: int) -> int:
    """``n_test + 36·n_cases + (n_cases if n_cases < n_test else 0)`` for the 12-perturbation run."""
    perturbed_cases = len(spec.PERTURBATIONS) * spec.SEVERITIES * n_cases
    return n_test + perturbed_cases + (n_cases if n_cases < n_test else 0)


def cost(seconds_total: float, n_test: int, n_cases: int, device: str, parameters: int | None) -> Dimension:
    """The arithmetic of the cost dimension from the measured wall time (not re-derivable itself).

    ``seconds_total`` is kept at the reference's recorded precision (4 dp) *before* anything is derived from
    it, so a re-derivation from the recorded value reproduces every field exactly.
    **score = min(100, 100·2·ref/(ref + seconds_per_case))** with ref = 0.02 s."""
    if not isinstance(seconds_total, (int, float)) or isinstance(seconds_total, bool) \
            or not math.isfinite(seconds_total) or seconds_total <= 0:
        raise MalformedInput(f"seconds_total must be a positive finite number (found {seconds_total!r})",
                             found=repr(seconds_total))
    if n_test < 1 or not 1 <= n_cases <= n_test:
        raise MalformedInput(f"need 1 <= n_cases <= n_test (found n_cases={n_cases}, n_test={n_test})",
                             n_cases=n_cases, n_test=n_test)
    if parameters is not None and (isinstance(parameters, bool) or parameters < 0):
        raise MalformedInput(f"parameters must be a non-negative integer or null (found {parameters!r})")
    seconds = round(float(seconds_total), 4)
    if seconds <= 0:
        raise MalformedInput(f"seconds_total rounds to 0 at 4 dp (found {seconds_total!r})")
    cases = evaluated_cases(int(n_test), int(n_cases))
    seconds_per_case = seconds / cases
    reference = spec.LATENCY_REFERENCE_SECONDS
    return {
        "basis": spec.cost_basis(device),
        "cases": cases,
        "cases_per_second": round(cases / seconds, 3),
        "caveat": spec.COST_CAVEAT,
        "device": device,
        "latency_reference_seconds": reference,
        "parameters": None if parameters is None else int(parameters),
        "parameters_millions": None if parameters is None else round(int(parameters) / 1e6, 1),
        "score": min(100.0, 100.0 * 2.0 * reference / (reference + seconds_per_case)),
        "scored": True,
        "seconds_per_case": seconds_per_case,
        "seconds_total": seconds,
    }


# --- limited data -----------------------------------------------------------------------------------------

def limited_data(fraction_probs: ArrayLike | None, labels: ArrayLike, n_classes: int) -> Dimension | None:
    """Balanced accuracy after training on 1%, 10% and 100% of the training split (test-set probabilities
    (3, n_test, K) in :data:`spec.TRAINING_FRACTIONS` order; None for a model with no training step).

    **score = 100·mean over {1%, 10%} of clip(cc(bacc_f) / cc(bacc_100%), 0, 1)**; not scored (``score`` and
    ``retention_by_fraction`` null, ``scored: false``, a reason) when cc(bacc_100%) = 0. Keys of
    ``per_fraction`` and ``retention_by_fraction`` are ``str(fraction)`` ("0.01", "0.1", "1.0")."""
    if fraction_probs is None:
        return None
    n_classes = check_n_classes(n_classes)
    stacked = np.asarray(fraction_probs)
    y = as_labels(labels, n_classes=n_classes)
    expected_shape = (len(spec.TRAINING_FRACTIONS), y.shape[0], n_classes)
    if stacked.shape != expected_shape:
        raise MalformedInput(f"fraction_probs must have shape {expected_shape} (found {stacked.shape})",
                             expected=list(expected_shape), found=list(stacked.shape))
    fraction_predictions = [predictions_from_probs(as_probs(stacked[i], what=f"fraction_probs[{i}]"))
                            for i in range(len(spec.TRAINING_FRACTIONS))]
    baccs = [balanced_accuracy(p, y, n_classes) for p in fraction_predictions]
    ccs = [chance_corrected(bacc, n_classes) if above_chance(p, y, n_classes) else 0.0
           for bacc, p in zip(baccs, fraction_predictions, strict=True)]
    full_cc = ccs[-1]
    scored = full_cc > 0.0
    out: Dimension = {
        "basis": spec.LIMITED_DATA_BASIS,
        "full_data_chance_corrected": full_cc,
    }
    if scored:
        retentions = {str(fraction): min(1.0, max(0.0, cc / full_cc))
                      for fraction, cc in zip(spec.TRAINING_FRACTIONS[:-1], ccs[:-1], strict=True)}
        out.update({
            "per_fraction": {str(f): bacc for f, bacc in zip(spec.TRAINING_FRACTIONS, baccs, strict=True)},
            "retention_by_fraction": retentions,
            "score": 100.0 * float(np.mean(list(retentions.values()))),
            "scored": True,
        })
    else:
        out.update({
            "not_scored_reason": spec.limited_data_not_scored_reason(full_cc),
            "per_fraction": {str(f): bacc for f, bacc in zip(spec.TRAINING_FRACTIONS, baccs, strict=True)},
            "retention_by_fraction": None,
            "score": None,
            "scored": False,
        })
    return out


# --- composite --------------------------------------------------------------------------------------------

def composite(dimensions: Mapping[str, Mapping[str, Any] | None]) -> dict[str, Any]:
    """``coverage = Σ w`` over scored dimensions (object and score non-null; a score of 0 counts),
    ``index = Σ w·s / coverage`` (null when nothing is scored), ``dimensions_scored`` sorted by name.
    Names outside the nine dimensions are refused."""
    unknown = sorted(set(dimensions) - set(spec.COMPOSITE_WEIGHTS))
    if unknown:
        raise MalformedInput(f"unknown dimensions {unknown}", expected=list(spec.DIMENSIONS), found=unknown)
    scored: list[str] = []
    coverage = 0.0
    weighted = 0.0
    for name in sorted(dimensions):
        value = dimensions[name]
        score = None if value is None else value.get("score")
        if score is None:
            continue
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
            raise MalformedInput(f"dimension {name} has a non-numeric score {score!r}", found=repr(score))
        scored.append(name)
        coverage += spec.COMPOSITE_WEIGHTS[name]
        weighted += spec.COMPOSITE_WEIGHTS[name] * float(score)
    return {
        "coverage": coverage,
        "dimensions_scored": scored,
        "index": weighted / coverage if scored else None,
    }
