"""Private access to a generation: its opening (salts and labels), its cases with images for the evaluation
and the operator's audit, the cases already used by any generation, and membership proofs.

Openings live at ``private/generations/<ledger id>/<generation>/<set hash>.reveal.json`` (0600): naming the
file by the set hash means a seal that failed before its ledger entry leaves a file that no seal entry
points to, and can never be mistaken for the real opening.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

import numpy as np

from heldout.generations.cases import ImageArray, LabelArray, content_sha256, public_case_ids, read_split
from heldout.generations.commitments import MemberProof, inclusion_path, set_hash
from heldout.generations.ledgers import open_ledger
from heldout.generations.pools import load_pool_cases
from heldout.generations.reveal import RevealDocument, parse_reveal
from heldout.generations.state import GenerationState, load_generations, utc
from heldout.store import Store
from keys import IncompleteError, UsageError, VerificationError
from keys.files import read_private_file
from ledger import Ledger
from seals import parse_json_object
from seals.timeutil import system_clock


class CaseSet(NamedTuple):
    """A generation's cases of one task: ids, uint8 images (N x ...), int64 labels (N)."""

    case_ids: list[str]
    images: ImageArray
    labels: LabelArray


def opening_path(store: Store, ledger_id: str, generation: str, set_hash_hex: str) -> Path:
    return store.openings / ledger_id / generation / f"{set_hash_hex}.reveal.json"


def noise_path(store: Store, ledger_id: str, generation: str, set_hash_hex: str) -> Path:
    """The Thresholdout noise secret of a generation (private until retirement; its SHA-256 is in the manifest)."""
    return store.openings / ledger_id / generation / f"{set_hash_hex}.noise.key"


def pending_draw_path(store: Store, ledger_id: str, generation: str) -> Path:
    """The candidates (ids, content hashes, labels, salts) of a seal whose pools and intent are logged and whose
    seal entry is not yet: what a re-run of the seal resumes from (``heldout.generations.seal``); removed once
    the seal entry is committed. Never exported, logged or printed."""
    return store.private / "pending-draws" / ledger_id / f"{generation}.json"


def withheld_blobs_path(store: Store, ledger_id: str) -> Path:
    """Blobs of bundles on ladder and Thresholdout generations, withheld until their generation is retired."""
    return store.private / "withheld" / ledger_id


def check_opening(reveal: RevealDocument, state: GenerationState) -> RevealDocument:
    """Recompute every commitment and the set hash of an opening; raise unless it is ``state``'s."""
    commitments = []
    for i, (opening, listed) in enumerate(zip(reveal.openings, reveal.listed_commitments, strict=True)):
        if opening.commitment != listed:
            raise VerificationError(f"the private opening of {state.name} is damaged at case #{i} "
                                    f"{opening.case_id}", case_id=opening.case_id, index=i)
        commitments.append(listed)
    found = set_hash(commitments)
    if found != state.set_hash or reveal.generation != state.name:
        raise VerificationError(f"the private opening of {state.name} does not hash to its sealed set hash",
                                expected=state.set_hash, found=found, index=state.seal_index)
    return reveal


def load_opening(store: Store, ledger_id: str, state: GenerationState) -> RevealDocument:
    path = opening_path(store, ledger_id, state.name, state.set_hash)
    if not os.path.lexists(path):  # (present in another form, a folder or a FIFO: refused below, exit 2)
        raise IncompleteError(f"the private opening of {state.name} is not in this store ({path})",
                              path=str(path), index=state.seal_index)
    reveal = parse_reveal(parse_json_object(read_private_file(path), what=f"opening of {state.name}"),
                          what=f"opening of {state.name}")
    return check_opening(reveal, state)


def opening_bytes(store: Store, ledger_id: str, state: GenerationState) -> bytes:
    load_opening(store, ledger_id, state)
    return read_private_file(opening_path(store, ledger_id, state.name, state.set_hash))


