"""One MedEval-1 evaluation: a prepared model on one task -> stored predictions -> the evaluation object.

Passes, in order (each a step of the progress callback):
1. trained models: fit on 1% and 10% of the capped training split (nested seeded subsets) and predict the
   test set; then fit on 100% (that fit is the model evaluated below, so its clean probabilities are the 100%
   fraction). Zero-shot models build their prompts instead.
2. clean: the full test set. Prompt models compute every template in the same pass when the robustness
   subset is the whole test set.
3. subset (only when the subset is smaller than the test set, as the spec's case count has it): prompt models
   compute the six templates on it; other models predict it again, which checks that inference repeats.
4. perturbed: 12 perturbations x 3 severities on the subset (default prompt), predicted labels kept.
``seconds_total`` times the inference of passes 2-4 only (not training, not making the perturbed images),
which is what the cost dimension's case count describes. The evaluation is computed from the stored
predictions as they read back from their npz bytes, exactly as the audit will.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any

import numpy as np
from numpy.typing import NDArray

from harness import perturbations
from harness.data import TaskData
from harness.fingerprint import code_fingerprint
from harness.metrics import (
    PERTURBATIONS,
    SEVERITIES,
    TEMPLATE_TEXTS,
    TRAINING_FRACTIONS,
    EvaluationMeta,
    StoredPredictions,
)
from harness.metrics.registry import BASE_SPEC_VERSION, metrics_for
from harness.metrics.spec import DOMAIN, PUBLIC_SPLIT_ORIGIN
from harness.models.base import Model, ModelInfo, Probs
from harness.tasks import TaskSpec
from keys.errors import HeldoutError, UsageError
from seals.timeutil import Clock, system_clock

#: progress(description of the step now running, steps done, steps in all)
ProgressCallback = Callable[[str, int, int], None]


@dataclass(frozen=True)
class EvaluationResult:
    """What one evaluation produced: the evaluation object, its stored predictions (and their exact npz
    bytes, the blob to store), the test labels it was scored against, and the model's identity."""

    evaluation: dict[str, Any]
    predictions: StoredPredictions
    predictions_npz: bytes
    labels: NDArray[np.int64]
    model: ModelInfo
    timings: dict[str, float] = field(default_factory=dict)  # seconds per phase (not part of the evaluation)


def _noop(description: str, done: int, total: int) -> None:
    return None


def _argmax(probs: Probs) -> NDArray[np.int64]:
    return np.argmax(probs, axis=1).astype(np.int64)


def fraction_subsets(n_train: int, seed: int) -> list[NDArray[np.int64]]:
    """Nested seeded subsets of the (capped) training split for each training fraction (the last is all)."""
    order = np.random.default_rng([seed, 2]).permutation(n_train)
    return [np.sort(order[: max(1, math.ceil(fraction * n_train))]).astype(np.int64)
            for fraction in TRAINING_FRACTIONS]


