"""The MedEval-1 v0.2 evaluation object (docs/MEDEVAL-1.2.md), built by the harness and re-derived by the
audit with the same code. Same top-level members as v0.1 (``EvaluationMeta`` holds the non-derivable ones)
with ``spec_version`` "MedEval-1 v0.2"; the dimensions and the composite are v0.2's."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from keys.errors import MalformedInput

from . import spec, spec_v02
from .core import IntArray, as_labels, predictions_from_probs
from .dimensions import cost
from .dimensions_v02 import (
    accuracy,
    calibration,
    class_counts,
    composite,
    limited_data,
    robustness,
    spec_sensitivity,
    subgroup,
    uncertainty,
)
from .draws import BOOTSTRAP_STREAM, SUBSET_STREAM, sample_without_replacement, stratified_bootstrap_counts, stream
from .evaluation import EvaluationMeta, evaluation_object
from .stored import StoredPredictions


def subset_indices(n_test: int, seed: int) -> IntArray:
    """All cases when ``n_test <= 1200``; else 1200 cases drawn without replacement (partial Fisher-Yates)
    from the subset stream (child 0 of ``SeedSequence(seed)``), sorted."""
    if isinstance(n_test, bool) or n_test < 1:
        raise MalformedInput(f"n_test must be a positive integer (found {n_test!r})", found=repr(n_test))
    if n_test <= spec.ROBUSTNESS_SUBSET_MAX:
        return np.arange(n_test, dtype=np.int64)
    return sample_without_replacement(stream(seed, SUBSET_STREAM), int(n_test), spec.ROBUSTNESS_SUBSET_MAX)


def bootstrap_weights(labels: IntArray, n_classes: int, seed: int) -> np.ndarray:
    """The (B + 1, n) weights: row 0 all ones, rows 1..B the stratified bootstrap's multiplicities drawn
    from the bootstrap stream (child 1 of ``SeedSequence(seed)``)."""
    counts = stratified_bootstrap_counts(stream(seed, BOOTSTRAP_STREAM), labels, n_classes, spec_v02.B)
    return np.vstack([np.ones((1, labels.shape[0])), counts.astype(np.float64)])


def compute(meta: EvaluationMeta, predictions: StoredPredictions, labels: ArrayLike) -> tuple[
        dict[str, Any], dict[str, Any]]:
    """(dimensions, composite) of v0.2."""
    n_classes = predictions.n_classes
    y = as_labels(labels, n_classes=n_classes, n=predictions.n_test)
    if y.shape[0] > spec_v02.MAX_TEST_CASES:
        raise MalformedInput(f"v0.2 evaluates at most {spec_v02.MAX_TEST_CASES} test cases", found=y.shape[0])
    probs = predictions.clean_probs.astype(np.float64)
    clean = predictions_from_probs(probs)
    weights = bootstrap_weights(y, n_classes, meta.seed)
    subset = subset_indices(predictions.n_test, meta.seed)
    subset_weights = weights[:, subset]
    labels_subset = y[subset]
    clean_subset = clean[subset]
    perturbed = predictions.perturbed_labels
    ordinal = spec_v02.dataset_of(meta.task) in spec_v02.ORDINAL_DATASETS

    accuracy_dimension, accuracy_rows, skilled = accuracy(weights, probs, clean, y, ordinal=ordinal)
    correct, totals = class_counts(weights, clean, y, n_classes)
    dimensions: dict[str, Any] = {"accuracy": accuracy_dimension}
    rows: dict[str, Any] = {"accuracy": accuracy_rows}
    dimensions["acquisition"], rows["acquisition"] = robustness(
        subset_weights, clean_subset, {n: perturbed[n] for n in spec.ACQUISITIONS}, labels_subset, n_classes,
        spec.ACQUISITIONS, "acquisition")
    dimensions["calibration"], rows["calibration"] = calibration(weights, probs, clean, y)
    dimensions["corruption"], rows["corruption"] = robustness(
        subset_weights, clean_subset, {n: perturbed[n] for n in spec.CORRUPTIONS}, labels_subset, n_classes,
        spec.CORRUPTIONS, "corruption")
    dimensions["cost"] = cost(meta.seconds_total, predictions.n_test, int(subset.shape[0]), meta.device,
                              meta.parameters)
    dimensions["limited_data"], rows["limited_data"] = limited_data(weights, predictions.fraction_probs, y,
                                                                    n_classes)
    dimensions["spec_sensitivity"], rows["spec_sensitivity"] = spec_sensitivity(
        subset_weights, predictions.template_probs, labels_subset, n_classes)
    dimensions["subgroup"], rows["subgroup"] = subgroup(correct, totals, n_classes)
    dimensions["uncertainty"], rows["uncertainty"] = uncertainty(weights, probs, clean, y)
    bounds = accuracy_dimension["balanced_accuracy_ci95"]
    index = composite(dimensions, rows, skilled=skilled, accuracy_lower=None if bounds is None else bounds[0],
                      n_classes=n_classes, cost_score=dimensions["cost"]["score"])
    return dimensions, index


def build_evaluation(meta: EvaluationMeta, predictions: StoredPredictions, labels: ArrayLike) -> dict[str, Any]:
    """The v0.2 evaluation object (floats unrounded; emit it through ``seals.canonical``)."""
    if meta.n_test != predictions.n_test or meta.n_classes != predictions.n_classes:
        raise MalformedInput(f"meta says n_test = {meta.n_test}, n_classes = {meta.n_classes}; the predictions "
                             f"have {predictions.n_test}, {predictions.n_classes}", field="n_test",
                             expected=[meta.n_test, meta.n_classes],
                             found=[predictions.n_test, predictions.n_classes])
    if meta.numpy_version is not None:
        raise MalformedInput("a v0.2 evaluation records no numpy_version (its draws do not depend on it)",
                             field="numpy_version", found=meta.numpy_version)
    dimensions, index = compute(meta, predictions, labels)
    return evaluation_object(meta, dimensions, index, spec_version=spec_v02.SPEC_VERSION)
