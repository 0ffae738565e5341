"""Openings and reveals: the document that lets anyone recompute a generation's set hash.

The **opening** of a generation, written under ``private/`` when it is sealed, and the **reveal**, published
as a blob when it is retired with ``--reveal``, are the same document (the reveal may add ``images``):

    {"type": "heldout/reveal", "reveal_version": 1, "generation", "ledger_id", "set_hash",
     "manifest_sha256", "membership", "commitment_scheme", "n_cases",
     "cases": [{"case_id", "task", "content_sha256", "label", "salt", "commitment"}, ...],
     "images": null | {task: SHA-256 of an npz blob with case_ids, labels, images},
     "order": null | {task: [case ids in evaluation order]},
     "pools": null | {task: [every commitment of the task's committed pool, ascending, lowercase hex]}}

Cases are listed in leaf order (commitments ascending); ``salt`` and ``commitment`` are lowercase hex (the
salt is empty for the public generation). Each case carries its commitment so that a verifier that finds a
wrong one can name the case: :func:`verify_reveal` recomputes every commitment from (salt, case id, content
hash, label), checks the id against the content hash, the counts against the manifest, the root of the
listed commitments against the manifest's set hash, and (when images are revealed) every content hash from
its image. **Evaluation order** (the order of a task's cases in every bundle's predictions): ascending case id
for sealed generations (``order`` is null); for ``public``, the official file order, recorded in ``order``.
**Pools** (sealed generations; null for ``public``): the commitment list of each task's pool commitment
(``heldout/generations/draw.py``), so a verifier recomputes the pool root the ``pool`` entry logged and the
draw the seed selects; the cases that were not drawn stay hidden (their salts were never published). The check:
:func:`verify_draw`. Canonical bytes: ``seals.canonical_bytes``; ``reveal_sha256`` is the SHA-256 of those bytes.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.metrics.npz import load_npz
from harness.provenance import check_known_task, n_classes
from heldout.generations.budget import TaskShape, check_stated_budget
from heldout.generations.cases import CASE_ID_PATTERN, content_sha256
from heldout.generations.commitments import SALT_BYTES, commitment, hex_bytes, set_hash
from heldout.generations.draw import DrawRecord, check_drawn, check_drawn_before_sealed, check_pool, recompute_seed
from heldout.generations.state import BlobSource
from keys import HeldoutError, MalformedInput, VerificationError
from ledger.checkpoint import parse_checkpoint
from seals import canonical_bytes
from seals.manifest import COMMITMENT_SCHEME, SealManifest

REVEAL_TYPE = "heldout/reveal"
REVEAL_VERSION = 1
_CASE_MEMBERS = ("case_id", "task", "content_sha256", "label", "salt", "commitment")
_TOP_MEMBERS = frozenset({"type", "reveal_version", "generation", "ledger_id", "set_hash", "manifest_sha256",
                          "membership", "commitment_scheme", "n_cases", "cases", "images", "order", "pools"})


@dataclass(frozen=True)
class CaseOpening:
    """What opens one case's commitment."""

    case_id: str
    task: str
    content_sha256: str
    label: int
    salt: bytes

    @property
    def commitment(self) -> bytes:
        return commitment(self.salt, self.case_id, self.content_sha256, self.label)

    def to_json(self, commitment_bytes: bytes | None = None) -> dict[str, Any]:
        return {"case_id": self.case_id, "task": self.task, "content_sha256": self.content_sha256,
                "label": self.label, "salt": self.salt.hex(),
                "commitment": (commitment_bytes or self.commitment).hex()}


