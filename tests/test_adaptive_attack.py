"""The boosting attack of Blum & Hardt against full release, the Ladder and Thresholdout on a synthetic
generation (tests/attack_support.py): full release lets the attacker overfit most, by far; the test prints the
overfitting each mechanism allowed (run with -s to see it; bench/adaptive_attack.py runs it larger)."""

from __future__ import annotations

import os

from tests.attack_support import MECHANISMS, overfitting

N = int(os.environ.get("HELDOUT_ATTACK_N", "2000"))
K = int(os.environ.get("HELDOUT_ATTACK_K", "1000"))
TRIALS = int(os.environ.get("HELDOUT_ATTACK_TRIALS", "3"))


def test_full_release_overfits_most_under_the_boosting_attack() -> None:
    result = overfitting(n=N, k=K, trials=TRIALS, seed=7)
    print(f"\nboosting attack, n = {N} held-out cases, k = {K} queries, {TRIALS} trials (percentage points above "
          "the 50% any classifier gets on fresh data):")
    for mechanism in MECHANISMS:
        row = result[mechanism]
        print(f"  {mechanism:>13}: overfitting {row['overfitting_pp']:6.2f} pp (max {row['max_overfitting_pp']:6.2f}),"
              f" {row['bits']:9.1f} bits released")
    full, ladder, thresholdout = (result[m]["overfitting_pp"] for m in MECHANISMS)
    assert full > 8.0  # the attack works when everything is released
    assert full > 3 * max(ladder, thresholdout, 0.5)  # and both mechanisms blunt it
    assert result["full release"]["bits"] > 5 * max(result["ladder"]["bits"], result["thresholdout"]["bits"])
