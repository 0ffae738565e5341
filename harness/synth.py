"""Synthetic task files in the exact official MedMNIST layout, with a class structure models can learn.

Each image is a soft-edged, striped "cell" on a smooth background. The class sets, with noise on top:
- its size (three levels, ``k % 3``; jitter makes neighbouring levels overlap a little),
- the orientation of its stripes (four levels, ``(k // 3) % 4``; jittered),
- its colour (colour tasks: a hue per class) or grey level (grey tasks: a level per class).
Position, ellipse shape and rotation, stripe phase, background and pixel noise are nuisance variables drawn
per image. Trained models reach well above chance, not 100%, and the perturbations visibly hurt them.
Everything is drawn from ``numpy.random.default_rng([seed, split])``, so a file is a function of its
arguments. Nothing here imports torch.
"""

from __future__ import annotations

import colorsys
import os
import tempfile
from pathlib import Path
from typing import Final

import numpy as np
from numpy.typing import NDArray

from harness.imageops import from_planar, resize
from harness.provenance import mark_synthetic
from harness.tasks import SPLITS, TaskSpec
from keys.errors import UsageError
from keys.files import removed_on_failure

#: Default split sizes per image size (small enough to write in seconds, large enough to learn from).
DEFAULT_COUNTS: Final = {28: {"train": 2000, "val": 300, "test": 600}, 224: {"train": 300, "val": 60, "test": 120}}
#: Most images one synthetic file may hold per split (a guard against filling the disk by a typo).
MAX_PER_SPLIT: Final = 200_000
_CHUNK: Final = 64

_RADIUS_LEVELS: Final = (0.17, 0.24, 0.31)  # fraction of the side
_RADIUS_JITTER: Final = 0.2
_ORIENTATION_JITTER_DEG: Final = 20.0
_STRIPE_PERIOD: Final = 1 / 6  # fraction of the side
_CENTRE_JITTER: Final = 0.12  # fraction of the side
_PIXEL_NOISE: Final = 0.08
_COLOUR_JITTER: Final = 0.1


def _class_colours(n_classes: int, channels: int) -> NDArray[np.float32]:
    """One object colour (or grey level) per class, shape (K, C)."""
    if channels == 1:
        # Golden-ratio spacing keeps any two classes' levels apart for every K.
        levels = 0.5 + 0.3 * ((np.arange(n_classes) * 0.6180339887) % 1.0)
        return levels[:, None].astype(np.float32)
    # Hues are blended into a shared purple stain so that colour helps without giving the class away.
    stain = np.asarray([0.45, 0.3, 0.55], dtype=np.float32)
    rgb = np.asarray([colorsys.hsv_to_rgb(k / n_classes, 0.5, 0.7) for k in range(n_classes)], dtype=np.float32)
    return (0.7 * stain + 0.3 * rgb).astype(np.float32)


def _labels(rng: np.random.Generator, n: int, n_classes: int) -> NDArray[np.int64]:
    """Mildly imbalanced labels (weights 1, 1.5, 2 repeating), every class present when n >= K."""
    weights = 1.0 + 0.5 * (np.arange(n_classes) % 3)
    drawn = rng.choice(n_classes, size=n, p=weights / weights.sum())
    if n >= n_classes:
        drawn[:n_classes] = np.arange(n_classes)
    return rng.permutation(drawn).astype(np.int64)


