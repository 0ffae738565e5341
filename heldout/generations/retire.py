"""Retiring a generation, and revealing it.

``retire`` appends ``{type: retire, generation, reason, created_utc}``. With ``reveal``, the generation's
opening (each case's id, content hash, label, salt and commitment; optionally the images, as one npz blob
per task) is checked against the sealed set hash, stored as a blob, copied to ``seals/<gen>.reveal.json``,
and ``{type: reveal, generation, reveal_sha256, created_utc}`` is appended in the same batch as the retire.
The image blobs are also named in the reveal entry (``image_blobs: {<task>_sha256: ...}``) so a ledger export
copies them. A generation already retired but not revealed can be revealed later (only the reveal is appended). Every
check runs before anything is written; every file is staged under ``private/staging/`` and published only
after the entries are logged (``heldout.staging``), so a failed or killed retire publishes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from heldout.entries import BundleEntry, RetireEntry, RevealEntry, records
from heldout.generations.access import load_opening, noise_path, opening_path, withheld_blobs_path
from heldout.generations.ledgers import generations_lock
from heldout.generations.pools import load_pool_cases
from heldout.generations.release import THRESHOLDOUT, WITHHOLDING_MODES
from heldout.generations.reveal import image_npz_bytes, reveal_bytes, verify_reveal
from heldout.generations.seal import reveal_path
from heldout.generations.state import RETIRE_REASONS, GenerationState, load_generations, utc
from heldout.staging import StagedOperation, staged_operation
from heldout.store import Store
from keys import Signer, UsageError
from keys.files import read_private_file
from ledger import BlobStore, Ledger
from seals import format_utc, parse_json_object, sha256_hex
from seals.manifest import SealManifest


@dataclass(frozen=True)
class RetireResult:
    generation: str
    retire_index: int | None
    reveal_index: int | None
    reveal_sha256: str | None
    note: str | None = None
    published: int = 0  # withheld blobs made public by this retirement
    #: committed withheld blobs (and a Thresholdout noise secret) this store no longer holds: every audit reports
    #: their bundles as failed, since what they committed to can no longer be checked
    missing_withheld: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def retire_generation(store: Store, ledger: Ledger, signer: Signer, generation: str, reason: str | None,
                      now: datetime, *, reveal: bool = False, with_images: bool = False) -> RetireResult:
    now = utc(now)
    if with_images and not reveal:
        raise UsageError("--with-images goes with --reveal", field="with_images")
    with generations_lock(ledger, store):
        generations = load_generations(ledger, now)
        state = generations.get(generation)
        if state is None:
            raise UsageError(f"no generation {generation!r} is sealed on this ledger", field="generation",
                             found=generation, expected=sorted(generations))
        retire = state.retire_index is None
        note = None
        if not retire:
            if not reveal or state.revealed:
                raise UsageError(f"{generation} is already retired (entry {state.retire_index}, "
                                 f"{state.retire_reason})" + (" and revealed" if state.revealed else ""),
                                 field="generation", index=state.retire_index, found="retired")
            note = f"already retired at entry {state.retire_index}: revealing only"
        elif reason not in RETIRE_REASONS:
            raise UsageError(f"--reason is one of {', '.join(RETIRE_REASONS)}", field="reason", found=reason)
        if reveal and state.revealed:
            note = f"already revealed at entry {state.reveal_index}"
            reveal = False
        entries: list[Mapping[str, Any]] = []
        if retire:
            entries.append(RetireEntry(generation=generation, reason=str(reason),
                                       created_utc=format_utc(now)).to_entry())
        reveal_digest = None
        document = None
        if reveal:
            opening = load_opening(store, ledger.ledger_id, state)  # checked against the sealed set hash
            document = parse_json_object(read_private_file(
                opening_path(store, ledger.ledger_id, generation, state.set_hash)), what="opening")
            # A reveal is logged for good: it must pass everything a verifier will check (its draw, its pools),
            # not only its set hash, or a damaged private opening becomes a permanent finding.
            manifest = SealManifest.verify(parse_json_object(BlobStore(store.blobs).get(state.manifest_sha256),
                                                             what=f"seal manifest of {generation}"), ledger.key)
            verify_reveal(document, manifest, manifest_sha256=state.manifest_sha256)
        # Every revealed byte waits in private/staging until the entries are logged (heldout.staging).
        with staged_operation(store, ledger, "retire") as staged:
            if document is not None:
                if with_images and state.membership != "public":
                    images: dict[str, str] = {}
                    for task in state.tasks:
                        ids = [o.case_id for o in opening.openings if o.task == task]
                        pixels, labels, _ = load_pool_cases(store, task, ids)
                        images[task] = staged.blob(image_npz_bytes(ids, np.asarray(labels), pixels),
                                                   label=f"images-{task}")
                    document["images"] = images
                data = reveal_bytes(document)
                reveal_digest = staged.blob(data, label="reveal-blob")
                staged.public_file(reveal_path(store, generation), data, label="reveal")
                extra: dict[str, Any] = {"n_cases": state.n_cases}
                if document.get("images"):
                    # Named in the entry too (as *_sha256 members) so that an export carries the images.
                    extra["image_blobs"] = {f"{task}_sha256": sha for task, sha in document["images"].items()}
                entries.append(RevealEntry(generation=generation, reveal_sha256=reveal_digest,
                                           created_utc=format_utc(now), extra=extra).to_entry())
            # At retirement the withheld bundles and the noise secret become public, staged with the rest: they
            # reach blobs/ only once the retirement is logged (and a recovery after a kill publishes them too).
            withheld, published, missing = stage_withheld(store, ledger, state, staged) if retire else ([], 0, [])
            indices = staged.commit(entries, signer=signer, now=now)
        for path in withheld:  # the public copies are in blobs/ now; the private ones have served
            path.unlink(missing_ok=True)
    retire_index = indices[0] if retire else None
    reveal_index = indices[-1] if document is not None else None
    return RetireResult(generation=generation, retire_index=retire_index, reveal_index=reveal_index,
                        reveal_sha256=reveal_digest, note=note, published=published,
                        missing_withheld=tuple(missing))


def stage_withheld(store: Store, ledger: Ledger, state: GenerationState,
                   staged: StagedOperation) -> tuple[list[Path], int, list[str]]:
    """Stage a retiring ladder / Thresholdout generation's withheld blobs (and its noise secret) for the public
    blob store, where the export finds them through the bundle entries (and the seal entry's noise_sha256) that
    committed their SHA-256 at evaluation time. Returns the private blob files staged (each re-hashed on the
    way), how many blobs will be published, and the committed ones the store no longer holds (said by the
    retire command; every audit reports their bundles as failed)."""
    if state.release_mode not in WITHHOLDING_MODES:
        return [], 0, []
    withheld = BlobStore(withheld_blobs_path(store, ledger.ledger_id))
    public = BlobStore(store.blobs)
    paths: list[Path] = []
    missing: list[str] = []
    for bundle in records(ledger.entries(state.seal_index), BundleEntry):
        if bundle.generation != state.name:
            continue
        for digest in (bundle.evaluation_sha256, bundle.predictions_sha256):
            if withheld.has(digest):
                staged.blob(withheld.get(digest), label=f"withheld-{len(paths)}")
                paths.append(withheld.path(digest))
            elif not public.has(digest):
                missing.append(digest)
    if state.release_mode == THRESHOLDOUT:
        secret_file = noise_path(store, ledger.ledger_id, state.name, state.set_hash)
        secret = read_private_file(secret_file)
        if sha256_hex(secret) == state.release.get("noise_sha256"):
            staged.blob(secret, label="noise-secret")
            return paths, len(paths) + 1, missing
        missing.append(str(state.release.get("noise_sha256")))
    return paths, len(paths), missing
