"""Task data in the official MedMNIST npz layout, from a local root; downloads only when asked and online.

A file holds ``{train,val,test}_{images,labels}``: uint8 images (N, H, W) for grey or (N, H, W, 3) for
colour, and uint8 labels (N, 1). A file is official only when its MD5 is medmnist's (``harness.provenance``);
those go through medmnist's own dataset classes. Any other file (synthetic, local, a private pool) is read
with numpy directly and labelled with its own SHA-256 and origin; the class counts prove nothing.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from harness.metrics.npz import read_npz_file
from harness.provenance import FileProvenance, file_provenance
from harness.tasks import SPLITS, TaskSpec, capped_train_indices, import_medmnist
from keys.errors import MalformedInput, UsageError
from keys.safeio import not_a_file, path_kind

DOWNLOAD_HOST: Final = ("zenodo.org", 443)
#: How long a download may wait to learn that the network is not there (never a hang).
CONNECT_TIMEOUT_S: Final = 5.0

UInt8Array = NDArray[np.uint8]
LabelArray = NDArray[np.int64]


@dataclass(frozen=True)
class TaskData:
    """The three splits of one task: uint8 images and int64 labels of shape (N,)."""

    task: str
    train_images: UInt8Array
    train_labels: LabelArray
    val_images: UInt8Array
    val_labels: LabelArray
    test_images: UInt8Array
    test_labels: LabelArray
    source: str  # the file it came from, or a description of where the arrays came from
    loaded_with: str  # "medmnist.BloodMNIST" or "numpy (synthetic file)"
    provenance: FileProvenance | None = None  # None for arrays that did not come from a task file

    @property
    def n_train(self) -> int:
        return int(self.train_labels.shape[0])

    @property
    def n_test(self) -> int:
        return int(self.test_labels.shape[0])

    def capped_train(self, size: int, seed: int) -> tuple[UInt8Array, LabelArray]:
        """The training split trained models use: capped at TRAIN_CAP[size] by a seeded subset."""
        index = capped_train_indices(self.n_train, size, seed)
        return self.train_images[index], self.train_labels[index]


def default_data_root() -> Path:
    """medmnist's own default root (``~/.medmnist``); never created here."""
    return Path.home() / ".medmnist"


def task_file(spec: TaskSpec, root: Path | None = None) -> Path:
    return (root if root is not None else default_data_root()) / spec.file_name


def load_task(spec: TaskSpec, root: Path | None = None, *, download: bool = False) -> TaskData:
    """Load ``spec``'s npz from ``root`` (default medmnist's); with ``download`` fetch it first if missing. The
    file is the operator's own input: anything wrong with it is bad input (:class:`UsageError`, exit 2), not
    tampering, as for a pool file."""
    try:
        return _load_task(spec, root, download=download)
    except MalformedInput as exc:
        raise UsageError(exc.message, **{"file": str(task_file(spec, root)), **exc.evidence}) from None


def _load_task(spec: TaskSpec, root: Path | None, *, download: bool) -> TaskData:
    path = task_file(spec, root)
    if not path.is_file():
        if path_kind(path) is not None:  # something else stands there: downloading would not help
            raise UsageError(not_a_file(path, "task file"), file=str(path))
        if not download:
            raise UsageError(
                f"{path} not found: download it with --download (needs the network), put the official file "
                f"{spec.file_name} there ({spec.url}), or write a synthetic one with "
                f"`heldout data synth {spec.task} --out {path.parent}`",
                file=str(path))
        _download(spec, path)
    provenance = file_provenance(path, spec.task)
    if provenance.official:
        arrays, loaded_with = _through_medmnist(spec, path.parent), f"medmnist.{spec.python_class}"
    else:
        arrays = _read_npz(spec, path, ("images", "labels"))
        loaded_with = f"numpy ({provenance.origin} file sha256:{provenance.sha256})"
    checked = {name: _check_array(spec, path, name, array) for name, array in arrays.items()}
    return TaskData(
        task=spec.task,
        train_images=checked["train_images"], train_labels=checked["train_labels"],
        val_images=checked["val_images"], val_labels=checked["val_labels"],
        test_images=checked["test_images"], test_labels=checked["test_labels"],
        source=str(path), loaded_with=loaded_with, provenance=provenance,
    )