def _images(rng: np.random.Generator, labels: NDArray[np.int64], spec: TaskSpec) -> NDArray[np.uint8]:
    size, channels = spec.size, spec.channels
    colours = _class_colours(spec.n_classes, channels)
    coords = np.arange(size, dtype=np.float32) + np.float32(0.5)
    yy, xx = coords[:, None], coords[None, :]
    chunks = []
    for start in range(0, labels.shape[0], _CHUNK):
        k = labels[start:start + _CHUNK]
        n = k.shape[0]

        def draw(low: float, high: float, n: int = n) -> NDArray[np.float32]:
            return rng.uniform(low, high, size=n).astype(np.float32)[:, None, None]

        cx = size * (0.5 + draw(-_CENTRE_JITTER, _CENTRE_JITTER))
        cy = size * (0.5 + draw(-_CENTRE_JITTER, _CENTRE_JITTER))
        radius = size * np.asarray(_RADIUS_LEVELS, dtype=np.float32)[k % 3][:, None, None]
        radius = radius * (1 + draw(-_RADIUS_JITTER, _RADIUS_JITTER))
        aspect, rotation = draw(0.8, 1.25), draw(0.0, np.pi)
        dx, dy = xx - cx, yy - cy
        u = dx * np.cos(rotation) + dy * np.sin(rotation)
        v = -dx * np.sin(rotation) + dy * np.cos(rotation)
        distance = np.sqrt((u / aspect) ** 2 + (v * aspect) ** 2)
        mask = 1.0 / (1.0 + np.exp((distance - radius) / (0.08 * radius + 0.3)))

        theta = np.deg2rad(45.0 * ((k // 3) % 4)).astype(np.float32)[:, None, None]
        theta = theta + np.deg2rad(draw(-_ORIENTATION_JITTER_DEG, _ORIENTATION_JITTER_DEG))
        phase = draw(0.0, 2 * np.pi)
        stripes = 0.5 + 0.5 * np.cos(2 * np.pi * (xx * np.cos(theta) + yy * np.sin(theta))
                                     / (size * _STRIPE_PERIOD) + phase)

        coarse = rng.uniform(0.0, 1.0, size=(n, 1, 4, 4)).astype(np.float32)
        field = resize(coarse, size, size, mode="bilinear")  # (n, 1, S, S), smooth
        colour = colours[k][:, :, None, None] + rng.uniform(
            -_COLOUR_JITTER, _COLOUR_JITTER, size=(n, channels, 1, 1)).astype(np.float32)
        if channels == 1:
            background = 0.12 + 0.18 * field
        else:  # a light, slightly pink smear with darker stained cells
            background = np.asarray([0.86, 0.78, 0.82], dtype=np.float32)[None, :, None, None] - 0.12 * field
        obj = colour * (0.72 + 0.28 * stripes[:, None])
        image = background * (1 - mask[:, None]) + obj * mask[:, None]
        image = image + rng.normal(0.0, _PIXEL_NOISE, size=image.shape).astype(np.float32)
        chunks.append(from_planar(image.astype(np.float32), grey=channels == 1))
    if not chunks:
        return np.zeros((0, *spec.image_shape), dtype=np.uint8)
    return np.concatenate(chunks)


def synth_arrays(spec: TaskSpec, counts: dict[str, int], seed: int) -> dict[str, NDArray[np.uint8]]:
    """The six official arrays for ``counts`` ({"train": n, "val": n, "test": n}); deterministic in ``seed``."""
    arrays: dict[str, NDArray[np.uint8]] = {}
    for index, split in enumerate(SPLITS):
        n = counts[split]
        if not 0 <= n <= MAX_PER_SPLIT:
            raise UsageError(f"--n-{split} must be between 0 and {MAX_PER_SPLIT} (found {n})", found=n)
        rng = np.random.default_rng([seed, index])
        labels = _labels(rng, n, spec.n_classes)
        arrays[f"{split}_images"] = _images(rng, labels, spec)
        arrays[f"{split}_labels"] = labels.astype(np.uint8)[:, None]
    return arrays


def write_synth(spec: TaskSpec, out_dir: Path, *, seed: int = 0, n_train: int | None = None,
                n_val: int | None = None, n_test: int | None = None) -> Path:
    """Write ``out_dir/<official file name>`` atomically (a temporary file renamed into place); return its path."""
    defaults = DEFAULT_COUNTS[spec.size]
    counts = {"train": defaults["train"] if n_train is None else n_train,
              "val": defaults["val"] if n_val is None else n_val,
              "test": defaults["test"] if n_test is None else n_test}
    if counts["test"] < 1:
        raise UsageError("--n-test must be at least 1", found=counts["test"])
    arrays = synth_arrays(spec, counts, seed)
    target = out_dir / spec.file_name
    with removed_on_failure(out_dir):  # a refused write (a full disk) leaves no new, empty folder behind
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(prefix=f".{spec.file_name}.", suffix=".tmp", dir=out_dir)
        except OSError as exc:
            raise UsageError(f"cannot write into {out_dir}: {exc.strerror or exc}", path=str(out_dir)) from None
        try:
            with os.fdopen(handle, "wb") as stream:
                np.savez_compressed(stream, **arrays)  # type: ignore[arg-type]
            mark_synthetic(Path(temporary))  # never mistaken for the official file (harness.provenance)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    return target