def used_case_ids(store: Store, ledger_id: str, generations: Mapping[str, GenerationState]) -> set[str]:
    """Every case id committed by any opening in the store (any ledger, any generation, including the
    leftovers of seals that never reached their ledger: excluding too much only costs pool cases), after
    checking that each generation sealed on this ledger has its opening here and that it matches."""
    for state in generations.values():
        load_opening(store, ledger_id, state)
    used: set[str] = set()
    if store.openings.is_dir():
        for path in sorted(store.openings.glob("*/*/*.reveal.json")):
            reveal = parse_reveal(parse_json_object(read_private_file(path), what=str(path)), what=str(path))
            used.update(o.case_id for o in reveal.openings)
    return used


def generation_state(ledger: Ledger, generation: str, now: datetime | None = None) -> GenerationState:
    """One generation's state at ``now`` (default: the system clock); a usage error when the ledger seals no
    such name."""
    generations = load_generations(ledger, utc(now) if now is not None else system_clock())
    if generation not in generations:
        raise UsageError(f"no generation {generation!r} is sealed on ledger {ledger.ledger_id}",
                         field="generation", found=generation, expected=sorted(generations))
    return generations[generation]


def generation_cases(store: Store, generation: str, task: str, *, ledger: Ledger | None = None,
                     data_root: Path | None = None) -> CaseSet:
    """The cases of ``generation`` for ``task`` with their private labels.

    Sealed generations: from the private pool, ordered by case id (the evaluation order); every image is
    re-hashed against the sealed content hash. ``public``: the official test split read from
    ``<data_root>/<task>.npz``, in file order, checked case by case against the sealed public set."""
    own = ledger is None
    active = open_ledger(store) if ledger is None else ledger
    try:
        state = generation_state(active, generation)
        reveal = load_opening(store, active.ledger_id, state)
    finally:
        if own:
            active.close()
    if task not in state.tasks:
        raise UsageError(f"{generation} has no task {task!r}", field="task", found=task,
                         expected=sorted(state.tasks))
    openings = reveal.task_cases(task)
    if state.membership == "public":
        if data_root is None:
            raise UsageError("the public generation is read from the official test split: give the data root",
                             field="data_root")
        split = read_split(Path(data_root) / f"{task}.npz", "test")
        hashes = [content_sha256(split.images[i], int(split.labels[i])) for i in range(len(split.labels))]
        ids = public_case_ids(task, hashes)
        sealed = {o.case_id: o.content_sha256 for o in openings}
        for cid, h in zip(ids, hashes, strict=True):
            if sealed.get(cid) != h:
                raise VerificationError(f"{data_root}/{task}.npz is not the sealed public split: case {cid} "
                                        "is not in it", case_id=cid, path=str(data_root))
        if len(ids) != len(sealed):
            raise VerificationError(f"{data_root}/{task}.npz has {len(ids)} test cases; the public seal has "
                                    f"{len(sealed)}", expected=len(sealed), found=len(ids), path=str(data_root))
        if ids != [o.case_id for o in openings]:
            raise VerificationError(f"{data_root}/{task}.npz is not the sealed public split (its case order "
                                    "differs)", path=str(data_root))
        return CaseSet(ids, split.images, split.labels)
    case_ids = [o.case_id for o in openings]
    images, labels, hashes = load_pool_cases(store, task, case_ids)
    for i, o in enumerate(openings):
        if hashes[i] != o.content_sha256 or int(labels[i]) != o.label or \
                content_sha256(images[i], int(labels[i])) != o.content_sha256:
            raise VerificationError(f"the private pool's copy of {o.case_id} does not match its seal",
                                    case_id=o.case_id)
    return CaseSet(case_ids, images, np.asarray(labels, dtype=np.int64))


def prove_member(store: Store, ledger: Ledger, generation: str, case: str) -> MemberProof:
    """The membership proof of one case: its opening and its inclusion path in the set tree."""
    state = generation_state(ledger, generation)
    reveal = load_opening(store, ledger.ledger_id, state)
    match = [o for o in reveal.openings if o.case_id == case]
    if not match:
        raise UsageError(f"case {case} is not in {generation}", case_id=case, field="case_id")
    opening = match[0]
    index, path = inclusion_path(list(reveal.listed_commitments), opening.commitment)
    return MemberProof(generation=generation, set_hash=state.set_hash, case_id=opening.case_id,
                       task=opening.task, content_sha256=opening.content_sha256, label=opening.label,
                       salt=opening.salt, leaf_index=index, tree_size=len(reveal.openings), path=tuple(path))
