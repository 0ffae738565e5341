"""Torch helpers shared by the torch models: devices, thread counts, seeded RNG scopes, image tensors."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import torch

from harness.models.base import Images, Probs
from keys.errors import UsageError


def torch_device(name: str) -> torch.device:
    """A usable torch device for ``name``, or a UsageError saying why not."""
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError) as exc:
        raise UsageError(f"unknown device {name!r}: {exc}", found=name) from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"device {name!r} asked for, but torch sees no CUDA device", found=name)
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise UsageError(f"device {name!r} asked for, but MPS is not available", found=name)
    return device


@contextlib.contextmanager
def torch_threads(count: int | None) -> Iterator[None]:
    """Run with ``count`` intra-op threads (None: leave torch's setting), restoring the previous value."""
    if count is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Seed torch's global generator inside a scope without disturbing the caller's random state."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def to_tensor(images: Images, device: torch.device) -> torch.Tensor:
    """uint8 (N, H, W) or (N, H, W, C) -> float32 (N, C, H, W) in [0, 1] on ``device``."""
    array = np.asarray(images)
    tensor = torch.from_numpy(np.ascontiguousarray(array))
    tensor = tensor[:, None] if tensor.ndim == 3 else tensor.permute(0, 3, 1, 2)
    return tensor.to(device=device, dtype=torch.float32).div_(255.0)


def softmax_numpy(logits: torch.Tensor) -> Probs:
    """Softmax over classes in float64 (rows sum to 1 after the float32 cast), as a float32 array."""
    probs = torch.softmax(logits.detach().to("cpu", torch.float64), dim=-1)
    return probs.numpy().astype(np.float32)
