"""A store with sealed generations and bundles, built without torch: predictions are synthetic (random
probabilities with some skill), turned into evaluations by the same ``harness.metrics.build_evaluation`` the
harness uses, and logged by the same ``heldout.evaluation.record_bundle`` the evaluate command uses.
Used by the audit, passport and tamper tests and by ``bench/audit_bench.py``."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from harness.bundle import bundle_entry
from harness.metrics import (
    PERTURBATIONS,
    SEVERITIES,
    EvaluationMeta,
    StoredPredictions,
    build_evaluation,
    evaluation_bytes,
    split_origin_for,
    subset_indices,
)
from harness.models.base import ModelInfo
from harness.run import EvaluationResult
from heldout.evaluation import record_bundle
from heldout.generations import GenerationState, generation_cases, ledger_signer, load_generations, open_ledger
from heldout.generations.access import withheld_blobs_path
from heldout.store import Store
from ledger import BlobStore, Ledger
from seals import format_utc, parse_utc
from tests.generations_support import cli, init_store, write_npz

TASK = "bloodmnist"
N_CLASSES = 8
NOW = "2026-09-01T00:00:00Z"
NOW_ENV = "HELDOUT_NOW"


@dataclass(frozen=True)
class AuditFixture:
    store: Path
    ledger_id: str
    data_root: Path
    key_b64: str


def synthetic_result(model_id: str, labels: np.ndarray, *, generation: str, seed: int, skill: float,
                     now: datetime, prompts: bool = False, split_origin: str | None = None,
                     edit: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> EvaluationResult:
    """An evaluation of a made-up model whose clean probabilities put ``skill`` extra mass on the truth."""
    rng = np.random.default_rng(seed)
    n = labels.shape[0]

    def probs(count: int, truth: np.ndarray) -> np.ndarray:
        raw = rng.dirichlet(np.ones(N_CLASSES), size=count)
        raw[np.arange(count), truth] += skill
        return raw / raw.sum(axis=1, keepdims=True)

    subset = subset_indices(n, seed)
    clean = probs(n, labels)
    clean_pred = clean[subset].argmax(axis=1)
    perturbed = {}
    for name in PERTURBATIONS:
        rows = []
        for severity in range(SEVERITIES):
            keep = rng.random(subset.shape[0]) > 0.15 * (severity + 1)
            rows.append(np.where(keep, clean_pred, rng.integers(0, N_CLASSES, subset.shape[0])))
        perturbed[name] = np.stack(rows)
    templates = np.stack([probs(subset.shape[0], labels[subset]) for _ in range(6)]) if prompts else None
    predictions = StoredPredictions.from_npz_bytes(
        StoredPredictions(clean_probs=clean, perturbed_labels=perturbed, template_probs=templates).to_npz_bytes())
    meta = EvaluationMeta(
        code_fingerprint="000000000000", device="cpu", domain="medicine", kind="image",
        limitations={"n_train_available": None, "notes": None, "train_capped": False}, modality="Microscopy",
        n_classes=N_CLASSES, n_test=n, runtime_s=1.0, seed=seed,
        split_origin=split_origin or split_origin_for(generation, public=generation == "public"), task=TASK,
        task_name="Peripheral blood cells (8-class)", timestamp=format_utc(now), seconds_total=0.5,
        parameters=1000, numpy_version=np.__version__)
    evaluation = build_evaluation(meta, predictions, labels)
    if edit is not None:  # an evaluation as computed elsewhere (another numpy), or forged
        evaluation = edit(evaluation)
    info = ModelInfo(model_id=model_id, model_name=f"synthetic {model_id}", family="synthetic",
                     params="made-up probabilities for tests", parameters=1000, behaviour_version="1.0.0",
                     code_fingerprint="000000000000")
    return EvaluationResult(evaluation=evaluation, predictions=predictions, predictions_npz=predictions.to_npz_bytes(),
                            labels=labels.astype(np.int64), model=info)


def withholding_store(root: Path, *seals: tuple[str, ...], pool_cases: int) -> tuple[Path, Path, str]:
    """A store under ``root`` (``store``, ``data``) with a pool of ``pool_cases`` synthetic cases of ``TASK``, the
    ``public`` generation, and the generations ``seals`` gives as their ``seal`` arguments (ladder, Thresholdout);
    returns the store, the public data root and the ledger id."""
    store, data = root / "store", root / "data"
    with command_clock(NOW):
        ledger_id = init_store(store)
        write_npz(data / f"{TASK}.npz", n_test=60, classes=N_CLASSES, shape=(28, 28, 3), seed=11)
        pool = write_npz(root / "pool" / f"{TASK}.npz", n_test=pool_cases, classes=N_CLASSES, shape=(28, 28, 3),
                         seed=12)
        for args in (("pool", "add", TASK, str(pool)),
                     ("seal", "public", "--tasks", TASK, "--data-root", str(data), "--expires", "2027-06-01"),
                     *seals):
            result = cli(*args, store=store)
            assert result.exit_code == 0, result.output
    return store, data, ledger_id


def add_bundle(store: Path, generation: str, model_id: str, *, seed: int, skill: float = 0.6, at: str = NOW,
               data_root: Path | None = None,
               edit: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> int:
    """Log one synthetic bundle on ``generation``; returns its ledger index."""
    st = Store.open(store)
    now = parse_utc(at)
    with open_ledger(st) as ledger:
        cases = generation_cases(st, generation, TASK, ledger=ledger, data_root=data_root)
        state = load_generations(ledger, now)[generation]
        result = synthetic_result(model_id, np.asarray(cases.labels, dtype=np.int64), generation=generation,
                                  seed=seed, skill=skill, now=now, split_origin=state.split_origin(TASK), edit=edit)
        entry = bundle_entry(result, generation=generation, created_utc=now)
        outcome = record_bundle(st, ledger, ledger_signer(st, ledger), entry, result.evaluation,
                                result.predictions_npz, now=now)
    return outcome.index


def copy_fixture(base: AuditFixture, target: Path) -> AuditFixture:
    """A private copy of ``base``'s store and data at ``target``, for one test to damage or forge in."""
    shutil.copytree(base.store.parent, target, symlinks=True)
    return AuditFixture(store=target / "store", ledger_id=base.ledger_id, data_root=target / "data",
                        key_b64=base.key_b64)


