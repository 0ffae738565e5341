"""open_clip models: zero-shot classification by text prompt, and a frozen image encoder for the linear probe.

Where the weights come from is decided before open_clip is called (see :mod:`harness.models.sources`), so a
missing download never turns into a 20-45 s retry loop. Images are preprocessed as open_clip's own transform
does for square inputs (bicubic resize to the model's size, then its mean/std), on tensors rather than PIL
images, batch by batch.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from harness.metrics import TEMPLATE_TEXTS
from harness.models.base import Images, Labels, Model, Probs, millions
from harness.models.sources import WeightsSource
from harness.models.torchutil import softmax_numpy, to_tensor, torch_device, torch_threads
from harness.tasks import TaskSpec
from keys.errors import UsageError


class OpenClipBackbone:
    """An open_clip model loaded once: image and text features, L2-normalised, and its logit scale."""

    def __init__(self, source: WeightsSource, device: str, *, batch_size: int = 32, threads: int | None = None):
        import open_clip  # heavy; only when a model is built

        self.source = source
        self.batch_size = batch_size
        self.threads = threads
        self.device = torch_device(device)
        quiet = logging.getLogger()
        level = quiet.level
        quiet.setLevel(logging.ERROR)  # open_clip logs a warning for random initialisation, which we asked for
        try:
            model, _, _ = open_clip.create_model_and_transforms(source.model_name, pretrained=source.pretrained,
                                                                device=self.device)
            self.tokenizer = open_clip.get_tokenizer(source.model_name)
        except Exception as exc:  # what a weights file that is not a checkpoint makes torch raise: EOFError for
            # an empty one (which click would take for Ctrl-C), UnpicklingError, KeyError, BadZipFile...
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise UsageError(f"could not load {source.describe()}: {first}. {source.how_to}",
                             found=source.describe()) from None
        finally:
            quiet.setLevel(level)
        self.model = model.eval()
        cfg: dict[str, Any] = dict(getattr(model.visual, "preprocess_cfg", {}) or {})
        size = cfg.get("size", getattr(model.visual, "image_size", 224))
        self.image_size = (size, size) if isinstance(size, int) else tuple(size)
        self.mean = torch.tensor(cfg.get("mean", (0.48145466, 0.4578275, 0.40821073)), device=self.device)
        self.std = torch.tensor(cfg.get("std", (0.26862954, 0.26130258, 0.27577711)), device=self.device)
        self.parameters = int(sum(p.numel() for p in model.parameters()))

    def _preprocess(self, batch: Images) -> torch.Tensor:
        x = to_tensor(batch, self.device)
        if x.shape[1] == 1:
            x = x.expand(-1, 3, -1, -1)
        if tuple(x.shape[2:]) != self.image_size:
            x = F.interpolate(x, size=self.image_size, mode="bicubic", align_corners=False, antialias=True)
            x = x.clamp_(0.0, 1.0)
        return (x - self.mean[None, :, None, None]) / self.std[None, :, None, None]

    @torch.inference_mode()
    def image_features(self, images: Images) -> torch.Tensor:
        with torch_threads(self.threads):
            parts = [F.normalize(self.model.encode_image(self._preprocess(images[i:i + self.batch_size])), dim=-1)
                     for i in range(0, images.shape[0], self.batch_size)]
        return torch.cat(parts).float()

    @torch.inference_mode()
    def text_features(self, prompts: Sequence[str]) -> torch.Tensor:
        with torch_threads(self.threads):
            tokens = self.tokenizer(list(prompts)).to(self.device)
            return F.normalize(self.model.encode_text(tokens), dim=-1).float()

    def logit_scale(self) -> float:
        scale = getattr(self.model, "logit_scale", None)
        return 100.0 if scale is None else float(min(scale.exp().item(), 100.0))


class ZeroShotModel(Model):
    """Zero-shot classification: cosine similarity to one text prompt per class, softmax over classes."""

    uses_prompts = True
    trains = False

    def __init__(self, *, model_id: str, model_name: str, family: str, source: WeightsSource,
                 device: str = "cpu", batch_size: int = 32, threads: int | None = None) -> None:
        super().__init__(device=device)
        self.model_id, self.model_name, self.family = model_id, model_name, family
        self.source = source
        self.batch_size, self.threads = batch_size, threads
        self.backbone: OpenClipBackbone | None = None
        self.class_text: torch.Tensor | None = None  # (T, K, D) over all templates

    def _loaded(self) -> OpenClipBackbone:
        if self.backbone is None or self.backbone.device != torch_device(self.device):
            self.backbone = OpenClipBackbone(self.source, self.device, batch_size=self.batch_size,
                                             threads=self.threads)
        return self.backbone

    def prepare(self, task: TaskSpec, train_images: Images, train_labels: Labels, *, seed: int) -> None:
        backbone = self._loaded()
        self.task = task
        self.templates = tuple(TEMPLATE_TEXTS)
        per_template = [backbone.text_features([t.format(c=name) for name in task.class_names])
                        for t in self.templates]
        self.class_text = torch.stack(per_template)

    def _text_for(self, templates: Sequence[str]) -> torch.Tensor:
        task = self._require_task()
        if self.class_text is None:
            raise UsageError(f"{self.model_id} has not been prepared", found=self.model_id)
        if tuple(templates) == self.templates[: len(templates)]:
            return self.class_text[: len(templates)]
        backbone = self._loaded()
        return torch.stack([backbone.text_features([t.format(c=n) for n in task.class_names]) for t in templates])

    def predict_proba_templates(self, images: Images, templates: Sequence[str] = TEMPLATE_TEXTS) -> Probs:
        backbone = self._loaded()
        text = self._text_for(templates)
        features = backbone.image_features(images)
        logits = backbone.logit_scale() * torch.einsum("nd,tkd->tnk", features, text)
        return softmax_numpy(logits)

    def predict_proba(self, images: Images) -> Probs:
        return self.predict_proba_templates(images, self.templates[:1])[0]

    def parameter_count(self) -> int | None:
        return self._loaded().parameters

    def params_sentence(self) -> str:
        count = self.parameter_count() or 0
        sentence = f"{millions(count)} frozen; classified by text prompt, no labels used"
        return sentence + ("; random weights (a plumbing check, not a model)" if self.source.random else "")

    def notes(self) -> str | None:
        if self.source.random:
            return "random initial weights: a plumbing check of the zero-shot path, not a model"
        return None


class ClipImageEncoder:
    """A frozen open_clip image tower used as a feature extractor (linear probe)."""

    def __init__(self, source: WeightsSource, device: str, *, batch_size: int = 32, threads: int | None = None):
        self.backbone = OpenClipBackbone(source, device, batch_size=batch_size, threads=threads)
        self.parameters = int(sum(p.numel() for p in self.backbone.model.visual.parameters()))
        self.description = f"frozen {source.describe()} image encoder ({millions(self.parameters)})"

    def features(self, images: Images) -> np.ndarray:
        return self.backbone.image_features(images).cpu().numpy()
