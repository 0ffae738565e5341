"""The audit's faster re-derivation computes exactly what the straightforward formulas compute, bit for bit:
the sort-based AUC against the average-rank AUC, and the robustness cells counted in one pass against each
cell computed on its own (agreement, Cohen's kappa, balanced accuracy)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.metrics import core


def average_rank_auc(is_positive: np.ndarray, scores: np.ndarray) -> float | None:
    """The rank-sum AUC with average ranks for ties, computed the plain way (an argsort, tie groups)."""
    n_pos = int(np.count_nonzero(is_positive))
    n_neg = is_positive.shape[0] - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    n = scores.shape[0]
    order = np.argsort(scores, kind="stable")
    ordered = scores[order]
    starts_group = np.empty(n, dtype=bool)
    starts_group[0] = True
    starts_group[1:] = ordered[1:] != ordered[:-1]
    group = np.cumsum(starts_group) - 1
    starts = np.flatnonzero(starts_group)
    ends = np.append(starts[1:], n)
    ranks = np.empty(n, dtype=np.float64)
    ranks[order] = ((starts + 1 + ends) / 2.0)[group]
    u_statistic = float(ranks[is_positive].sum()) - n_pos * (n_pos + 1) / 2.0
    return u_statistic / (n_pos * n_neg)


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 400), levels=st.sampled_from([2, 5, 50, 0]),
       share=st.floats(0.0, 1.0))
def test_the_sort_based_auc_is_the_average_rank_auc(seed, n, levels, share):
    rng = np.random.default_rng(seed)
    # few levels: mostly ties; 0: float32 probabilities as stored, widened to float64
    scores = (rng.integers(0, levels, n) / levels if levels else
              rng.random(n).astype(np.float32).astype(np.float64))
    is_positive = rng.random(n) < share
    assert core.roc_auc(is_positive, scores) == average_rank_auc(is_positive, scores)


def same_float(first: float, second: float) -> bool:
    return (math.isnan(first) and math.isnan(second)) or (first == second and math.copysign(1, first)
                                                           == math.copysign(1, second))


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), m=st.integers(1, 21), n=st.integers(1, 300), k=st.integers(2, 11),
       agreement=st.floats(0.0, 1.0), constant=st.booleans())
def test_robustness_cells_counted_together_equal_each_cell_alone(seed, m, n, k, agreement, constant):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n) if not constant else np.zeros(n, dtype=np.int64)
    reference = np.where(rng.random(n) < 0.7, labels, rng.integers(0, k, n))
    rows = np.where(rng.random((m, n)) < agreement, reference, rng.integers(0, k, (m, n)))
    if constant:  # both constant on the same class: kappa undefined (NaN)
        rows[0] = 0
        reference = np.zeros(n, dtype=np.int64)
    agree, marginal = core.agreement_counts(reference, rows, k)
    recalls = core.row_recalls(rows, labels, k)
    for i, row in enumerate(rows):
        assert agree[i] / n == float(np.count_nonzero(row == reference) / n)
        assert same_float(core.kappa_of_counts(n, agree[i], marginal[i]), core.cohen_kappa(reference, row, k))
        assert float(np.add.reduce(recalls[i])) / recalls.shape[1] == core.balanced_accuracy(row, labels, k)


def plain_charge_bits(evaluation: dict) -> float:
    """The leakage charge walked the plain way: every number's bits recomputed where it is met."""
    from heldout.generations.budget import CATEGORICAL_MEMBERS, FREE_MEMBERS, NUMBER_RULES, UNKNOWN_NUMBER_BITS, _counts

    counts = _counts(evaluation)
    total = 0.0

    def walk(value, name, rule):
        nonlocal total
        if name in FREE_MEMBERS:
            return
        if name is not None and name in NUMBER_RULES:
            rule = NUMBER_RULES[name]
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, key, rule)
        elif isinstance(value, list):
            for item in value:
                walk(item, None, rule)
        elif isinstance(value, bool):
            total += 1.0
        elif isinstance(value, (int, float)) or (value is None and rule is not None):
            total += math.log2(rule.values(counts) + 1) if rule is not None else UNKNOWN_NUMBER_BITS
        elif isinstance(value, str) and name is not None and name in CATEGORICAL_MEMBERS:
            total += math.log2(CATEGORICAL_MEMBERS[name])

    for key, item in evaluation.items():
        walk(item, key, None)
    return round(total, 6)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16), n=st.integers(2, 1500), prompts=st.booleans())
def test_the_leakage_charge_is_the_plain_walks(seed, n, prompts):
    from heldout.generations import charge_bits
    from seals import parse_utc
    from tests.audit_support import synthetic_result

    labels = np.random.default_rng(seed).integers(0, 8, n)
    evaluation = synthetic_result("m", labels, generation="gen1", seed=seed, skill=0.5,
                                  now=parse_utc("2026-09-01T00:00:00Z"), prompts=prompts).evaluation
    assert charge_bits(evaluation) == plain_charge_bits(evaluation)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3000), st.integers(0, 3000)), min_size=1, max_size=12),
       st.integers(2, 12))
def test_above_chance_on_integers_is_the_fraction_test(pairs, n_classes):
    from fractions import Fraction

    correct = [min(c, t) for c, t in pairs]
    totals = [t for _, t in pairs]
    present = [(c, t) for c, t in zip(correct, totals, strict=True) if t > 0]
    exact = sum((Fraction(c, t) for c, t in present), Fraction(0))
    assert core.counts_above_chance(correct, totals, n_classes) == (n_classes * exact > len(present))
    # on the boundary itself (balanced accuracy exactly 1/K): not above
    boundary = [(t // n_classes, t) for t in range(n_classes, n_classes * 13, n_classes)][:len(pairs)]
    assert not core.counts_above_chance([c for c, _ in boundary], [t for _, t in boundary], n_classes)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6) | st.floats(0, 1), min_size=1, max_size=300), st.booleans())
def test_float_mean_is_numpys_mean(values, as_array):
    given_values = np.array(values) if as_array else values
    assert core.float_mean(given_values) == float(np.mean(given_values))
