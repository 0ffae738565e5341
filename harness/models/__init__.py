"""The model registry: ``create_model(model_id, ...)`` and what each registered model is.

Importing this package does not import torch: each factory imports its model's module when called, after
checking what it can without torch (weights sources, architecture names), so a missing download or a typo
fails at once. Importing it does set the OpenMP wait policy for the torch to come (see harness.torchenv);
every torch-using module is a submodule of this package, so the setting always precedes them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from harness.models.base import BEHAVIOUR_VERSION, Model, ModelInfo
from harness.models.sources import RANDOM, biomedclip_source, clip_source
from harness.torchenv import before_torch_import
from keys.errors import UsageError

before_torch_import()

DEFAULT_CLIP_ARCH: Final = "ViT-B-32"


@dataclass(frozen=True)
class ModelOptions:
    """Options a caller (the CLI) may pass; each model reads the ones it understands."""

    weights: str | None = None  # a checkpoint file/dir, an open_clip pretrained tag, or "random"
    arch: str | None = None  # an open_clip architecture (clip_zeroshot; linear_probe's encoder)
    device: str = "cpu"
    threads: int | None = None  # torch intra-op threads (None: each model's default)


@dataclass(frozen=True)
class RegisteredModel:
    model_id: str
    family: str
    summary: str
    create: Callable[[ModelOptions], Model]


def _biomedclip(options: ModelOptions) -> Model:
    source = biomedclip_source(options.weights)  # fails here, before torch, when weights are missing
    from harness.models.openclip import ZeroShotModel  # imports torch

    return ZeroShotModel(model_id="biomedclip_zeroshot", model_name="BiomedCLIP ViT-B/16, zero-shot",
                         family="foundation", source=source, device=options.device, threads=options.threads)


def _clip(options: ModelOptions) -> Model:
    arch = options.arch or DEFAULT_CLIP_ARCH
    source = clip_source(arch, options.weights)
    from harness.models.openclip import ZeroShotModel  # imports torch

    return ZeroShotModel(model_id="clip_zeroshot", model_name=f"CLIP {arch} ({source.label}), zero-shot",
                         family="foundation", source=source, device=options.device, threads=options.threads)


def _linear_probe(options: ModelOptions) -> Model:
    source = None
    if options.arch or options.weights:
        source = clip_source(options.arch or DEFAULT_CLIP_ARCH, options.weights, model_id="linear_probe")
    from harness.models.trained import CPU_THREADS, LinearProbe  # imports torch

    return LinearProbe(source=source, device=options.device,
                       threads=options.threads if options.threads is not None else CPU_THREADS)


def _cnn_small(options: ModelOptions) -> Model:
    from harness.models.trained import CPU_THREADS, CnnSmall  # imports torch

    return CnnSmall(device=options.device, threads=options.threads if options.threads is not None else CPU_THREADS)


def _majority(options: ModelOptions) -> Model:
    from harness.models.trained import Majority  # imports torch (module-level)

    return Majority(device=options.device)


REGISTRY: Final[dict[str, RegisteredModel]] = {
    entry.model_id: entry for entry in (
        RegisteredModel("biomedclip_zeroshot", "foundation",
                        "BiomedCLIP ViT-B/16 (open_clip hf-hub config), zero-shot by the six templates; "
                        "--weights DIR or the hub", _biomedclip),
        RegisteredModel("clip_zeroshot", "foundation",
                        f"any open_clip architecture (--arch, default {DEFAULT_CLIP_ARCH}) with --weights FILE|TAG|"
                        f"{RANDOM}, zero-shot by the six templates", _clip),
        RegisteredModel("linear_probe", "linear_probe",
                        "frozen image encoder + logistic regression (open_clip with --arch/--weights; "
                        "otherwise a fixed random-feature encoder)", _linear_probe),
        RegisteredModel("cnn_small", "trained_baseline",
                        "3-conv CNN trained from scratch on the training split (CPU, 2 threads)", _cnn_small),
        RegisteredModel("majority", "baseline", "predicts the training split's class frequencies", _majority),
    )
}
MODEL_IDS: Final[tuple[str, ...]] = tuple(REGISTRY)


def create_model(model_id: str, *, weights: str | None = None, arch: str | None = None, device: str = "cpu",
                 threads: int | None = None) -> Model:
    """Build a registered model (unprepared); a UsageError names the known ids or says what is missing."""
    entry = REGISTRY.get(model_id)
    if entry is None:
        raise UsageError(f"unknown model {model_id!r}", expected=list(MODEL_IDS), found=model_id)
    return entry.create(ModelOptions(weights=weights, arch=arch, device=device, threads=threads))


__all__ = ["BEHAVIOUR_VERSION", "MODEL_IDS", "REGISTRY", "Model", "ModelInfo", "ModelOptions", "RegisteredModel",
           "create_model"]
