"""The leakage budget: how many bits about a sealed generation's labels its released numbers may carry, and
the accuracy guarantee those bits leave for every statistic released on the generation.

**The bound.** If everything ever released about the set can be written in L bits, the statistics evaluated
on it were chosen, adaptively or not, from at most S·2^L candidates, S being the number of statistics
released (all models, all tasks). By Hoeffding's inequality (McDiarmid's for statistics that average
class-wise proportions) and a union bound, every one of them is within eps of its expectation with
probability >= 1 - delta when 2 S·2^L·exp(-2 n eps^2) <= delta, i.e.

    eps = sqrt((L ln 2 + ln(2 S / delta)) / (2 n)),      L = (2 n eps^2 - ln(2 S / delta)) / ln 2,

where n is the number of cases the statistic *concentrates at*: the task's cases for case-wise proportions
(accuracy, ECE), its **smallest class** for class-wise ones (balanced accuracy, per-class and worst-class
recall, AUC, and every score built on chance-corrected balanced accuracy). This is the description-length
argument behind the Ladder (Blum & Hardt 2015) and Thresholdout (Dwork et al. 2015). eps is stated on the
scale each statistic is *published* on: a proportion in [0, 1] at scale 1; a dimension score
100·cc(p) = 100·(p - 1/K)/(1 - 1/K) at scale 100/(1 - 1/K).

**Families** (:func:`released_families`): per release mode, which statistics are released, the n each
concentrates at and how many are released per evaluation (an upper bound, counting each class of a
class-wise minimum once). Full release publishes all of them; the Ladder and Thresholdout publish one number
per bundle (the accuracy score). Ratios (retention, spec sensitivity, limited data) are released in full mode
but are not covered by this bound: a ratio of two small chance-corrected numbers does not concentrate, and the
manifest says so.

**The manifest** records the budget L, the smallest class and n of the weakest task, and each family with the
eps guaranteed if the whole budget is spent by k models (the union over S = k · tasks · per-evaluation
statistics). ``heldout status`` states each family's eps at the *current* spend and the statistics actually
released. The smallest class size is label-dependent: the seal charges it (log2(n + 1) bits per task,
``statement_bits``) before any bundle.

**Default budget**: L at eps = 0.05 on the [0, 1] scale, at the weakest family's n (the smallest class of the
smallest task), k = 100 models, delta = 0.05. An explicit ``--budget-bits`` is recorded with the eps it implies.
A seal whose budget cannot pay for one evaluation in its release mode (:func:`one_evaluation_bits`) is refused
up front, with the numbers.

**Charge per bundle**: full release, :func:`charge_bits` (every released number that depends on the held-out
labels, log2 of the count of values it can take at its released precision: a field in [lo, hi] released to d
decimals takes (hi - lo)·10^d + 1 values, capped for proportions over n cases at n + 1, plus one for "null / not
scored"; a label-dependent boolean 1 bit; the template names log2(6); a numeric field this table does not know
64 bits; seed, counts, timing, the whole cost dimension, descriptions and metadata are free). Ladder and
Thresholdout: the description length of the released sequence (:mod:`heldout.generations.release`).
Charges are rounded to 6 decimals (the canonical float rule) so sums compare exactly.

A bundle is admitted while used + charge <= budget (equality allowed); beyond it the evaluation is refused with
:class:`BudgetExhausted` (exit 4) and the generation is due for retirement.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING, Any

from heldout.generations.release import FULL, LADDER, THRESHOLDOUT
from keys import HeldoutError, LapsedError, MalformedInput, UsageError, VerificationError
from seals.manifest import LeakageBudget

if TYPE_CHECKING:
    from heldout.generations.state import GenerationState

DEFAULT_K = 100
DEFAULT_DELTA = 0.05
DEFAULT_EPS = 0.05
UNKNOWN_NUMBER_BITS = 64.0
TOLERANCE = 1e-9
#: Upper bound on the label-dependent numbers one full MedEval-1 v0.1 evaluation releases per family (the
#: reference evaluations release at most 150 numbers in all; tests/test_generations_budget.py checks).
FULL_STATISTICS_PER_EVALUATION = 256
DEFAULT_RULE = ("L = (2 n eps^2 - ln(2 S/delta)) / ln 2 at the weakest family's n (smallest class), S = k * tasks * "
                "statistics per evaluation (Hoeffding/McDiarmid + union bound over S·2^L adaptive choices)")
EXPLICIT_RULE = "explicit bits; eps = sqrt((L ln 2 + ln(2 S/delta)) / (2 n)) per family under the same bound"
PUBLIC_RULE = "public generation: membership and labels are public, nothing to leak, no budget"


class BudgetExhausted(LapsedError):
    """An evaluation would take a generation past its leakage budget (exit 4): the generation is due for
    retirement."""


def default_budget_bits(n: int, k: int, delta: float, eps: float) -> float:
    """L = (2 n eps^2 - ln(2k/delta)) / ln 2, in bits, with k the number of statistics in the union (may be
    <= 0 for a set too small for eps)."""
    _check_parameters(n, k, delta)
    if eps <= 0:
        raise UsageError("eps must be positive", field="eps", found=eps)
    return round((2 * n * eps * eps - math.log(2 * k / delta)) / math.log(2), 6)


def implied_eps(bits: float, n: int, k: int, delta: float) -> float:
    """The error on the [0, 1] scale that ``bits`` leave for k statistics concentrating at n cases."""
    _check_parameters(n, k, delta)
    return round(math.sqrt((max(bits, 0.0) * math.log(2) + math.log(2 * k / delta)) / (2 * n)), 6)


def smallest_eps(n: int, k: int, delta: float) -> float:
    """The eps at which the default budget becomes positive (below it, no release is covered at all)."""
    return implied_eps(0.0, n, k, delta)


def _check_parameters(n: int, k: int, delta: float) -> None:
    if n < 1:
        raise UsageError("a budget needs at least one case", field="n", found=n)
    if k < 1:
        raise UsageError("the number of expected models must be at least 1", field="k", found=k)
    if not 0 < delta < 1:
        raise UsageError("delta must be in (0, 1)", field="delta", found=delta)


# --- released statistics ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TaskShape:
    """What the budget needs to know about one task of a generation: its cases, classes and smallest class."""

    task: str
    n: int
    n_classes: int
    smallest_class: int

    @classmethod
    def from_labels(cls, task: str, labels: Sequence[int], n_classes: int) -> TaskShape:
        counts = [0] * n_classes
        for label in labels:
            counts[int(label)] += 1
        return cls(task=task, n=len(labels), n_classes=n_classes, smallest_class=max(1, min(counts)))


@dataclass(frozen=True)
class StatisticFamily:
    """A family of released statistics: the n it concentrates at, the scale it is published on, how many are
    released per evaluation, and whether the bound covers it at all."""

    family: str
    n: int
    scale: float
    per_evaluation: int
    covered: bool = True

    def eps(self, bits: float, statistics: int, delta: float) -> float | None:
        """eps on the published scale when ``bits`` are spent over ``statistics`` statistics in all."""
        if not self.covered:
            return None
        return round(self.scale * implied_eps(bits, self.n, max(1, statistics), delta), 6)

    def to_json(self, bits: float, statistics: int, delta: float) -> dict[str, Any]:
        return {"family": self.family, "n": self.n, "scale": round(self.scale, 6),
                "per_evaluation": self.per_evaluation, "statistics": statistics,
                "eps": self.eps(bits, statistics, delta)}


def _score_scale(n_classes: int) -> float:
    return 100.0 / (1.0 - 1.0 / n_classes)


def released_families(mode: str, shape: TaskShape) -> list[StatisticFamily]:
    """The statistic families a bundle on a task of ``shape`` releases in release ``mode``."""
    score = StatisticFamily("accuracy score 100*cc(balanced accuracy), 0-100", shape.smallest_class,
                            _score_scale(shape.n_classes), 1)
    if mode in (LADDER, THRESHOLDOUT):
        return [score]
    per = FULL_STATISTICS_PER_EVALUATION * shape.n_classes
    return [
        StatisticFamily("dimension scores and composite index on class-wise statistics, 0-100",
                        shape.smallest_class, _score_scale(shape.n_classes), per),
        StatisticFamily("class-wise proportions (balanced accuracy, per-class recall, worst-class recall, AUC), 0-1",
                        shape.smallest_class, 1.0, per),
        StatisticFamily("case-wise proportions (accuracy, selective accuracy, ECE, confidence), 0-1", shape.n, 1.0,
                        FULL_STATISTICS_PER_EVALUATION),
        StatisticFamily("ratios (retention, spec sensitivity, limited data): not covered by the bound",
                        shape.smallest_class, 1.0, FULL_STATISTICS_PER_EVALUATION, covered=False),
    ]


def weakest(shapes: Sequence[TaskShape]) -> TaskShape:
    """The task whose smallest class is smallest (ties: fewer cases, then name)."""
    return min(shapes, key=lambda s: (s.smallest_class, s.n, s.task))


def statement_bits(counts: Sequence[int]) -> float:
    """Bits the manifest itself releases about the labels: each task's smallest class size (n + 1 values for a
    task of n cases), from the tasks' case counts."""
    return round(math.fsum(math.log2(n + 1) for n in counts), 6)


