"""The leakage budget: how many bits about a sealed generation's labels its released numbers may carry.

**Default budget.** Hoeffding's inequality plus a union bound over everything an adaptive analyst could have
asked: if the whole record of released numbers can be written in L bits, the statistics evaluated on the
set were chosen from at most k·2^L candidates, and all of them are within eps of their population value
with probability >= 1 - delta as long as 2k·2^L·exp(-2 n eps^2) <= delta, i.e.

    L = (2 n eps^2 - ln(2k / delta)) / ln 2   bits,

(the description-length argument behind the Ladder and Thresholdout). n is the number of cases of the
smallest task of the generation (each bundle's numbers come from one task's cases), k the number of models
expected, delta the failure probability, eps the target error on a [0, 1] metric. Defaults: k = 100,
delta = 0.05, eps = 0.05. An explicit ``--budget-bits`` is recorded with the eps it implies under the same
bound (eps = sqrt((L ln 2 + ln(2k/delta)) / (2n))), so the manifest states the guarantee honestly.

**Charge per bundle** (:func:`charge_bits`): every *released number* of the evaluation object that depends on
the held-out labels is charged log2 of the count of values it can take at its released precision: a field
in [lo, hi] released to d decimals takes (hi - lo)·10^d + 1 values, capped for proportions over n cases at
n + 1, plus one more outcome for "null / not scored". A boolean that depends on the labels (``scored``) is
1 bit; the spec's categorical template names (``best_spec``/``worst_spec``) log2(6). Fields that do not
depend on the labels (seed, counts, timing and the whole ``cost`` dimension, descriptions, metadata) are
free. A numeric field this table does not know is charged 64 bits (a float64 takes at most 2^64 values).
Charges are rounded to 6 decimals (the canonical float rule) so sums compare exactly.

**Ladder release** (:func:`ladder_release`): a score is released only when it beats the best released so
far by at least ``step``, rounded to a multiple of ``step``; otherwise nothing new is released. Coded as
"no improvement" = 1 bit and "improvement to level j" = 1 + log2(levels) bits (a prefix code, so the
charges sum to the length of the transcript's description), see :func:`ladder_charge_bits`.

A bundle is admitted while used + charge <= budget (equality allowed); beyond it the evaluation is refused
with :class:`BudgetExhausted` (exit 4) and the generation is due for retirement.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from keys import LapsedError, MalformedInput, UsageError
from seals.manifest import LeakageBudget

if TYPE_CHECKING:
    from heldout.generations.state import GenerationState

DEFAULT_K = 100
DEFAULT_DELTA = 0.05
DEFAULT_EPS = 0.05
UNKNOWN_NUMBER_BITS = 64.0
TOLERANCE = 1e-9
DEFAULT_RULE = "L = (2 n eps^2 - ln(2k/delta)) / ln 2 (Hoeffding + union bound over k·2^L adaptive queries)"
EXPLICIT_RULE = "explicit bits; eps = sqrt((L ln 2 + ln(2k/delta)) / (2n)) under the same bound"
PUBLIC_RULE = "public generation: membership and labels are public, nothing to leak, no budget"


class BudgetExhausted(LapsedError):
    """An evaluation would take a generation past its leakage budget (exit 4): the generation is due for
    retirement."""


def default_budget_bits(n: int, k: int, delta: float, eps: float) -> float:
    """L = (2 n eps^2 - ln(2k/delta)) / ln 2, in bits (may be <= 0 for a set too small for eps)."""
    _check_parameters(n, k, delta)
    if eps <= 0:
        raise UsageError("eps must be positive", field="eps", found=eps)
    return round((2 * n * eps * eps - math.log(2 * k / delta)) / math.log(2), 6)


def implied_eps(bits: float, n: int, k: int, delta: float) -> float:
    """The target error a budget of ``bits`` achieves under the same bound."""
    _check_parameters(n, k, delta)
    return round(math.sqrt((bits * math.log(2) + math.log(2 * k / delta)) / (2 * n)), 6)


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


def make_budget(*, n: int, k: int = DEFAULT_K, delta: float = DEFAULT_DELTA, eps: float = DEFAULT_EPS,
                bits: float | None = None) -> LeakageBudget:
    """The budget a seal records: the default from (n, k, delta, eps), or ``bits`` when given (explicit).
    Refuses (exit 2) a default that comes out at zero or below, saying which eps would make it positive."""
    if bits is not None:
        if not math.isfinite(bits) or bits <= 0:
            # a zero budget covers no release at all: every evaluation would be refused, so it is a mistake
            raise UsageError("--budget-bits must be a positive number", field="budget_bits", found=bits)
        return LeakageBudget(bits=bits, basis="explicit", n=n, k=k, delta=delta,
                             eps=implied_eps(bits, n, k, delta), rule=EXPLICIT_RULE)
    value = default_budget_bits(n, k, delta, eps)
    if value <= 0:
        raise UsageError(
            f"the default leakage budget for n = {n} cases per task, k = {k} models, delta = {delta} and "
            f"eps = {eps} is {value:.2f} bits: no release is covered; use a larger set, --eps of at least "
            f"{smallest_eps(n, k, delta):.4f}, or an explicit --budget-bits",
            field="budget", found=value, expected="> 0")
    return LeakageBudget(bits=value, basis="default", n=n, k=k, delta=delta, eps=eps, rule=DEFAULT_RULE)


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

    def walk(value: Any, name: str | None, rule: NumberRule | None) -> None:
        nonlocal total
        if name in FREE_MEMBERS:
            return
        if name is not None and name in NUMBER_RULES:
            rule = NUMBER_RULES[name]
        if isinstance(value, Mapping):
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


# --- ladder release ---------------------------------------------------------------------------------------

def _levels(step: float, low: float, high: float) -> int:
    return math.floor((high - low) / step + TOLERANCE) + 1


def ladder_release(score: float, best_so_far: float | None, step: float) -> float | None:
    """The value to release for ``score`` under the Ladder: None when it does not beat ``best_so_far`` by at
    least ``step``; otherwise ``score`` rounded to the nearest multiple of ``step`` (6 decimals)."""
    if not math.isfinite(score):
        raise MalformedInput("a ladder score must be a finite number", found=repr(score))
    if not step > 0:
        raise UsageError("the ladder step must be positive", field="step", found=step)
    if best_so_far is not None and score < best_so_far + step - TOLERANCE:
        return None
    return round(round(score / step) * step, 6)


def ladder_charge_bits(released: bool, step: float, *, low: float = 0.0, high: float = 100.0) -> float:
    """Bits of one ladder answer: 1 for "no improvement", 1 + log2(levels) for a released level."""
    if not step > 0:
        raise UsageError("the ladder step must be positive", field="step", found=step)
    return round(1.0 + (math.log2(_levels(step, low, high)) if released else 0.0), 6)


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
