"""How much the nine MedEval-1 dimensions add to an evaluation, against the model's own forward passes.

One run: a synthetic task with n test cases (default 1200, so the robustness subset is the whole test set),
a model evaluated end to end by ``harness.run.evaluate`` (its measured inference time over all evaluated
cases, n + 36 n, is the baseline), then each dimension function timed on that run's stored predictions
(median of --repeats), the whole ``build_evaluation`` (composite included), and the audit's side (load the
npz blob, then ``build_evaluation``). The default model, cnn_small, is the fastest real model here, so its
ratio is the worst case; zero-shot ViTs are hundreds of times slower per case. The end-to-end wall time of
that evaluation (training included) is reported against a one-minute budget on 2 cores: it is measured here,
not asserted in a test, because a loaded CI machine would make such a test fail for no fault of the code.

    python bench/harness_bench.py [--n 1200] [--model cnn_small] [--repeats 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
from rich.console import Console
from rich.table import Table

from harness import metrics
from harness.data import load_task
from harness.metrics.core import predictions_from_probs
from harness.models import create_model
from harness.run import evaluate
from harness.synth import write_synth
from harness.tasks import task_spec

#: The end-to-end budget of one cnn_small evaluation at the default sizes on 2 cores (was a timed test).
WALL_BUDGET_S = 60.0


def median_seconds(function: Callable[[], Any], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1200, help="test cases")
    parser.add_argument("--model", default="cnn_small")
    parser.add_argument("--task", default="bloodmnist")
    parser.add_argument("--n-train", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=20260727)
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON instead of a table")
    args = parser.parse_args()

    spec = task_spec(args.task)
    with tempfile.TemporaryDirectory() as root:
        write_synth(spec, Path(root), seed=1, n_train=args.n_train, n_val=10, n_test=args.n)
        data = load_task(spec, Path(root))
    started = time.perf_counter()
    model = create_model(args.model)
    result = evaluate(model, data, spec, seed=args.seed)
    evaluate_wall_s = time.perf_counter() - started
    forward_s = result.timings["inference_s"]
    stored, labels, seed = result.predictions, result.labels, args.seed
    n_classes = stored.n_classes
    probs = stored.clean_probs.astype(np.float64)
    subset = metrics.subset_indices(stored.n_test, seed)
    clean_predictions = predictions_from_probs(probs)
    clean_subset, labels_subset = clean_predictions[subset], labels[subset]
    perturbed = stored.perturbed_labels
    # Models without prompts have no template probabilities; time the dimension on stand-in ones of the
    # right shape (the clean subset probabilities, sharpened differently per template) so all nine count.
    template_probs = stored.template_probs
    stand_in_templates = template_probs is None
    if template_probs is None:
        logits = np.log(np.clip(probs[subset], 1e-9, 1.0))
        template_probs = np.stack([np.exp(logits * (1 + 0.1 * t)) for t in range(6)])
        template_probs /= template_probs.sum(axis=2, keepdims=True)
    dimensions: dict[str, Callable[[], Any]] = {
        "accuracy": lambda: metrics.accuracy(probs, labels, seed=seed),
        "acquisition": lambda: metrics.acquisition(clean_subset, {n: perturbed[n] for n in metrics.ACQUISITIONS},
                                                   labels_subset, n_classes),
        "calibration": lambda: metrics.calibration(probs, labels),
        "corruption": lambda: metrics.corruption(clean_subset, {n: perturbed[n] for n in metrics.CORRUPTIONS},
                                                 labels_subset, n_classes),
        "cost": lambda: metrics.cost(forward_s, stored.n_test, int(subset.shape[0]), "cpu", 1),
        "limited_data": lambda: metrics.limited_data(stored.fraction_probs, labels, n_classes),
        "spec_sensitivity": lambda: metrics.spec_sensitivity(template_probs, labels_subset, n_classes),
        "subgroup": lambda: metrics.subgroup(clean_predictions, labels, n_classes),
        "uncertainty": lambda: metrics.uncertainty(probs, labels),
    }
    seconds = {name: median_seconds(function, args.repeats) for name, function in dimensions.items()}
    meta = metrics.EvaluationMeta.from_recorded(result.evaluation)
    build_s = median_seconds(lambda: metrics.build_evaluation(meta, stored, labels), args.repeats)
    audit_s = median_seconds(lambda: metrics.build_evaluation(
        meta, metrics.StoredPredictions.from_npz_bytes(result.predictions_npz), labels), args.repeats)
    nine_s = sum(seconds.values())
    report = {
        "model": args.model, "task": args.task, "n_test": stored.n_test, "n_cases": int(subset.shape[0]),
        "forward_cases": result.evaluation["dimensions"]["cost"]["cases"], "forward_s": forward_s,
        "dimension_s": seconds, "nine_dimensions_s": nine_s, "build_evaluation_s": build_s,
        "audit_load_and_build_s": audit_s, "ratio_nine_to_forward": nine_s / forward_s,
        "ratio_build_to_forward": build_s / forward_s, "stand_in_templates": stand_in_templates,
        "train_s": result.timings["train_s"], "perturb_s": result.timings["perturb_s"],
        "evaluate_wall_s": evaluate_wall_s, "ratio_evaluate_to_budget": evaluate_wall_s / WALL_BUDGET_S,
        "balanced_accuracy": result.evaluation["dimensions"]["accuracy"]["balanced_accuracy"],
    }
    if args.json:
        print(json.dumps(report, indent=1))
        return
    table = Table(title=f"MedEval-1 metrics vs forward passes: {args.model} on synthetic {args.task}, "
                        f"n = {stored.n_test} ({report['forward_cases']} forward cases)")
    table.add_column("what")
    table.add_column("seconds", justify="right")
    table.add_column("% of forward", justify="right")
    for name, value in seconds.items():
        label = f"{name} (stand-in templates)" if name == "spec_sensitivity" and stand_in_templates else name
        table.add_row(label, f"{value:.4f}", f"{100 * value / forward_s:.2f}")
    table.add_row("all nine dimensions", f"{nine_s:.4f}", f"{100 * nine_s / forward_s:.2f}", style="bold")
    table.add_row("build_evaluation (as recorded)", f"{build_s:.4f}", f"{100 * build_s / forward_s:.2f}")
    table.add_row("audit: load blob + build", f"{audit_s:.4f}", f"{100 * audit_s / forward_s:.2f}")
    table.add_row("model forward passes (baseline)", f"{forward_s:.4f}", "100.00", style="bold")
    console = Console()
    console.print(table)
    verdict = "meets" if build_s / forward_s < 0.10 else "MISSES"
    console.print(f"metrics add {100 * build_s / forward_s:.2f}% to the forward time: {verdict} the < 10% target "
                  f"(training {report['train_s']:.1f} s and perturbing {report['perturb_s']:.1f} s not counted)")
    console.print(f"end-to-end evaluation of {args.model} (training included): {evaluate_wall_s:.1f} s, "
                  f"{evaluate_wall_s / WALL_BUDGET_S:.2f} of the {WALL_BUDGET_S:.0f} s budget on 2 cores; "
                  f"balanced accuracy {report['balanced_accuracy']:.3f}")


if __name__ == "__main__":
    main()