def build_reveal(*, generation: str, ledger_id: str, manifest_sha256: str, membership: str,
                 openings: Sequence[CaseOpening], images: Mapping[str, str] | None = None,
                 order: Mapping[str, Sequence[str]] | None = None,
                 pools: Mapping[str, Sequence[bytes]] | None = None) -> dict[str, Any]:
    """The reveal (or opening) document, cases in leaf order."""
    with_commitments = sorted(((o.commitment, o) for o in openings), key=lambda pair: pair[0])
    return {
        "type": REVEAL_TYPE,
        "reveal_version": REVEAL_VERSION,
        "generation": generation,
        "ledger_id": ledger_id,
        "set_hash": set_hash([c for c, _ in with_commitments]),
        "manifest_sha256": manifest_sha256,
        "membership": membership,
        "commitment_scheme": COMMITMENT_SCHEME,
        "n_cases": len(with_commitments),
        "cases": [o.to_json(c) for c, o in with_commitments],
        "images": dict(sorted(images.items())) if images else None,
        "order": {task: list(ids) for task, ids in sorted(order.items())} if order else None,
        "pools": {task: [c.hex() for c in sorted(pool)] for task, pool in sorted(pools.items())} if pools else None,
    }


def reveal_bytes(doc: Mapping[str, Any]) -> bytes:
    return canonical_bytes(dict(doc))


@dataclass(frozen=True)
class RevealDocument:
    generation: str
    ledger_id: str
    set_hash: str
    manifest_sha256: str
    membership: str
    openings: tuple[CaseOpening, ...]
    listed_commitments: tuple[bytes, ...]
    images: Mapping[str, str] | None
    order: Mapping[str, tuple[str, ...]] | None = None
    pools: Mapping[str, tuple[bytes, ...]] | None = None

    def task_cases(self, task: str) -> list[CaseOpening]:
        """The task's cases in evaluation order (ascending case id, or the recorded ``order``)."""
        cases = {o.case_id: o for o in self.openings if o.task == task}
        if self.order is not None and task in self.order:
            return [cases[cid] for cid in self.order[task]]
        return [cases[cid] for cid in sorted(cases)]

    def task_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for o in self.openings:
            counts[o.task] = counts.get(o.task, 0) + 1
        return dict(sorted(counts.items()))

    def by_case_id(self) -> dict[str, CaseOpening]:
        return {o.case_id: o for o in self.openings}


def _where(i: int, case: Any) -> str:
    cid = case.get("case_id") if isinstance(case, dict) else None
    return f"case #{i} ({cid})" if isinstance(cid, str) else f"case #{i}"