def statistics_per_evaluation(mode: str, shape: TaskShape) -> int:
    return sum(f.per_evaluation for f in released_families(mode, shape) if f.covered)


@cache
def full_evaluation_bits(n_test: int, n_classes: int) -> float:
    """The charge of the smallest full MedEval-1 evaluation at (n_test, n_classes): one built from synthetic
    predictions without prompt templates or training fractions (a model that has neither)."""
    import numpy as np

    from harness.metrics import PERTURBATIONS, SEVERITIES, EvaluationMeta, StoredPredictions, build_evaluation
    from harness.metrics import subset_indices as subset_of

    rng = np.random.default_rng(0)
    labels = np.arange(n_test) % n_classes
    probs = rng.dirichlet(np.ones(n_classes), size=n_test)
    subset = subset_of(n_test, 0)
    perturbed = {name: np.tile(probs[subset].argmax(axis=1), (SEVERITIES, 1)) for name in PERTURBATIONS}
    predictions = StoredPredictions(clean_probs=probs, perturbed_labels=perturbed)
    meta = EvaluationMeta(code_fingerprint="0" * 12, device="cpu", domain="medicine", kind="image",
                          limitations={"n_train_available": None, "notes": None, "train_capped": False},
                          modality="synthetic", n_classes=n_classes, n_test=n_test, runtime_s=1.0, seed=0,
                          split_origin="budget", task="budget", task_name="budget", timestamp="1970-01-01T00:00:00Z",
                          seconds_total=1.0, parameters=None)
    return charge_bits(build_evaluation(meta, predictions, labels))


