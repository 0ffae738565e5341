"""Leakage-budget arithmetic, the charge per released number, the Ladder, and admission at the boundary;
generation states derived from ledger entries."""

from __future__ import annotations

import copy
import json
import math
from datetime import UTC, datetime, timedelta

import pytest

from heldout.generations import (
    BudgetExhausted,
    charge_bits,
    check_budget,
    default_budget_bits,
    implied_eps,
    ladder_release,
    load_generations,
    make_budget,
)
from heldout.generations.budget import smallest_eps
from keys import ExpiredError, LapsedError, UsageError, VerificationError
from seals import format_utc
from tests.conftest import REFERENCE_PASSPORT

T0 = datetime(2026, 9, 1, tzinfo=UTC)


def reference_evaluations() -> list[dict]:
    return list(json.loads(REFERENCE_PASSPORT.read_text())["computed"]["evaluations"])


# --- the default budget ------------------------------------------------------------------------------------

@pytest.mark.parametrize("n, k, delta, eps", [(10_000, 100, 0.05, 0.05), (2000, 10, 0.01, 0.1), (500, 1, 0.5, 0.2)])
def test_default_budget_is_the_union_bound_formula(n: int, k: int, delta: float, eps: float) -> None:
    bits = default_budget_bits(n, k, delta, eps)
    assert bits == round((2 * n * eps**2 - math.log(2 * k / delta)) / math.log(2), 6)
    # Spending exactly L bits keeps 2k·2^L·exp(-2 n eps^2) at delta: the bound the budget stands for.
    assert 2 * k * 2**bits * math.exp(-2 * n * eps**2) == pytest.approx(delta, rel=1e-5)
    assert implied_eps(bits, n, k, delta) == pytest.approx(eps, abs=1e-6)


def test_default_budget_grows_with_n_and_eps_and_shrinks_with_k() -> None:
    assert default_budget_bits(20_000, 100, 0.05, 0.05) > default_budget_bits(10_000, 100, 0.05, 0.05)
    assert default_budget_bits(10_000, 100, 0.05, 0.06) > default_budget_bits(10_000, 100, 0.05, 0.05)
    assert default_budget_bits(10_000, 1000, 0.05, 0.05) < default_budget_bits(10_000, 100, 0.05, 0.05)


def test_make_budget_refuses_a_set_too_small_for_eps_and_names_the_eps_that_works() -> None:
    with pytest.raises(UsageError) as caught:
        make_budget(n=500)
    assert f"{smallest_eps(500, 100, 0.05):.4f}" in caught.value.message
    assert (make_budget(n=500, eps=smallest_eps(500, 100, 0.05) + 0.01).bits or 0) > 0


def test_explicit_budget_records_the_eps_it_implies() -> None:
    budget = make_budget(n=1000, bits=100.0)
    assert budget.basis == "explicit" and budget.bits == 100.0
    assert budget.eps == pytest.approx(math.sqrt((100 * math.log(2) + math.log(2 * 100 / 0.05)) / 2000), abs=1e-6)
    with pytest.raises(UsageError):
        make_budget(n=1000, bits=-1.0)


# --- the charge --------------------------------------------------------------------------------------------

def test_charge_of_a_single_score_is_log2_of_its_values_at_6_decimals() -> None:
    # score in [0, 100] at 6 decimals: 10^8 + 1 values, plus the null (not scored) outcome.
    assert charge_bits({"dimensions": {"accuracy": {"score": 12.5}}}) == round(math.log2(10**8 + 2), 6)
    # a proportion over n cases takes at most n + 1 values.
    assert charge_bits({"n_test": 156, "accuracy": 0.5}) == round(math.log2(157 + 1), 6)
    # 4-decimal early-rounded arrays: 10^4 + 1 values each.
    assert charge_bits({"retention_by_severity": [0.1, 0.2, 0.3]}) == round(3 * math.log2(10**4 + 2), 6)
    assert charge_bits({"scored": True}) == 1.0
    assert charge_bits({"best_spec": "template_2"}) == round(math.log2(6), 6)
    assert charge_bits({"mystery": 3.0}) == 64.0  # a field the table does not know: a float64's 64 bits


