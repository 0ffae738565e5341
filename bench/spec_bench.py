"""Re-derivation time per bundle: MedEval-1 v0.2 against v0.1, measured in the same run.

For each reference task size (n_test, K), one synthetic bundle with every kind of stored prediction (12
perturbations x 3 severities and 6 templates on the subset, 3 training fractions) is re-derived as the audit
does (load the npz blob, then the version's ``build_evaluation``) under v0.1 and under v0.2; the median of
--repeats runs of each, and the ratio v0.2 / v0.1 (v0.1 is the baseline). numpy only, no torch.

    python bench/spec_bench.py [--repeats 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
from rich.console import Console
from rich.table import Table

from harness.metrics import PERTURBATIONS, EvaluationMeta, StoredPredictions
from harness.metrics.registry import metrics_for

SIZES = (("breastmnist", 156, 2), ("retinamnist", 400, 5), ("pneumoniamnist", 624, 2), ("dermamnist", 2005, 7),
         ("bloodmnist", 3421, 8), ("organcmnist", 8216, 11))
SEED = 20260727


def bundle(task: str, n: int, k: int, version: str) -> tuple[EvaluationMeta, bytes, np.ndarray]:
    rng = np.random.default_rng(n)
    labels = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k))
    logits[np.arange(n), labels] += 1.5
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    subset = metrics_for(version).subset_indices(n, SEED)
    clean = probs.argmax(axis=1)[subset]
    perturbed = {p: np.where(rng.random((3, subset.size)) < 0.3, rng.integers(0, k, (3, subset.size)), clean)
                 for p in PERTURBATIONS}
    predictions = StoredPredictions(probs, perturbed, template_probs=np.stack([probs[subset]] * 6),
                                    fraction_probs=np.stack([probs] * 3))
    metrics = metrics_for(version)
    meta = EvaluationMeta(
        code_fingerprint="bench", device="cpu", domain="medicine", kind="image",
        limitations={"n_train_available": 1000, "notes": None, "train_capped": False}, modality="bench",
        n_classes=k, n_test=n, runtime_s=1.0, seed=SEED, split_origin="bench", task=task, task_name=task,
        timestamp="2026-12-01T00:00:00+00:00", seconds_total=10.0, parameters=1,
        numpy_version=metrics.numpy_version_for_new_evaluation())
    return meta, predictions.to_npz_bytes(), labels


def rederive_seconds(task: str, n: int, k: int, version: str, repeats: int) -> float:
    meta, blob, labels = bundle(task, n, k, version)
    metrics = metrics_for(version)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        metrics.build_evaluation(meta, StoredPredictions.from_npz_bytes(blob), labels)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    for task, n, k in SIZES:
        v01 = rederive_seconds(task, n, k, "MedEval-1 v0.1", args.repeats)
        v02 = rederive_seconds(task, n, k, "MedEval-1 v0.2", args.repeats)
        rows.append({"task": task, "n_test": n, "n_classes": k, "v01_s": round(v01, 4), "v02_s": round(v02, 4),
                     "ratio": round(v02 / v01, 1)})
    if args.json:
        print(json.dumps({"numpy": np.__version__, "rows": rows}, indent=1))
        return
    table = Table(title=f"re-derivation per bundle (median of {args.repeats}; numpy {np.__version__})")
    for column in ("task", "n_test", "K", "v0.1 s", "v0.2 s", "v0.2 / v0.1"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(row["task"], str(row["n_test"]), str(row["n_classes"]), f"{row['v01_s']:.3f}",
                      f"{row['v02_s']:.3f}", f"{row['ratio']:.1f}x")
    Console().print(table)


if __name__ == "__main__":
    main()