def one_evaluation_bits(mode: str, shapes: Sequence[TaskShape], step: float | None) -> float:
    """What the first bundle on a generation can cost at most, in its release mode: the dearest of its tasks."""
    from heldout.generations.release import Transcript, worst_case_bits

    if mode == FULL:
        return max(full_evaluation_bits(s.n, s.n_classes) for s in shapes)
    assert step is not None
    return worst_case_bits(mode, Transcript(), step)


def make_budget(*, n: int, k: int = DEFAULT_K, delta: float = DEFAULT_DELTA, eps: float = DEFAULT_EPS,
                bits: float | None = None, mode: str = FULL, shapes: Sequence[TaskShape] = (),
                step: float | None = None) -> LeakageBudget:
    """The budget a seal records: the default from (weakest n, S, delta, eps), or ``bits`` when given
    (explicit), with each released family's guarantee. Refuses (exit 2, before anything is written) a default
    that comes out at zero or below, naming the eps that would work, and a budget that cannot pay for one
    evaluation in the release mode, with both numbers."""
    weak = weakest(shapes) if shapes else None
    if bits is not None and (not math.isfinite(bits) or bits <= 0):
        # a zero budget covers no release at all: every evaluation would be refused, so it is a mistake
        raise UsageError("--budget-bits must be a positive number", field="budget_bits", found=bits)
    if bits is None:
        n_weak, statistics = (weak.smallest_class if weak is not None else n), _statistics(mode, weak, k, len(shapes))
        value = default_budget_bits(n_weak, statistics, delta, eps)
        if value <= 0:
            raise UsageError(
                f"the default leakage budget at n = {n_weak} (the smallest class of the weakest task), "
                f"S = {statistics} released statistics (k = {k} models), delta = {delta} and eps = {eps} is "
                f"{value:.2f} bits: no release is covered; use a larger set, --eps of at least "
                f"{smallest_eps(n_weak, statistics, delta):.4f}, or an explicit --budget-bits",
                field="budget", found=value, expected="> 0")
    try:
        budget = budget_record(mode=mode, weak=weak, n=n, n_tasks=len(shapes), counts=[s.n for s in shapes], k=k,
                               delta=delta, eps=eps, bits=bits)
    except HeldoutError as exc:
        raise UsageError(f"the leakage budget cannot be recorded: {exc.message}",
                         **{"field": "budget", **exc.evidence}) from None
    value = float(budget.bits or 0.0)
    if shapes:
        needed = one_evaluation_bits(mode, shapes, step)
        spent_by_seal = budget.statement_bits
        if value < spent_by_seal + needed - TOLERANCE:
            raise UsageError(
                f"a budget of {value:.2f} bits cannot pay for one evaluation in {mode} release: the seal itself "
                f"states {spent_by_seal:.2f} bits (each task's smallest class) and one evaluation can cost "
                f"{needed:.2f} bits; need at least {spent_by_seal + needed:.2f} bits (--budget-bits, a larger "
                f"--eps or a larger set)" + ("" if mode != FULL else "; or --ladder-step / --thresholdout"),
                field="budget", found=round(value, 6), expected=f">= {round(spent_by_seal + needed, 6)}")
    return budget


