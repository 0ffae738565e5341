"""Small numpy image operations shared by the synthetic data and the perturbations.

Images travel as uint8 in the MedMNIST layout ((N, H, W) grey or (N, H, W, C) colour) and are worked on as
float32 (N, C, H, W) in [0, 1]. Resizing is separable and written as matrices (out x in), so a batch resizes
with two matrix products and any ratio is exact for the box (area) filter.
"""

from __future__ import annotations

from functools import cache

import numpy as np
from numpy.typing import NDArray

from keys.errors import MalformedInput

Float32Array = NDArray[np.float32]
UInt8Array = NDArray[np.uint8]


def to_planar(images: UInt8Array) -> Float32Array:
    """uint8 (N, H, W) or (N, H, W, C) -> float32 (N, C, H, W) in [0, 1]."""
    array = np.asarray(images)
    if array.dtype != np.uint8:
        raise MalformedInput(f"images must be uint8 (found {array.dtype})", expected="uint8", found=str(array.dtype))
    if array.ndim == 3:
        array = array[:, None, :, :]
    elif array.ndim == 4:
        array = array.transpose(0, 3, 1, 2)
    else:
        raise MalformedInput(f"images must have shape (N, H, W) or (N, H, W, C) (found {array.shape})",
                             found=list(array.shape))
    return array.astype(np.float32) / np.float32(255.0)


def from_planar(planar: Float32Array, *, grey: bool) -> UInt8Array:
    """float32 (N, C, H, W) in [0, 1] -> uint8 in the MedMNIST layout (rounded half to even, clipped)."""
    scaled = np.rint(np.clip(planar, 0.0, 1.0) * np.float32(255.0)).astype(np.uint8)
    return scaled[:, 0] if grey else np.ascontiguousarray(scaled.transpose(0, 2, 3, 1))


@cache
def area_matrix(n_out: int, n_in: int) -> Float32Array:
    """Box-filter resampling n_in -> n_out: each output pixel averages the input span it covers."""
    edges = np.arange(n_out + 1, dtype=np.float64) * (n_in / n_out)
    lo, hi = edges[:-1, None], edges[1:, None]
    pixel = np.arange(n_in, dtype=np.float64)[None, :]
    overlap = np.clip(np.minimum(hi, pixel + 1) - np.maximum(lo, pixel), 0.0, None)
    return (overlap / overlap.sum(axis=1, keepdims=True)).astype(np.float32)


@cache
def bilinear_matrix(n_out: int, n_in: int) -> Float32Array:
    """Bilinear resampling n_in -> n_out with pixel-centre alignment (align_corners=False), edges clamped."""
    source = (np.arange(n_out, dtype=np.float64) + 0.5) * (n_in / n_out) - 0.5
    source = np.clip(source, 0.0, n_in - 1)
    left = np.floor(source).astype(np.int64)
    right = np.minimum(left + 1, n_in - 1)
    weight = source - left
    matrix = np.zeros((n_out, n_in), dtype=np.float64)
    rows = np.arange(n_out)
    np.add.at(matrix, (rows, left), 1.0 - weight)
    np.add.at(matrix, (rows, right), weight)
    return matrix.astype(np.float32)


@cache
def nearest_matrix(n_out: int, n_in: int) -> Float32Array:
    """Nearest-neighbour resampling n_in -> n_out (pixel centres)."""
    source = np.minimum(((np.arange(n_out) + 0.5) * (n_in / n_out)).astype(np.int64), n_in - 1)
    matrix = np.zeros((n_out, n_in), dtype=np.float32)
    matrix[np.arange(n_out), source] = 1.0
    return matrix


def resample(planar: Float32Array, rows: Float32Array, cols: Float32Array) -> Float32Array:
    """Apply a row matrix (H' x H) and a column matrix (W' x W) to every plane of (N, C, H, W)."""
    return np.matmul(np.matmul(rows, planar), cols.T).astype(np.float32, copy=False)


def resize(planar: Float32Array, height: int, width: int, *, mode: str) -> Float32Array:
    """Resize (N, C, H, W) to (height, width) with ``mode`` in {"area", "bilinear", "nearest"}."""
    builders = {"area": area_matrix, "bilinear": bilinear_matrix, "nearest": nearest_matrix}
    build = builders[mode]
    return resample(planar, build(height, planar.shape[2]), build(width, planar.shape[3]))
