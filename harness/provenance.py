"""Where a task file came from: official (the MedMNIST release, checked by MD5), synthetic, or local.

Only a file whose MD5 is the one medmnist publishes for that task (``medmnist.INFO[flag]["MD5"]`` /
``["MD5_224"]``) is *official*. Every other file is labelled with its own SHA-256 and an origin:
``synthetic`` when ``heldout data synth`` wrote it (it marks the npz's zip comment with
:data:`SYNTHETIC_MARK`, which leaves the arrays and keys exactly the official ones), else ``local``. The class
counts prove nothing: any file can have them.

The catalogue below is facts from medmnist 3.0.2's ``INFO`` (flags, class counts, MD5s of the 28 px and 224 px
files), held here so that the core commands (``pool add``, ``seal``) know the task names and the official
MD5s without medmnist installed; ``tests/test_provenance.py`` checks it against ``medmnist.INFO`` when the
harness extra is present. Torch-free and medmnist-free.
"""

from __future__ import annotations

import hashlib
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from keys.errors import UsageError

OFFICIAL: Final = "official"
SYNTHETIC: Final = "synthetic"
LOCAL: Final = "local"
SYNTHETIC_MARK: Final = b"heldout-synthetic-v1"
SIZES: Final = (28, 224)

#: flag -> (classes, MD5 of <flag>.npz, MD5 of <flag>_224.npz): the 2D single-label MedMNIST datasets.
CATALOGUE: Final[dict[str, tuple[int, str, str]]] = {
    "bloodmnist": (8, "7053d0359d879ad8a5505303e11de1dc", "b718ff6835fcbdb22ba9eacccd7b2601"),
    "breastmnist": (2, "750601b1f35ba3300ea97c75c52ff8f6", "b56378a6eefa9fed602bb16d192d4c8b"),
    "dermamnist": (7, "0744692d530f8e62ec473284d019b0c7", "8974907d8e169bef5f5b96bc506ae45d"),
    "octmnist": (4, "c68d92d5b585d8d81f7112f81e2d0842", "abc493b6d529d5de7569faaef2773ba3"),
    "organamnist": (11, "68e3f8846a6bd62f0c9bf841c0d9eacc", "50747347e05c87dd3aaf92c49f9f3170"),
    "organcmnist": (11, "b9ceb9546e10131b32923c5bbeaea2b1", "050f5e875dc056f6768abf94ec9995d1"),
    "organsmnist": (11, "9ab87b696fb54e2a387ebe992d6ed5f1", "b354719e553fbbb2513d5533f52a4cb1"),
    "pathmnist": (9, "a8b06965200029087d5bd730944a56c1", "2c51a510bcdc9cf8ddb2af93af1eadec"),
    "pneumoniamnist": (2, "28209eda62fecd6e6a2d98b1501bb15f", "d6a3c71de1b945ea11211b03746c1fe1"),
    "retinamnist": (5, "bd4c0672f1bba3e3a89f0e4e876791e4", "eae7e3b6f3fcbda4ae613ebdcbe35348"),
    "tissuemnist": (8, "ebe78ee8b05294063de985d821c1c34b", "b077128c4a949f0a4eb01517f9037b9c"),
}


#: ``kind`` of an evaluation by image size.
KINDS: Final = {28: "image", 224: "image224"}
#: ``domain`` of every MedEval-1 evaluation.
DOMAIN: Final = "medicine"
#: Human names and modalities. medmnist.INFO has neither in a short form; the reference passport's
#: ``task_name`` and ``modality`` strings are kept verbatim for its six datasets.
TASK_NAMES: Final[dict[str, tuple[str, str]]] = {
    "bloodmnist": ("Peripheral blood cells (8-class)", "Microscopy"),
    "breastmnist": ("Breast ultrasound (malignancy)", "Ultrasound"),
    "dermamnist": ("Dermatoscopy (7-class skin lesion)", "Dermatoscopy"),
    "organcmnist": ("Abdominal CT organs — coronal (C)", "CT"),
    "pneumoniamnist": ("Paediatric chest X-ray (pneumonia)", "Chest X-ray"),
    "retinamnist": ("Fundus photography (DR grade)", "Fundus"),
    "pathmnist": ("Colorectal histology (9-class tissue)", "Histopathology"),
    "octmnist": ("Retinal OCT (4-class)", "OCT"),
    "tissuemnist": ("Kidney cortex cells (8-class)", "Microscopy"),
    "organamnist": ("Abdominal CT organs — axial (A)", "CT"),
    "organsmnist": ("Abdominal CT organs — sagittal (S)", "CT"),
}


def task_description(task: str) -> dict[str, str]:
    """What an evaluation of ``task`` says of its task (MedEval-1's task table: ``task_name``, ``modality``,
    ``kind``, ``domain``), known without medmnist installed; a UsageError for a task MedEval-1 does not know."""
    flag = check_known_task(task).removesuffix("_224")
    name, modality = TASK_NAMES[flag]
    size = 224 if task.endswith("_224") else 28
    return {"task_name": name if size == 28 else f"{name} @{size}px", "modality": modality, "kind": KINDS[size],
            "domain": DOMAIN}


def known_tasks() -> list[str]:
    """Every task name MedEval-1 evaluates: each flag at 28 px (bare) and at 224 px (``_224``)."""
    return sorted(_KNOWN_TASKS)


# Built once: the audit asks for every bundle and evaluation it reads.
_KNOWN_TASKS = frozenset([*CATALOGUE, *(f"{flag}_224" for flag in CATALOGUE)])


def check_known_task(task: str) -> str:
    """``task`` if MedEval-1 knows it, else a usage error listing the names it knows (nothing is written)."""
    if not isinstance(task, str) or task not in _KNOWN_TASKS:
        raise UsageError(f"unknown task {str(task)[:60]!r}: MedEval-1 evaluates the 2D single-label MedMNIST tasks "
                         f"({', '.join(sorted(CATALOGUE))}, each also at _224)", field="tasks",
                         found=str(task)[:60], expected=known_tasks())
    return task


def n_classes(task: str) -> int:
    return CATALOGUE[check_known_task(task).removesuffix("_224")][0]


def official_md5(task: str) -> str:
    _classes, md5_28, md5_224 = CATALOGUE[check_known_task(task).removesuffix("_224")]
    return md5_224 if task.endswith("_224") else md5_28


@dataclass(frozen=True)
class FileProvenance:
    """A task file's origin (official / synthetic / local), its SHA-256 and MD5."""

    origin: str
    sha256: str
    md5: str

    @property
    def official(self) -> bool:
        return self.origin == OFFICIAL

    def to_json(self) -> dict[str, Any]:
        return {"origin": self.origin, "sha256": self.sha256}


def file_provenance(path: Path, task: str) -> FileProvenance:
    """Hash ``path`` and say where it came from (module docstring)."""
    sha, md5 = hashlib.sha256(), hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
            md5.update(block)
    origin = OFFICIAL if md5.hexdigest() == official_md5(task) else SYNTHETIC if _marked_synthetic(path) else LOCAL
    return FileProvenance(origin=origin, sha256=sha.hexdigest(), md5=md5.hexdigest())


def _marked_synthetic(path: Path) -> bool:
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.comment == SYNTHETIC_MARK
    except (OSError, zipfile.BadZipFile):
        return False


def mark_synthetic(path: Path) -> None:
    """Set the synthetic mark as the npz's zip comment (arrays and keys untouched)."""
    with zipfile.ZipFile(path, "a") as archive:
        archive.comment = SYNTHETIC_MARK