def _statistics(mode: str, weak: TaskShape | None, k: int, n_tasks: int) -> int:
    """S: the statistics k models release over every task, counted at the weakest task's per-evaluation rate."""
    return k * max(1, n_tasks) * (statistics_per_evaluation(mode, weak) if weak is not None else 1)


def budget_record(*, mode: str, weak: TaskShape | None, n: int, n_tasks: int, counts: Sequence[int], k: int,
                  delta: float, eps: float | None, bits: float | None) -> LeakageBudget:
    """The leakage budget the rule gives, with nothing refused: ``bits`` given is the explicit basis (eps is
    what it implies), else the default at ``eps``; ``weak`` is the weakest task (its smallest class is the n the
    weakest family concentrates at; None: ``n`` itself, one statistic a task); ``counts`` each task's cases
    (the seal's own statement, log2(n + 1) bits each). What a seal records (:func:`make_budget`) and what a
    verifier recomputes from a manifest (:func:`check_stated_budget`)."""
    n_weak = weak.smallest_class if weak is not None else n
    statistics = _statistics(mode, weak, k, n_tasks)
    if bits is not None:
        value, basis, rule, eps_value = bits, "explicit", EXPLICIT_RULE, implied_eps(bits, n_weak, statistics, delta)
    else:
        if eps is None:
            raise MalformedInput("a default leakage budget states its eps", field="leakage_budget.eps")
        value, basis, rule = default_budget_bits(n_weak, statistics, delta, eps), "default", DEFAULT_RULE
        eps_value = eps
    return LeakageBudget(bits=value, basis=basis, n=n_weak, k=k, delta=delta, eps=eps_value, rule=rule,
                         statement_bits=statement_bits(counts),
                         families=tuple(family.to_json(value, statistics, delta)
                                        for family in (released_families(mode, weak) if weak is not None else ())))