def parse_reveal(doc: Any, *, what: str = "reveal") -> RevealDocument:
    """Parse the shape of a reveal; raises :class:`MalformedInput` naming the member or the case."""
    if not isinstance(doc, dict):
        raise MalformedInput(f"{what} is not a JSON object")
    unknown = set(doc) - _TOP_MEMBERS
    missing = _TOP_MEMBERS - set(doc)
    if unknown or missing:
        raise MalformedInput(f"{what} has unknown members {sorted(unknown)} or lacks {sorted(missing)}",
                             field=sorted(unknown | missing)[0])
    if doc["type"] != REVEAL_TYPE or doc["reveal_version"] != REVEAL_VERSION:
        raise MalformedInput(f"{what} is not a heldout reveal v{REVEAL_VERSION}", field="type",
                             found=f"{doc['type']} v{doc['reveal_version']}")
    for member in ("generation", "ledger_id", "set_hash", "manifest_sha256", "membership"):
        if not isinstance(doc[member], str):
            raise MalformedInput(f"{what} {member} must be a string", field=member)
    cases = doc["cases"]
    if not isinstance(cases, list) or not cases:
        raise MalformedInput(f"{what} lists no cases", field="cases")
    if doc["n_cases"] != len(cases):
        raise MalformedInput(f"{what} n_cases says {doc['n_cases']} but lists {len(cases)} cases",
                             field="n_cases", expected=len(cases), found=doc["n_cases"])
    salt_size = 0 if doc["membership"] == "public" else SALT_BYTES
    openings: list[CaseOpening] = []
    listed: list[bytes] = []
    for i, case in enumerate(cases):
        where = _where(i, case)
        if not isinstance(case, dict) or set(case) != set(_CASE_MEMBERS):
            raise MalformedInput(f"{what}: {where} must have exactly {list(_CASE_MEMBERS)}", index=i,
                                 case_id=case.get("case_id") if isinstance(case, dict) else None)
        label = case["label"]
        if isinstance(label, bool) or not isinstance(label, int) or label < 0:
            raise MalformedInput(f"{what}: {where} label must be a non-negative integer", index=i,
                                 case_id=str(case["case_id"]), field="label")
        for member in ("case_id", "task"):
            if not isinstance(case[member], str):
                raise MalformedInput(f"{what}: {where} {member} must be a string", index=i, field=member)
        try:
            hex_bytes(case["content_sha256"], size=32, what="content_sha256")
            salt = hex_bytes(case["salt"], size=salt_size, what="salt")
            listed.append(hex_bytes(case["commitment"], size=32, what="commitment"))
        except MalformedInput as exc:
            raise MalformedInput(f"{what}: {where} {exc.message}", index=i, case_id=case["case_id"],
                                 field=exc.evidence.get("field")) from None
        openings.append(CaseOpening(case_id=case["case_id"], task=case["task"],
                                    content_sha256=case["content_sha256"], label=label, salt=salt))
    images = doc["images"]
    if images is not None and (not isinstance(images, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in images.items())):
        raise MalformedInput(f"{what} images must be null or an object {{task: sha256}}", field="images")
    order = doc["order"]
    if order is not None:
        if not isinstance(order, dict) or not all(
                isinstance(ids, list) and all(isinstance(c, str) for c in ids) for ids in order.values()):
            raise MalformedInput(f"{what} order must be null or an object {{task: [case ids]}}", field="order")
        for task, ids in order.items():
            expected = sorted(o.case_id for o in openings if o.task == task)
            if sorted(ids) != expected or not expected:
                raise MalformedInput(f"{what} order of {task} is not exactly that task's cases", field="order",
                                     found=task)
        order = {task: tuple(ids) for task, ids in order.items()}
    pools = doc["pools"]
    if pools is not None:
        if not isinstance(pools, dict) or not all(isinstance(v, list) for v in pools.values()):
            raise MalformedInput(f"{what} pools must be null or an object {{task: [commitments]}}", field="pools")
        pools = {task: tuple(hex_bytes(c, size=32, what=f"pools.{task}[]") for c in listed_pool)
                 for task, listed_pool in pools.items()}
    return RevealDocument(generation=doc["generation"], ledger_id=doc["ledger_id"], set_hash=doc["set_hash"],
                          manifest_sha256=doc["manifest_sha256"], membership=doc["membership"],
                          openings=tuple(openings), listed_commitments=tuple(listed), images=images, order=order,
                          pools=pools)


def _case_error(i: int, opening: CaseOpening, message: str, **evidence: Any) -> VerificationError:
    return VerificationError(f"case #{i} {opening.case_id}: {message}", index=i, case_id=opening.case_id,
                             **evidence)


