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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.metrics import evaluation_bytes
from harness.metrics.dimensions import n_cases_for
from harness.provenance import check_known_task, n_classes
from heldout.entries import BundleEntry, records
from heldout.generations import (
    WITHHOLDING_MODES,
    GenerationState,
    Transcript,
    charge_bits,
    check_budget,
    generation_cases,
    load_generations,
    noise_path,
    release_record,
    released_score,
    transcripts,
    withheld_blobs_path,
    worst_case_bits,
)
from heldout.generations.budget import full_evaluation_bits
from heldout.generations.ledgers import generations_lock
from heldout.generations.release import THRESHOLDOUT
from heldout.specs import (
    BundleRun,
    Supersession,
    bundle_run,
    current_spec_version,
    load_supersessions,
    require_not_superseded,
)
from heldout.staging import staged_operation
from heldout.store import Store
from heldout.witness.operator import attested_time
from keys import ExpiredError, MalformedInput, Signer, UsageError
from keys.files import read_private_file
from ledger import BlobStore, Ledger
from seals import format_utc, parse_json_object, sha256_hex

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
    """One appended bundle: its ledger index, the entry, and the evaluation it carries. On a generation that
    withholds (ladder, Thresholdout) the evaluation stays private: :meth:`to_json` and :func:`bundle_rows` give
    only the entry, whose ``release`` member is the public record."""

    index: int
    entry: dict[str, Any]
    evaluation: dict[str, Any]
    withheld: bool = False

    def to_json(self) -> dict[str, Any]:
        if self.withheld:
            return {"index": self.index, "entry": self.entry, "release": self.entry.get("release"),
                    "evaluation": None, "withheld": "the evaluation and predictions stay private until the "
                                                    "generation is retired; the entry commits to their SHA-256"}
        return {"index": self.index, "entry": self.entry, "evaluation": self.evaluation}


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
    supersessions = load_supersessions(ledger.entries())
    spec_version = current_spec_version(supersessions, now)
    for task in request.tasks:
        check_known_task(task)
    require_current_by_witnesses(attested_time(store, ledger), state, supersessions, spec_version)
    unknown = [t for t in request.tasks if t not in state.tasks]
    if unknown:
        raise UsageError(f"{request.generation} has no task {unknown[0]!r}", field="tasks", found=unknown[0],
                         expected=sorted(state.tasks))
    if len(set(request.tasks)) != len(request.tasks):
        raise UsageError("each task is evaluated once per command", field="tasks", found=list(request.tasks))
    for task in request.tasks:  # admission up front, on what is public: nothing runs that could not be paid
        check_budget(generations, request.generation, admission_bits(ledger, state, task, n_classes(task)), now)
        if state.release_mode == THRESHOLDOUT:
            public_estimate(ledger, blobs, request.model_id, task)
    finished: list[tuple[dict[str, Any], dict[str, Any], bytes]] = []
    for task in request.tasks:
        split_origin = state.split_origin(task)
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


def require_current_by_witnesses(witnessed: datetime | None, state: GenerationState,
                                 supersessions: Mapping[str, Supersession], spec_version: str) -> None:
    """What is in force judged by the witnessed time (``attested_time``), not the operator's clock: once
    witnesses have cosigned a checkpoint at or after the generation's expiry, nothing more is evaluated on it
    (exit 3), nor under a spec version superseded by then (exit 4), whatever ``now`` says."""
    if witnessed is None:
        return
    if witnessed >= state.expiry:
        raise ExpiredError(f"generation {state.name} expired at {format_utc(state.expiry)}: witnesses attest the "
                           f"ledger reached {format_utc(witnessed)} (the local clock cannot undo that)",
                           generation=state.name, expected=f"before {format_utc(state.expiry)}",
                           found=f"witnessed {format_utc(witnessed)}")
    require_not_superseded(supersessions, spec_version, witnessed)


def public_estimate(ledger: Ledger, blobs: BlobStore, model_id: str, task: str,
                    run: Mapping[str, Any] | None = None) -> tuple[int, float]:
    """Thresholdout's public estimate of a model's score on a task: its latest bundle on the ``public``
    generation (whose evaluations are public), as (entry index, accuracy score); with ``run`` (the bundle entry
    the estimate is for), that public bundle must be the same run of the model (``BundleEntry.RUN_MEMBERS``)."""
    found: BundleEntry | None = None
    for bundle in records(ledger.entries(), BundleEntry):
        if bundle.generation == "public" and bundle.model_id == model_id and bundle.task == task:
            found = bundle
    if found is None:
        raise UsageError(f"Thresholdout needs a public estimate: evaluate {model_id} on the public generation "
                         f"({task}) first", field="public_estimate", found=model_id)
    index = int(found.index or 0)
    other_run = found.run_difference(run) if run is not None else None
    if other_run is not None:
        member, cited, own = other_run
        raise UsageError(f"the latest public run of {model_id} on {task} (entry {index}) is another run of the model "
                         f"({member} {cited!r}, this one {own!r}): evaluate this run on the public generation first",
                         field=f"public_estimate.{member}", expected=own, found=cited)
    score = released_score(parse_json_object(blobs.get(found.evaluation_sha256),
                                             what=f"evaluation of entry {index}"))
    if score is None:
        raise UsageError(f"the public bundle {index} of {model_id} has no accuracy score", index=index)
    return index, score


