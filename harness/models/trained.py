"""Models with a training step: a small CNN from scratch, a linear probe on a frozen encoder, and the
majority baseline. ``prepare`` always trains from scratch with the given seed, so the run can fit the 1%,
10% and 100% fractions independently and reproducibly."""

from __future__ import annotations

import math
from typing import Final, Protocol

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from harness.models.base import Images, Labels, Model, Probs, millions
from harness.models.openclip import ClipImageEncoder
from harness.models.sources import WeightsSource
from harness.models.torchutil import seeded, softmax_numpy, to_tensor, torch_device, torch_threads
from harness.tasks import TaskSpec
from keys.errors import UsageError

#: Every trained model here works at 28 px: 224 px inputs are box-averaged down (exactly 8 x 8 pixels), which
#: keeps training CPU-friendly at both sizes. The perturbations are applied before, at the task's own size.
WORK_SIDE: Final = 28
CPU_THREADS: Final = 2


def _work_tensor(images: Images, device: torch.device) -> torch.Tensor:
    x = to_tensor(images, device)
    if x.shape[-1] != WORK_SIDE:
        x = F.adaptive_avg_pool2d(x, WORK_SIDE)
    return ((x - 0.5) / 0.25).contiguous(memory_format=torch.channels_last)


class SmallCnn(nn.Module):
    """Three 3x3 conv blocks (16, 32, 64 channels, batch norm, ReLU), two max-pools, global average, linear.
    Run channels-last: on 2 CPU threads that is several times faster for these small convolutions."""

    def __init__(self, channels: int, n_classes: int) -> None:
        super().__init__()

        def block(c_in: int, c_out: int) -> list[nn.Module]:
            return [nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True)]

        self.features = nn.Sequential(*block(channels, 16), nn.MaxPool2d(2), *block(16, 32), nn.MaxPool2d(2),
                                      *block(32, 64), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(64, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class CnnSmall(Model):
    """``cnn_small``: a 3-conv CNN trained from scratch on the (capped) training split, on the CPU."""

    model_id = "cnn_small"
    model_name = "Small CNN (3 conv layers), trained from scratch"
    family = "trained_baseline"
    trains = True

    EPOCHS: Final = 12
    MIN_STEPS: Final = 60  # tiny fractions (1% of a small split) still get this many updates
    BATCH: Final = 64
    LEARNING_RATE: Final = 3e-3
    WEIGHT_DECAY: Final = 1e-4

    def __init__(self, *, device: str = "cpu", threads: int | None = CPU_THREADS, epochs: int = EPOCHS) -> None:
        super().__init__(device=device)
        self.threads, self.epochs = threads, epochs
        self.network: SmallCnn | None = None

    def prepare(self, task: TaskSpec, train_images: Images, train_labels: Labels, *, seed: int) -> None:
        if train_labels.shape[0] == 0:
            raise UsageError("cnn_small needs at least one training image", found=0)
        self.task = task
        device = torch_device(self.device)
        with torch_threads(self.threads), seeded(seed):
            network = SmallCnn(task.channels, task.n_classes).to(device).to(memory_format=torch.channels_last)
            x = _work_tensor(train_images, device)
            y = torch.as_tensor(train_labels, dtype=torch.long, device=device)
            n = int(y.shape[0])
            batch = min(self.BATCH, n)
            per_epoch = math.ceil(n / batch)
            steps = max(self.MIN_STEPS, self.epochs * per_epoch)
            optimiser = torch.optim.AdamW(network.parameters(), lr=self.LEARNING_RATE, weight_decay=self.WEIGHT_DECAY)
            schedule = torch.optim.lr_scheduler.OneCycleLR(optimiser, max_lr=self.LEARNING_RATE, total_steps=steps)
            order = torch.Generator().manual_seed(seed)
            network.train()
            step = 0
            while step < steps:
                permutation = torch.randperm(n, generator=order).to(device)
                for start in range(0, n - batch + 1, batch):  # drop the ragged last batch (batch norm)
                    index = permutation[start:start + batch]
                    inputs = x[index].contiguous(memory_format=torch.channels_last)  # indexing drops the layout
                    loss = F.cross_entropy(network(inputs), y[index])
                    optimiser.zero_grad(set_to_none=True)
                    loss.backward()
                    optimiser.step()
                    schedule.step()
                    step += 1
                    if step == steps:
                        break
        self.network = network.eval()

    @torch.inference_mode()
    def predict_proba(self, images: Images) -> Probs:
        if self.network is None:
            raise UsageError("cnn_small has not been trained", found=self.model_id)
        device = torch_device(self.device)
        with torch_threads(self.threads):
            logits = [self.network(_work_tensor(images[i:i + 512], device)) for i in range(0, images.shape[0], 512)]
        return softmax_numpy(torch.cat(logits))

    def parameter_count(self) -> int | None:
        task = self._require_task()
        return int(sum(p.numel() for p in SmallCnn(task.channels, task.n_classes).parameters()))

    def params_sentence(self) -> str:
        count = self.parameter_count() or 0
        return (f"{millions(count)} trained from scratch on the training split "
                f"({self.epochs} epochs, AdamW, inputs at {WORK_SIDE} px)")


class FeatureEncoder(Protocol):
    parameters: int
    description: str

    def features(self, images: Images) -> np.ndarray: ...


class RandomConvEncoder:
    """A fixed random-feature encoder (no weights to supply): 64 random 5x5 filters with random thresholds,
    ReLU, 4x4 average pooling -> 1,024 features. Drawn from a constant seed, so it is the same encoder in every
    run; used by the linear probe when no pretrained encoder is given."""

    FILTERS: Final = 64
    KERNEL: Final = 5
    POOL: Final = 4
    ENCODER_SEED: Final = 20260727

    def __init__(self, channels: int, device: str, threads: int | None) -> None:
        rng = np.random.default_rng(self.ENCODER_SEED)
        weight = rng.normal(0.0, 1.0, size=(self.FILTERS, channels, self.KERNEL, self.KERNEL))
        weight /= np.sqrt((weight**2).sum(axis=(1, 2, 3), keepdims=True))
        self.device, self.threads = torch_device(device), threads
        self.weight = torch.as_tensor(weight, dtype=torch.float32, device=self.device)
        self.bias = torch.as_tensor(rng.uniform(-0.5, 0.5, size=self.FILTERS), dtype=torch.float32,
                                    device=self.device)
        self.parameters = int(self.weight.numel() + self.bias.numel())
        self.description = (f"fixed random-feature encoder ({self.FILTERS} random {self.KERNEL}x{self.KERNEL} "
                            "filters, no pretrained weights)")

    @torch.inference_mode()
    def features(self, images: Images) -> np.ndarray:
        parts = []
        with torch_threads(self.threads):
            for i in range(0, images.shape[0], 1024):
                x = _work_tensor(images[i:i + 1024], self.device)
                x = F.relu(F.conv2d(x, self.weight, self.bias, padding=self.KERNEL // 2))
                parts.append(F.adaptive_avg_pool2d(x, self.POOL).flatten(1).cpu())
        return torch.cat(parts).numpy()


class LinearProbe(Model):
    """``linear_probe``: a frozen image encoder and a multinomial logistic regression trained on its features.

    With an open_clip source it probes that model's image tower; without one it probes a fixed random-feature
    encoder and says so in its name, params sentence and notes."""

    model_id = "linear_probe"
    family = "linear_probe"
    trains = True

    L2: Final = 1e-3
    MAX_ITERATIONS: Final = 200

    def __init__(self, *, source: WeightsSource | None = None, device: str = "cpu",
                 threads: int | None = CPU_THREADS, batch_size: int = 32) -> None:
        super().__init__(device=device)
        self.source, self.threads, self.batch_size = source, threads, batch_size
        self.encoder: FeatureEncoder | None = None
        self.weight: torch.Tensor | None = None
        self.bias: torch.Tensor | None = None
        self.model_name = ("Linear probe on a fixed random-feature encoder" if source is None
                           else f"Linear probe on {source.describe()}")

    def _encoder(self, task: TaskSpec) -> FeatureEncoder:
        if self.encoder is None:
            if self.source is None:
                self.encoder = RandomConvEncoder(task.channels, self.device, self.threads)
            else:
                self.encoder = ClipImageEncoder(self.source, self.device, batch_size=self.batch_size,
                                                threads=self.threads)
        return self.encoder

    def prepare(self, task: TaskSpec, train_images: Images, train_labels: Labels, *, seed: int) -> None:
        if train_labels.shape[0] == 0:
            raise UsageError("linear_probe needs at least one training image", found=0)
        self.task = task
        features = torch.as_tensor(self._encoder(task).features(train_images), dtype=torch.float64)
        self.mean = features.mean(dim=0)
        self.scale = features.std(dim=0, unbiased=False).clamp_min(1e-6)
        z = (features - self.mean) / self.scale
        y = torch.as_tensor(train_labels, dtype=torch.long)
        with torch_threads(self.threads), seeded(seed):
            weight = torch.zeros(z.shape[1], task.n_classes, dtype=torch.float64, requires_grad=True)
            bias = torch.zeros(task.n_classes, dtype=torch.float64, requires_grad=True)
            optimiser = torch.optim.LBFGS([weight, bias], max_iter=self.MAX_ITERATIONS,
                                          line_search_fn="strong_wolfe")

            def closure() -> torch.Tensor:
                optimiser.zero_grad()
                loss = F.cross_entropy(z @ weight + bias, y) + 0.5 * self.L2 * (weight**2).sum()
                loss.backward()
                return loss

            optimiser.step(closure)
        self.weight, self.bias = weight.detach(), bias.detach()

    def predict_proba(self, images: Images) -> Probs:
        if self.weight is None or self.bias is None:
            raise UsageError("linear_probe has not been trained", found=self.model_id)
        features = torch.as_tensor(self._encoder(self._require_task()).features(images), dtype=torch.float64)
        return softmax_numpy(((features - self.mean) / self.scale) @ self.weight + self.bias)

    def parameter_count(self) -> int | None:
        task = self._require_task()
        encoder = self._encoder(task)
        return encoder.parameters + self._head_size(task)

    def _head_size(self, task: TaskSpec) -> int:
        width = self.weight.shape[0] if self.weight is not None else 0
        return width * task.n_classes + task.n_classes

    def params_sentence(self) -> str:
        task = self._require_task()
        encoder = self._encoder(task)
        return (f"{encoder.description}, frozen; logistic regression head ({self._head_size(task):,} parameters) "
                "trained on the training split")

    def notes(self) -> str | None:
        if self.source is None:
            return ("linear probe on a fixed random-feature encoder: no pretrained encoder weights were "
                    "supplied, so this measures the harness and the data, not a foundation model")
        if self.source.random:
            return "linear probe on a randomly initialised encoder: a plumbing check, not a model"
        return None


class Majority(Model):
    """``majority``: predicts the training split's class frequencies for every image (argmax: the majority)."""

    model_id = "majority"
    model_name = "Majority class (training-split prior)"
    family = "baseline"
    trains = True

    def __init__(self, *, device: str = "cpu") -> None:
        super().__init__(device=device)
        self.prior: np.ndarray | None = None

    def prepare(self, task: TaskSpec, train_images: Images, train_labels: Labels, *, seed: int) -> None:
        if train_labels.shape[0] == 0:
            raise UsageError("majority needs at least one training label", found=0)
        self.task = task
        counts = np.bincount(train_labels, minlength=task.n_classes).astype(np.float64)
        self.prior = counts / counts.sum()

    def predict_proba(self, images: Images) -> Probs:
        if self.prior is None:
            raise UsageError("majority has not been fitted", found=self.model_id)
        return np.repeat(self.prior[None, :], images.shape[0], axis=0).astype(np.float32)

    def parameter_count(self) -> int | None:
        return self._require_task().n_classes

    def params_sentence(self) -> str:
        return f"{self._require_task().n_classes} class frequencies counted on the training split; no image input"
