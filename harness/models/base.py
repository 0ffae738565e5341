"""What every model offers the run: preparation on a task, class probabilities, and its identity.

A model is prepared once per task (and once more per training fraction for trained models: ``prepare``
always starts from scratch with the given seed, so the 1%, 10% and 100% fits are independent and
reproducible). Images arrive as uint8 in the MedMNIST layout; probabilities leave as float32 (N, K) rows that
sum to 1. Nothing here imports torch; the torch models import it in their own modules.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from harness.fingerprint import code_fingerprint
from harness.metrics import TEMPLATE_TEXTS
from harness.tasks import TaskSpec
from keys.errors import UsageError

Probs = NDArray[np.float32]
Images = NDArray[np.uint8]
Labels = NDArray[np.int64]

#: Version of the models' behaviour (inputs, preprocessing, training recipe); bump when results may change.
BEHAVIOUR_VERSION = "1.0.0"


@dataclass(frozen=True)
class ModelInfo:
    """A model's identity as bundles and passports name it."""

    model_id: str
    model_name: str
    family: str
    params: str  # one sentence: size and how it decides, e.g. "195.9M frozen; classified by text prompt"
    parameters: int | None
    behaviour_version: str
    code_fingerprint: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def millions(count: int) -> str:
    return f"{count / 1e6:.1f}M" if count >= 50_000 else f"{count:,}"


class Model(ABC):
    """Base class of every registered model."""

    model_id: str = ""
    model_name: str = ""
    family: str = ""
    #: Takes a text prompt: the run scores spec_sensitivity with the six templates.
    uses_prompts: bool = False
    #: Has a training step: the run scores limited_data with 1%, 10% and 100% of the training split.
    trains: bool = False

    def __init__(self, *, device: str = "cpu") -> None:
        self.device = device
        self.task: TaskSpec | None = None

    def use_device(self, device: str) -> None:
        """Run on ``device`` ("cpu", "cuda", "cuda:1", "mps"); checked when the model is prepared."""
        self.device = device

    @abstractmethod
    def prepare(self, task: TaskSpec, train_images: Images, train_labels: Labels, *, seed: int) -> None:
        """Get ready to predict ``task``: train from scratch on the given split, or build prompts."""

    @abstractmethod
    def predict_proba(self, images: Images) -> Probs:
        """Class probabilities (N, K) float32 for uint8 images; prompt models use the default template."""

    def predict_proba_templates(self, images: Images, templates: Sequence[str] = TEMPLATE_TEXTS) -> Probs:
        """(T, N, K) probabilities, one slice per prompt template (prompt models only)."""
        raise UsageError(f"{self.model_id} takes no text prompt", found=self.model_id)

    @abstractmethod
    def parameter_count(self) -> int | None:
        """Number of parameters (after ``prepare`` where it depends on the task)."""

    @abstractmethod
    def params_sentence(self) -> str:
        """The ``params`` sentence: how big, what is frozen or trained, how it decides."""

    def notes(self) -> str | None:
        """A caveat for the evaluation's ``limitations.notes`` (e.g. random weights), or None."""
        return None

    def info(self) -> ModelInfo:
        return ModelInfo(model_id=self.model_id, model_name=self.model_name, family=self.family,
                         params=self.params_sentence(), parameters=self.parameter_count(),
                         behaviour_version=BEHAVIOUR_VERSION, code_fingerprint=code_fingerprint())

    def _require_task(self) -> TaskSpec:
        if self.task is None:
            raise UsageError(f"{self.model_id} has not been prepared for a task", found=self.model_id)
        return self.task