def log_withheld_bundle(store: Path, generation: str, model_id: str, *, seed: int, skill: float,
                        release: Callable[[Ledger, GenerationState], dict[str, Any]], at: str = NOW,
                        edit: Callable[[dict[str, Any]], dict[str, Any]] | None = None, prompts: bool = False,
                        edit_entry: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> int:
    """Log a bundle on a ladder / Thresholdout generation as a dishonest operator would: a real evaluation
    (``edit`` and ``prompts`` as for :func:`synthetic_result`), its blobs withheld as the evaluate command withholds
    them, but the ``release`` record (and its charge) that ``release(ledger, state)`` chooses, and the entry as
    ``edit_entry`` leaves it. Returns its ledger index."""
    st = Store.open(store)
    now = parse_utc(at)
    with open_ledger(st) as ledger:
        state = load_generations(ledger, now)[generation]
        labels = np.asarray(generation_cases(st, generation, TASK, ledger=ledger).labels, dtype=np.int64)
        result = synthetic_result(model_id, labels, generation=generation, seed=seed, skill=skill, now=now,
                                  split_origin=state.split_origin(TASK), edit=edit, prompts=prompts)
        entry = bundle_entry(result, generation=generation, created_utc=now)
        entry["release"] = release(ledger, state)
        entry["leakage_bits"] = entry["release"]["bits"]
        if edit_entry is not None:
            entry = edit_entry(entry)
        withheld = BlobStore(withheld_blobs_path(st, ledger.ledger_id))
        withheld.put(evaluation_bytes(result.evaluation))
        withheld.put(result.predictions_npz)
        return ledger.append(entry, signer=ledger_signer(st, ledger), now=now)


@contextmanager
def command_clock(at: str) -> Iterator[None]:
    """Run the commands inside at ``at`` (they read ``$HELDOUT_NOW``), whatever the caller's clock says."""
    before = os.environ.get(NOW_ENV)
    os.environ[NOW_ENV] = at
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(NOW_ENV, None)
        else:
            os.environ[NOW_ENV] = before


def build_store(root: Path, *, bundles_per_generation: int = 2, n_public: int = 60, per_task: int = 40,
                budget_bits: float = 1e9) -> AuditFixture:
    """public (official split of ``n_public`` cases), gen1 and gen2 (``per_task`` cases each) and
    ``bundles_per_generation`` synthetic bundles on each, at :data:`NOW`."""
    store = root / "store"
    data_root = root / "data"
    with command_clock(NOW):
        ledger_id = init_store(store)
    write_npz(data_root / f"{TASK}.npz", n_test=n_public, classes=N_CLASSES, shape=(28, 28, 3), seed=11)
    pool = write_npz(root / "pool" / f"{TASK}.npz", n_test=3 * per_task + 10, classes=N_CLASSES,
                     shape=(28, 28, 3), seed=12)
    for args in (("pool", "add", TASK, str(pool)),
                 ("seal", "public", "--tasks", TASK, "--data-root", str(data_root), "--expires", "2027-06-01"),
                 ("seal", "gen1", "--tasks", TASK, "--per-task", str(per_task), "--expires", "2027-03-01",
                  "--budget-bits", str(budget_bits)),
                 ("seal", "gen2", "--tasks", TASK, "--per-task", str(per_task), "--expires", "2027-04-01",
                  "--budget-bits", str(budget_bits))):
        with command_clock(NOW):
            result = cli(*args, store=store)
        assert result.exit_code == 0, result.output
    for g, generation in enumerate(("public", "gen1", "gen2")):
        for b in range(bundles_per_generation):
            add_bundle(store, generation, f"model_{b}", seed=100 * g + b, data_root=data_root)
    st = Store.open(store)
    key = st.keyring.list()[0].public_key.b64
    return AuditFixture(store=store, ledger_id=ledger_id, data_root=data_root, key_b64=key)