def admission_bits(ledger: Ledger, state: GenerationState, task: str, classes: int) -> float:
    """What one more bundle on (generation, task) can cost at most, known before the model runs (admission
    must not depend on the labels): the worst case of its answer for ladder and Thresholdout, the smallest
    full evaluation's charge for full release (the exact charge is checked again once computed)."""
    if state.release_mode in WITHHOLDING_MODES and state.release_step is not None:
        transcript = transcripts(ledger.entries(state.seal_index), state.name).get(task, Transcript())
        return worst_case_bits(state.release_mode, transcript, state.release_step)
    if state.budget_bits is None:
        return 0.0
    return full_evaluation_bits(state.tasks[task], classes)


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
    never reach ``blobs/`` unlogged). On a ladder or Thresholdout generation each entry also carries the
    ``release`` record (the only public number) and its blobs go to ``private/withheld/`` until the generation
    is retired. Takes the generations lock."""
    with generations_lock(ledger, store):
        blobs = BlobStore(store.blobs)
        generations = load_generations(ledger, now, blobs=blobs)
        supersessions = load_supersessions(ledger.entries())
        current = current_spec_version(supersessions, now)
        witnessed = attested_time(store, ledger)
        charged: dict[str, float] = {}
        released_in_batch: set[tuple[str, str]] = set()
        # A withholding generation's entries since its seal and its per-task transcripts, read once per batch:
        # the batch's own answers are on other tasks (one bundle per task), so they change neither.
        since_seal: dict[str, dict[str, Transcript]] = {}
        entries: list[dict[str, Any]] = []
        withheld: list[bool] = []
        logged_runs = _logged_runs(ledger, [generations.get(str(entry["generation"])) for entry, _, _ in bundles],
                                   supersessions)
        for position, (entry, evaluation, predictions_npz) in enumerate(bundles):
            name = str(entry["generation"])
            state = generations.get(name)
            if state is None:
                raise UsageError(f"no generation {name!r} is sealed on this ledger", field="generation",
                                 found=name)
            require_current_by_witnesses(witnessed, state, supersessions, str(evaluation.get("spec_version")))
            require_not_superseded(supersessions, str(evaluation.get("spec_version")), now)
            if evaluation.get("spec_version") != current or entry.get("spec_version") != current:
                said = [f"its {what} says {value!r}" for what, value in (
                    ("evaluation", evaluation.get("spec_version")), ("entry", entry.get("spec_version")))
                    if value != current]
                raise UsageError(f"new evaluations use the current spec, {current}; {' and '.join(said)}",
                                 field="spec_version", expected=current,
                                 found=evaluation.get("spec_version") if evaluation.get("spec_version") != current
                                 else entry.get("spec_version"))
            if current in BundleEntry.SPEC_SEEDS and "seed" not in entry:  # (every verifier names it: rule 10)
                raise MalformedInput(f"bundle {position}: under {current} a bundle entry states its evaluation's "
                                     "seed", field="seed", expected=BundleEntry.SPEC_SEEDS[current], found=None,
                                     position=position)
            for member, data in (("evaluation_sha256", evaluation_bytes(evaluation)),
                                 ("predictions_sha256", predictions_npz)):
                if entry.get(member) != sha256_hex(data):  # (it would log a blob nothing stores)
                    raise MalformedInput(f"bundle {position}: the entry's {member} is not the SHA-256 of the "
                                         f"{member.split('_')[0]} given with it", field=member,
                                         expected=sha256_hex(data), found=entry.get(member), position=position)
            logged = BundleEntry.from_entry(entry, index=ledger.size + position)
            assert isinstance(logged, BundleEntry)
            disagreement = logged.evaluation_disagreement(evaluation, cases_for=n_cases_for, sealed=state.created)
            if disagreement is not None:  # every audit would report it: nothing is logged
                raise MalformedInput(f"bundle {position}: {disagreement.reason} ({disagreement.member} "
                                     f"{disagreement.found!r}, where {disagreement.expected!r} is expected)",
                                     field=disagreement.member, expected=disagreement.expected,
                                     found=disagreement.found, position=position)
            run = bundle_run(logged, supersessions)  # (as every verifier keys it: the spec in force at its date)
            if run in logged_runs:  # the same stored predictions logged again would become the "latest" run
                where = (f"entry {logged_runs[run]}" if logged_runs[run] < ledger.size
                         else f"bundle {logged_runs[run] - ledger.size} of this batch")
                raise UsageError(f"bundle {position}: these predictions of {run[0]} on {name}/{run[2]} are already "
                                 f"logged under {run[4]} ({where}): a run is logged once (the "
                                 "latest bundle is what a passport cites; logging an earlier run again would pick "
                                 "it)", field="predictions_sha256", found=run[3], index=logged_runs[run],
                                 position=position)
            logged_runs[run] = ledger.size + position
            entry = dict(entry)
            if state.membership != "public":
                # An unsalted hash of the sealed labels is a public statement about them: on a small task set
                # anyone could recover the labels by enumeration before the reveal. The audit needs no such
                # hash (it re-derives every number from the labels), so a sealed generation's entry carries none.
                entry.pop("labels_hash", None)
            if state.withholding and state.release_step is not None:
                task = str(entry["task"])
                if (name, task) in released_in_batch:  # each answer depends on the logged one before it
                    raise UsageError(f"one bundle per task of {name} in a batch: its release depends on the "
                                     "previous answer", field="task", found=task)
                released_in_batch.add((name, task))
                if name not in since_seal:
                    since_seal[name] = transcripts(ledger.entries(state.seal_index), name)
                transcript = since_seal[name].get(task, Transcript())
                public_index = None
                extra: dict[str, Any] = {}
                if state.release_mode == THRESHOLDOUT:
                    public_index, estimate = public_estimate(ledger, blobs, str(entry["model_id"]), task, entry)
                    extra = {"public_estimate": estimate, "task": task,
                             "secret": read_private_file(noise_path(store, ledger.ledger_id, name, state.set_hash)),
                             "threshold": state.release.get("threshold"), "sigma": state.release.get("sigma")}
                record = release_record(state.release_mode, step=state.release_step, transcript=transcript,
                                        score=released_score(evaluation), **extra)
                if public_index is not None:
                    record["public_bundle"] = public_index
                entry["release"] = record
                bits = float(record["bits"])
                withheld.append(True)
            else:
                bits = charge_bits(evaluation)
                withheld.append(False)
            entry["leakage_bits"] = round(bits, 6)
            check_budget(generations, name, charged.get(name, 0.0) + bits, now)  # the batch's charges together
            charged[name] = charged.get(name, 0.0) + bits
            entries.append(entry)
        private = BlobStore(withheld_blobs_path(store, ledger.ledger_id))
        with staged_operation(store, ledger, "evaluate") as staged:
            for entry, (_, evaluation, predictions_npz), hidden in zip(entries, bundles, withheld, strict=True):
                task = str(entry["task"])
                for label, data in ((f"evaluation-{task}", evaluation_bytes(evaluation)),
                                    (f"predictions-{task}", predictions_npz)):
                    if hidden:
                        staged.private_file(private.path(sha256_hex(data)), data, label=label)
                    else:
                        staged.blob(data, label=label)
            # The Thresholdout noise is drawn for these very indices: refuse rather than log them elsewhere.
            indices = staged.commit(entries, signer=signer, now=now, expected_size=ledger.size)
    return [BundleOutcome(index=index, entry=entry, evaluation=evaluation, withheld=hidden)
            for index, entry, (_, evaluation, _), hidden in zip(indices, entries, bundles, withheld, strict=True)]



def _logged_runs(ledger: Ledger, states: Sequence[GenerationState | None],
                 supersessions: Mapping[str, Supersession]) -> dict[BundleRun, int]:
    """The run (:func:`bundle_run`, as every verifier keys it) of every bundle logged on the generations of
    ``states``, with its index (one pass from the earliest of their seals). The same predictions evaluated under
    a new spec version are a new evaluation (what a supersession asks for)."""
    names = {state.name: state for state in states if state is not None}
    if not names:
        return {}
    start = min(state.seal_index for state in names.values())
    return {bundle_run(bundle, supersessions): int(bundle.index or 0)
            for bundle in records(ledger.entries(start), BundleEntry) if bundle.generation in names}


def bundle_rows(outcomes: Sequence[BundleOutcome]) -> list[dict[str, Any]]:
    """The results table: one row per bundle, the numbers people compare (only the released value when the
    generation withholds)."""
    rows = []
    for outcome in outcomes:
        if outcome.withheld:
            release = outcome.entry.get("release") or {}
            rows.append({"index": outcome.index, "task": outcome.entry["task"], "n_test": outcome.entry["n_test"],
                         "released": release.get("value"), "release_mode": release.get("mode"),
                         "leakage_bits": outcome.entry["leakage_bits"], "created_utc": outcome.entry["created_utc"]})
            continue
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
