"""Blum & Hardt's boosting attack (2015, "The Ladder", section 4) against the three release modes, on a synthetic
generation whose labels are coin flips, so that no classifier can beat 50% on fresh data and every point above
50% on the held-out set is overfitting.

The attacker submits k random classifiers (independent uniform labels per case), reads what the mechanism
releases for each, keeps those that look better than chance, and submits their majority vote. It scores that
vote on the held-out set; the overfitting is its held-out accuracy minus 50% (its accuracy on fresh data).

* full release: the exact held-out accuracy of every query; keep those above 50%;
* Ladder: :func:`heldout.generations.release.ladder_release` at ``step``; keep the queries it released (a
  released value means "better than the best so far by a step");
* Thresholdout: :func:`heldout.generations.release.thresholdout_answer` with the accuracy on an independent
  public set of cases as the public estimate; keep the queries whose released value is above 50%.

Scores are accuracies in percent (the mechanisms' 0-100 scale). Used by tests/test_adaptive_attack.py and
bench/adaptive_attack.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from heldout.generations.release import Transcript, answer_bits, ladder_release, thresholdout_answer

MECHANISMS = ("full release", "ladder", "thresholdout")


def _percent(predictions: np.ndarray, labels: np.ndarray) -> float:
    return float(100.0 * np.mean(predictions == labels))


def boosting_attack(mechanism: str, *, n: int, k: int, seed: int, step: float = 1.0, threshold: float = 4.0,
                    sigma: float = 1.0) -> tuple[float, float]:
    """One run of the attack against ``mechanism``: (overfitting in percentage points, bits the released
    sequence carries: k * log2(n + 1) for full release, the description length of the transcript otherwise)."""
    rng = np.random.default_rng(seed)
    holdout = rng.integers(0, 2, n)
    public = rng.integers(0, 2, n)
    secret = rng.bytes(32)
    kept: list[np.ndarray] = []
    transcript = Transcript()
    bits = 0.0
    best: float | None = None
    last_over: int | None = None
    for query in range(k):
        on_holdout = rng.integers(0, 2, n)
        on_public = rng.integers(0, 2, n)  # the same random classifier applied to the public cases
        score = _percent(on_holdout, holdout)
        if mechanism == "full release":
            keep = score > 50.0
            bits += math.log2(n + 1)
        elif mechanism == "ladder":
            released = ladder_release(score, best, step)
            keep = released is not None
            bits += answer_bits("ladder", transcript, keep, step)
            transcript = transcript.then(released, keep)
            if released is not None:
                best = released
        elif mechanism == "thresholdout":
            answer = thresholdout_answer(score, _percent(on_public, public), secret=secret, threshold=threshold,
                                         sigma=sigma, step=step, task="attack", answer=query,
                                         last_over_threshold=last_over)
            if answer.over_threshold:
                last_over = query
            bits += answer_bits("thresholdout", transcript, answer.over_threshold, step)
            transcript = transcript.then(answer.value if answer.over_threshold else None, answer.over_threshold)
            keep = answer.value > 50.0
        else:
            raise ValueError(mechanism)
        if keep:
            kept.append(on_holdout)
    if not kept:
        return 0.0, bits
    vote = (np.mean(np.stack(kept), axis=0) > 0.5).astype(holdout.dtype)
    return _percent(vote, holdout) - 50.0, bits


def overfitting(*, n: int, k: int, trials: int, seed: int = 0,
                progress: Callable[[str, int], None] | None = None) -> dict[str, dict[str, float]]:
    """Per mechanism, the mean overfitting (percentage points) and bits released over ``trials`` runs."""
    out = {}
    for mechanism in MECHANISMS:
        runs = []
        for trial in range(trials):
            runs.append(boosting_attack(mechanism, n=n, k=k, seed=seed + trial))
            if progress is not None:
                progress(mechanism, trial + 1)
        out[mechanism] = {"overfitting_pp": round(float(np.mean([r[0] for r in runs])), 3),
                          "max_overfitting_pp": round(float(np.max([r[0] for r in runs])), 3),
                          "bits": round(float(np.mean([r[1] for r in runs])), 1)}
    return out
