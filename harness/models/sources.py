"""Where an open_clip model's weights come from, decided before torch or open_clip is imported.

Offline (``HF_HUB_OFFLINE=1``) a model whose weights are neither on a local path nor in the Hugging Face
cache fails here, at once, with a message saying how to supply them: open_clip itself would otherwise retry
a download for 20-45 s first (without the variable) or fail deep inside the hub client (with it).
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from harness.tasks import hub_offline
from keys.errors import UsageError
from keys.safeio import not_a_file, path_kind

BIOMEDCLIP_REPO: Final = "microsoft/BiomedCLIP-PubMedBERT_256-vit_base_patch16_224"
CHECKPOINT_SUFFIXES: Final = (".bin", ".safetensors", ".pth", ".pt")
RANDOM: Final = "random"

BIOMEDCLIP_HOW_TO: Final = (
    "supply the BiomedCLIP weights with --weights DIR, a snapshot of the Hugging Face repo "
    f"{BIOMEDCLIP_REPO} (open_clip_config.json and open_clip_pytorch_model.bin; e.g. "
    f"`huggingface-cli download {BIOMEDCLIP_REPO} --local-dir DIR` on a connected machine), or run once "
    "online without HF_HUB_OFFLINE so that the hub cache holds them; the PubMedBERT text tower also needs "
    "the `transformers` package and its tokenizer files (microsoft/BiomedNLP-BiomedBERT-base-uncased-abstract) "
    "in the hub cache"
)
CLIP_HOW_TO: Final = (
    "pass --weights with a checkpoint file, an open_clip pretrained tag (needs the network or the hub "
    "cache), or 'random' for random initial weights (a plumbing check only)"
)


@dataclass(frozen=True)
class WeightsSource:
    """What open_clip is asked to build: ``create_model_and_transforms(model_name, pretrained=pretrained)``."""

    model_name: str  # "ViT-S-32", "hf-hub:org/repo" or "local-dir:/path"
    pretrained: str | None  # a checkpoint file or a pretrained tag; None for hub/local-dir or random weights
    random: bool
    label: str  # the weights in words, for model names and messages
    how_to: str  # how to supply weights, for error messages

    def describe(self) -> str:
        return f"{self.model_name} ({self.label})"


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache directory, by huggingface_hub's own environment rules."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]) / "hub"
    cache_home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache_home / "huggingface" / "hub"


def cached_snapshot(repo: str) -> Path | None:
    """A cached snapshot of ``repo`` that holds an open_clip config and a checkpoint, if there is one."""
    snapshots = hub_cache_dir() / f"models--{repo.replace('/', '--')}" / "snapshots"
    if not snapshots.is_dir():
        return None
    for snapshot in sorted(snapshots.iterdir()):
        if (snapshot / "open_clip_config.json").is_file() and _checkpoint_in(snapshot):
            return snapshot
    return None


def _checkpoint_in(directory: Path) -> bool:
    return any(p.suffix in CHECKPOINT_SUFFIXES and p.is_file() for p in directory.iterdir())


def biomedclip_source(weights: str | None) -> WeightsSource:
    """BiomedCLIP from ``weights`` (a snapshot directory), else the hub cache, else the hub when online."""
    if weights:
        directory = Path(weights).expanduser()
        if not directory.is_dir():
            raise UsageError(f"BiomedCLIP weights {directory} is not a directory: {BIOMEDCLIP_HOW_TO}",
                             path=str(directory))
        if not (directory / "open_clip_config.json").is_file() or not _checkpoint_in(directory):
            raise UsageError(f"{directory} lacks open_clip_config.json or a checkpoint: {BIOMEDCLIP_HOW_TO}",
                             path=str(directory))
        source = WeightsSource(f"local-dir:{directory}", None, False, f"weights from {directory}",
                               BIOMEDCLIP_HOW_TO)
    elif cached_snapshot(BIOMEDCLIP_REPO) is not None or not hub_offline():
        source = WeightsSource(f"hf-hub:{BIOMEDCLIP_REPO}", None, False, "weights from the Hugging Face hub",
                               BIOMEDCLIP_HOW_TO)
    else:
        raise UsageError(f"BiomedCLIP weights are not available offline (HF_HUB_OFFLINE is set and the hub cache "
                         f"{hub_cache_dir()} has no snapshot of {BIOMEDCLIP_REPO}): {BIOMEDCLIP_HOW_TO}",
                         path=str(hub_cache_dir()))
    if importlib.util.find_spec("transformers") is None:
        raise UsageError("BiomedCLIP's PubMedBERT text tower needs the `transformers` package, which is not "
                         "installed: pip install transformers", found="transformers missing")
    return source


def open_clip_archs() -> list[str]:
    """The architectures open_clip ships configs for (read from its files; no torch import)."""
    spec = importlib.util.find_spec("open_clip")
    if spec is None or not spec.submodule_search_locations:
        raise UsageError("open_clip is not installed: install the harness extra, pip install 'heldout[harness]'")
    configs = Path(next(iter(spec.submodule_search_locations))) / "model_configs"
    return sorted(p.stem for p in configs.glob("*.json"))


def clip_source(arch: str, weights: str | None, *, model_id: str = "clip_zeroshot") -> WeightsSource:
    """Any open_clip architecture with explicit weights: a file, a pretrained tag, or 'random'."""
    archs = open_clip_archs()
    if arch not in archs:
        raise UsageError(f"unknown open_clip architecture {arch!r}", found=arch,
                         expected=[a for a in archs if a.startswith(("ViT-B", "ViT-S", "RN50"))])
    if not weights:
        raise UsageError(f"{model_id} with an open_clip encoder needs --weights: {CLIP_HOW_TO}", found=None)
    if weights == RANDOM:
        return WeightsSource(arch, None, True, "random weights", CLIP_HOW_TO)
    path = Path(weights).expanduser()
    if path.is_file():
        return WeightsSource(arch, str(path), False, f"weights from {path}", CLIP_HOW_TO)
    if path_kind(path) is not None:  # (a FIFO, a folder, a dangling link: said as what it is)
        raise UsageError(f"{not_a_file(path, 'weights file')}: {CLIP_HOW_TO}", path=str(path))
    if os.sep in weights or weights.endswith(CHECKPOINT_SUFFIXES):
        raise UsageError(f"weights file {path} not found: {CLIP_HOW_TO}", path=str(path))
    return WeightsSource(arch, weights, False, f"pretrained tag {weights}", CLIP_HOW_TO)
