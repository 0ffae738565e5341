"""Stored predictions: everything an evaluation is re-derived from, as one deterministic npz blob.

Stored dtypes (decided): probabilities are little-endian float32 (``<f4``), predicted labels little-endian
int16 (``<i2``, so K <= 32767). The constructor *casts* to these dtypes, so a :class:`StoredPredictions` in
memory already holds exactly what the blob will hold; the harness computes the evaluation from that object
and the audit from the loaded blob, and both see identical numbers (float32 -> float64 widening is exact).

Blob layout (FORMATS section 8, the only layout :meth:`StoredPredictions.from_npz_bytes` reads): an
uncompressed zip (``ZIP_STORED``: no compressor whose output could differ between zlib builds) with a fixed
timestamp (1980-01-01 00:00:00), fixed permissions, no zip64, nothing before or after it, and members in a fixed
order, each an ``.npy`` file of format version 1.0, C order, written without pickle:

* ``format.npy`` : the unicode string ``FORMAT``;
* ``clean_probs.npy`` : (n_test, K);
* ``perturbed_labels.<name>.npy`` : (3, n_cases) for each of the 12 perturbations, names sorted;
* ``template_probs.npy`` : (6, n_cases, K), only for models that take a text prompt;
* ``fraction_probs.npy`` : (3, n_test, K), only for models with a training step.

n_cases = min(n_test, 1200): the rows are the robustness subset, in subset (sorted index) order.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from keys.errors import MalformedInput

from . import spec
from .npz import load_stored_npz

FORMAT = "MedEval-1 stored predictions v1"
PROB_DTYPE = np.dtype("<f4")
LABEL_DTYPE = np.dtype("<i2")
#: Probabilities may overshoot 1 by float32 rounding only; rows must sum to 1 within this tolerance.
PROB_TOLERANCE = 1e-5
ROW_SUM_TOLERANCE = 1e-3
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)
_FORMAT_MEMBER = "format"
_PERTURBED_PREFIX = "perturbed_labels."


def _frozen(array: NDArray[Any]) -> NDArray[Any]:
    array = np.ascontiguousarray(array)
    array.setflags(write=False)
    return array


def _probs(value: ArrayLike, name: str, shape: tuple[int, ...]) -> NDArray[np.float32]:
    array = np.asarray(value)
    if array.dtype.kind not in "fiu":
        raise MalformedInput(f"stored predictions: {name} must be real numbers (found dtype {array.dtype})",
                             field=name, expected=str(PROB_DTYPE), found=str(array.dtype))
    if array.shape != shape:
        raise MalformedInput(f"stored predictions: {name} must have shape {shape} (found {array.shape})",
                             field=name, expected=list(shape), found=list(array.shape))
    stored = np.array(array, dtype=PROB_DTYPE, copy=True)
    if not np.isfinite(stored).all():
        raise MalformedInput(f"stored predictions: {name} contains NaN or infinite values", field=name)
    if stored.size and (stored.min() < 0 or stored.max() > 1 + PROB_TOLERANCE):
        raise MalformedInput(f"stored predictions: {name} has values outside [0, 1]", field=name,
                             expected=[0, 1], found=[float(stored.min()), float(stored.max())])
    row_error = np.abs(stored.astype(np.float64).sum(axis=-1) - 1.0)
    if row_error.size and row_error.max() > ROW_SUM_TOLERANCE:
        raise MalformedInput(f"stored predictions: {name} has rows that do not sum to 1 "
                             f"(worst off by {row_error.max():.3g})", field=name,
                             found=float(row_error.max()))
    return _frozen(stored)


def _labels(value: ArrayLike, name: str, shape: tuple[int, ...], n_classes: int) -> NDArray[np.int16]:
    array = np.asarray(value)
    if array.dtype.kind not in "iu":
        raise MalformedInput(f"stored predictions: {name} must be integer labels (found dtype {array.dtype})",
                             field=name, expected=str(LABEL_DTYPE), found=str(array.dtype))
    if array.shape != shape:
        raise MalformedInput(f"stored predictions: {name} must have shape {shape} (found {array.shape})",
                             field=name, expected=list(shape), found=list(array.shape))
    if array.size and (array.min() < 0 or array.max() >= n_classes):
        raise MalformedInput(f"stored predictions: {name} has labels outside 0..{n_classes - 1}", field=name,
                             expected=[0, n_classes - 1], found=[int(array.min()), int(array.max())])
    return _frozen(np.array(array, dtype=LABEL_DTYPE, copy=True))


@dataclass(frozen=True, eq=False)
class StoredPredictions:
    """The stored predictions of one evaluation (see the module docstring for dtypes and layout).

    ``clean_probs`` (n_test, K) on the full test set; ``perturbed_labels`` name -> (3, n_cases) predicted
    labels for all 12 perturbations on the subset; ``template_probs`` (6, n_cases, K) or None for models
    without prompts; ``fraction_probs`` (3, n_test, K) or None for models with no training step. Arrays are
    converted to the stored dtypes, copied and made read-only on construction; shapes and values are checked
    (MalformedInput says what was expected and what was found)."""

    # Typed loosely because the constructor accepts any real (probabilities) or integer (labels) array and
    # casts it; once constructed the arrays are always <f4 / <i2.
    clean_probs: NDArray[Any]
    perturbed_labels: Mapping[str, NDArray[Any]]
    template_probs: NDArray[Any] | None = None
    fraction_probs: NDArray[Any] | None = None

    def __post_init__(self) -> None:
        clean = np.asarray(self.clean_probs)
        if clean.ndim != 2 or clean.shape[0] < 1 or clean.shape[1] < 2:
            raise MalformedInput(f"stored predictions: clean_probs must have shape (n_test >= 1, K >= 2) "
                                 f"(found {clean.shape})", field="clean_probs", expected="(n_test, K)",
                                 found=list(clean.shape))
        n_test, n_classes = int(clean.shape[0]), int(clean.shape[1])
        if n_classes > np.iinfo(LABEL_DTYPE).max:
            raise MalformedInput(f"stored predictions: K = {n_classes} exceeds the int16 label range")
        n_cases = min(n_test, spec.ROBUSTNESS_SUBSET_MAX)
        object.__setattr__(self, "clean_probs", _probs(clean, "clean_probs", (n_test, n_classes)))
        given = self.perturbed_labels
        if not isinstance(given, Mapping) or set(given) != set(spec.PERTURBATIONS):
            found = sorted(given) if isinstance(given, Mapping) else None
            raise MalformedInput("stored predictions: perturbed_labels must hold exactly the 12 "
                                 "perturbations", field="perturbed_labels", expected=list(spec.PERTURBATIONS),
                                 found=found)
        perturbed = {name: _labels(self.perturbed_labels[name], f"perturbed_labels[{name}]",
                                   (spec.SEVERITIES, n_cases), n_classes) for name in spec.PERTURBATIONS}
        object.__setattr__(self, "perturbed_labels", MappingProxyType(perturbed))
        if self.template_probs is not None:
            object.__setattr__(self, "template_probs", _probs(
                self.template_probs, "template_probs", (len(spec.TEMPLATES), n_cases, n_classes)))
        if self.fraction_probs is not None:
            object.__setattr__(self, "fraction_probs", _probs(
                self.fraction_probs, "fraction_probs", (len(spec.TRAINING_FRACTIONS), n_test, n_classes)))

    @property
    def n_test(self) -> int:
        return int(self.clean_probs.shape[0])

    @property
    def n_classes(self) -> int:
        return int(self.clean_probs.shape[1])

    @property
    def n_cases(self) -> int:
        return min(self.n_test, spec.ROBUSTNESS_SUBSET_MAX)

    def _members(self) -> list[tuple[str, NDArray[Any]]]:
        members: list[tuple[str, NDArray[Any]]] = [
            (_FORMAT_MEMBER, np.array(FORMAT)),
            ("clean_probs", self.clean_probs),
        ]
        members += [(_PERTURBED_PREFIX + name, self.perturbed_labels[name]) for name in spec.PERTURBATIONS]
        if self.template_probs is not None:
            members.append(("template_probs", self.template_probs))
        if self.fraction_probs is not None:
            members.append(("fraction_probs", self.fraction_probs))
        return members

    def to_npz_bytes(self) -> bytes:
        """The blob: same arrays, same bytes (uncompressed zip, fixed timestamp/permissions/order)."""
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
            for name, array in self._members():
                member = io.BytesIO()
                np.lib.format.write_array(member, array, version=(1, 0), allow_pickle=False)
                info = zipfile.ZipInfo(f"{name}.npy", date_time=_ZIP_DATE)
                info.compress_type = zipfile.ZIP_STORED
                info.create_system = 3
                info.external_attr = 0o100644 << 16
                archive.writestr(info, member.getvalue())
        return buffer.getvalue()

    @classmethod
    def from_npz_bytes(cls, data: bytes, *, n_test: int | None = None,
                       n_classes: int | None = None) -> StoredPredictions:
        """Load a blob in the layout :meth:`to_npz_bytes` writes (FORMATS section 8), safely and strictly: the
        zip and every ``.npy`` header must be exactly that layout (``harness.metrics.npz.load_stored_npz``: no
        leading or trailing bytes, no compression, no zip64, no extra fields, member times 1980-01-01, ``.npy``
        format 1.0 in C order, headers checked against their sizes before anything is read; anything else is
        refused naming what is wrong, never read another way), exactly the expected members in the section's
        order, exact stored dtypes, then the constructor's shape and value checks; optionally the expected
        ``n_test`` and ``n_classes``."""
        required = {_FORMAT_MEMBER, "clean_probs"} | {f"{_PERTURBED_PREFIX}{name}" for name in spec.PERTURBATIONS}
        allowed = required | {"template_probs", "fraction_probs"}
        arrays = load_stored_npz(data, what="stored predictions", limit=max(len(data), 1))
        if not required <= set(arrays) or not set(arrays) <= allowed:
            raise MalformedInput("stored predictions: unexpected set of members",
                                 expected=sorted(required), found=sorted(arrays))
        order = [_FORMAT_MEMBER, "clean_probs", *(f"{_PERTURBED_PREFIX}{name}" for name in spec.PERTURBATIONS),
                 "template_probs", "fraction_probs"]
        expected_order = [name for name in order if name in arrays]
        if list(arrays) != expected_order:
            at = next(k for k, (a, b) in enumerate(zip(arrays, expected_order, strict=True)) if a != b)
            raise MalformedInput(f"stored predictions: member {at + 1} is {list(arrays)[at]}.npy, expected "
                                 f"{expected_order[at]}.npy (members in the order of FORMATS section 8)",
                                 field=list(arrays)[at], expected=[f"{n}.npy" for n in expected_order],
                                 found=[f"{n}.npy" for n in arrays])
        fmt = arrays.pop(_FORMAT_MEMBER)
        if fmt.dtype.kind != "U" or fmt.dtype.str[0] != "<" or fmt.shape != () or str(fmt) != FORMAT:
            raise MalformedInput("stored predictions: unknown format marker", expected=FORMAT,
                                 found=str(fmt)[:80])
        for name, array in arrays.items():
            expected_dtype = LABEL_DTYPE if name.startswith(_PERTURBED_PREFIX) else PROB_DTYPE
            if array.dtype != expected_dtype:
                raise MalformedInput(f"stored predictions: {name} has dtype {array.dtype.str}, expected "
                                     f"{expected_dtype.str}", field=name, expected=expected_dtype.str,
                                     found=array.dtype.str)
        loaded = cls(
            clean_probs=arrays["clean_probs"],
            perturbed_labels={name: arrays[_PERTURBED_PREFIX + name] for name in spec.PERTURBATIONS},
            template_probs=arrays.get("template_probs"),
            fraction_probs=arrays.get("fraction_probs"),
        )
        if n_test is not None and loaded.n_test != n_test:
            raise MalformedInput(f"stored predictions cover {loaded.n_test} test cases, expected {n_test}",
                                 field="clean_probs", expected=n_test, found=loaded.n_test)
        if n_classes is not None and loaded.n_classes != n_classes:
            raise MalformedInput(f"stored predictions have {loaded.n_classes} classes, expected {n_classes}",
                                 field="clean_probs", expected=n_classes, found=loaded.n_classes)
        return loaded

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StoredPredictions):
            return NotImplemented
        return self.to_npz_bytes() == other.to_npz_bytes()

    __hash__ = None  # type: ignore[assignment]
