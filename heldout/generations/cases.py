"""Cases: the content hash and stable id of one held-out case, and reading MedMNIST-layout npz files.

**content_sha256 (scheme ``heldout-case-v1``)** of an image with its label:

    SHA-256( JCS({"dtype": "uint8", "label": L, "scheme": "heldout-case-v1", "shape": [H, W(, C)]})
             || 0x0A || image bytes in C order )

where JCS is RFC 8785 (the header never contains a raw newline, so the split is unambiguous), ``L`` is the
integer class label and the shape is the image's own (one case, without the batch axis). The reveal and the
audit recompute it from the images.

**case id** = ``<task>-<first 16 hex of content_sha256>``. Identical (image, label) pairs are one case: a
pool keeps the first. In the official test split (the ``public`` generation, kept whole and in file order)
a repeated pair gets ``-2``, ``-3``, ... appended, in order of appearance.

Only single-label tasks are in scope (MedEval-1): labels are N x 1 (or N) integers.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from harness.metrics.npz import read_npz_file
from harness.provenance import check_known_task
from keys import MalformedInput, UsageError
from seals import jcs_bytes

CASE_SCHEME = "heldout-case-v1"
SPLITS = ("test", "val", "train")
TASK_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,63}")
CASE_ID_PATTERN = re.compile(r"([a-z][a-z0-9_]{0,63})-([0-9a-f]{16})(?:-([1-9][0-9]*))?")
ImageArray = NDArray[np.uint8]
LabelArray = NDArray[np.int64]


def check_task(task: str) -> str:
    """A task name MedEval-1 knows (``harness.provenance``), else a usage error before anything is written."""
    if not isinstance(task, str) or not TASK_PATTERN.fullmatch(task):
        raise UsageError(f"task {task!r} is not a task name (lowercase letters, digits, '_'; e.g. bloodmnist)",
                         found=str(task)[:60])
    return check_known_task(task)


def content_header(shape: tuple[int, ...], label: int) -> bytes:
    return jcs_bytes({"dtype": "uint8", "label": int(label), "scheme": CASE_SCHEME, "shape": list(shape)})


def content_sha256(image: ImageArray, label: int) -> str:
    """The content hash of one case (see the module docstring)."""
    if image.dtype != np.uint8:
        raise MalformedInput("case images are uint8", expected="uint8", found=str(image.dtype))
    digest = hashlib.sha256(content_header(tuple(int(d) for d in image.shape), label))
    digest.update(b"\n")
    digest.update(np.ascontiguousarray(image).tobytes(order="C"))
    return digest.hexdigest()


def content_hashes(images: ImageArray, labels: LabelArray) -> list[str]:
    return [content_sha256(images[i], int(labels[i])) for i in range(len(labels))]


def case_id(task: str, content_hash: str) -> str:
    return f"{task}-{content_hash[:16]}"


def task_of(case: str) -> str:
    match = CASE_ID_PATTERN.fullmatch(case)
    if not match:
        raise MalformedInput(f"{case!r} is not a case id <task>-<16 hex>", found=str(case)[:80])
    return match.group(1)


def public_case_ids(task: str, hashes: list[str]) -> list[str]:
    """Case ids for a split kept whole and in order: repeats of one (image, label) get -2, -3, ..."""
    seen: dict[str, int] = {}
    out = []
    for h in hashes:
        base = case_id(task, h)
        count = seen.get(base, 0) + 1
        seen[base] = count
        out.append(base if count == 1 else f"{base}-{count}")
    return out


@dataclass(frozen=True)
class SplitArrays:
    """One split of an npz file: uint8 images (N x H x W or N x H x W x C) and int64 labels (N)."""

    images: ImageArray
    labels: LabelArray


def read_split(path: Path, split: str = "test") -> SplitArrays:
    """Read ``{split}_images`` and ``{split}_labels`` from a MedMNIST-layout npz file, strictly: uint8
    images of rank 3 or 4, one integer label per image (N x 1 or N), no pickled objects. The file is the
    operator's own input (a pool to add, the official split to seal or evaluate on): anything wrong with it is
    bad input (:class:`UsageError`, exit 2), not tampering."""
    if split not in SPLITS:
        raise UsageError(f"--split is one of {', '.join(SPLITS)}", found=split)
    if not path.exists():
        raise UsageError(f"no file at {path}", path=str(path))
    try:
        return _read_split(path, split)
    except MalformedInput as exc:
        raise UsageError(exc.message, **{"path": str(path), **exc.evidence}) from None


def _read_split(path: Path, split: str) -> SplitArrays:
    wanted = (f"{split}_images", f"{split}_labels")
    data = read_npz_file(path, what=path.name, members=frozenset(wanted))
    missing = [k for k in wanted if k not in data]
    if missing:
        raise MalformedInput(
            f"{path.name} has no {' or '.join(missing)} (MedMNIST layout: {{train,val,test}}_{{images,labels}})",
            path=str(path), expected=list(wanted))
    images, labels = data[wanted[0]], data[wanted[1]]
    if images.dtype != np.uint8 or images.ndim not in (3, 4) or len(images) == 0:
        raise MalformedInput(f"{path.name}: {split}_images must be uint8 N x H x W or N x H x W x C",
                             path=str(path), found=f"{images.dtype} {images.shape}")
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if labels.ndim != 1 or labels.dtype.kind not in "iu":
        raise MalformedInput(
            f"{path.name}: {split}_labels must be integers N x 1 (multi-label tasks are outside MedEval-1)",
            path=str(path), found=f"{labels.dtype} {labels.shape}")
    if len(labels) != len(images):
        raise MalformedInput(f"{path.name}: {len(images)} images but {len(labels)} labels", path=str(path),
                             expected=len(images), found=len(labels))
    if len(labels) and labels.min() < 0:
        raise MalformedInput(f"{path.name}: labels must be non-negative", path=str(path), found=int(labels.min()))
    if len(labels) and int(labels.max()) > np.iinfo(np.int64).max:  # (judged on the file's own type: a cast
        # first turned 2^63 into a negative "found")
        raise MalformedInput(f"{path.name}: a label is too large (a class index, 0 to a few dozen)", path=str(path),
                             found=int(labels.max()))
    return SplitArrays(np.ascontiguousarray(images), labels.astype(np.int64))
