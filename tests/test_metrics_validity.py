"""Validity of the MedEval-1 index (issue 12, must show): models without skill score <= 5, an oracle >= 95,
and the index falls as label noise is injected into an oracle's predictions (0, 10, 20, 40%).

Tasks: the reference passport's six datasets with their test sizes and class counts (the 28 px and 224 px
variants share both), labels drawn from seeded, skewed class priors. Every model supplies every kind of stored
prediction (perturbed labels, templates, training fractions), so every dimension is exercised. The same
models run under v0.2, which must pass, and under v0.1, whose failures the tests print and require: v0.1's
composite gives models with no skill far more than 5 (the reason v0.2 exists)."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pytest

import harness.metrics as m
from harness.metrics.registry import metrics_for

V01, V02 = "MedEval-1 v0.1", "MedEval-1 v0.2"
TASKS = (("bloodmnist", 3421, 8), ("breastmnist", 156, 2), ("dermamnist", 2005, 7), ("organcmnist", 8216, 11),
         ("pneumoniamnist", 624, 2), ("retinamnist", 400, 5))
SEED = 20260727
NOISE = (0.0, 0.1, 0.2, 0.4)
Model = Callable[[np.ndarray, int, np.random.Generator], np.ndarray]


def task_labels(n: int, k: int, index: int) -> np.ndarray:
    rng = np.random.default_rng(100 + index)
    priors = rng.dirichlet(np.full(k, 2.0))
    return rng.choice(k, size=n, p=priors)


def one_hot(predictions: np.ndarray, k: int) -> np.ndarray:
    out = np.zeros((predictions.size, k), dtype=np.float32)
    out[np.arange(predictions.size), predictions] = 1.0
    return out


def majority(labels: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    return one_hot(np.full(labels.size, np.bincount(labels, minlength=k).argmax()), k)


def prior_only(labels: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    priors = np.bincount(labels, minlength=k) / labels.size  # the class priors (known to the model), every case
    return np.tile(priors.astype(np.float32), (labels.size, 1))


def uniform_random(labels: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    return rng.dirichlet(np.ones(k), size=labels.size).astype(np.float32)


def noisy_oracle(rate: float) -> Model:
    def model(labels: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
        predictions = labels.copy()
        flipped = rng.random(labels.size) < rate
        predictions[flipped] = (labels[flipped] + rng.integers(1, k, int(flipped.sum()))) % k  # another class
        return one_hot(predictions, k)
    return model


BASELINES: dict[str, Model] = {"majority": majority, "prior-only": prior_only, "uniform-random": uniform_random}


def index_of(version: str, model: Model, task: str, n: int, k: int, position: int) -> float:
    labels = task_labels(n, k, position)
    rng_seed = 1000 + position
    predictions = subset_rows(model, labels, k, rng_seed, metrics_for(version).subset_indices(n, SEED))
    meta = m.EvaluationMeta(
        code_fingerprint="validity", device="cpu", domain="medicine", kind="image",
        limitations={"n_train_available": None, "notes": None, "train_capped": False}, modality="test",
        n_classes=k, n_test=n, runtime_s=1.0, seed=SEED, split_origin="validity", task=task, task_name=task,
        timestamp="2026-12-01T00:00:00+00:00", seconds_total=1.0, parameters=None,
        numpy_version=metrics_for(version).numpy_version_for_new_evaluation())
    evaluation = metrics_for(version).build_evaluation(meta, predictions, labels)
    return float(evaluation["composite"]["index"])


def subset_rows(model: Model, labels: np.ndarray, k: int, seed: int, subset: np.ndarray) -> m.StoredPredictions:
    """The model's predictions everywhere: clean; 12 perturbations x 3 severities and 6 templates at the
    version's robustness subset; 3 training fractions. A random model draws afresh for each."""
    rng = np.random.default_rng(seed)
    clean = model(labels, k, rng)
    perturbed = {name: np.stack([model(labels, k, rng).argmax(axis=1)[subset] for _ in range(3)])
                 for name in m.PERTURBATIONS}
    templates = np.stack([model(labels, k, rng)[subset] for _ in range(6)])
    fractions = np.stack([model(labels, k, rng) for _ in range(2)] + [clean])
    return m.StoredPredictions(clean, perturbed, template_probs=templates, fraction_probs=fractions)


def table(version: str) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    models = {**BASELINES, **{f"oracle+{int(rate * 100)}% noise": noisy_oracle(rate) for rate in NOISE}}
    for position, (task, n, k) in enumerate(TASKS):
        out[task] = {name: index_of(version, model, task, n, k, position) for name, model in models.items()}
    return out


@pytest.fixture(scope="module")
def v02() -> dict[str, dict[str, float]]:
    return table(V02)


@pytest.fixture(scope="module")
def v01() -> dict[str, dict[str, float]]:
    return table(V01)


def show(version: str, results: dict[str, dict[str, float]]) -> None:
    names = list(next(iter(results.values())))
    print(f"\n{version} composite index")
    print(f"{'task':16}" + "".join(f"{name:>22}" for name in names))
    for task, row in results.items():
        print(f"{task:16}" + "".join(f"{row[name]:22.2f}" for name in names))


def no_skill_violations(results: dict[str, dict[str, float]]) -> list[tuple[str, str, float]]:
    return [(task, name, row[name]) for task, row in results.items() for name in BASELINES if row[name] > 5.0]


def oracle_violations(results: dict[str, dict[str, float]]) -> list[tuple[str, float]]:
    return [(task, row["oracle+0% noise"]) for task, row in results.items() if row["oracle+0% noise"] < 95.0]


def monotonicity_violations(results: dict[str, dict[str, float]]) -> list[tuple[str, list[float]]]:
    out = []
    for task, row in results.items():
        series = [row[f"oracle+{int(rate * 100)}% noise"] for rate in NOISE]
        if any(later >= earlier for earlier, later in itertools.pairwise(series)):
            out.append((task, series))
    return out


def test_v02_models_without_skill_score_at_most_5_on_every_task(v02):
    show(V02, v02)
    assert no_skill_violations(v02) == []


def test_v02_oracle_scores_at_least_95_on_every_task(v02):
    assert oracle_violations(v02) == []


def test_v02_index_falls_strictly_as_label_noise_grows(v02):
    assert monotonicity_violations(v02) == []


def test_v01_fails_the_same_validity_tests(v01):
    """v0.1 is kept exactly as it is (the reference passport's numbers); this shows, in the test's own output,
    what v0.2 corrects: models with no skill get a v0.1 composite far above 5."""
    show(V01, v01)
    failures = no_skill_violations(v01)
    print(f"\nv0.1: {len(failures)} of {len(TASKS) * len(BASELINES)} no-skill evaluations score above 5:")
    for task, name, value in failures:
        print(f"  {task:16} {name:16} {value:6.2f}")
    print(f"v0.1 oracle below 95: {oracle_violations(v01)}")
    print(f"v0.1 not strictly falling with noise: {monotonicity_violations(v01)}")
    assert len(failures) >= len(TASKS)  # at least one per task: v0.1 does violate
    assert max(value for _, _, value in failures) > 15.0