def verify_reveal(doc: Any, manifest: SealManifest, *, image_blobs: BlobSource | None = None,
                  manifest_sha256: str | None = None) -> RevealDocument:
    """Check a reveal against its signed manifest (already verified by the caller); raise naming the first
    case that does not match. ``manifest_sha256``: the hash of the manifest file, checked when given."""
    reveal = parse_reveal(doc)
    for member, expected in (("generation", manifest.generation), ("ledger_id", manifest.ledger_id),
                             ("set_hash", manifest.set_hash), ("membership", manifest.membership),
                             ("manifest_sha256", manifest_sha256)):
        found = getattr(reveal, member)
        if expected is not None and found != expected:
            raise VerificationError(f"the reveal's {member} is not the manifest's", field=member,
                                    expected=expected, found=found)
    seen: set[str] = set()
    previous = b""
    for i, (opening, listed) in enumerate(zip(reveal.openings, reveal.listed_commitments, strict=True)):
        match = CASE_ID_PATTERN.fullmatch(opening.case_id)
        if not match or match.group(1) != opening.task or match.group(2) != opening.content_sha256[:16] or (
                match.group(3) and manifest.membership != "public"):
            raise _case_error(i, opening, "the case id is not <task>-<first 16 hex of its content hash>",
                              field="case_id", expected=f"{opening.task}-{opening.content_sha256[:16]}")
        if opening.case_id in seen:
            raise _case_error(i, opening, "the case is listed twice", field="case_id")
        seen.add(opening.case_id)
        recomputed = opening.commitment
        if recomputed != listed:
            raise _case_error(i, opening, "its commitment does not open with the revealed id, content hash, "
                              "label and salt", field="commitment", expected=recomputed.hex(),
                              found=listed.hex())
        if listed <= previous:
            raise _case_error(i, opening, "cases are not in leaf order (commitments ascending, no repeats)",
                              field="commitment")
        previous = listed
    counts = reveal.task_counts()
    if counts != manifest.task_counts:
        raise VerificationError("the reveal's case counts per task are not the manifest's", field="tasks",
                                expected=manifest.task_counts, found=counts)
    root = set_hash(list(reveal.listed_commitments))
    if root != manifest.set_hash:
        raise VerificationError("the revealed commitments do not hash to the manifest's set hash",
                                field="set_hash", expected=manifest.set_hash, found=root)
    verify_draw(reveal, manifest)
    verify_budget(manifest, reveal)
    if reveal.images is not None:
        if image_blobs is None:
            raise VerificationError("the reveal names image blobs but no blob store was given to check them",
                                    field="images")
        verify_reveal_images(reveal, image_blobs)
    return reveal


def verify_budget(manifest: SealManifest, reveal: RevealDocument | None = None, *, index: int | None = None) -> None:
    """The manifest's leakage budget is what its rule gives (``budget.check_stated_budget``): from what the
    manifest states alone, or, with the generation's ``reveal`` (or the operator's private opening), exactly,
    from its cases' labels: each task's smallest class, of which the weakest bounds the budget. Raises
    :class:`keys.VerificationError` naming the member that differs."""
    classes: dict[str, int] = {}
    for task in manifest.task_counts:
        try:
            classes[task] = n_classes(check_known_task(task))
        except HeldoutError:
            raise VerificationError(f"the seal manifest of {manifest.generation} names a task no budget rule "
                                    f"knows: {task!r}", index=index, field="tasks", found=task[:80]) from None
    shapes: list[TaskShape] | None = None
    if reveal is not None:
        shapes = []
        for task, count in classes.items():
            labels = [o.label for o in reveal.openings if o.task == task]
            wrong = next((label for label in labels if label >= count), None)
            if wrong is not None:
                raise VerificationError(f"a case of {task} in {manifest.generation} has label {wrong}, which the "
                                        f"task's {count} classes do not hold", index=index, field="label",
                                        expected=f"< {count}", found=wrong)
            shapes.append(TaskShape.from_labels(task, labels, count))
    check_stated_budget(manifest.generation, manifest.release.mode, manifest.task_counts, classes,
                        manifest.leakage_budget, shapes=shapes, index=index)


