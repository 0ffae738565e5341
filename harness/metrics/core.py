"""Small exact building blocks shared by the dimensions: input checks, chance correction, recalls, AUC, kappa.

All of them are pure numpy and compute in float64 from whatever they are given (stored predictions are
float32; widening float32 to float64 is exact, so the harness and the audit see the same numbers).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from keys.errors import MalformedInput

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


def as_probs(probs: ArrayLike, *, what: str = "probs", n_classes: int | None = None) -> FloatArray:
    """Class probabilities as a float64 (n, K) array; refuses other shapes, empty input, non-finite values."""
    array = np.asarray(probs)
    if array.dtype.kind not in "fiu":
        raise MalformedInput(f"{what} must be a real numeric array (found dtype {array.dtype})",
                             expected="float", found=str(array.dtype))
    if array.ndim != 2 or array.shape[0] < 1 or array.shape[1] < 2:
        raise MalformedInput(f"{what} must have shape (n >= 1, K >= 2) (found {array.shape})",
                             expected="(n, K)", found=list(array.shape))
    if n_classes is not None and array.shape[1] != n_classes:
        raise MalformedInput(f"{what} has {array.shape[1]} classes, expected {n_classes}",
                             expected=n_classes, found=array.shape[1])
    out = array.astype(np.float64)
    if not np.isfinite(out).all():
        raise MalformedInput(f"{what} contains NaN or infinite values")
    return out


def as_labels(labels: ArrayLike, *, n_classes: int, n: int | None = None, what: str = "labels") -> IntArray:
    """Integer class labels as a 1-D int64 array; (n, 1) columns (MedMNIST's layout) are flattened."""
    array = np.asarray(labels)
    if array.ndim == 2 and array.shape[1] == 1:
        array = array[:, 0]
    if array.ndim != 1 or array.shape[0] < 1:
        raise MalformedInput(f"{what} must be a non-empty 1-D array (found shape {array.shape})",
                             expected="(n,)", found=list(array.shape))
    if array.dtype.kind not in "iu":
        raise MalformedInput(f"{what} must be integers (found dtype {array.dtype})",
                             expected="integer", found=str(array.dtype))
    if n is not None and array.shape[0] != n:
        raise MalformedInput(f"{what} has {array.shape[0]} entries, expected {n}", expected=n,
                             found=array.shape[0])
    out = array.astype(np.int64)
    if out.min() < 0 or out.max() >= n_classes:
        raise MalformedInput(f"{what} must lie in 0..{n_classes - 1} (found {out.min()}..{out.max()})",
                             expected=[0, n_classes - 1], found=[int(out.min()), int(out.max())])
    return out


def check_n_classes(n_classes: int) -> int:
    """K as a Python int, at least 2."""
    if isinstance(n_classes, bool) or not isinstance(n_classes, (int, np.integer)) or n_classes < 2:
        raise MalformedInput(f"n_classes must be an integer >= 2 (found {n_classes!r})",
                             found=repr(n_classes))
    return int(n_classes)


def predictions_from_probs(probs: FloatArray) -> IntArray:
    """Top-1 predictions; ties go to the lowest class index (numpy's argmax)."""
    return np.argmax(probs, axis=1).astype(np.int64)


def chance_corrected_raw(value: float, n_classes: int) -> float:
    """``(x - 1/K) / (1 - 1/K)``, unclipped (negative below chance)."""
    chance = 1.0 / n_classes
    return (value - chance) / (1.0 - chance)


def chance_corrected(value: float, n_classes: int) -> float:
    """The spec's ``cc(x) = max(0, (x - 1/K) / (1 - 1/K))``."""
    return max(0.0, chance_corrected_raw(value, n_classes))


def class_recalls(predictions: IntArray, labels: IntArray, n_classes: int) -> FloatArray:
    """Recall of every class present in ``labels`` (classes with no case are left out, in class order)."""
    totals = np.bincount(labels, minlength=n_classes)
    correct = np.bincount(labels[predictions == labels], minlength=n_classes)
    present = totals > 0
    return correct[present] / totals[present]


def counts_above_chance(correct: Iterable[int], totals: Iterable[int], n_classes: int) -> bool:
    """Is the balanced accuracy of these per-class counts strictly above chance (1/K)? Decided exactly on
    integers, ``K · Σ_k c_k / n_k > P`` over the P classes present, never on a float chance-corrected value
    (a balanced accuracy of exactly 1/K computes as 1/K + 7e-17 in float64)."""
    pairs = [(int(c), int(t)) for c, t in zip(correct, totals, strict=True) if int(t) > 0]
    common = math.lcm(*(t for _, t in pairs))  # both sides times the common multiple of the n_k: integers
    return n_classes * sum(c * (common // t) for c, t in pairs) > len(pairs) * common


def above_chance(predictions: IntArray, labels: IntArray, n_classes: int) -> bool:
    """:func:`counts_above_chance` of the per-class correct counts of ``predictions``."""
    totals = np.bincount(labels, minlength=n_classes)
    correct = np.bincount(labels[predictions == labels], minlength=n_classes)
    return counts_above_chance(correct.tolist(), totals.tolist(), n_classes)


def balanced_accuracy(predictions: IntArray, labels: IntArray, n_classes: int) -> float:
    """Unweighted mean of the per-class recalls over the classes present in ``labels``."""
    return float_mean(class_recalls(predictions, labels, n_classes))


def accuracy_top1(predictions: IntArray, labels: IntArray) -> float:
    """Fraction of cases whose prediction equals the label."""
    return float(np.count_nonzero(predictions == labels) / labels.shape[0])


def roc_auc(is_positive: NDArray[np.bool_], scores: FloatArray) -> float | None:
    """ROC AUC by the rank-sum formula with average ranks for ties; None when one side is empty.

    A score's average rank (1-based) is ``(below + 1 + at_or_below) / 2``, counted in the sorted scores, so
    twice the positives' rank sum is an integer: one sort and two binary searches per class, and the only
    roundings are the final ones (``U`` is a multiple of 1/2 below 2^52, exact as a float64)."""
    n_pos = int(np.count_nonzero(is_positive))
    n_neg = is_positive.shape[0] - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    ordered = np.sort(scores)
    positives = scores[is_positive]
    twice_rank_sum = (int(np.searchsorted(ordered, positives, side="left").sum())
                      + int(np.searchsorted(ordered, positives, side="right").sum()) + n_pos)
    u_statistic = (twice_rank_sum - n_pos * (n_pos + 1)) / 2
    return u_statistic / (n_pos * n_neg)


def macro_auc(probs: FloatArray, labels: IntArray) -> float | None:
    """Binary: ROC AUC of class 1. Otherwise the unweighted mean of one-vs-rest AUCs over the classes for
    which it is defined (the class and its complement both present); None when none is."""
    n_classes = probs.shape[1]
    if n_classes == 2:
        return roc_auc(labels == 1, probs[:, 1])
    aucs = [auc for k in range(n_classes) if (auc := roc_auc(labels == k, probs[:, k])) is not None]
    return float_mean(aucs) if aucs else None


def cohen_kappa(first: IntArray, second: IntArray, n_classes: int) -> float:
    """Cohen's kappa between two labelings, NaN when undefined (both constant on the same class).

    Computed from integer counts, ``(n·agree - Σ a_k b_k) / (n² - Σ a_k b_k)``, so the only rounding is the
    final division."""
    agree = int(np.count_nonzero(first == second))
    marginal_product = int(np.dot(np.bincount(first, minlength=n_classes).astype(np.int64),
                                  np.bincount(second, minlength=n_classes).astype(np.int64)))
    return kappa_of_counts(int(first.shape[0]), agree, marginal_product)


def kappa_of_counts(n: int, agree: int, marginal_product: int) -> float:
    """:func:`cohen_kappa` from its integer counts (cases, agreements, ``Σ a_k b_k``)."""
    denominator = n * n - marginal_product
    if denominator == 0:
        return math.nan
    return (n * agree - marginal_product) / denominator


def agreement_counts(reference: IntArray, rows: IntArray, n_classes: int) -> tuple[list[int], list[int]]:
    """For each row of ``rows`` (m, n), against ``reference`` (n,): the cases they agree on and the kappa's
    ``Σ_k a_k b_k`` over their class counts, as Python ints (exact; one pass over all rows)."""
    m = rows.shape[0]
    agree = np.count_nonzero(rows == reference, axis=1)
    row_counts = np.bincount((rows + (np.arange(m, dtype=np.int64) * n_classes)[:, None]).ravel(),
                             minlength=m * n_classes).reshape(m, n_classes)
    marginal = row_counts @ np.bincount(reference, minlength=n_classes).astype(np.int64)
    return agree.tolist(), marginal.tolist()


def row_recalls(rows: IntArray, labels: IntArray, n_classes: int) -> FloatArray:
    """:func:`class_recalls` of each row of ``rows`` (m, n) against ``labels`` (n,), one row each (m, P):
    the same integer counts (hits summed over each present class's cases, taken in class order) and the
    same divisions, for all rows in one pass."""
    totals = np.bincount(labels, minlength=n_classes)
    present = totals > 0
    starts = (np.cumsum(totals) - totals)[present]  # strictly increasing: each present class has a case
    by_class = np.argsort(labels, kind="stable")
    correct = np.add.reduceat((rows == labels)[:, by_class], starts, axis=1, dtype=np.int64)
    return correct / totals[present]


def float_mean(values: ArrayLike) -> float:
    """``float(np.mean(values))`` of float64 values (a non-empty list of floats or 1-D float64 array): numpy's
    sum of them, then one division by their count, which is what ``np.mean`` computes for float64 input, less
    its Python-level wrapper (the v0.1 robustness dimensions take a few dozen such means per evaluation)."""
    array = np.asarray(values, dtype=np.float64)
    return float(np.add.reduce(array)) / array.shape[0]


def mean_or_none(values: list[float]) -> float | None:
    """Mean of the finite values, None when there are none."""
    finite = [value for value in values if math.isfinite(value)]
    return float_mean(finite) if finite else None


def plain(value: Any) -> Any:
    """A numpy scalar as the Python number it holds; anything else unchanged."""
    return value.item() if isinstance(value, np.generic) else value
