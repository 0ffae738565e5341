"""Generate the fixed MedEval-1 v0.2 re-derivation corpus (run once; the outputs are committed).

    python tests/data/v02_corpus/generate.py

Writes, for each case: ``<name>.npz`` (the stored predictions blob, exactly as the harness stores it),
``<name>.labels.json`` (canonical JSON list of labels) and one entry in ``corpus.json``: the evaluation meta
(the non-derivable fields), the blobs' SHA-256 and the SHA-256 of the expected evaluation's canonical bytes.
The inputs are synthetic (seeded numpy draws below); once written they are data, so nothing here needs to
reproduce them. ``tests/test_metrics_corpus.py`` re-derives every case and requires the same bytes, under
every numpy version CI runs (``.ci/numpy_matrix.sh``).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from harness.metrics import PERTURBATIONS, EvaluationMeta, StoredPredictions, evaluation_bytes  # noqa: E402
from harness.metrics.registry import metrics_for  # noqa: E402
from seals.canonical import canonical_bytes  # noqa: E402

V02 = "MedEval-1 v0.2"
# name, task, n_test, K, skill, prompts, trained, tie confidences
CASES = (
    ("blood_small_prompts", "bloodmnist", 150, 8, 1.5, True, False, False),
    ("organc_subset_trained", "organcmnist", 1500, 11, 2.0, False, True, False),
    ("retina_ordinal", "retinamnist", 400, 5, 1.0, True, False, False),
    ("pneumonia_ties", "pneumoniamnist_224", 624, 2, 0.0, False, True, True),
    ("breast_weak", "breastmnist", 156, 2, 0.3, True, True, False),
)


def probabilities(rng: np.random.Generator, labels: np.ndarray, k: int, skill: float) -> np.ndarray:
    logits = rng.normal(size=(labels.size, k))
    logits[np.arange(labels.size), labels] += skill
    probs = np.exp(logits)
    return probs / probs.sum(axis=1, keepdims=True)


def build_case(index: int, name: str, task: str, n: int, k: int, skill: float, prompts: bool, trained: bool,
               ties: bool) -> dict:
    rng = np.random.default_rng(5000 + index)
    labels = rng.choice(k, size=n, p=rng.dirichlet(np.full(k, 3.0)))
    clean = probabilities(rng, labels, k, skill)
    if ties:  # a few distinct confidence levels: many tied blocks
        top = np.argmax(clean, axis=1)
        level = rng.choice([0.55, 0.7, 0.9], size=n)
        clean = np.tile(((1 - level) / (k - 1))[:, None], (1, k))
        clean[np.arange(n), top] = level
    seed = 20260727 + index
    subset = metrics_for(V02).subset_indices(n, seed)
    clean_subset = np.argmax(clean, axis=1)[subset]
    perturbed = {p: np.where(rng.random((3, subset.size)) < 0.2 * (1 + np.arange(3))[:, None],
                             rng.integers(0, k, (3, subset.size)), clean_subset) for p in PERTURBATIONS}
    templates = np.stack([probabilities(rng, labels[subset], k, skill * (0.5 + t / 6)) for t in range(6)]) \
        if prompts else None
    fractions = np.stack([probabilities(rng, labels, k, skill * f) for f in (0.2, 0.6)] + [clean]) \
        if trained else None
    predictions = StoredPredictions(clean, perturbed, template_probs=templates, fraction_probs=fractions)
    blob = predictions.to_npz_bytes()
    stored = StoredPredictions.from_npz_bytes(blob)
    meta = {
        "code_fingerprint": "corpus000000", "device": "cpu", "domain": "medicine",
        "kind": "image224" if task.endswith("_224") else "image",
        "limitations": {"n_train_available": 1000 if trained else None, "notes": None, "train_capped": False},
        "modality": "synthetic", "n_classes": k, "n_test": n, "runtime_s": 12.3, "seed": seed,
        "split_origin": "corpus", "task": task, "task_name": f"synthetic {task}",
        "timestamp": "2026-12-01T00:00:00+00:00", "seconds_total": 4.5678, "parameters": 1234567,
    }
    evaluation = metrics_for(V02).build_evaluation(EvaluationMeta(**meta), stored, labels)
    labels_json = canonical_bytes([int(v) for v in labels])
    (HERE / f"{name}.npz").write_bytes(blob)
    (HERE / f"{name}.labels.json").write_bytes(labels_json)
    return {
        "name": name, "meta": meta,
        "predictions_sha256": hashlib.sha256(blob).hexdigest(),
        "labels_sha256": hashlib.sha256(labels_json).hexdigest(),
        "evaluation_sha256": hashlib.sha256(evaluation_bytes(evaluation)).hexdigest(),
        "index": evaluation["composite"]["index"],
    }


def main() -> None:
    cases = [build_case(i, *case) for i, case in enumerate(CASES)]
    document = {
        "spec_version": V02,
        "generated_with": {"numpy": np.__version__, "python": sys.version.split()[0]},
        "generator": "tests/data/v02_corpus/generate.py",
        "cases": cases,
    }
    (HERE / "corpus.json").write_text(json.dumps(document, indent=1, sort_keys=True) + "\n", "utf-8")
    for case in cases:
        print(f"{case['name']:24} index {case['index']:.6f} evaluation {case['evaluation_sha256'][:16]}")


if __name__ == "__main__":
    main()