def check_stated_budget(generation: str, mode: str, counts: Mapping[str, int], n_classes: Mapping[str, int],
                        stated: LeakageBudget, *, shapes: Sequence[TaskShape] | None = None,
                        index: int | None = None) -> None:
    """Raise :class:`keys.VerificationError` unless a seal's ``stated`` leakage budget is what its rule gives.

    With ``shapes`` (each task's cases, classes and smallest class, from the labels: the operator's private
    opening, or the reveal), exactly: the weakest task is known. Without (a sealed generation, read by a third
    party), from what the manifest states: its tasks' case counts, the release mode, k, delta and eps (or the
    explicit bits) determine everything but the weakest task and its smallest class ``stated.n``; some task
    must hold that smallest class (at most its cases over its classes, a class-balanced set, or 1) and give the
    stated budget, families and statement with it. So an operator who claims a larger smallest class than any
    task can hold, or states bits, eps or a guarantee its rule does not give, is caught at once; one who claims
    a possible but false smallest class, at reveal."""
    if stated.basis == "public":
        expected_public = public_budget(min(counts.values())).to_json()
        if stated.to_json() != expected_public:
            raise _differs(generation, stated.to_json(), expected_public, index, labels=False)
        return
    if stated.basis == "default" and stated.eps is None:
        raise VerificationError(f"the leakage budget of {generation} is on the default basis and states no eps",
                                index=index, generation=generation, field="leakage_budget.eps")
    bits = stated.bits if stated.basis == "explicit" else None
    ordered = [(task, counts[task]) for task in sorted(counts)]
    if shapes is not None:
        candidates = [weakest(shapes)]
        counts_list = [shape.n for shape in shapes]
    else:
        candidates = [TaskShape(task=task, n=count, n_classes=n_classes[task], smallest_class=stated.n)
                      for task, count in ordered if 1 <= stated.n <= _largest_smallest_class(count, n_classes[task])]
        counts_list = [count for _, count in ordered]
        if not candidates:
            most = max(_largest_smallest_class(count, n_classes[task]) for task, count in ordered)
            raise VerificationError(
                f"the leakage budget of {generation} states a smallest class of {stated.n} cases, which no task can "
                f"hold (at most {most}: a task's cases over its classes)", index=index, generation=generation,
                field="leakage_budget.n", expected=f"<= {most}", found=stated.n)
    found = stated.to_json()
    first: dict[str, Any] | None = None  # what the first candidate gives, named when none matches
    for weak in candidates:
        try:
            wanted = budget_record(mode=mode, weak=weak, n=weak.smallest_class, n_tasks=len(counts),
                                   counts=counts_list, k=stated.k, delta=stated.delta, eps=stated.eps,
                                   bits=bits).to_json()
        except HeldoutError:  # the rule gives no budget at all here (a default at or below zero bits)
            statistics = _statistics(mode, weak, stated.k, len(counts))
            wanted = {**found, "bits": default_budget_bits(weak.smallest_class, statistics, stated.delta,
                                                           float(stated.eps or 0.0))}
        if wanted == found:
            return
        first = first or wanted
    assert first is not None
    raise _differs(generation, found, first, index, labels=shapes is not None)


def _differs(generation: str, found: Mapping[str, Any], wanted: Mapping[str, Any], index: int | None, *,
             labels: bool) -> VerificationError:
    """The stated budget ``found`` is not the ``wanted`` one its rule gives: named by its first differing member
    (:data:`_MEMBER_ORDER`)."""
    member = _first_difference(found, wanted)
    basis = "its cases' labels" if labels else "what its manifest states"
    return VerificationError(f"the leakage budget of {generation} is not what its rule gives from {basis}: "
                             f"leakage_budget.{member} differs", index=index, generation=generation,
                             field=f"leakage_budget.{member}", expected=shown_member(wanted.get(member)),
                             found=shown_member(found.get(member)))


