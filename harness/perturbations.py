"""The twelve MedEval-1 perturbations (7 corruptions, 5 simulated re-acquisitions) at three severities.

The spec leaves the parameters to this module: they are the constants below, fixed in code. Spatial
parameters are written for 28 px images and scale with the image side (a blur radius of 1 px at 28 px is 8 px
at 224 px); crop, pixelation and resolution factors are fractions of the side and so scale by construction;
intensity parameters act on [0, 1] values and do not depend on size. Random draws come from
``numpy.random.default_rng([seed, index of the perturbation, severity])``, so each (perturbation, severity)
cell has a stream of its own and the output is a function of (images, name, severity, seed). Batched: a
whole array goes in, in chunks of a fixed size, and comes out as uint8 of the same shape. Numpy only.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Final

import numpy as np

from harness.imageops import Float32Array, UInt8Array, from_planar, resize, to_planar
from harness.metrics.spec import PERTURBATIONS
from keys.errors import UsageError

SEVERITY_LEVELS: Final[tuple[int, ...]] = (1, 2, 3)
REFERENCE_SIDE: Final = 28
#: Images per chunk: bounds memory at 224 px (a chunk is 64 x 3 x 224 x 224 float32, about 38 MB).
CHUNK: Final = 64

# --- corruptions -------------------------------------------------------------------------------------------
BRIGHTNESS_SHIFT: Final = (0.12, 0.24, 0.36)  # added to [0, 1] intensities
CONTRAST_FACTOR: Final = (0.7, 0.5, 0.3)  # deviations from each image's mean are multiplied by this
DEFOCUS_RADIUS_PX28: Final = (0.75, 1.25, 2.0)  # disk radius in pixels at 28 px
GAUSSIAN_NOISE_SIGMA: Final = (0.04, 0.08, 0.14)
PIXELATE_FRACTION: Final = (0.6, 0.45, 0.3)  # box-downsampled to this fraction of the side, then blown up
QUANTISE_BITS: Final = (4, 3, 2)  # 16, 8, 4 grey levels per channel
SHOT_NOISE_PHOTONS: Final = (80.0, 30.0, 12.0)  # expected photon count at full intensity
# --- acquisitions ------------------------------------------------------------------------------------------
DETECTOR_READ_SIGMA: Final = (0.02, 0.04, 0.07)  # additive read noise
DETECTOR_PHOTONS: Final = (200.0, 80.0, 40.0)  # signal-dependent (Poisson) part
DETECTOR_ROW_SIGMA: Final = (0.01, 0.02, 0.04)  # per-row offset (banding, one draw per image row)
FIELD_OF_VIEW_FRACTION: Final = (0.85, 0.72, 0.6)  # centre crop of this fraction of the side, zoomed back
GAMMA: Final = (1.25, 1.5, 1.9)  # each image gets gamma or 1/gamma, drawn from the seed
RESOLUTION_FRACTION: Final = (0.7, 0.5, 0.35)  # acquired at this fraction of the side, bilinear upsampled
WINDOW_LEVEL: Final = ((0.8, 0.55), (0.65, 0.6), (0.5, 0.62))  # (width, level) of the display window

PerturbFn = Callable[[Float32Array, int, np.random.Generator], Float32Array]


def _side(planar: Float32Array) -> int:
    return int(planar.shape[2])


def _scaled(n: float, side: int) -> int:
    return max(1, round(n * side))


def brightness(x: Float32Array, s: int, rng: np.random.Generator) -> Float32Array:
    return x + np.float32(BRIGHTNESS_SHIFT[s - 1])


def contrast(x: Float32Array, s: int, rng: np.random.Generator) -> Float32Array:
    mean = x.mean(axis=(1, 2, 3), keepdims=True)
    return (x - mean) * np.float32(CONTRAST_FACTOR[s - 1]) + mean


@cache
def _disk(radius: float) -> Float32Array:
    """A normalised disk kernel with anti-aliased edges (coverage by 8 x 8 sub-samples per pixel)."""
    half = int(np.ceil(radius))
    offsets = (np.arange(8) + 0.5) / 8 - 0.5
    centres = np.arange(-half, half + 1, dtype=np.float64)
    fine = (centres[:, None] + offsets[None, :]).ravel()
    inside = (fine[:, None] ** 2 + fine[None, :] ** 2) <= radius**2
    coverage = inside.reshape(2 * half + 1, 8, 2 * half + 1, 8).mean(axis=(1, 3))
    return (coverage / coverage.sum()).astype(np.float32)


def _convolve(x: Float32Array, kernel: Float32Array) -> Float32Array:
    """Same-size convolution of every plane with a centred kernel, reflect padding, via the FFT."""
    half = kernel.shape[0] // 2
    padded = np.pad(x, ((0, 0), (0, 0), (half, half), (half, half)), mode="reflect")
    height, width = padded.shape[2], padded.shape[3]
    placed = np.zeros((height, width), dtype=np.float32)
    placed[: kernel.shape[0], : kernel.shape[1]] = kernel
    placed = np.roll(placed, (-half, -half), axis=(0, 1))  # kernel centre at the origin
    spectrum = np.fft.rfft2(padded) * np.fft.rfft2(placed)
    out = np.fft.irfft2(spectrum, s=(height, width))
    return out[:, :, half:height - half, half:width - half].astype(np.float32)


def defocus_blur(x: Float32Array, s: int, rng: np.random.Generator) -> Float32Array:
    radius = DEFOCUS_RADIUS_PX28[s - 1] * _side(x) / REFERENCE_SIDE
    return _convolve(x, _disk(radius))


def gaussian_noise(x: Float32Array, s: int, rng: np.random.Generator) -> Float32Array:
    return x + rng.normal(0.0, GAUSSIAN_NOISE_SIGMA[s - 1], size=x.shape).astype(np.float32)


def pixelate(x: Float32Array, s: int, rng: np.random.Generator) -> Float32Array:
    side = _side(x)
    small = _scaled(PIXELATE_FRACTION[s - 1], side)
    return resize(resize(x, small, small, mode="area"), side, side, mode="nearest")


def quantise(x: Float32Array, s: int, rng: np.random.Generator) -> Float32Array:
    levels = 2 ** QUANTISE_BITS[s - 1]
    bins = np.minimum(np.floor(np.clip(x, 0.0, 1.0) * levels), levels - 1)
    return ((bins + 0.5) / levels).astype(np.float32)


def shot_noise(x: Float32Array, s: int, rng: np.random.Generator) -> Float32Array:
    photons = SHOT_NOISE_PHOTONS[s - 1]
    return (rng.poisson(np.clip(x, 0.0, 1.0) * photons) / photons).astype(np.float32)


def detector_noise(x: Float32Array, s: int, rng: np.random.Generator) -> Float32Array:
    photons = DETECTOR_PHOTONS[s - 1]
    signal = rng.poisson(np.clip(x, 0.0, 1.0) * photons) / photons
    read = rng.normal(0.0, DETECTOR_READ_SIGMA[s - 1], size=x.shape)
    rows = rng.normal(0.0, DETECTOR_ROW_SIGMA[s - 1], size=(x.shape[0], 1, x.shape[2], 1))
    return (signal + read + rows).astype(np.float32)


def field_of_view(x: Float32Array, s: int, rng: np.random.Generator) -> Float32Array:
    side = _side(x)
    crop = _scaled(FIELD_OF_VIEW_FRACTION[s - 1], side)
    start = (side - crop) // 2
    window = x[:, :, start:start + crop, start:start + crop]
    return resize(np.ascontiguousarray(window), side, side, mode="bilinear")


def gamma_shift(x: Float32Array, s: int, rng: np.random.Generator) -> Float32Array:
    exponent = np.where(rng.random(x.shape[0]) < 0.5, GAMMA[s - 1], 1.0 / GAMMA[s - 1]).astype(np.float32)
    return np.power(np.clip(x, 0.0, 1.0), exponent[:, None, None, None])


def resolution(x: Float32Array, s: int, rng: np.random.Generator) -> Float32Array:
    side = _side(x)
    small = _scaled(RESOLUTION_FRACTION[s - 1], side)
    return resize(resize(x, small, small, mode="area"), side, side, mode="bilinear")


def window_level(x: Float32Array, s: int, rng: np.random.Generator) -> Float32Array:
    width, level = WINDOW_LEVEL[s - 1]
    return (x - np.float32(level - width / 2)) / np.float32(width)


FUNCTIONS: Final[dict[str, PerturbFn]] = {
    "brightness": brightness, "contrast": contrast, "defocus_blur": defocus_blur,
    "gaussian_noise": gaussian_noise, "pixelate": pixelate, "quantise": quantise, "shot_noise": shot_noise,
    "detector_noise": detector_noise, "field_of_view": field_of_view, "gamma_shift": gamma_shift,
    "resolution": resolution, "window_level": window_level,
}


def apply(images: UInt8Array, name: str, severity: int, seed: int) -> UInt8Array:
    """Perturb a batch of uint8 images ((N, H, W) or (N, H, W, C)) at ``severity`` in 1..3; same shape out."""
    if name not in FUNCTIONS:
        raise UsageError(f"unknown perturbation {name!r}", expected=sorted(FUNCTIONS), found=name)
    if severity not in SEVERITY_LEVELS:
        raise UsageError(f"severity must be 1, 2 or 3 (found {severity!r})", expected=list(SEVERITY_LEVELS),
                         found=severity)
    array = np.asarray(images)
    grey = array.ndim == 3
    planar_all = to_planar(array)
    rng = np.random.default_rng([seed, PERTURBATIONS.index(name), severity])
    function = FUNCTIONS[name]
    out = np.empty_like(array)
    for start in range(0, array.shape[0], CHUNK):
        chunk = planar_all[start:start + CHUNK]
        out[start:start + CHUNK] = from_planar(function(chunk, severity, rng), grey=grey)
    return out


def parameters_table() -> dict[str, list[object]]:
    """The constants per perturbation, for reports (severity 1, 2, 3)."""
    return {
        "brightness": list(BRIGHTNESS_SHIFT), "contrast": list(CONTRAST_FACTOR),
        "defocus_blur": list(DEFOCUS_RADIUS_PX28), "gaussian_noise": list(GAUSSIAN_NOISE_SIGMA),
        "pixelate": list(PIXELATE_FRACTION), "quantise": list(QUANTISE_BITS),
        "shot_noise": list(SHOT_NOISE_PHOTONS),
        "detector_noise": [list(t) for t in zip(DETECTOR_READ_SIGMA, DETECTOR_PHOTONS, DETECTOR_ROW_SIGMA,
                                                strict=True)],
        "field_of_view": list(FIELD_OF_VIEW_FRACTION), "gamma_shift": list(GAMMA),
        "resolution": list(RESOLUTION_FRACTION), "window_level": [list(t) for t in WINDOW_LEVEL],
    }