def test_charge_ignores_label_independent_fields_and_values() -> None:
    evaluation = reference_evaluations()[0]
    base = charge_bits(evaluation)
    assert 1000 < base < 5000
    changed = copy.deepcopy(evaluation)
    changed["dimensions"]["cost"]["seconds_total"] = 1.0  # timing is not about labels
    changed["seed"] = 1
    changed["runtime_s"] = 0.1
    changed["dimensions"]["accuracy"]["score"] = 99.0  # the value does not matter, only what it can take
    assert charge_bits(changed) == base


def test_charge_of_every_reference_evaluation_is_positive_and_deterministic() -> None:
    charges = [charge_bits(e) for e in reference_evaluations()]
    assert len(charges) == 12 and all(c > 0 for c in charges)
    assert charges == [charge_bits(e) for e in reference_evaluations()]


# --- the ladder ------------------------------------------------------------------------------------------

def test_ladder_releases_only_a_step_improvement_rounded_to_the_step() -> None:
    assert ladder_release(71.3, None, 1.0) == 71.0
    assert ladder_release(71.9, 71.0, 1.0) is None  # beats by less than a step
    assert ladder_release(72.0, 71.0, 1.0) == 72.0  # exactly a step: released
    assert ladder_release(74.6, 71.0, 1.0) == 75.0
    assert ladder_release(80.26, 70.0, 0.5) == 80.5
    with pytest.raises(UsageError):
        ladder_release(1.0, None, 0.0)


# --- states and admission ---------------------------------------------------------------------------------

def seal_entry(name: str, *, created: datetime = T0, days: int = 180, bits: float | None = 100.0) -> dict:
    return {"type": "seal", "v": 1, "generation": name, "manifest_sha256": "a" * 64, "set_hash": "b" * 64,
            "created_utc": format_utc(created), "expiry_utc": format_utc(created + timedelta(days=days)),
            "membership": "public" if name == "public" else "sealed", "tasks": {"bloodmnist": 500},
            "budget_bits": bits, "release": {"mode": "full", "step": None}}


def bundle_entry(name: str, bits: float | None, *, model: str = "m", evaluation: str = "c" * 64) -> dict:
    entry = {"type": "bundle", "v": 1, "generation": name, "model_id": model, "task": "bloodmnist",
             "evaluation_sha256": evaluation, "predictions_sha256": "d" * 64, "created_utc": format_utc(T0)}
    if bits is not None:
        entry["leakage_bits"] = bits
    return entry


def numbered(*entries: dict) -> list[tuple[int, dict]]:
    return list(enumerate([{"type": "genesis"}, *entries]))


def test_states_follow_the_time_rules() -> None:
    entries = numbered(seal_entry("gen1"), seal_entry("gen2"),
                       {"type": "retire", "v": 1, "generation": "gen2", "reason": "leaked",
                        "created_utc": format_utc(T0 + timedelta(days=1))})
    assert load_generations(entries, T0 - timedelta(seconds=1))["gen1"].state == "sealed"
    assert load_generations(entries, T0)["gen1"].state == "current"
    assert load_generations(entries, T0 + timedelta(days=180) - timedelta(seconds=1))["gen1"].state == "current"
    assert load_generations(entries, T0 + timedelta(days=180))["gen1"].state == "expired"
    assert load_generations(entries, T0)["gen2"].state == "retired"


