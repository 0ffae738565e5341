"""Sealing a generation: draw disjoint cases, commit to them, sign the manifest, append the ``seal`` entry.

Every check runs before anything is written (a refused seal leaves the store and the ledger as they were):
the name (``genN`` or ``public``, not used on this ledger), the expiry (after ``now``), the tasks (a pool for
each, or for ``public`` an official file ``<data root>/<task>.npz``), enough unused cases, a positive budget.

**Draw (commit-then-draw, ``heldout/generations/draw.py``).** Candidates of a task = its pool's case ids minus
every case id any opening in the store commits (all generations, sealed or retired, public included). Each
candidate gets a fresh 32-byte salt (``os.urandom``); the commitments' root and count are logged as a ``pool``
entry per task, followed in the same batch by the seal ``intent``. The seed is derived from the first checkpoint
containing the intent (its witnesses' cosignatures, or without witnesses its root: weaker, the manifest says
which), and ``heldout-draw-v1`` selects each task's cases from the committed pool. The operator's ``--seed`` is
refused for sealed generations. A seal refused after the intent was logged leaves the intent in the log: a
retried draw is visible (the audit reports a generation with more than one intent, or an intent never sealed).

**Order of writes, and the entry index.** Holding the generations lock: log the pools and the intent, draw,
read the ledger size s, sign the manifest with ``entry_index = s``, stage the private opening,
``seals/<gen>.seal.json`` and its blob under ``private/staging/`` (``heldout.staging``), append the seal entry
(for ``public`` in one batch with its reveal entry, since its membership is public), and only then publish the
staged files. If the append fails, or the command is killed before it, nothing is published and the staging
folder is discarded (the logged intent then stays unsealed, which the audit reports). The seal entry carries
``manifest_sha256``, the manifest its predicted index; the append is a compare-and-swap on that index
(``expected_size``): if another writer appended in between, it is refused, nothing is published, and the
command fails, so no manifest ever points at the wrong entry.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.provenance import FileProvenance, file_provenance, n_classes
from heldout.entries import IntentEntry, PoolEntry, RevealEntry, SealEntry
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
from heldout.generations.commitments import SALT_BYTES, set_hash
from heldout.generations.draw import DrawRecord, PoolRef, derive_seed, draw_cases, seed_material
from heldout.generations.ledgers import generations_lock
from heldout.generations.pools import pool_entries, pool_tasks
from heldout.generations.release import FULL, LADDER, NOISE_BYTES, THRESHOLDOUT
from heldout.generations.reveal import CaseOpening, build_reveal, reveal_bytes
from heldout.generations.state import GenerationState, load_generations, utc
from heldout.staging import staged_operation
from heldout.store import Store
from keys import MalformedInput, Signer, UsageError, VerificationError
from ledger import AppendConflict, BlobStore, Ledger
from ledger.cosignature import with_cosignatures
from ledger.policy import Policy
from seals import format_utc, sha256_hex
from seals.manifest import (
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


def _expected_shape(task: str, candidates: list[CaseOpening], per_task: int) -> TaskShape:
    """A task's shape before its draw: each class's expected share of ``per_task`` (the pool's proportions)."""
    classes = n_classes(task)
    counts = [0] * classes
    for opening in candidates:
        counts[int(opening.label)] += 1
    smallest = min(per_task * c // max(1, len(candidates)) for c in counts)
    return TaskShape(task=task, n=per_task, n_classes=classes, smallest_class=max(1, smallest))


def _candidates(store: Store, ledger: Ledger, request: SealRequest, tasks: tuple[str, ...],
                generations: dict[str, GenerationState]) -> dict[str, list[CaseOpening]]:
    """Each task's candidates (its pool minus every case already used), each with a fresh salt."""
    if request.per_task is None or request.per_task < 1:
        raise UsageError("--per-task must be a positive number of cases", field="per_task",
                         found=request.per_task)
    if request.seed is not None:
        raise UsageError("--seed no longer applies to a sealed generation: its draw's seed comes from the log "
                         "(the checkpoint, or the witnesses' cosignatures, after the seal intent)", field="seed",
                         found=request.seed)
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
    return {task: sorted((CaseOpening(case_id=cid, task=task, content_sha256=pools[task][cid][0],
                                      label=pools[task][cid][1], salt=os.urandom(SALT_BYTES))
                          for cid in candidates[task]), key=lambda o: o.commitment)
            for task in tasks}


def _commit_and_intend(ledger: Ledger, signer: Signer, request: SealRequest, name: str,
                       candidates: Mapping[str, Sequence[CaseOpening]], release: ReleasePolicy,
                       now: datetime) -> tuple[int, dict[str, PoolRef]]:
    """Log one ``pool`` entry per task and the seal ``intent`` in one batch (one checkpoint covers them);
    returns the intent's index and the pool references."""
    start = ledger.size
    pools = {task: PoolRef(start + i, set_hash([o.commitment for o in openings]), len(openings))
             for i, (task, openings) in enumerate(sorted(candidates.items()))}
    stamp = format_utc(now)
    entries: list[Mapping[str, Any]] = [
        PoolEntry(task=task, pool_root=ref.pool_root, pool_size=ref.pool_size, created_utc=stamp).to_entry()
        for task, ref in sorted(pools.items())]
    entries.append(IntentEntry(generation=name, tasks={task: int(request.per_task or 0) for task in sorted(candidates)},
                               pools={task: ref.index for task, ref in sorted(pools.items())},
                               expiry_utc=format_utc(request.expiry), created_utc=stamp,
                               extra={"release": release.to_json()}).to_entry())
    try:
        indices = ledger.append_batch(entries, signer=signer, now=now, expected_size=start)
    except AppendConflict as exc:
        raise UsageError(f"another writer appended to the ledger while {name}'s pools were being committed; "
                         "nothing was logged: run the seal again", generation=name, **exc.evidence) from None
    return indices[-1], pools


def _draw(ledger: Ledger, name: str, intent_index: int, pools: Mapping[str, PoolRef],
          candidates: Mapping[str, Sequence[CaseOpening]], per_task: int,
          policy: Policy | None) -> tuple[DrawRecord, list[CaseOpening]]:
    """Derive the seed from the first checkpoint containing the intent (its witnesses' cosignatures when the
    ledger is witnessed, else its root), and draw. Only the cosignatures of witnesses the store's ``policy``
    lists count: a line of any other key (one the operator holds) could be re-made at will to grind the seed,
    and an audit with the policy refuses such a draw."""
    size = intent_index + 1
    signed = ledger.checkpoint_at(size)
    if signed is None:
        raise VerificationError("the ledger signed no checkpoint containing the seal intent", index=intent_index)
    # read once (a slow witness may still add one afterwards); recorded without their line ends
    lines = tuple(line.rstrip("\n") for line in ledger.cosignature_lines(size))
    if policy is not None:
        listed = {c.line.rstrip("\n") for c in policy.cosignatures(
            with_cosignatures(signed, [line + "\n" for line in lines])).values()}
        lines = tuple(line for line in lines if line in listed)
    checkpoint = with_cosignatures(signed, [line + "\n" for line in lines])
    if lines:
        source = "witness-cosignatures"
        material = seed_material(source, cosignatures=lines)
    elif ledger.after_checkpoint is not None:
        # Witnesses are configured but none cosigned: refuse rather than fall back to the weaker seed the
        # operator could steer (the intent stays logged; a later seal shows as a retried draw).
        raise VerificationError(f"no witness cosigned checkpoint {size}, which contains the seal intent of {name}: "
                                "the draw needs their cosignatures (heldout witness sync, then seal again)",
                                index=intent_index, size=size, cause=str(ledger.witnessing_error or ""))
    else:
        source = "checkpoint-root"
        material = seed_material(source, root=checkpoint.root)
    seed = derive_seed(source, material)
    drawn = draw_cases(seed, candidates, dict.fromkeys(candidates, per_task))
    record = DrawRecord(seed_source=source, intent_index=intent_index, pools=dict(pools),
                        checkpoint_size=checkpoint.size, checkpoint_note=checkpoint.note, cosignatures=lines,
                        seed=seed.hex())
    return record, drawn


def _witness_policy(store: Store) -> Policy | None:
    """The store's witness policy when it has witnesses (whose cosignatures seed a draw), else None."""
    from heldout.witness.operator import load_endpoints, store_policy

    return store_policy(store) if load_endpoints(store) else None


def seal_entry_of(manifest: SealManifest, digest: str) -> dict[str, Any]:
    """The seal entry that logs ``manifest`` (whose file hashes to ``digest``): every member it carries is the
    manifest's, so a verifier rebuilds it from the signed manifest and compares (the generation's state, its
    expiry, budget and release are read from this entry)."""
    budget = manifest.leakage_budget
    return SealEntry(
        generation=manifest.generation, manifest_sha256=digest, set_hash=manifest.set_hash,
        expiry_utc=format_utc(manifest.expiry), created_utc=format_utc(manifest.created),
        extra={"membership": manifest.membership, "tasks": manifest.task_counts, "n_cases": manifest.n_cases,
               "budget_bits": budget.bits, "release": manifest.release.to_json(),
               **({"sources": manifest.task_sources} if manifest.task_sources else {}),
               **({"statement_bits": budget.statement_bits,
                   "guarantee": {"delta": budget.delta, "k": budget.k, "families": list(budget.families)}}
                  if budget.families else {})},
    ).to_entry()


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
        draw: DrawRecord | None = None
        pool_lists: dict[str, list[bytes]] | None = None
        noise_secret = os.urandom(NOISE_BYTES) if mode == THRESHOLDOUT and name != "public" else None
        release = ReleasePolicy(mode, step, request.threshold if noise_secret else None,
                                request.sigma if noise_secret else None,
                                sha256_hex(noise_secret) if noise_secret else None)
        if name == "public":
            openings, order, sources = _public_openings(request, tasks)
        else:
            candidates = _candidates(store, ledger, request, tasks, generations)
            per_task = int(request.per_task or 0)
            # The budget is checked before anything is logged, on each task's expected class sizes, so that a
            # refused seal logs nothing. Whether it can pay for one evaluation does not depend on the draw; a
            # default budget (it grows with the smallest class) is computed again on the drawn cases below.
            make_budget(n=per_task, k=request.k, delta=request.delta, eps=request.eps, bits=request.budget_bits,
                        mode=mode, shapes=[_expected_shape(task, candidates[task], per_task) for task in tasks],
                        step=step)
            intent_index, pools = _commit_and_intend(ledger, signer, request, name, candidates, release, now)
            draw, openings = _draw(ledger, name, intent_index, pools, candidates, per_task, _witness_policy(store))
            pool_lists = {task: [o.commitment for o in pool] for task, pool in candidates.items()}
        counts = {task: sum(1 for o in openings if o.task == task) for task in tasks}
        shapes = [TaskShape.from_labels(task, [o.label for o in openings if o.task == task], n_classes(task))
                  for task in tasks]
        budget = public_budget(min(counts.values())) if name == "public" else make_budget(
            n=min(counts.values()), k=request.k, delta=request.delta, eps=request.eps, bits=request.budget_bits,
            mode=mode, shapes=shapes, step=step)
        sealed = [g for g in generations.values() if g.membership != "public"]
        draft = build_reveal(generation=name, ledger_id=ledger.ledger_id, manifest_sha256="0" * 64,
                             membership="public" if name == "public" else "sealed", openings=openings,
                             order=order, pools=pool_lists)
        manifest = SealManifest(
            generation=name, membership="public" if name == "public" else "sealed",
            tasks=tuple(TaskCount(task, counts[task], *((sources[task].origin, sources[task].sha256)
                                                        if task in sources else (None, None)))
                        for task in tasks), set_hash=draft["set_hash"],
            created=now, expiry=expiry, leakage_budget=budget, release=release, seed=None,
            draw=None if draw is None else draw.to_json(),
            predecessor=sealed[-1].name if sealed and name != "public" else None,
            ledger_id=ledger.ledger_id, entry_index=ledger.size)
        signed = manifest.sign(signer)
        data = manifest_bytes(signed)
        digest = sha256_hex(data)
        opening = reveal_bytes({**draft, "manifest_sha256": digest})
        entries: list[Mapping[str, Any]] = [seal_entry_of(manifest, digest)]

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
                    entries.append(RevealEntry(generation=name, reveal_sha256=reveal_digest,
                                               created_utc=format_utc(now),
                                               extra={"n_cases": manifest.n_cases}).to_entry())
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
