"""MedMNIST tasks as MedEval-1 sees them: a task flag (``bloodmnist``, ``bloodmnist_224``) and what it means.

Class names, channels and official counts come from ``medmnist.INFO``. That table is read from medmnist's
``info.py`` without executing the package: ``import medmnist`` imports torch (its dataset module) and creates
``~/.medmnist`` as a side effect of computing its default root, and neither may happen for ``heldout data
synth`` or for ``--help``. :func:`import_medmnist` imports the real package (for its dataset classes) with the
default-root side effect removed; the harness always passes a root explicitly.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import sys
import types
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from harness.provenance import KINDS
from harness.provenance import TASK_NAMES as _NAMES
from harness.torchenv import before_torch_import
from keys.errors import UsageError
from keys.names import ASCII_DIGITS

#: The sizes MedEval-1 evaluates (``kind`` ``image`` and ``image224``).
SIZES: Final[tuple[int, ...]] = (28, 224)
#: medmnist task types in scope: one label per image. Ordinal regression (RetinaMNIST) is scored as
#: multi-class classification, as the reference passport does; multi-label (ChestMNIST) is out of scope.
SINGLE_LABEL_TASKS: Final = frozenset({"multi-class", "binary-class", "ordinal-regression"})
#: The training split is capped (a seeded subset) above these sizes so that trained models stay CPU-friendly.
#: Decided to agree with the reference passport's ``train_capped`` flags (28 px: 11,959 not capped, 12,975
#: capped; 224 px: 1,080 not capped, 4,708 capped).
TRAIN_CAP: Final = {28: 12000, 224: 2000}

SPLITS: Final[tuple[str, ...]] = ("train", "val", "test")


@dataclass(frozen=True)
class TaskSpec:
    """One evaluable task: a 2D single-label MedMNIST dataset at one size."""

    task: str  # the flag written into evaluations: "bloodmnist" or "bloodmnist_224"
    dataset: str  # the medmnist flag: "bloodmnist"
    size: int
    kind: str
    task_name: str
    modality: str
    class_names: tuple[str, ...]
    channels: int
    medmnist_task: str
    official_counts: dict[str, int]
    python_class: str
    url: str
    md5: str

    @property
    def n_classes(self) -> int:
        return len(self.class_names)

    @property
    def file_name(self) -> str:
        """The official file name: ``<flag>.npz`` at 28 px, ``<flag>_224.npz`` at 224 px."""
        return f"{self.dataset}.npz" if self.size == 28 else f"{self.dataset}_{self.size}.npz"

    @property
    def image_shape(self) -> tuple[int, ...]:
        """Shape of one image in the npz: (H, W) for grey, (H, W, 3) for colour."""
        return (self.size, self.size) if self.channels == 1 else (self.size, self.size, self.channels)

    @property
    def train_cap(self) -> int:
        return TRAIN_CAP[self.size]


def parse_task(task: str, size: int | None = None) -> tuple[str, int]:
    """Split a task flag into (medmnist flag, size); ``size`` may be given separately (``--size``)."""
    flag, found = task.strip().lower(), 28
    head, sep, tail = flag.rpartition("_")
    if sep and ASCII_DIGITS.fullmatch(tail):
        flag, found = head, int(tail)
        if found == 28:
            raise UsageError(f"task {task!r}: the 28 px task is named without a suffix ({flag!r})", found=task)
    if size is not None and sep and ASCII_DIGITS.fullmatch(tail) and size != found:
        raise UsageError(f"task {task!r} names size {found} but --size is {size}", expected=found, found=size)
    chosen = size if size is not None else found
    if chosen not in SIZES:
        raise UsageError(f"size {chosen} is not evaluated by MedEval-1 (sizes: 28, 224)", expected=list(SIZES),
                         found=chosen)
    return flag, chosen


def task_spec(task: str, size: int | None = None) -> TaskSpec:
    """The :class:`TaskSpec` for a task flag (``bloodmnist``, ``bloodmnist_224``), or a UsageError."""
    flag, chosen = parse_task(task, size)
    info_table = medmnist_info()
    if flag not in info_table:
        raise UsageError(f"unknown MedMNIST dataset {flag!r}", found=flag,
                         expected=sorted(k for k in info_table if not k.endswith("3d")))
    info = info_table[flag]
    if flag.endswith("3d"):
        raise UsageError(f"{flag} is a 3D dataset; MedEval-1 evaluates 2D images only", found=flag)
    if info["task"] not in SINGLE_LABEL_TASKS:
        raise UsageError(f"{flag} is a {info['task']!r} task; MedEval-1 scores single-label tasks only",
                         found=info["task"])
    labels = info["label"]
    class_names = tuple(labels[str(i)] for i in range(len(labels)))
    base_name, modality = _NAMES.get(flag, (f"{info['python_class']} ({len(class_names)}-class)", "unknown"))
    suffix = "" if chosen == 28 else f"_{chosen}"
    return TaskSpec(
        task=flag if chosen == 28 else f"{flag}_{chosen}",
        dataset=flag,
        size=chosen,
        kind=KINDS[chosen],
        task_name=base_name if chosen == 28 else f"{base_name} @{chosen}px",
        modality=modality,
        class_names=class_names,
        channels=int(info["n_channels"]),
        medmnist_task=str(info["task"]),
        official_counts={split: int(info["n_samples"][split]) for split in SPLITS},
        python_class=str(info["python_class"]),
        url=str(info.get(f"url{suffix}", "")),
        md5=str(info.get(f"MD5{suffix}", "")),
    )


def in_scope_datasets() -> list[str]:
    """Every 2D single-label medmnist flag (what ``task_spec`` accepts at each size)."""
    return sorted(flag for flag, info in medmnist_info().items()
                  if not flag.endswith("3d") and info["task"] in SINGLE_LABEL_TASKS)


def capped_train_indices(n_train: int, size: int, seed: int) -> NDArray[np.int64]:
    """Indices of the (capped) training split: all of it, or a sorted seeded subset of TRAIN_CAP[size]."""
    cap = TRAIN_CAP[size]
    if n_train <= cap:
        return np.arange(n_train, dtype=np.int64)
    # A stream of its own (seed, 1) so that it never coincides with the robustness subset's default_rng(seed).
    rng = np.random.default_rng([seed, 1])
    return np.sort(rng.choice(n_train, cap, replace=False)).astype(np.int64)


def _medmnist_info_path() -> Path:
    spec = importlib.util.find_spec("medmnist")
    if spec is None or not spec.submodule_search_locations:
        raise UsageError("medmnist is not installed: install the harness extra, pip install 'heldout[harness]'")
    return Path(next(iter(spec.submodule_search_locations))) / "info.py"


def _info_module_without_default_root() -> types.ModuleType:
    """medmnist/info.py executed without its ``DEFAULT_ROOT = get_default_root()`` line (which mkdirs ~)."""
    path = _medmnist_info_path()
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    tree.body = [node for node in tree.body
                 if not (isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "DEFAULT_ROOT"
                                                              for t in node.targets))]
    module = types.ModuleType("medmnist.info")
    module.__file__ = str(path)
    exec(compile(tree, str(path), "exec"), module.__dict__)  # medmnist's own code, minus one statement
    module.DEFAULT_ROOT = None  # type: ignore[attr-defined]
    return module


@cache
def medmnist_info() -> dict[str, Any]:
    """``medmnist.INFO`` without importing torch or touching the home directory."""
    loaded = sys.modules.get("medmnist.info")
    if loaded is not None:
        return dict(loaded.INFO)
    return dict(_info_module_without_default_root().INFO)


def import_medmnist() -> types.ModuleType:
    """The medmnist package (dataset classes; imports torch), without it creating ``~/.medmnist``."""
    if "medmnist" not in sys.modules:
        sys.modules.setdefault("medmnist.info", _info_module_without_default_root())
    before_torch_import()
    import medmnist  # lazy on purpose: it imports torch

    return medmnist


def hub_offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` is set to a true value (huggingface_hub's own reading of it)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in {"1", "ON", "YES", "TRUE"}
