"""``heldout evaluate``: run a model on a generation's cases, store its predictions, append a ``bundle``.

The only part of the core that imports torch, and only when called: the harness's runner and models are
imported inside :func:`evaluate_on_generation`, so every other command and the audit stay torch-free.

For each task: the generation's cases (private pool or the official test split, checked against the seal),
the task's training split from the data root (for trained models), one MedEval-1 evaluation, its leakage
charge checked against the generation's budget (refused, exit 4, before anything is written), then, for all
tasks at once and all or none, the two blobs per task (evaluation JSON, predictions npz) staged, the ``bundle``
entries carrying their hashes and charges appended in one batch, and the blobs published (``heldout.staging``).
The model runs without the generations lock; the charges are checked and logged under it.
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
from heldout.generations.ledgers import generations_lock
from heldout.specs import current_spec_version, load_supersessions, require_not_superseded
from heldout.staging import staged_operation
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
    finished: list[tuple[dict[str, Any], dict[str, Any], bytes]] = []
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
        finished.append((entry, result.evaluation, result.predictions_npz))
    return record_bundles(store, ledger, signer, finished, now=now)


def record_bundle(store: Store, ledger: Ledger, signer: Signer, entry: dict[str, Any], evaluation: dict[str, Any],
                  predictions_npz: bytes, *, now: datetime) -> BundleOutcome:
    """:func:`record_bundles` for one bundle."""
    return record_bundles(store, ledger, signer, [(entry, evaluation, predictions_npz)], now=now)[0]


def record_bundles(store: Store, ledger: Ledger, signer: Signer,
                   bundles: Sequence[tuple[dict[str, Any], dict[str, Any], bytes]], *,
                   now: datetime) -> list[BundleOutcome]:
    """Charge finished evaluations ``(entry, evaluation, predictions npz)`` to their generation's budget and
    log them, all or none: refused (exit 4) before anything is written when the charges together would
    exceed the budget; otherwise the blobs are staged, the entries (each carrying ``leakage_bits``) appended
    in one batch, and only then the blobs published (``heldout.staging``: predictions on a sealed generation
    never reach ``blobs/`` unlogged). Takes the generations lock."""
    with generations_lock(ledger, store):
        generations = load_generations(ledger, now, blobs=BlobStore(store.blobs))
        supersessions = load_supersessions(ledger.entries())
        current = current_spec_version(supersessions, now)
        charged: dict[str, float] = {}
        best: dict[tuple[str, str], float | None] = {}
        entries: list[dict[str, Any]] = []
        for entry, evaluation, _ in bundles:
            name = str(entry["generation"])
            state = generations.get(name)
            if state is None:
                raise UsageError(f"no generation {name!r} is sealed on this ledger", field="generation",
                                 found=name)
            require_not_superseded(supersessions, str(evaluation.get("spec_version")), now)
            if evaluation.get("spec_version") != current or entry.get("spec_version") != current:
                raise UsageError(f"new evaluations use the current spec, {current}; this one is "
                                 f"{evaluation.get('spec_version')!r}", field="spec_version", expected=current,
                                 found=evaluation.get("spec_version"))
            entry = dict(entry)
            if state.release_mode == "ladder" and state.ladder_step is not None:
                index_score = evaluation["composite"]["index"]
                key = (name, str(entry["task"]))
                if key not in best:
                    best[key] = _best_released(ledger, name, key[1])
                released = ladder_release(index_score, best[key], state.ladder_step) \
                    if index_score is not None else None
                if released is not None:
                    best[key] = released
                bits = ladder_charge_bits(released is not None, state.ladder_step)
                entry["ladder_released"] = released
            else:
                bits = charge_bits(evaluation)
            entry["leakage_bits"] = round(bits, 6)
            check_budget(generations, name, charged.get(name, 0.0) + bits, now)  # the batch's charges together
            charged[name] = charged.get(name, 0.0) + bits
            entries.append(entry)
        with staged_operation(store, ledger, "evaluate") as staged:
            for entry, (_, evaluation, predictions_npz) in zip(entries, bundles, strict=True):
                task = str(entry["task"])
                staged.blob(evaluation_bytes(evaluation), label=f"evaluation-{task}")
                staged.blob(predictions_npz, label=f"predictions-{task}")
            indices = staged.commit(entries, signer=signer, now=now)
    return [BundleOutcome(index=index, entry=entry, evaluation=evaluation)
            for index, entry, (_, evaluation, _) in zip(indices, entries, bundles, strict=True)]


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
