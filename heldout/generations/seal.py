"""Sealing a generation: draw disjoint cases, commit to them, sign the manifest, append the ``seal`` entry.

Every check runs before anything is written (a refused seal leaves the store and the ledger as they were):
the name (``genN`` or ``public``, not used on this ledger), the expiry (after ``now``), the tasks (a pool for
each, or for ``public`` an official file ``<data root>/<task>.npz``), enough unused cases, a positive budget.

**Draw.** Candidates of a task = its pool's case ids minus every case id any opening in the store commits
(all generations, sealed or retired, public included), sorted. Tasks are taken in name order with one
generator ``numpy.random.default_rng(seed)``; each draws ``sorted(rng.choice(len(candidates), per_task,
replace=False))``. The seed (random when not given) is recorded in the manifest. Salts are 32 bytes from
``os.urandom``, never derived from the seed.

**Order of writes, and the entry index.** Holding the generations lock: read the ledger size s, sign the
manifest with ``entry_index = s``, stage the private opening, ``seals/<gen>.seal.json`` and its blob under
``private/staging/`` (``heldout.staging``), append the seal entry (for ``public`` in one batch with its reveal
entry, since its membership is public), and only then publish the staged files. If the append fails, or the
command is killed before it, nothing is published and the staging folder is discarded. The seal entry
carries ``manifest_sha256``, the manifest its predicted index; the append is a compare-and-swap on that index
(``expected_size``): if another writer appended in between, it is refused, nothing is published, and the
command fails, so no manifest ever points at the wrong entry.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from harness.provenance import FileProvenance, file_provenance, n_classes
from heldout.generations.access import noise_path, opening_path, used_case_ids
from heldout.generations.budget import (
    DEFAULT_DELTA,
    DEFAULT_EPS,
    DEFAULT_K,
    TaskShape,
    make_budget,
    public_budget,
)
from heldout.generations.cases import check_task, content_hashes, public_case_ids, read_split
from heldout.generations.commitments import SALT_BYTES
from heldout.generations.ledgers import generations_lock
from heldout.generations.pools import pool_entries, pool_tasks
from heldout.generations.release import FULL, LADDER, NOISE_BYTES, THRESHOLDOUT
from heldout.generations.reveal import CaseOpening, build_reveal, reveal_bytes
from heldout.generations.state import GenerationState, load_generations, utc
from heldout.staging import staged_operation
from heldout.store import Store
from keys import MalformedInput, Signer, UsageError
from ledger import AppendConflict, BlobStore, Ledger
from seals import format_utc, sha256_hex
from seals.manifest import (
    MAX_SEED,
    ReleasePolicy,
    SealManifest,
    TaskCount,
    check_generation_name,
    manifest_bytes,
)


@dataclass(frozen=True)
class SealRequest:
    generation: str
    tasks: tuple[str, ...]
    expiry: datetime
    per_task: int | None = None
    seed: int | None = None
    budget_bits: float | None = None
    k: int = DEFAULT_K
    delta: float = DEFAULT_DELTA
    eps: float = DEFAULT_EPS
    ladder_step: float | None = None
    data_root: Path | None = None
    thresholdout: bool = False
    threshold: float | None = None
    sigma: float | None = None
    #: Rounding step of Thresholdout's released values (the ladder uses ``ladder_step``).
    thresholdout_step: float = 1.0


@dataclass(frozen=True)
class SealResult:
    manifest: SealManifest
    signed: dict[str, Any]
    manifest_sha256: str
    manifest_path: Path
    seal_index: int
    reveal_index: int | None = None
    written: tuple[Path, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {"generation": self.manifest.generation, "seal_index": self.seal_index,
                "reveal_index": self.reveal_index, "manifest_sha256": self.manifest_sha256,
                "manifest_path": str(self.manifest_path), "set_hash": self.manifest.set_hash,
                "tasks": self.manifest.task_counts, "expiry_utc": format_utc(self.manifest.expiry),
                "leakage_budget": self.manifest.leakage_budget.to_json(), "seed": self.manifest.seed}


def _release_mode(request: SealRequest) -> tuple[str, float | None]:
    """(mode, step) from the request, refusing contradictory or incomplete release options (exit 2)."""
    if request.thresholdout:
        if request.ladder_step is not None:
            raise UsageError("choose one release mode: --ladder-step or --thresholdout", field="release")
        if request.threshold is None or request.sigma is None:
            raise UsageError("--thresholdout needs --threshold T and --sigma S (on the 0-100 score scale)",
                             field="release")
        for label, value in (("--threshold", request.threshold), ("--sigma", request.sigma),
                             ("--step", request.thresholdout_step)):
            if not 0 < value <= 100:
                raise UsageError(f"{label} must be in (0, 100]", field="release", found=value)
        return THRESHOLDOUT, request.thresholdout_step
    if request.threshold is not None or request.sigma is not None:
        raise UsageError("--threshold and --sigma go with --thresholdout", field="release")
    if request.ladder_step is not None:
        if not 0 < request.ladder_step <= 100:
            raise UsageError("--ladder-step must be in (0, 100]", field="ladder_step", found=request.ladder_step)
        return LADDER, request.ladder_step
    return FULL, None


def manifest_path(store: Store, generation: str) -> Path:
    return store.seals / f"{generation}.seal.json"


def reveal_path(store: Store, generation: str) -> Path:
    """The published copy of a reveal (exported with the seals); the ledger binds its SHA-256."""
    return store.seals / f"{generation}.reveal.json"


def _check_name(name: str) -> str:
    try:
        return check_generation_name(name)
    except MalformedInput:
        raise UsageError(f"{name!r} is not a generation name: genN (gen1, gen2, ...) or public",
                         field="generation", found=str(name)[:60]) from None


def _check_tasks(tasks: Sequence[str]) -> tuple[str, ...]:
    if not tasks:
        raise UsageError("name at least one task (--tasks bloodmnist,breastmnist)", field="tasks")
    for task in tasks:
        check_task(task)
    if len(set(tasks)) != len(tasks):
        raise UsageError("a task is named twice in --tasks", field="tasks", found=list(tasks))
    return tuple(sorted(tasks))


def _public_openings(request: SealRequest, tasks: tuple[str, ...]
                     ) -> tuple[list[CaseOpening], dict[str, list[str]], dict[str, FileProvenance]]:
    if request.per_task is not None:
        raise UsageError("public seals the whole official test split; --per-task does not apply",
                         field="per_task")
    if request.data_root is None:
        raise UsageError("sealing public needs --data-root, the folder of the official <task>.npz files",
                         field="data_root")
    openings = []
    order: dict[str, list[str]] = {}
    sources: dict[str, FileProvenance] = {}
    for task in tasks:
        path = Path(request.data_root) / f"{task}.npz"
        if not path.is_file():
            raise UsageError(f"no file {path} for task {task!r}", field="tasks", found=task, path=str(path))
        sources[task] = file_provenance(path, task)  # official only when medmnist's MD5 matches
        split = read_split(path, "test")
        hashes = content_hashes(split.images, split.labels)
        order[task] = public_case_ids(task, hashes)
        for cid, h, label in zip(order[task], hashes, split.labels, strict=True):
            openings.append(CaseOpening(case_id=cid, task=task, content_sha256=h, label=int(label), salt=b""))
    return openings, order, sources


def _drawn_openings(store: Store, ledger: Ledger, request: SealRequest, tasks: tuple[str, ...],
                    generations: dict[str, GenerationState], seed: int) -> list[CaseOpening]:
    if request.per_task is None or request.per_task < 1:
        raise UsageError("--per-task must be a positive number of cases", field="per_task",
                         found=request.per_task)
    known = set(pool_tasks(store))
    for task in tasks:
        if task not in known:
            raise UsageError(f"unknown task {task!r}: no private pool; run: heldout pool add {task} FILE.npz",
                             field="tasks", found=task, expected=sorted(known))
    used = used_case_ids(store, ledger.ledger_id, generations)
    pools = {task: pool_entries(store, task) for task in tasks}
    candidates = {task: sorted(set(pools[task]) - used) for task in tasks}
    for task in tasks:
        if len(candidates[task]) < request.per_task:
            raise UsageError(
                f"too few unused cases for {task}: {len(candidates[task])} left in its pool of "
                f"{len(pools[task])}, {request.per_task} needed", field="per_task", found=len(candidates[task]),
                expected=request.per_task)
    rng = np.random.default_rng(seed)
    openings = []
    for task in tasks:
        chosen = sorted(int(i) for i in rng.choice(len(candidates[task]), request.per_task, replace=False))
        for i in chosen:
            cid = candidates[task][i]
            content, label = pools[task][cid]
            openings.append(CaseOpening(case_id=cid, task=task, content_sha256=content, label=label,
                                        salt=os.urandom(SALT_BYTES)))
    return openings


def _seal_entry(manifest: SealManifest, digest: str) -> dict[str, Any]:
    return {
        "type": "seal", "v": 1,
        "generation": manifest.generation,
        "manifest_sha256": digest,
        "set_hash": manifest.set_hash,
        "expiry_utc": format_utc(manifest.expiry),
        "created_utc": format_utc(manifest.created),
        "membership": manifest.membership,
        "tasks": manifest.task_counts,
        "n_cases": manifest.n_cases,
        "budget_bits": manifest.leakage_budget.bits,
        "release": manifest.release.to_json(),
        **({"sources": manifest.task_sources} if manifest.task_sources else {}),
        **({"statement_bits": manifest.leakage_budget.statement_bits,
            "guarantee": {"delta": manifest.leakage_budget.delta, "k": manifest.leakage_budget.k,
                          "families": list(manifest.leakage_budget.families)}}
           if manifest.leakage_budget.families else {}),
    }


def seal_generation(store: Store, ledger: Ledger, signer: Signer, request: SealRequest,
                    now: datetime) -> SealResult:
    """Seal ``request.generation`` on ``ledger`` at ``now`` (module docstring for the rules)."""
    now = utc(now)
    name = _check_name(request.generation)
    tasks = _check_tasks(request.tasks)
    expiry = utc(request.expiry)
    if (request.ladder_step is not None or request.thresholdout) and name == "public":
        raise UsageError("the public generation is released in full: --ladder-step and --thresholdout do not "
                         "apply", field="ladder_step")
    mode, step = _release_mode(request)
    with generations_lock(ledger, store):
        generations = load_generations(ledger, now)
        if name in generations:
            raise UsageError(f"generation {name} is already sealed on this ledger (entry "
                             f"{generations[name].seal_index}); choose another name", field="generation",
                             found=name, index=generations[name].seal_index)
        if expiry <= now:
            raise UsageError(f"the expiry {format_utc(expiry)} is not in the future (now {format_utc(now)})",
                             field="expires", expected=f"> {format_utc(now)}", found=format_utc(expiry))
        order = None
        sources: dict[str, FileProvenance] = {}
        if name == "public":
            seed = None
            openings, order, sources = _public_openings(request, tasks)
        else:
            if request.seed is not None and not 0 <= request.seed <= MAX_SEED:
                raise UsageError("--seed must be an integer in 0..2^53-1", field="seed", found=request.seed)
            seed = request.seed if request.seed is not None else secrets.randbelow(MAX_SEED + 1)
            openings = _drawn_openings(store, ledger, request, tasks, generations, seed)
        counts = {task: sum(1 for o in openings if o.task == task) for task in tasks}
        shapes = [TaskShape.from_labels(task, [o.label for o in openings if o.task == task], n_classes(task))
                  for task in tasks]
        budget = public_budget(min(counts.values())) if name == "public" else make_budget(
            n=min(counts.values()), k=request.k, delta=request.delta, eps=request.eps, bits=request.budget_bits,
            mode=mode, shapes=shapes, step=step)
        noise_secret = os.urandom(NOISE_BYTES) if mode == THRESHOLDOUT else None
        release = ReleasePolicy(mode, step, request.threshold if noise_secret else None,
                                request.sigma if noise_secret else None,
                                sha256_hex(noise_secret) if noise_secret else None)
        sealed = [g for g in generations.values() if g.membership != "public"]
        draft = build_reveal(generation=name, ledger_id=ledger.ledger_id, manifest_sha256="0" * 64,
                             membership="public" if name == "public" else "sealed", openings=openings,
                             order=order)
        manifest = SealManifest(
            generation=name, membership="public" if name == "public" else "sealed",
            tasks=tuple(TaskCount(task, counts[task], *((sources[task].origin, sources[task].sha256)
                                                        if task in sources else (None, None)))
                        for task in tasks), set_hash=draft["set_hash"],
            created=now, expiry=expiry, leakage_budget=budget, release=release, seed=seed,
            predecessor=sealed[-1].name if sealed and name != "public" else None,
            ledger_id=ledger.ledger_id, entry_index=ledger.size)
        signed = manifest.sign(signer)
        data = manifest_bytes(signed)
        digest = sha256_hex(data)
        opening = reveal_bytes({**draft, "manifest_sha256": digest})
        entries: list[Mapping[str, Any]] = [_seal_entry(manifest, digest)]

        try:
            with staged_operation(store, ledger, "seal") as staged:
                staged.private_file(opening_path(store, ledger.ledger_id, name, manifest.set_hash), opening,
                                    label="opening")
                if noise_secret is not None:
                    staged.private_file(noise_path(store, ledger.ledger_id, name, manifest.set_hash), noise_secret,
                                        label="noise-secret")
                staged.public_file(manifest_path(store, name), data, label="manifest")
                staged.blob(data, label="manifest-blob")
                if name == "public":
                    reveal_digest = staged.blob(opening, label="reveal-blob")
                    staged.public_file(reveal_path(store, name), opening, label="reveal")
                    entries.append({"type": "reveal", "v": 1, "generation": name,
                                    "reveal_sha256": reveal_digest, "created_utc": format_utc(now),
                                    "n_cases": manifest.n_cases})
                # The manifest records its entry index: refuse (and discard) rather than log it anywhere else.
                indices = staged.commit(entries, signer=signer, now=now, expected_size=manifest.entry_index)
        except AppendConflict as exc:
            raise UsageError(f"another writer appended to the ledger while {name} was being sealed; nothing was "
                             "sealed: run the seal again", generation=name, **exc.evidence) from None
        written = (opening_path(store, ledger.ledger_id, name, manifest.set_hash),
                   *((noise_path(store, ledger.ledger_id, name, manifest.set_hash),) if noise_secret is not None
                     else ()),
                   manifest_path(store, name),
                   BlobStore(store.blobs).path(digest),
                   *((reveal_path(store, name),) if name == "public" else ()))
    return SealResult(manifest=manifest, signed=signed, manifest_sha256=digest,
                      manifest_path=manifest_path(store, name), seal_index=indices[0],
                      reveal_index=indices[1] if len(indices) > 1 else None, written=written)
