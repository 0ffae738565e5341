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
refused for sealed generations. Every intent stays in the log, so a retried draw is visible (the audit reports a
generation with more than one intent, or an intent never sealed).

**A seal killed or refused after its intent is logged (resume).** Before the pools and the intent are logged,
the candidates of each task (case id, content hash, label, salt) and, for Thresholdout, the noise secret are
written to the *pending draw* ``private/pending-draws/<ledger id>/<gen>.json`` (0600, atomically, durably:
``heldout.generations.access.pending_draw_path``); it is removed once the seal entry is committed. So a seal
killed (SIGKILL, power cut) or refused (no witness cosignature yet, another writer's append) between the two
leaves the intent logged and unsealed, and this file. Running the same ``heldout seal gen`` again finds that
intent (the last logged intent of the name, no seal entry after it) and, when the pending draw rebuilds exactly
the ``pool`` entries the intent draws from (each task's root and size, and the noise secret its release commits
to), the request has the intent's parameters (per-task counts, expiry, release) and every candidate is still in
its pool and used by no generation, logs no new intent: it resumes from the intent's index and the saved
candidates, so the seed comes from the same checkpoint and the draw is the one the first run would have made
(with witnesses, from the cosignatures on that checkpoint when the re-run reads them), then seals as usual. The
audit sees one intent, sealed. Refused (exit 2, nothing written): a request with other parameters than the
pending intent's ("a pending draw of gen exists with other parameters"), and an intent that cannot be resumed
(its pending draw is missing, damaged or of another attempt, or a case of its pool was sealed since), naming the
intent's entry, unless ``--retry-draw`` (``SealRequest.retry_draw``): then a new intent is logged as before, and
the audit reports the draw as retried, for good. A pending draw whose intent never reached the log is replaced by
the next attempt; one left by a seal killed after its commit is removed by the next ``heldout seal`` on the
ledger. ``heldout status`` lists the pending intents (:func:`generations_and_pending`).

**Order of writes, and the entry index.** Holding the generations lock: write the pending draw, log the pools
and the intent (or resume a pending intent: neither), draw, read the ledger size s, sign the manifest with
``entry_index = s``, stage the private opening, ``seals/<gen>.seal.json`` and its blob under ``private/staging/``
(``heldout.staging``), append the seal entry (for ``public`` in one batch with its reveal entry, since its
membership is public), only then publish the staged files, and remove the pending draw. If the append fails, or
the command is killed before it, nothing is published and the staging folder is discarded (the logged intent
then stays unsealed, which the audit reports until the same seal, run again, resumes it: above). The seal entry
carries ``manifest_sha256``, the manifest its predicted index; the append is a compare-and-swap on that index
(``expected_size``): if another writer appended in between, it is refused, nothing is published, and the
command fails, so no manifest ever points at the wrong entry.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.provenance import FileProvenance, file_provenance, n_classes
from heldout.entries import IntentEntry, PoolEntry, RevealEntry, SealEntry
from heldout.generations.access import noise_path, opening_path, pending_draw_path, used_case_ids
from heldout.generations.budget import (
    DEFAULT_DELTA,
    DEFAULT_EPS,
    DEFAULT_K,
    TaskShape,
    make_budget,
    public_budget,
)
from heldout.generations.cases import check_task, content_hashes, public_case_ids, read_split
from heldout.generations.commitments import SALT_BYTES, hex_bytes, set_hash
from heldout.generations.draw import DrawRecord, PoolRef, derive_seed, draw_cases, seed_material
from heldout.generations.ledgers import generations_lock
from heldout.generations.pools import pool_entries, pool_tasks
from heldout.generations.release import FULL, LADDER, NOISE_BYTES, THRESHOLDOUT
from heldout.generations.reveal import CaseOpening, build_reveal, reveal_bytes
from heldout.generations.state import BlobSource, Generations, GenerationState, load_generations, utc
from heldout.staging import StagedOperation, staged_operation
from heldout.store import Store
from keys import HeldoutError, MalformedInput, Signer, StorageError, UsageError, VerificationError, storage_error
from keys.files import fsync_dir, read_private_file, remove_stale_leftovers, write_private_file
from ledger import AppendConflict, BlobStore, EntryRejected, Ledger
from ledger.cosignature import with_cosignatures
from ledger.entries import encode_entry
from ledger.policy import Policy
from seals import canonical_bytes, format_utc, parse_json_object, sha256_hex
from seals.manifest import (
    LeakageBudget,
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
    #: Log a new intent even though one of this generation is logged and unsealed and cannot be resumed (the
    #: audit then reports the generation's draw as retried, for good).
    retry_draw: bool = False


@dataclass(frozen=True)
class SealResult:
    manifest: SealManifest
    signed: dict[str, Any]
    manifest_sha256: str
    manifest_path: Path
    seal_index: int
    reveal_index: int | None = None
    written: tuple[Path, ...] = field(default_factory=tuple)
    #: The index of the logged, unsealed intent this seal resumed (a killed seal's), or None for a new intent.
    resumed_intent: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"generation": self.manifest.generation, "seal_index": self.seal_index,
                "reveal_index": self.reveal_index, "resumed_intent": self.resumed_intent,
                "manifest_sha256": self.manifest_sha256,
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


def generation_argument(name: str) -> str:
    """A generation named by the operator (an argument): ``genN`` or ``public`` (FORMATS section 1), else a usage
    error, before the name is used anywhere (a file name under ``seals/``, a lookup)."""
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


def _check_draw_request(store: Store, request: SealRequest, tasks: tuple[str, ...]) -> None:
    """What a sealed generation's request must be, before any pool is read: a positive ``--per-task``, no
    ``--seed``, a private pool for every task."""
    if request.per_task is None or request.per_task < 1:
        raise UsageError("--per-task must be a positive number of cases", field="per_task",
                         found=request.per_task)
    if request.seed is not None:
        raise UsageError("--seed no longer applies to a sealed generation: its draw's seed comes from the log "
                         "(the checkpoint, or the witnesses' cosignatures, after the seal intent)", field="seed",
                         found=request.seed)
    if request.data_root is not None:  # (said, not ignored: the cases come from the private pool)
        raise UsageError("--data-root applies to the public generation only: a sealed generation's cases are drawn "
                         "from its private pool (heldout pool add)", field="data_root", found=str(request.data_root))
    known = set(pool_tasks(store))
    for task in tasks:
        if task not in known:
            raise UsageError(f"unknown task {task!r}: no private pool; run: heldout pool add {task} FILE.npz",
                             field="tasks", found=task, expected=sorted(known))


def _candidates(store: Store, ledger: Ledger, request: SealRequest, tasks: tuple[str, ...],
                generations: Mapping[str, GenerationState]) -> dict[str, list[CaseOpening]]:
    """Each task's candidates (its pool minus every case already used), each with a fresh salt."""
    _check_draw_request(store, request, tasks)
    return _fresh_candidates(request, tasks, {task: pool_entries(store, task) for task in tasks},
                             used_case_ids(store, ledger.ledger_id, generations))


def _fresh_candidates(request: SealRequest, tasks: tuple[str, ...], pools: Mapping[str, Mapping[str, tuple[str, int]]],
                      used: set[str]) -> dict[str, list[CaseOpening]]:
    """:func:`_candidates` from the pools and the used cases, already read."""
    per_task = int(request.per_task or 0)
    candidates = {task: sorted(set(pools[task]) - used) for task in tasks}
    for task in tasks:
        if len(candidates[task]) < per_task:
            raise UsageError(
                f"too few unused cases for {task}: {len(candidates[task])} left in its pool of "
                f"{len(pools[task])}, {per_task} needed", field="per_task", found=len(candidates[task]),
                expected=per_task)
    return {task: sorted((CaseOpening(case_id=cid, task=task, content_sha256=pools[task][cid][0],
                                      label=pools[task][cid][1], salt=os.urandom(SALT_BYTES))
                          for cid in candidates[task]), key=lambda o: o.commitment)
            for task in tasks}


def _commit_and_intend(ledger: Ledger, signer: Signer, request: SealRequest, name: str,
                       candidates: Mapping[str, Sequence[CaseOpening]], release: ReleasePolicy,
                       now: datetime) -> tuple[int, dict[str, PoolRef]]:
    """Log one ``pool`` entry per task and the seal ``intent`` in one batch (one checkpoint covers them);
    returns the intent's index and the pool references. The caller wrote the pending draw first."""
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
        # operator could steer (the intent stays logged, with its pending draw: the same seal run again after
        # the witnesses cosigned resumes it).
        raise VerificationError(f"no witness cosigned checkpoint {size}, which contains the seal intent of {name}: "
                                "the draw needs their cosignatures (heldout witness sync, then run the same seal "
                                "again: it resumes this intent)",
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


# --- the pending draw: what a killed seal leaves, and what its re-run resumes -------------------------------

PENDING_TYPE = "heldout/pending-draw"
PENDING_VERSION = 1
#: A pending draw holds every candidate of every task (about 180 bytes each): a bound well above any pool.
PENDING_LIMIT = 1 << 30


def _pending_bytes(ledger_id: str, name: str, candidates: Mapping[str, Sequence[CaseOpening]],
                   noise_secret: bytes | None) -> bytes:
    return canonical_bytes({
        "type": PENDING_TYPE, "version": PENDING_VERSION, "ledger_id": ledger_id, "generation": name,
        "noise_secret": None if noise_secret is None else noise_secret.hex(),
        "candidates": {task: [[o.case_id, o.content_sha256, o.label, o.salt.hex()] for o in openings]
                       for task, openings in sorted(candidates.items())}})


def _write_pending(store: Store, ledger_id: str, name: str, candidates: Mapping[str, Sequence[CaseOpening]],
                   noise_secret: bytes | None) -> None:
    """The pending draw of ``name``, written (0600, atomically, durably) before its pools and intent are logged;
    a file another attempt left (one whose intent never reached the log, or one ``--retry-draw`` replaces)
    goes first."""
    path = pending_draw_path(store, ledger_id, name)
    path.unlink(missing_ok=True)
    remove_stale_leftovers(path.parent, path.name, tags=("tmp",))  # a write killed halfway
    write_private_file(path, _pending_bytes(ledger_id, name, candidates, noise_secret))


def _remove_pending(store: Store, ledger_id: str, name: str) -> None:
    """Remove the pending draw of ``name`` (durably) with what a write of it killed halfway left, and its folders
    when they are left empty."""
    path = pending_draw_path(store, ledger_id, name)
    if not path.parent.is_dir():
        return
    path.unlink(missing_ok=True)
    remove_stale_leftovers(path.parent, path.name, tags=("tmp",))
    fsync_dir(path.parent)
    for folder in (path.parent, path.parent.parent):
        try:
            folder.rmdir()
        except OSError:
            break  # not empty: another pending draw (or another ledger's) is there


def _sweep_pending(store: Store, ledger_id: str, generations: Mapping[str, GenerationState]) -> None:
    """Remove the pending draws of generations already sealed (a seal killed after its commit, before it removed
    its pending draw): nothing resumes them, and they hold the salts of the cases not drawn."""
    folder = pending_draw_path(store, ledger_id, "x").parent
    if not folder.is_dir():
        return
    for path in sorted(folder.iterdir()):
        stem = path.name.lstrip(".").split(".json", 1)[0]  # gen3.json, or .gen3.json.tmp<pid> of a killed write
        if stem in generations:
            _remove_pending(store, ledger_id, stem)


def _read_pending(path: Path, ledger_id: str, name: str) -> tuple[dict[str, list[CaseOpening]], bytes | None]:
    """The candidates (each task's, ascending by commitment) and noise secret of a pending draw; MalformedInput
    (never quoting a salt) unless it is exactly what :func:`_pending_bytes` writes for ``name``."""
    what = f"the pending draw of {name}"
    doc = parse_json_object(read_private_file(path, limit=PENDING_LIMIT), what=what)
    if set(doc) != {"type", "version", "ledger_id", "generation", "noise_secret", "candidates"} \
            or doc["type"] != PENDING_TYPE or doc["version"] != PENDING_VERSION:
        raise MalformedInput(f"{what} is not a heldout pending draw v{PENDING_VERSION}", path=str(path))
    if doc["ledger_id"] != ledger_id or doc["generation"] != name:
        raise MalformedInput(f"{what} is of another ledger or generation", path=str(path))
    noise = doc["noise_secret"]
    noise_secret = None if noise is None else hex_bytes(noise, size=NOISE_BYTES, what="noise_secret")
    raw = doc["candidates"]
    if not isinstance(raw, dict) or not raw:
        raise MalformedInput(f"{what} lists no candidates", path=str(path))
    candidates: dict[str, list[CaseOpening]] = {}
    for task, rows in raw.items():
        if not isinstance(rows, list) or not rows:
            raise MalformedInput(f"{what} lists no candidates of {task}", path=str(path))
        openings = []
        for row in rows:
            if not (isinstance(row, list) and len(row) == 4 and isinstance(row[0], str)
                    and isinstance(row[2], int) and not isinstance(row[2], bool) and row[2] >= 0):
                raise MalformedInput(f"{what} has a malformed candidate of {task}", path=str(path))
            hex_bytes(row[1], size=32, what="content_sha256")
            openings.append(CaseOpening(case_id=row[0], task=task, content_sha256=row[1], label=row[2],
                                        salt=hex_bytes(row[3], size=SALT_BYTES, what="salt")))
        candidates[task] = sorted(openings, key=lambda o: o.commitment)
    return candidates, noise_secret


@dataclass(frozen=True)
class _Resume:
    """A logged, unsealed intent and the pending draw that rebuilds its pools: the seal continues from them."""

    intent: IntentEntry
    pools: dict[str, PoolRef]
    candidates: dict[str, list[CaseOpening]]
    noise_secret: bytes | None


def _rebuild(store: Store, ledger: Ledger, name: str, intent: IntentEntry) -> tuple[_Resume | None, str]:
    """(the resume, "") when this store's pending draw of ``name`` rebuilds exactly the pool entries ``intent``
    draws from (each task's root and size) and the noise secret its release commits to; else (None, why not)."""
    path = pending_draw_path(store, ledger.ledger_id, name)
    if not path.exists() and not path.is_symlink():
        return None, (f"this store holds no pending draw of {name} ({path}), so the salts of its committed pools "
                      "are lost")
    try:
        candidates, noise_secret = _read_pending(path, ledger.ledger_id, name)
    except HeldoutError as exc:
        return None, f"its pending draw {path} cannot be used: {exc.message}"
    if set(candidates) != set(intent.pools):
        return None, f"the pending draw {path} is of other tasks than the intent's pools (a file of another attempt)"
    pools: dict[str, PoolRef] = {}
    for task, openings in sorted(candidates.items()):
        index = intent.pools[task]
        ref = PoolRef(index, set_hash([o.commitment for o in openings]), len(openings))
        logged = None
        if 0 <= index < int(intent.index or 0):
            with contextlib.suppress(HeldoutError):
                logged = PoolEntry.from_entry(ledger.entry(index), index=index)
        if not isinstance(logged, PoolEntry) or (logged.task, logged.pool_root, logged.pool_size) != (
                task, ref.pool_root, ref.pool_size):
            return None, (f"the pending draw {path} does not rebuild the {task} pool entry {index} the intent draws "
                          "from (a file of another attempt)")
        pools[task] = ref
    release = intent.get("release")
    committed = release.get("noise_sha256") if isinstance(release, dict) else None
    if (committed is None) != (noise_secret is None) or (
            noise_secret is not None and sha256_hex(noise_secret) != committed):
        return None, f"the noise secret of the pending draw {path} is not the one the intent's release commits to"
    return _Resume(intent, pools, candidates, noise_secret), ""


def _other_parameters(intent: IntentEntry, tasks: tuple[str, ...], per_task: int, expiry: datetime,
                      release: ReleasePolicy) -> list[str]:
    """What the request asks that ``intent`` does not record (empty: the same draw)."""
    differ = []
    asked = dict.fromkeys(tasks, per_task)
    if dict(intent.tasks) != asked:
        differ.append(f"per-task counts {dict(sorted(intent.tasks.items()))} (asked: {asked})")
    if intent.expiry_utc != format_utc(expiry):
        differ.append(f"expiry {intent.expiry_utc} (asked: {format_utc(expiry)})")
    logged, wanted = intent.get("release"), release.to_json()
    if logged != wanted:
        def shown(body: Any) -> Any:
            return {k: v for k, v in body.items() if k != "noise_sha256"} if isinstance(body, dict) else body
        differ.append(f"release {shown(logged)} (asked: {shown(wanted)})")
    return differ


def _unavailable(resume: _Resume, pools: Mapping[str, Mapping[str, tuple[str, int]]], used: set[str]) -> str:
    """Why the cases of a resumed draw's pools cannot be drawn any more ("" when they all can): each must still be
    in its task's private pool, unchanged, and unused by every opening in the store."""
    for task, openings in sorted(resume.candidates.items()):
        for o in openings:
            if o.case_id in used:
                return f"case {o.case_id} of its committed {task} pool has since been sealed in another generation"
            if pools[task].get(o.case_id) != (o.content_sha256, o.label):
                return f"case {o.case_id} of its committed {task} pool is no longer in the private pool as it was"
    return ""


def _resume_or_refuse(store: Store, ledger: Ledger, request: SealRequest, name: str, tasks: tuple[str, ...],
                      pending: Sequence[IntentEntry], mode: str, step: float | None,
                      pools: Mapping[str, Mapping[str, tuple[str, int]]], used: set[str]) -> _Resume | None:
    """What to do with the logged, unsealed intents of ``name`` (``pending``, in log order): resume the last one
    from this store's pending draw when it rebuilds that intent's pools and the request has its parameters;
    refuse (exit 2) when the parameters differ, or when it cannot be resumed, unless ``--retry-draw``; None: log
    a new intent."""
    if not pending:
        return None
    intent = pending[-1]
    index = int(intent.index or 0)
    resume, why = _rebuild(store, ledger, name, intent)
    if resume is not None:
        per_task = int(request.per_task or 0)
        differ = _other_parameters(intent, tasks, per_task, utc(request.expiry),
                                   _release_policy(mode, step, request, resume.noise_secret))
        if differ:
            if request.retry_draw:
                return None
            raise UsageError(
                f"a pending draw of {name} exists with other parameters: its seal intent (entry {index}) records "
                f"{'; '.join(differ)}. Run the seal again with the intent's parameters to finish that draw, or "
                f"pass --retry-draw to log a new intent (the audit then reports {name}'s draw as retried, for good)",
                field="generation", generation=name, index=index)
        why = _unavailable(resume, pools, used)
        if not why:
            return resume
    if request.retry_draw:
        return None
    raise UsageError(
        f"the seal intent of {name} at entry {index} was logged and never sealed (a seal killed or refused after "
        f"logging it), and cannot be resumed: {why}. Sealing {name} again logs a second intent, which the audit "
        f"reports for good as a retried draw (how seed grinding shows); pass --retry-draw to do so anyway",
        field="generation", generation=name, index=index, intents=[int(i.index or 0) for i in pending])


def _tap_intents(pairs: Iterable[tuple[int, Mapping[str, Any]]], found: list[IntentEntry]
                 ) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """``pairs`` unchanged, keeping each valid ``intent`` entry met in ``found`` (one pass over the log)."""
    for index, entry in pairs:
        if entry.get("type") == IntentEntry.TYPE:
            with contextlib.suppress(HeldoutError):  # not an intent the seal logs: the audit reports it
                record = IntentEntry.from_entry(entry, index=index)
                if isinstance(record, IntentEntry):
                    found.append(record)
        yield index, entry


def generations_and_pending(ledger: Ledger, now: datetime, *, blobs: BlobSource | None = None
                            ) -> tuple[Generations, list[IntentEntry]]:
    """The ledger's generations (:func:`load_generations`) and its pending intents: each ``intent`` entry that no
    seal entry of its generation follows (a seal killed or refused after logging it), in log order."""
    intents: list[IntentEntry] = []
    generations = load_generations(_tap_intents(ledger.entries(), intents), now, blobs=blobs)
    pending = [i for i in intents if i.generation not in generations
               or generations[i.generation].seal_index < int(i.index or 0)]
    return generations, pending


def _release_policy(mode: str, step: float | None, request: SealRequest, noise_secret: bytes | None
                    ) -> ReleasePolicy:
    try:
        return ReleasePolicy(mode, step, request.threshold if noise_secret else None,
                             request.sigma if noise_secret else None,
                             sha256_hex(noise_secret) if noise_secret else None)
    except MalformedInput as exc:  # the operator's options (a step of 1e-320 rounds to 0): bad input, exit 2
        raise UsageError(f"the release policy cannot be recorded: {exc.message}", **exc.evidence) from None


def _check_seal_entry_draft(name: str, tasks: Sequence[str], budget: LeakageBudget, release: ReleasePolicy,
                            expires: datetime, now: datetime) -> None:
    """The seal entry as it will be logged after the draw, with stand-ins for the draw's hashes, checked as the
    ledger checks an entry: numbers the entry cannot hold (a budget beyond 2^53) are refused before the pools and
    the intent are logged, not after (the intent would then stand abandoned for good)."""
    draft = SealEntry(generation=name, manifest_sha256="0" * 64, set_hash="0" * 64,
                      expiry_utc=format_utc(expires), created_utc=format_utc(now),
                      extra={"membership": "sealed", "tasks": {task: 1 for task in tasks}, "n_cases": len(tasks),
                             **_budget_members(budget, release)})
    try:
        encode_entry(draft.to_entry())
    except EntryRejected as exc:
        raise UsageError(f"the seal entry could not be logged: {exc.message}", **exc.evidence) from None


def _budget_members(budget: LeakageBudget, release: ReleasePolicy) -> dict[str, Any]:
    """The seal entry's members that state the generation's budget and release (its draft and the entry)."""
    return {"budget_bits": budget.bits, "release": release.to_json(),
            **({"statement_bits": budget.statement_bits,
                "guarantee": {"delta": budget.delta, "k": budget.k, "families": list(budget.families)}}
               if budget.families else {})}


def seal_entry_of(manifest: SealManifest, digest: str) -> dict[str, Any]:
    """The seal entry that logs ``manifest`` (whose file hashes to ``digest``): every member it carries is the
    manifest's, so a verifier rebuilds it from the signed manifest and compares (the generation's state, its
    expiry, budget and release are read from this entry)."""
    return SealEntry(
        generation=manifest.generation, manifest_sha256=digest, set_hash=manifest.set_hash,
        expiry_utc=format_utc(manifest.expiry), created_utc=format_utc(manifest.created),
        extra={"membership": manifest.membership, "tasks": manifest.task_counts, "n_cases": manifest.n_cases,
               **_budget_members(manifest.leakage_budget, manifest.release),
               **({"sources": manifest.task_sources} if manifest.task_sources else {})},
    ).to_entry()


class SealPending(StorageError):
    """A seal whose pools and intent are logged failed before its seal entry was (a full disk, an I/O error):
    exit 2 as any environment error, saying that the intent is logged and that running the same seal again
    resumes it (its pending draw is kept: same pools, same candidates, the same draw). "Nothing was written"
    would be false, and an audit counts the intent as a draw abandoned until the seal follows it."""

    def __init__(self, generation: str, intent_index: int, cause: StorageError) -> None:
        super().__init__(f"the seal intent of {generation} is logged (entry {intent_index}), but the seal failed "
                         f"before its entry: {cause.message}; run the same seal again once the cause is fixed (it "
                         "resumes this intent with the same draw)",
                         **{**cause.evidence, "generation": generation, "index": intent_index})


@contextmanager
def _resumable(name: str, intent_index: int | None, operation: Sequence[StagedOperation]) -> Iterator[None]:
    """Say so when the file system fails after ``name``'s intent (at ``intent_index``) is logged and before its
    seal entry is (the staged ``operation``, once it exists, not committed); after the commit the staging says
    what happened (:class:`PublishPending`)."""
    try:
        yield
    except OSError as exc:
        if intent_index is None or (operation and operation[0].committed):
            raise
        raise SealPending(name, intent_index, storage_error(exc)) from None
    except StorageError as exc:
        if intent_index is None or (operation and operation[0].committed) or isinstance(exc, SealPending):
            raise
        raise SealPending(name, intent_index, exc) from None


def seal_generation(store: Store, ledger: Ledger, signer: Signer, request: SealRequest,
                    now: datetime) -> SealResult:
    """Seal ``request.generation`` on ``ledger`` at ``now`` (module docstring for the rules)."""
    now = utc(now)
    name = generation_argument(request.generation)
    tasks = _check_tasks(request.tasks)
    expiry = utc(request.expiry)
    if (request.ladder_step is not None or request.thresholdout) and name == "public":
        raise UsageError("the public generation is released in full: --ladder-step and --thresholdout do not "
                         "apply", field="ladder_step")
    mode, step = _release_mode(request)
    with generations_lock(ledger, store):
        generations, pending = generations_and_pending(ledger, now)
        _sweep_pending(store, ledger.ledger_id, generations)
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
        resume: _Resume | None = None
        intent_index: int | None = None  # once the seal's intent is logged (not for the public generation)
        if name == "public":
            noise_secret = None
            release = _release_policy(mode, step, request, None)
            openings, order, sources = _public_openings(request, tasks)
        else:
            _check_draw_request(store, request, tasks)
            per_task = int(request.per_task or 0)
            used = used_case_ids(store, ledger.ledger_id, generations)
            pool_cases = {task: pool_entries(store, task) for task in tasks}
            # A logged intent of this name that no seal followed: resumed (same pools, same seed), or refused.
            resume = _resume_or_refuse(store, ledger, request, name, tasks,
                                       [i for i in pending if i.generation == name], mode, step, pool_cases, used)
            if resume is not None:
                candidates, noise_secret = resume.candidates, resume.noise_secret
            else:
                candidates = _fresh_candidates(request, tasks, pool_cases, used)
                noise_secret = os.urandom(NOISE_BYTES) if mode == THRESHOLDOUT else None
            release = _release_policy(mode, step, request, noise_secret)
            # The budget is checked before anything is logged, on each task's expected class sizes, so that a
            # refused seal logs nothing. Whether it can pay for one evaluation does not depend on the draw; a
            # default budget (it grows with the smallest class) is computed again on the drawn cases below.
            budget = make_budget(n=per_task, k=request.k, delta=request.delta, eps=request.eps,
                                 bits=request.budget_bits, mode=mode,
                                 shapes=[_expected_shape(task, candidates[task], per_task) for task in tasks],
                                 step=step)
            _check_seal_entry_draft(name, tasks, budget, release, request.expiry, now)
            if resume is not None:
                intent_index, pools = int(resume.intent.index or 0), resume.pools
            else:
                # The candidates with their salts go to the pending draw first: a seal killed (or refused) after
                # its intent is logged leaves what its re-run resumes from.
                _write_pending(store, ledger.ledger_id, name, candidates, noise_secret)
                try:
                    intent_index, pools = _commit_and_intend(ledger, signer, request, name, candidates, release,
                                                             now)
                except UsageError:  # another writer came first: nothing was logged, the store stays as it was
                    _remove_pending(store, ledger.ledger_id, name)
                    raise
            with _resumable(name, intent_index, []):
                draw, openings = _draw(ledger, name, intent_index, pools, candidates, per_task,
                                       _witness_policy(store))
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

        operation: list[StagedOperation] = []  # the staged operation, once it exists
        try:
            with _resumable(name, intent_index, operation), \
                    staged_operation(store, ledger, "seal") as staged:
                operation.append(staged)
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
                             "sealed: run the seal again (it resumes the logged intent)", generation=name,
                             **exc.evidence) from None
        finally:
            if name != "public" and operation and operation[0].committed:
                # Sealed (even when publishing failed after the commit: the next command finishes it): nothing
                # resumes the pending draw any more. A pending draw left behind goes with the next seal's sweep.
                with contextlib.suppress(OSError):
                    _remove_pending(store, ledger.ledger_id, name)
        written = (opening_path(store, ledger.ledger_id, name, manifest.set_hash),
                   *((noise_path(store, ledger.ledger_id, name, manifest.set_hash),) if noise_secret is not None
                     else ()),
                   manifest_path(store, name),
                   BlobStore(store.blobs).path(digest),
                   *((reveal_path(store, name),) if name == "public" else ()))
    return SealResult(manifest=manifest, signed=signed, manifest_sha256=digest,
                      manifest_path=manifest_path(store, name), seal_index=indices[0],
                      reveal_index=indices[1] if len(indices) > 1 else None, written=written,
                      resumed_intent=None if resume is None else resume.intent.index)