def _read_npz(spec: TaskSpec, path: Path, kinds: tuple[str, ...]) -> dict[str, Any]:
    """The arrays ``{split}_{kind}`` for ``kind`` in ``kinds`` (keys are the split alone for one kind)."""
    wanted = frozenset(f"{s}_{k}" for s in SPLITS for k in kinds)
    npz = read_npz_file(path, what=str(path), members=wanted)  # regular file, headers checked before loading
    missing = sorted(wanted - set(npz))
    if missing:
        raise MalformedInput(f"{path} lacks the official keys {missing}", file=str(path),
                             expected=sorted(wanted), found=sorted(npz))
    if len(kinds) == 1:
        return {s: npz[f"{s}_{kinds[0]}"] for s in SPLITS}
    return {f"{s}_{k}": npz[f"{s}_{k}"] for s in SPLITS for k in kinds}


def _through_medmnist(spec: TaskSpec, root: Path) -> dict[str, Any]:
    medmnist = import_medmnist()
    dataset_class = getattr(medmnist, spec.python_class)
    arrays: dict[str, Any] = {}
    for split in SPLITS:
        dataset = dataset_class(split=split, root=str(root), download=False, size=spec.size)
        len(dataset)  # medmnist's own check of the official count
        arrays[f"{split}_images"], arrays[f"{split}_labels"] = dataset.imgs, dataset.labels
    return arrays


def _check_array(spec: TaskSpec, path: Path, name: str, array: Any) -> Any:
    if name.endswith("_images"):
        if array.dtype != np.uint8 or array.shape[1:] != spec.image_shape:
            raise MalformedInput(
                f"{path}: {name} must be uint8 of shape (N, {', '.join(map(str, spec.image_shape))})",
                file=str(path), field=name, expected=["uint8", list(spec.image_shape)],
                found=[str(array.dtype), list(array.shape[1:])])
        return np.ascontiguousarray(array)
    labels = array[:, 0] if array.ndim == 2 and array.shape[1] == 1 else array
    if labels.ndim != 1 or labels.dtype.kind not in "iu":
        raise MalformedInput(f"{path}: {name} must be integer labels of shape (N, 1)", file=str(path), field=name,
                             found=[str(array.dtype), list(array.shape)])
    if labels.size and (labels.min() < 0 or labels.max() >= spec.n_classes):
        raise MalformedInput(f"{path}: {name} must lie in 0..{spec.n_classes - 1}", file=str(path), field=name,
                             found=[int(labels.min()), int(labels.max())])
    return labels.astype(np.int64)


def _download(spec: TaskSpec, path: Path) -> None:
    """Fetch the official file with medmnist's downloader, after a bounded check that the host is reachable."""
    if os.environ.get("HELDOUT_OFFLINE"):
        raise UsageError(f"{path} not found and HELDOUT_OFFLINE is set: fetch {spec.url} yourself", file=str(path))
    try:
        socket.create_connection(DOWNLOAD_HOST, timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise UsageError(f"{path} not found and {DOWNLOAD_HOST[0]} is unreachable ({exc}): download {spec.url} "
                         f"on a connected machine and put it at {path}", file=str(path)) from None
    path.parent.mkdir(parents=True, exist_ok=True)
    dataset_class = getattr(import_medmnist(), spec.python_class)
    try:
        dataset_class(split="test", root=str(path.parent), download=True, size=spec.size)
    except RuntimeError as exc:
        raise UsageError(f"downloading {spec.file_name} failed: {str(exc).strip().splitlines()[0]}",
                         file=str(path)) from None
