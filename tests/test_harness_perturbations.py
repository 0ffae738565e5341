"""The twelve perturbations: the spec's names, deterministic in the seed, shape- and dtype-preserving, batched,
stronger with severity, scaled with image size, numpy only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness import perturbations
from harness.metrics import ACQUISITIONS, CORRUPTIONS, PERTURBATIONS
from keys.errors import MalformedInput, UsageError

RANDOM_ONES = {"gaussian_noise", "shot_noise", "detector_noise", "gamma_shift"}
REPO = Path(__file__).resolve().parent.parent


def images(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Smooth structured images (a gradient plus a blob) with some noise: blur and resampling must show."""
    rng = np.random.default_rng(seed)
    n, side = shape[0], shape[1]
    yy, xx = np.mgrid[0:side, 0:side] / side
    base = 0.3 + 0.4 * xx + 0.3 * np.exp(-((xx - 0.5) ** 2 + (yy - 0.5) ** 2) / 0.02)
    stack = base[None] + rng.normal(0, 0.05, size=(n, side, side))
    if len(shape) == 4:
        stack = np.repeat(stack[..., None], shape[3], axis=3) * np.array([1.0, 0.9, 0.8])
    return np.clip(stack * 255, 0, 255).astype(np.uint8)


def test_names_are_the_specs() -> None:
    assert set(perturbations.FUNCTIONS) == set(PERTURBATIONS) == set(CORRUPTIONS) | set(ACQUISITIONS)
    assert len(CORRUPTIONS) == 7 and len(ACQUISITIONS) == 5
    assert set(perturbations.parameters_table()) == set(PERTURBATIONS)


@pytest.mark.parametrize("name", sorted(PERTURBATIONS))
@pytest.mark.parametrize("shape", [(5, 28, 28), (3, 28, 28, 3), (2, 224, 224)])
def test_shape_dtype_and_determinism(name: str, shape: tuple[int, ...]) -> None:
    batch = images(shape)
    for severity in (1, 2, 3):
        out = perturbations.apply(batch, name, severity, 20260727)
        assert out.shape == batch.shape and out.dtype == np.uint8
        assert np.array_equal(out, perturbations.apply(batch, name, severity, 20260727))
        assert not np.array_equal(out, batch)
    assert np.array_equal(batch, images(shape))  # the input is not modified


@pytest.mark.parametrize("name", sorted(RANDOM_ONES))
def test_random_perturbations_follow_the_seed(name: str) -> None:
    batch = images((6, 28, 28, 3))
    assert not np.array_equal(perturbations.apply(batch, name, 2, 1), perturbations.apply(batch, name, 2, 2))


@pytest.mark.parametrize("name", sorted(set(PERTURBATIONS) - RANDOM_ONES))
def test_deterministic_perturbations_ignore_the_seed(name: str) -> None:
    batch = images((4, 28, 28))
    assert np.array_equal(perturbations.apply(batch, name, 3, 1), perturbations.apply(batch, name, 3, 2))


def test_cells_have_independent_streams() -> None:
    # Same seed, different severity or perturbation: different noise (not the same draws rescaled).
    batch = np.full((2, 28, 28), 128, dtype=np.uint8)
    noise_1 = perturbations.apply(batch, "gaussian_noise", 1, 5).astype(float) - 128
    noise_2 = perturbations.apply(batch, "gaussian_noise", 2, 5).astype(float) - 128
    assert abs(np.corrcoef(noise_1.ravel(), noise_2.ravel())[0, 1]) < 0.2


@pytest.mark.parametrize("name", sorted(PERTURBATIONS))
def test_severity_increases_the_change(name: str) -> None:
    batch = images((16, 28, 28, 3))
    change = [np.abs(perturbations.apply(batch, name, s, 3).astype(float) - batch).mean() for s in (1, 2, 3)]
    assert change[0] < change[1] < change[2], change


def test_batched_equals_itself_chunk_by_chunk_size() -> None:
    # More images than one chunk: the result is still a function of (images, name, severity, seed).
    batch = images((perturbations.CHUNK + 9, 28, 28))
    once = perturbations.apply(batch, "shot_noise", 2, 11)
    again = perturbations.apply(batch.copy(), "shot_noise", 2, 11)
    assert np.array_equal(once, again)


def test_spatial_parameters_scale_with_size() -> None:
    # A blur of the same *relative* strength: smoothing a 224 px image (a 28 px image upsampled by 8) at a
    # severity is close to upsampling the 28 px result.
    small = images((2, 28, 28))
    large = np.repeat(np.repeat(small, 8, axis=1), 8, axis=2)
    blurred_small = perturbations.apply(small, "defocus_blur", 3, 0).astype(float)
    blurred_large = perturbations.apply(large, "defocus_blur", 3, 0).astype(float)
    pooled = blurred_large.reshape(2, 28, 8, 28, 8).mean(axis=(2, 4))
    assert np.abs(pooled - blurred_small).mean() < 6.0
    assert perturbations.apply(large, "pixelate", 3, 0).shape == large.shape


def test_bad_arguments_are_refused() -> None:
    batch = images((2, 28, 28))
    with pytest.raises(UsageError, match="unknown perturbation"):
        perturbations.apply(batch, "jpeg", 1, 0)
    with pytest.raises(UsageError, match="severity"):
        perturbations.apply(batch, "contrast", 0, 0)
    with pytest.raises(MalformedInput, match="uint8"):
        perturbations.apply(batch.astype(np.float32), "contrast", 1, 0)


def test_perturbations_are_numpy_only() -> None:
    code = ("import sys, numpy as np; from harness import perturbations; "
            "perturbations.apply(np.zeros((1, 28, 28), np.uint8), 'pixelate', 2, 0); "
            "print(sorted(m for m in ('torch', 'medmnist', 'open_clip') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True,
                            cwd=REPO)
    assert result.stdout.strip() == "[]"
