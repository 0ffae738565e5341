"""``heldout evaluate``: run a model on a generation's cases, store its predictions, append a ``bundle``.

The only part of the core that imports torch, and only when called: the harness's runner and models are
imported inside :func:`evaluate_on_generation`, so every other command and the audit stay torch-free.

For each task: the generation's cases (private pool or the official test split, checked against the seal),
the task's training split from the data root (for trained models), one MedEval-1 evaluation, its leakage
charge checked against the generation's budget (refused, exit 4, before anything is written), then the two
blobs (evaluation JSON, predictions npz) and the ``bundle`` entry carrying their hashes and the charge.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.metrics import evaluation_bytes, split_origin_for
from heldout.generations import (
    charge_bits,
    check_budget,
    generation_cases,
    ladder_charge_bits,
    ladder_release,
    load_generations,
)
from heldout.specs import current_spec_version, load_supersessions, require_not_superseded
from heldout.store import Store
from keys import Signer, UsageError
from ledger import BlobStore, Ledger

#: progress(task, step description, steps done, steps in all)
EvaluationProgress = Callable[[str, str, int, int], None]


@dataclass(frozen=True)
class EvaluationRequest:
    model_id: str
    generation: str
    tasks: tuple[str, ...]
    seed: int
    data_root: Path | None = None
    weights: str | None = None
    arch: str | None = None
    device: str = "cpu"


@dataclass(frozen=True)
class BundleOutcome:
    """One appended bundle: its ledger index, the entry, and the evaluation it carries."""

    index: int
    entry: dict[str, Any]
    evaluation: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "entry": self.entry, "evaluation": self.evaluation}


def _best_released(ledger: Ledger, generation: str, task: str) -> float | None:
    best: float | None = None
    for _, entry in ledger.entries():
        if entry.get("type") == "bundle" and entry.get("generation") == generation and entry.get("task") == task:
            released = entry.get("ladder_released")
            if isinstance(released, (int, float)) and (best is None or released > best):
                best = float(released)
    return best


def evaluate_on_generation(store: Store, ledger: Ledger, signer: Signer, request: EvaluationRequest, *,
                           now: datetime, progress: EvaluationProgress | None = None) -> list[BundleOutcome]:
    """Evaluate ``request.model_id`` on each task of ``request.generation`` and append one bundle per task."""
    from harness.bundle import bundle_entry
    from harness.data import load_task
    from harness.models import create_model
    from harness.run import evaluate
    from harness.tasks import task_spec

    blobs = BlobStore(store.blobs)
    generations = load_generations(ledger, now, blobs=blobs)
    state = generations.get(request.generation)
    if state is None:
        raise UsageError(f"no generation {request.generation!r} is sealed on this ledger", field="generation",
                         found=request.generation, expected=sorted(generations))
    state.require_current(now)
    spec_version = current_spec_version(load_supersessions(ledger.entries()), now)
    unknown = [t for t in request.tasks if t not in state.tasks]
    if unknown:
        raise UsageError(f"{request.generation} has no task {unknown[0]!r}", field="tasks", found=unknown[0],
                         expected=sorted(state.tasks))
    split_origin = split_origin_for(request.generation, public=state.membership == "public")
    outcomes: list[BundleOutcome] = []
    for task in request.tasks:
        spec = task_spec(task)
        data = load_task(spec, request.data_root)
        cases = generation_cases(store, request.generation, task, ledger=ledger, data_root=request.data_root)
        task_data = replace(data, test_images=cases.images, test_labels=cases.labels,
                            source=f"{request.generation} cases of {task} ({len(cases.case_ids)})")
        model = create_model(request.model_id, weights=request.weights, arch=request.arch, device=request.device)

        def step(description: str, done: int, total: int, _task: str = task) -> None:
            if progress is not None:
                progress(_task, description, done, total)

        result = evaluate(model, task_data, spec, seed=request.seed, split_origin=split_origin,
                          device=request.device, progress=step, clock=lambda: now, spec_version=spec_version)
        entry = bundle_entry(result, generation=request.generation, created_utc=now)
        outcomes.append(record_bundle(ledger, signer, blobs, entry, result.evaluation, result.predictions_npz,
                                      now=now))
    return outcomes


def record_bundle(ledger: Ledger, signer: Signer, blobs: BlobStore, entry: dict[str, Any],
                  evaluation: dict[str, Any], predictions_npz: bytes, *, now: datetime) -> BundleOutcome:
    """Charge a finished evaluation to its generation's budget and log it: refused (exit 4) before anything
    is written when the charge would exceed the budget; otherwise both blobs are stored, then the entry
    (carrying ``leakage_bits``) is appended. Callers hold the generations lock."""
    generations = load_generations(ledger, now, blobs=blobs)
    name = str(entry["generation"])
    state = generations.get(name)
    if state is None:
        raise UsageError(f"no generation {name!r} is sealed on this ledger", field="generation", found=name)
    supersessions = load_supersessions(ledger.entries())
    require_not_superseded(supersessions, str(evaluation.get("spec_version")), now)
    current = current_spec_version(supersessions, now)
    if evaluation.get("spec_version") != current or entry.get("spec_version") != current:
        raise UsageError(f"new evaluations use the current spec, {current}; this one is "
                         f"{evaluation.get('spec_version')!r}", field="spec_version", expected=current,
                         found=evaluation.get("spec_version"))
    entry = dict(entry)
    if state.release_mode == "ladder" and state.ladder_step is not None:
        index_score = evaluation["composite"]["index"]
        released = ladder_release(index_score, _best_released(ledger, name, str(entry["task"])),
                                  state.ladder_step) if index_score is not None else None
        bits = ladder_charge_bits(released is not None, state.ladder_step)
        entry["ladder_released"] = released
    else:
        bits = charge_bits(evaluation)
    entry["leakage_bits"] = round(bits, 6)
    check_budget(generations, name, bits, now)
    blobs.put(evaluation_bytes(evaluation))
    blobs.put(predictions_npz)
    index = ledger.append(entry, signer=signer, now=now)
    return BundleOutcome(index=index, entry=entry, evaluation=evaluation)


def bundle_rows(outcomes: Sequence[BundleOutcome]) -> list[dict[str, Any]]:
    """The results table: one row per bundle, the numbers people compare."""
    rows = []
    for outcome in outcomes:
        evaluation = outcome.evaluation
        dims = evaluation["dimensions"]
        acc = dims.get("accuracy") or {}
        rows.append({
            "index": outcome.index,
            "task": evaluation["task"],
            "n_test": evaluation["n_test"],
            "balanced_accuracy": acc.get("balanced_accuracy"),
            "auc": acc.get("auc"),
            "composite": evaluation["composite"]["index"],
            "coverage": evaluation["composite"]["coverage"],
            "leakage_bits": outcome.entry["leakage_bits"],
            "created_utc": outcome.entry["created_utc"],
        })
    return rows