def test_budget_admission_at_the_boundary() -> None:
    entries = numbered(seal_entry("gen1", bits=100.0), bundle_entry("gen1", 60.0), bundle_entry("gen1", 30.0))
    generations = load_generations(entries, T0 + timedelta(days=1))
    assert generations["gen1"].bits_used == 90.0 and generations["gen1"].bits_left == 10.0
    check = check_budget(generations, "gen1", 10.0, T0 + timedelta(days=1))  # exactly the rest: admitted
    assert check.left_after == 0.0
    with pytest.raises(BudgetExhausted) as caught:
        check_budget(generations, "gen1", 10.000001, T0 + timedelta(days=1))
    assert caught.value.exit_code == 4 and isinstance(caught.value, LapsedError)
    assert "due for retirement" in caught.value.message
    # 10 bits left while the largest bundle took 60: another like it would be refused, so it is due.
    assert generations["gen1"].due_for_retirement
    roomy = load_generations(numbered(seal_entry("gen1", bits=100.0), bundle_entry("gen1", 30.0)), T0)
    assert not roomy["gen1"].due_for_retirement and roomy["gen1"].bits_left == 70.0
    full = load_generations(numbered(seal_entry("gen1", bits=100.0), bundle_entry("gen1", 100.0)), T0)
    assert full["gen1"].due_for_retirement and full["gen1"].bits_left == 0.0
    with pytest.raises(BudgetExhausted):
        check_budget(full, "gen1", 0.000001, T0)
    check_budget(full, "gen1", 0.0, T0)  # a zero charge (e.g. nothing released) is still admitted


def test_admission_refuses_unknown_retired_expired_and_not_yet_sealed() -> None:
    entries = numbered(seal_entry("gen1"), seal_entry("gen2"),
                       {"type": "retire", "v": 1, "generation": "gen2", "reason": "budget",
                        "created_utc": format_utc(T0)})
    generations = load_generations(entries, T0)
    with pytest.raises(UsageError):
        check_budget(generations, "gen9", 1.0, T0)
    with pytest.raises(LapsedError):
        check_budget(generations, "gen2", 1.0, T0)
    with pytest.raises(ExpiredError):
        check_budget(generations, "gen1", 1.0, T0 + timedelta(days=400))
    with pytest.raises(ExpiredError):
        check_budget(generations, "gen1", 1.0, T0 - timedelta(days=1))


def test_public_generation_has_no_budget() -> None:
    generations = load_generations(numbered(seal_entry("public", bits=None), bundle_entry("public", 5000.0)), T0)
    assert generations["public"].budget_bits is None and generations["public"].bits_left is None
    check_budget(generations, "public", 10**6, T0)


def test_bundle_without_leakage_bits_is_charged_from_its_evaluation_blob() -> None:
    evaluation = reference_evaluations()[3]
    data = json.dumps(evaluation).encode()

    class Blobs:
        def get(self, sha256_hex: str) -> bytes:
            assert sha256_hex == "c" * 64
            return data

    entries = numbered(seal_entry("gen1"), bundle_entry("gen1", None))
    assert load_generations(entries, T0, blobs=Blobs())["gen1"].bits_used == charge_bits(evaluation)
    # without its evaluation, the bundle is that generation's fault (named), not every generation's (a raise
    # here made every later rule see no generation at all: false findings on each)
    unread = load_generations(entries, T0)
    assert unread["gen1"].bits_used == 0.0 and len(unread.anomalies) == 1
    assert "states no leakage_bits and its evaluation cannot be read" in unread.anomalies[0].message


@pytest.mark.parametrize("entries", [
    [seal_entry("gen1"), seal_entry("gen1")],
    [{"type": "retire", "v": 1, "generation": "gen1", "reason": "leaked", "created_utc": format_utc(T0)}],
    [seal_entry("gen1"), {"type": "retire", "v": 1, "generation": "gen1", "reason": "leaked",
                          "created_utc": format_utc(T0)},
     {"type": "retire", "v": 1, "generation": "gen1", "reason": "leaked", "created_utc": format_utc(T0)}],
    [{"type": "reveal", "v": 1, "generation": "gen3", "reveal_sha256": "e" * 64, "created_utc": format_utc(T0)}],
])
def test_a_self_contradicting_ledger_is_reported_with_the_entry(entries: list[dict]) -> None:
    """A contradiction is reported (naming the entry) and reading goes on with the first entry: an append-only
    log cannot be repaired, so it must not stop every later command."""
    generations = load_generations(numbered(*entries), T0)
    assert [a.evidence["index"] for a in generations.anomalies] == [len(entries)]
    assert all(isinstance(a, VerificationError) for a in generations.anomalies)