def _largest_smallest_class(cases: int, classes: int) -> int:
    """The largest smallest class ``cases`` can have over ``classes`` (a balanced set); at least 1, as
    :meth:`TaskShape.from_labels` counts an empty class as 1 (a bound needs one case to concentrate at)."""
    return max(1, cases // classes)


#: The order a budget's members are named in when several differ: what the others follow from first.
_MEMBER_ORDER = ("basis", "n", "k", "delta", "bits", "eps", "statement_bits", "families", "rule")


def _first_difference(found: Mapping[str, Any], wanted: Mapping[str, Any]) -> str:
    members = sorted(set(found) | set(wanted), key=lambda m: (_MEMBER_ORDER.index(m) if m in _MEMBER_ORDER
                                                              else len(_MEMBER_ORDER), m))
    return next(m for m in members if found.get(m) != wanted.get(m))


def shown_member(value: Any) -> Any:
    """A logged member's value for an error's evidence: as is when a JSON scalar, else its JSON text (its repr
    when it has none), cut to its first 200 characters."""
    text = value if isinstance(value, (str, int, float, bool, type(None))) else \
        json.dumps(value, sort_keys=True, default=repr)
    return text[:200] if isinstance(text, str) else text


def public_budget(n: int) -> LeakageBudget:
    return LeakageBudget(bits=None, basis="public", n=n, k=1, delta=DEFAULT_DELTA, eps=None, rule=PUBLIC_RULE)


# --- charge per released number ---------------------------------------------------------------------------

@dataclass(frozen=True)
class NumberRule:
    low: float
    high: float
    decimals: int
    cap: str | None = None  # "n_test" / "n_cases": at most n + 1 values (a proportion over n cases)
    cap_values: int | None = None

    def values(self, counts: Mapping[str, int]) -> int:
        count = round((self.high - self.low) * 10**self.decimals) + 1
        if self.cap is not None and self.cap in counts:
            count = min(count, counts[self.cap] + 1)
        if self.cap_values is not None:
            count = min(count, self.cap_values)
        return count


_UNIT = NumberRule(0.0, 1.0, 6)
#: Numeric fields of a MedEval-1 evaluation object, by member name (a member's rule covers its list items
#: and the numbers nested under it, e.g. ``per_fraction``).
NUMBER_RULES: Mapping[str, NumberRule] = {
    "score": NumberRule(0.0, 100.0, 6),
    "index": NumberRule(0.0, 100.0, 6),
    "coverage": NumberRule(0.0, 1.0, 6, cap_values=2**9),  # a function of which of 9 dimensions scored
    "accuracy": NumberRule(0.0, 1.0, 6, cap="n_test"),
    "full_accuracy": NumberRule(0.0, 1.0, 6, cap="n_test"),
    "selective_acc_at_50": NumberRule(0.0, 1.0, 6, cap="n_test"),
    "selective_acc_at_80": NumberRule(0.0, 1.0, 6, cap="n_test"),
    "agreement_by_severity": NumberRule(0.0, 1.0, 4, cap="n_cases"),
    "retention_by_severity": NumberRule(0.0, 1.0, 4),
    "mean_kappa": NumberRule(-1.0, 1.0, 6),
    "brier": NumberRule(0.0, 2.0, 6),
    **{name: _UNIT for name in (
        "auc", "balanced_accuracy", "ci95", "clean_reference_cc", "mean_agreement", "mean_retention",
        "worst_retention", "ece", "mean_confidence", "overconfidence", "best_chance_corrected",
        "worst_chance_corrected", "chance_corrected", "retention", "spread_balanced_accuracy",
        "worst_class_recall", "risk_coverage_auc", "full_data_chance_corrected", "per_fraction",
        "retention_by_fraction")},
}
#: Members that do not depend on the held-out labels: free, with everything under them.
FREE_MEMBERS = frozenset({
    "seed", "n_test", "n_cases", "n_classes", "n_specs", "runtime_s", "timestamp", "cost", "limitations",
    "code_fingerprint", "spec_version", "kind", "task", "task_name", "modality", "domain", "device",
    "split_origin", "basis", "caveat", "spec", "has_real_metadata", "dimensions_scored", "not_scored_reason",
    "not_applicable", "n_train_available",
})
#: Categorical members that depend on the labels: the number of values each can take.
CATEGORICAL_MEMBERS: Mapping[str, int] = {"best_spec": 6, "worst_spec": 6}


def _counts(evaluation: Mapping[str, Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    n_test = evaluation.get("n_test")
    if isinstance(n_test, int) and not isinstance(n_test, bool) and n_test > 0:
        counts["n_test"] = n_test
        counts["n_cases"] = min(n_test, 1200)
    return counts


def charge_bits(evaluation: Mapping[str, Any]) -> float:
    """Bits the released numbers of one evaluation object can carry about the labels (module docstring)."""
    if not isinstance(evaluation, Mapping):
        raise MalformedInput("an evaluation is a JSON object", found=type(evaluation).__name__)
    counts = _counts(evaluation)
    total = 0.0
    bits_by_rule: dict[int, float] = {}  # a rule's bits per number (the counts are fixed for this evaluation)

    def number(rule: NumberRule | None) -> float:
        if rule is None:
            return UNKNOWN_NUMBER_BITS
        bits = bits_by_rule.get(id(rule))
        if bits is None:
            bits = bits_by_rule[id(rule)] = math.log2(rule.values(counts) + 1)
        return bits

    def walk(value: Any, name: str | None, rule: NumberRule | None) -> None:
        nonlocal total
        if name in FREE_MEMBERS:
            return
        if name is not None and name in NUMBER_RULES:
            rule = NUMBER_RULES[name]
        kind = type(value)  # parsed JSON's exact types first, each where the isinstance chain below puts it
        if kind is float or kind is int:
            total += number(rule)
        elif kind is dict:
            for key, item in value.items():
                walk(item, key, rule)
        elif kind is list:
            for item in value:
                walk(item, None, rule)
        elif kind is str:
            if name is not None and name in CATEGORICAL_MEMBERS:
                total += math.log2(CATEGORICAL_MEMBERS[name])
        elif kind is bool:
            total += 1.0
        elif isinstance(value, Mapping):
            for key, item in value.items():
                walk(item, key, rule)
        elif isinstance(value, list):
            for item in value:
                walk(item, None, rule)
        elif isinstance(value, (int, float)) or (value is None and rule is not None):
            total += number(rule)
        elif isinstance(value, str) and name is not None and name in CATEGORICAL_MEMBERS:
            total += math.log2(CATEGORICAL_MEMBERS[name])

    for key, item in evaluation.items():
        walk(item, key, None)
    return round(total, 6)


# --- admission --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BudgetCheck:
    generation: str
    budget_bits: float | None
    used_bits: float
    charge_bits: float

    @property
    def left_after(self) -> float | None:
        return None if self.budget_bits is None else round(self.budget_bits - self.used_bits - self.charge_bits, 6)


def check_budget(generations: Mapping[str, GenerationState], generation: str, bits: float,
                 now: datetime) -> BudgetCheck:
    """Admit a charge of ``bits`` on ``generation`` at ``now`` or raise: unknown generation (exit 2), retired
    (exit 4, LapsedError), expired (exit 3), or over budget (exit 4, BudgetExhausted). Writes nothing."""
    if not math.isfinite(bits) or bits < 0:
        raise UsageError("a charge is a non-negative number of bits", found=bits)
    state = generations.get(generation)
    if state is None:
        raise UsageError(f"no generation {generation!r} is sealed on this ledger", field="generation",
                         found=generation, expected=sorted(generations))
    state.require_current(now)
    used = state.bits_used
    budget = state.budget_bits
    if budget is not None and used + bits > budget + TOLERANCE:
        raise BudgetExhausted(
            f"{generation}: this evaluation would charge {bits:.3f} bits with {budget - used:.3f} of "
            f"{budget:.3f} left; refused, and {generation} is due for retirement",
            generation=generation, expected=f"<= {round(budget - used, 6)} bits", found=round(bits, 6),
            used_bits=used, budget_bits=budget)
    return BudgetCheck(generation=generation, budget_bits=budget, used_bits=used, charge_bits=round(bits, 6))