def evaluate(model: Model, task_data: TaskData, task_spec: TaskSpec, *, seed: int,
             split_origin: str = PUBLIC_SPLIT_ORIGIN, device: str = "cpu", progress: ProgressCallback | None = None,
             clock: Clock = system_clock, timer: Callable[[], float] = time.perf_counter,
             spec_version: str = BASE_SPEC_VERSION) -> EvaluationResult:
    """Evaluate ``model`` on ``task_data`` to MedEval-1 ``spec_version`` (see the module docstring for the
    passes); the version's metrics choose the robustness subset and build the evaluation object."""
    try:
        metrics = metrics_for(spec_version)
    except HeldoutError as exc:
        raise UsageError(exc.message, **exc.evidence) from None
    if task_data.task != task_spec.task:
        raise UsageError(f"task data is for {task_data.task}, the task spec for {task_spec.task}",
                         expected=task_spec.task, found=task_data.task)
    report = progress or _noop
    started = timer()
    model.use_device(device)
    labels = task_data.test_labels.astype(np.int64)
    test_images = task_data.test_images
    n_test = int(labels.shape[0])
    subset = metrics.subset_indices(n_test, seed)
    n_cases = int(subset.shape[0])
    strict_subset = n_cases < n_test
    total = (len(TRAINING_FRACTIONS) if model.trains else 1) + 1 + int(strict_subset) + len(PERTURBATIONS) * SEVERITIES
    done = 0
    timings = {"train_s": 0.0, "inference_s": 0.0, "perturb_s": 0.0}

    def step(description: str) -> None:
        nonlocal done
        report(description, done, total)

    def finished() -> None:
        nonlocal done
        done += 1
        report("", done, total)

    # 1. training fractions, or prompts
    fraction_probs: list[Probs] = []
    if model.trains:
        train_images, train_labels = task_data.capped_train(task_spec.size, seed)
        subsets = fraction_subsets(int(train_labels.shape[0]), seed)
        for fraction, index in zip(TRAINING_FRACTIONS, subsets, strict=True):
            step(f"train on {fraction:.0%} ({index.shape[0]} images)")
            mark = timer()
            model.prepare(task_spec, train_images[index], train_labels[index], seed=seed)
            timings["train_s"] += timer() - mark
            if fraction < 1.0:
                fraction_probs.append(model.predict_proba(test_images))
            finished()
    else:
        step("prepare prompts")
        model.prepare(task_spec, task_data.train_images[:0], task_data.train_labels[:0], seed=seed)
        finished()

    inference = 0.0
    notes: list[str] = [n for n in [model.notes()] if n]

    # 2. clean pass (and every template at once when the subset is the whole test set)
    step(f"clean pass ({n_test} images)")
    template_probs: Probs | None = None
    mark = timer()
    if model.uses_prompts and not strict_subset:
        template_probs = model.predict_proba_templates(test_images, TEMPLATE_TEXTS)
        clean_probs = template_probs[0]
    else:
        clean_probs = model.predict_proba(test_images)
    inference += timer() - mark
    finished()

    # 3. subset pass
    subset_images = test_images[subset]
    if strict_subset:
        step(f"subset pass ({n_cases} images)")
        mark = timer()
        if model.uses_prompts:
            template_probs = model.predict_proba_templates(subset_images, TEMPLATE_TEXTS)
            repeat = template_probs[0]
        else:
            repeat = model.predict_proba(subset_images)
        inference += timer() - mark
        changed = int((_argmax(repeat) != _argmax(clean_probs[subset])).sum())
        if changed:
            notes.append(f"inference did not repeat exactly: {changed} of {n_cases} subset predictions changed "
                         "on a second clean pass")
        finished()

    # 4. perturbed passes
    perturbed: dict[str, NDArray[np.int64]] = {}
    for name in PERTURBATIONS:
        rows = []
        for severity in range(1, SEVERITIES + 1):
            step(f"{name} severity {severity}")
            mark = timer()
            images = perturbations.apply(subset_images, name, severity, seed)
            timings["perturb_s"] += timer() - mark
            mark = timer()
            rows.append(_argmax(model.predict_proba(images)))
            inference += timer() - mark
            finished()
        perturbed[name] = np.stack(rows)
    timings["inference_s"] = inference

    if model.trains:
        fraction_probs.append(clean_probs)
    predictions = StoredPredictions(
        clean_probs=clean_probs, perturbed_labels=perturbed, template_probs=template_probs,
        fraction_probs=np.stack(fraction_probs) if model.trains else None)
    blob = predictions.to_npz_bytes()
    stored = StoredPredictions.from_npz_bytes(blob)
    info = model.info()
    meta = EvaluationMeta(
        code_fingerprint=code_fingerprint(), device=device, domain=DOMAIN, kind=task_spec.kind,
        limitations={"n_train_available": task_data.n_train, "notes": "; ".join(notes) or None,
                     "train_capped": task_data.n_train > task_spec.train_cap},
        modality=task_spec.modality, n_classes=task_spec.n_classes, n_test=n_test,
        runtime_s=timer() - started, seed=seed, split_origin=split_origin, task=task_spec.task,
        task_name=task_spec.task_name, timestamp=clock().astimezone(UTC).replace(microsecond=0).isoformat(),
        seconds_total=inference, parameters=info.parameters,
        numpy_version=metrics.numpy_version_for_new_evaluation())
    mark = timer()
    evaluation = metrics.build_evaluation(meta, stored, labels)
    timings["metrics_s"] = timer() - mark
    timings["runtime_s"] = timer() - started
    return EvaluationResult(evaluation=evaluation, predictions=stored, predictions_npz=blob, labels=labels,
                            model=info, timings=timings)