def verify_draw(reveal: RevealDocument, manifest: SealManifest) -> None:
    """The drawn cases must be exactly the ones the manifest's seed selects from the committed pools: each
    revealed pool hashes to the pool root the manifest records, the seed follows from its recorded material,
    and the draw (``heldout-draw-v1``) selects exactly the revealed commitments of each task. The manifest's
    binding to the ``pool`` and ``intent`` entries and to the ledger's checkpoint is checked with the ledger
    (``heldout.generations.verify.check_manifest_binding``)."""
    if manifest.membership == "public":
        if reveal.pools is not None:
            raise VerificationError("the public generation is not drawn: its reveal lists no pools", field="pools")
        return
    if manifest.draw is None:
        raise VerificationError(f"the seal manifest of {manifest.generation} records no draw: it was not drawn "
                                "from a committed pool with a seed the operator could not choose", field="draw")
    draw = DrawRecord.from_json(manifest.draw)
    if reveal.pools is None or set(reveal.pools) != set(manifest.task_counts) or set(draw.pools) != set(reveal.pools):
        raise VerificationError(f"the reveal of {manifest.generation} does not publish the committed pool of each "
                                "task", field="pools", expected=sorted(manifest.task_counts),
                                found=sorted(reveal.pools or {}))
    seed = recompute_seed(draw, checkpoint_root_of(draw))
    check_drawn_before_sealed(manifest.generation, manifest.created, draw)
    for task in sorted(reveal.pools):
        pool = reveal.pools[task]
        check_pool(task, pool, draw.pools[task])
        drawn = {o.commitment: o.case_id for o in reveal.openings if o.task == task}
        check_drawn(manifest.generation, task, seed, pool, drawn)


def checkpoint_root_of(draw: DrawRecord) -> bytes:
    """The root of the checkpoint the draw's seed material comes from (its signature is checked with the ledger
    key by the binding check; here only the root is read)."""
    checkpoint = parse_checkpoint(draw.checkpoint_note)
    if checkpoint.size != draw.checkpoint_size:
        raise VerificationError("the draw's checkpoint note is not of the size it records", field="draw.checkpoint",
                                expected=draw.checkpoint_size, found=checkpoint.size)
    return checkpoint.root


def image_npz_bytes(case_ids: Sequence[str], labels: np.ndarray, images: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    # C order: FORMATS section 10 refuses a Fortran-order member (every reader of the format reads it alike)
    np.savez(buffer, case_ids=np.asarray(list(case_ids), dtype=np.str_), labels=labels.astype(np.int64),
             images=np.ascontiguousarray(images))
    return buffer.getvalue()


def verify_reveal_images(reveal: RevealDocument, blobs: BlobSource) -> None:
    """Recompute every case's content hash from its revealed image; raise naming the first mismatch."""
    position = {o.case_id: i for i, o in enumerate(reveal.openings)}
    covered: set[str] = set()
    for task, sha in (reveal.images or {}).items():
        try:
            data = load_npz(blobs.get(sha), what=f"the image blob of task {task}",
                            members=frozenset({"case_ids", "images"}), c_order_only=True)
            case_ids = [str(c) for c in data["case_ids"]]
            images = data["images"]
        except KeyError as exc:
            raise VerificationError(f"the image blob of task {task} is not a reveal image file",
                                    field=f"images.{task}", found=type(exc).__name__) from None
        if len(case_ids) != len(images):
            raise VerificationError(f"the image blob of task {task} is inconsistent", field=f"images.{task}")
        for cid, image in zip(case_ids, images, strict=True):
            if cid not in position:
                raise VerificationError(f"the image blob of task {task} holds a case not in the reveal: {cid}",
                                        case_id=cid, field=f"images.{task}")
            i = position[cid]
            opening = reveal.openings[i]
            if content_sha256(np.asarray(image), opening.label) != opening.content_sha256:
                raise _case_error(i, opening, "its revealed image and label do not hash to its content hash",
                                  field="content_sha256")
            covered.add(cid)
    missing = [o.case_id for o in reveal.openings if o.task in (reveal.images or {}) and o.case_id not in covered]
    if missing:
        raise VerificationError(f"the revealed images lack case {missing[0]}", case_id=missing[0],
                                field="images")


def revealed_labels(reveal: RevealDocument, task: str) -> tuple[list[str], np.ndarray]:
    """A revealed task's case ids and int64 labels in evaluation order: what a third-party audit needs to
    re-derive the bundles of a revealed (or the public) generation without any private file."""
    cases = reveal.task_cases(task)
    return [o.case_id for o in cases], np.asarray([o.label for o in cases], dtype=np.int64)
