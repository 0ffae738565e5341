"""The whole evaluation object, built once by the harness and re-derived by the audit with the same code.

``build_evaluation(meta, predictions, labels)`` is the single function that turns stored predictions into the
spec's evaluation object; ``rederive`` runs it again from a recorded object's non-derivable fields
(:class:`EvaluationMeta`), and ``check_rederived`` raises on the first field whose canonical form differs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from keys.errors import MalformedInput, VerificationError
from seals.canonical import canonical_bytes, prepare

from . import spec
from .core import as_labels, plain, predictions_from_probs
from .dimensions import (
    accuracy,
    acquisition,
    calibration,
    composite,
    corruption,
    cost,
    limited_data,
    spec_sensitivity,
    subgroup,
    subset_indices,
    uncertainty,
)
from .stored import StoredPredictions

#: The fields of ``limitations`` the harness supplies; ``has_real_subgroup_metadata`` and ``subgroup_basis``
#: are derived from the subgroup dimension so the two can never disagree.
LIMITATION_INPUT_FIELDS = ("n_train_available", "notes", "train_capped")
_NUMPY_VERSION = re.compile(r"[0-9A-Za-z.+!_-]{1,40}")
_STRING_FIELDS = ("code_fingerprint", "device", "domain", "kind", "modality", "split_origin", "task",
                  "task_name", "timestamp")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class EvaluationMeta:
    """The fields of an evaluation object that cannot be derived from predictions and labels.

    ``limitations`` holds exactly ``n_train_available`` (int or None), ``notes`` (str or None) and
    ``train_capped`` (bool). ``seconds_total`` is the measured inference wall time (kept at 4 dp) and
    ``parameters`` the model's parameter count (None if not applicable); both feed the cost dimension.
    ``runtime_s`` is emitted at 1 dp."""

    code_fingerprint: str
    device: str
    domain: str
    kind: str
    limitations: Mapping[str, Any]
    modality: str
    n_classes: int
    n_test: int
    runtime_s: float
    seed: int
    split_origin: str
    task: str
    task_name: str
    timestamp: str
    seconds_total: float
    parameters: int | None
    #: The numpy version the evaluation was computed with (v0.1 records it: its draws come from numpy's
    #: ``Generator`` methods, whose streams numpy only keeps stable within a version). None: not recorded.
    numpy_version: str | None = None

    def __post_init__(self) -> None:
        # numpy scalars (an n_test from an array's shape, a bool from comparing numpy ints) become the Python
        # values they hold, so the checks below and the emitted JSON see plain types.
        for name in ("n_classes", "n_test", "seed", "runtime_s", "seconds_total", "parameters"):
            object.__setattr__(self, name, plain(getattr(self, name)))
        if isinstance(self.limitations, Mapping):
            object.__setattr__(self, "limitations", {k: plain(v) for k, v in self.limitations.items()})
        for name in _STRING_FIELDS:
            if not isinstance(getattr(self, name), str):
                raise MalformedInput(f"evaluation meta: {name} must be a string", field=name,
                                     found=type(getattr(self, name)).__name__)
        for name in ("n_classes", "n_test", "seed"):
            if not _is_int(getattr(self, name)) or getattr(self, name) < 0:
                raise MalformedInput(f"evaluation meta: {name} must be a non-negative integer", field=name,
                                     found=repr(getattr(self, name)))
        for name in ("runtime_s", "seconds_total"):
            if not _is_number(getattr(self, name)) or getattr(self, name) < 0:
                raise MalformedInput(f"evaluation meta: {name} must be a non-negative number", field=name,
                                     found=repr(getattr(self, name)))
        if self.parameters is not None and (not _is_int(self.parameters) or self.parameters < 0):
            raise MalformedInput("evaluation meta: parameters must be a non-negative integer or null",
                                 field="parameters", found=repr(self.parameters))
        limits = self.limitations
        if not isinstance(limits, Mapping) or set(limits) != set(LIMITATION_INPUT_FIELDS):
            raise MalformedInput("evaluation meta: limitations must hold exactly the harness-supplied fields",
                                 field="limitations", expected=list(LIMITATION_INPUT_FIELDS),
                                 found=sorted(limits) if isinstance(limits, Mapping) else None)
        if not (limits["n_train_available"] is None or _is_int(limits["n_train_available"])) \
                or not (limits["notes"] is None or isinstance(limits["notes"], str)) \
                or not isinstance(limits["train_capped"], bool):
            raise MalformedInput("evaluation meta: limitations has a field of the wrong type",
                                 field="limitations", found={k: type(v).__name__ for k, v in limits.items()})
        object.__setattr__(self, "limitations", {name: limits[name] for name in LIMITATION_INPUT_FIELDS})
        if self.numpy_version is not None and (not isinstance(self.numpy_version, str)
                                               or not _NUMPY_VERSION.fullmatch(self.numpy_version)):
            raise MalformedInput("evaluation meta: numpy_version must be a version string",
                                 field="numpy_version", found=repr(self.numpy_version)[:60])

    @classmethod
    def from_recorded(cls, evaluation: Mapping[str, Any]) -> EvaluationMeta:
        """The meta of a recorded (parsed JSON) evaluation object: its top-level non-derivable fields, the
        harness-supplied part of ``limitations``, and ``dimensions.cost.{seconds_total, parameters}``."""
        if not isinstance(evaluation, Mapping):
            raise MalformedInput("recorded evaluation is not an object", found=type(evaluation).__name__)

        def field(container: Mapping[str, Any], name: str, where: str) -> Any:
            if not isinstance(container, Mapping) or name not in container:
                raise MalformedInput(f"recorded evaluation lacks {where}{name}", field=f"{where}{name}")
            return container[name]

        dimensions = field(evaluation, "dimensions", "")
        cost_dimension = field(dimensions, "cost", "dimensions.")
        limitations = field(evaluation, "limitations", "")
        return cls(
            code_fingerprint=field(evaluation, "code_fingerprint", ""),
            device=field(evaluation, "device", ""),
            domain=field(evaluation, "domain", ""),
            kind=field(evaluation, "kind", ""),
            limitations={name: field(limitations, name, "limitations.") for name in LIMITATION_INPUT_FIELDS},
            modality=field(evaluation, "modality", ""),
            n_classes=field(evaluation, "n_classes", ""),
            n_test=field(evaluation, "n_test", ""),
            runtime_s=field(evaluation, "runtime_s", ""),
            seed=field(evaluation, "seed", ""),
            split_origin=field(evaluation, "split_origin", ""),
            task=field(evaluation, "task", ""),
            task_name=field(evaluation, "task_name", ""),
            timestamp=field(evaluation, "timestamp", ""),
            seconds_total=field(cost_dimension, "seconds_total", "dimensions.cost."),
            parameters=field(cost_dimension, "parameters", "dimensions.cost."),
            numpy_version=evaluation.get("numpy_version"),
        )


def compute_dimensions(predictions: StoredPredictions, labels: ArrayLike, *, seed: int, seconds_total: float,
                       device: str, parameters: int | None,
                       metadata: Mapping[str, ArrayLike] | None = None) -> dict[str, Any]:
    """All nine dimension objects, keyed and ordered by name, from stored predictions and labels."""
    n_classes = predictions.n_classes
    y = as_labels(labels, n_classes=n_classes, n=predictions.n_test)
    probs = predictions.clean_probs.astype(np.float64)
    subset = subset_indices(predictions.n_test, seed)
    n_cases = int(subset.shape[0])
    clean_predictions = predictions_from_probs(probs)
    clean_subset = clean_predictions[subset]
    labels_subset = y[subset]
    perturbed = predictions.perturbed_labels
    dimensions = {
        "accuracy": accuracy(probs, y, seed=seed),
        "acquisition": acquisition(clean_subset, {n: perturbed[n] for n in spec.ACQUISITIONS},
                                   labels_subset, n_classes),
        "calibration": calibration(probs, y),
        "corruption": corruption(clean_subset, {n: perturbed[n] for n in spec.CORRUPTIONS},
                                 labels_subset, n_classes),
        "cost": cost(seconds_total, predictions.n_test, n_cases, device, parameters),
        "limited_data": limited_data(predictions.fraction_probs, y, n_classes),
        "spec_sensitivity": spec_sensitivity(predictions.template_probs, labels_subset, n_classes),
        "subgroup": subgroup(clean_predictions, y, n_classes, metadata),
        "uncertainty": uncertainty(probs, y),
    }
    return dimensions


def build_evaluation(meta: EvaluationMeta, predictions: StoredPredictions, labels: ArrayLike, *,
                     metadata: Mapping[str, ArrayLike] | None = None) -> dict[str, Any]:
    """The spec's evaluation object (floats unrounded; emit it through ``seals.canonical``).

    ``labels`` are the test labels ((n_test,) or MedMNIST's (n_test, 1)); ``metadata`` optional subgroup
    attributes (attribute -> one value per test case). The meta's ``n_test`` and ``n_classes`` must match the
    predictions and labels."""
    if meta.n_test != predictions.n_test:
        raise MalformedInput(f"meta says n_test = {meta.n_test}, the predictions cover {predictions.n_test}",
                             field="n_test", expected=meta.n_test, found=predictions.n_test)
    if meta.n_classes != predictions.n_classes:
        raise MalformedInput(f"meta says n_classes = {meta.n_classes}, the predictions have "
                             f"{predictions.n_classes}", field="n_classes", expected=meta.n_classes,
                             found=predictions.n_classes)
    dimensions = compute_dimensions(predictions, labels, seed=meta.seed, seconds_total=meta.seconds_total,
                                    device=meta.device, parameters=meta.parameters, metadata=metadata)
    return evaluation_object(meta, dimensions, composite(dimensions), spec_version=spec.SPEC_VERSION)


def evaluation_object(meta: EvaluationMeta, dimensions: dict[str, Any], composite_object: dict[str, Any], *,
                      spec_version: str) -> dict[str, Any]:
    """The evaluation object around computed dimensions and composite: the meta's fields, ``limitations``
    (subgroup basis and metadata flag from the subgroup dimension), ``numpy_version`` when the meta has one."""
    subgroup_dimension = dimensions["subgroup"]
    evaluation = {
        "code_fingerprint": meta.code_fingerprint,
        "composite": composite_object,
        "device": meta.device,
        "dimensions": dimensions,
        "domain": meta.domain,
        "kind": meta.kind,
        "limitations": {
            "has_real_subgroup_metadata": subgroup_dimension["has_real_metadata"],
            "n_train_available": meta.limitations["n_train_available"],
            "notes": meta.limitations["notes"],
            "subgroup_basis": subgroup_dimension["basis"],
            "train_capped": meta.limitations["train_capped"],
        },
        "modality": meta.modality,
        "n_classes": meta.n_classes,
        "n_test": meta.n_test,
        "runtime_s": round(float(meta.runtime_s), 1),
        "seed": meta.seed,
        "spec_version": spec_version,
        "split_origin": meta.split_origin,
        "task": meta.task,
        "task_name": meta.task_name,
        "timestamp": meta.timestamp,
    }
    if meta.numpy_version is not None:
        evaluation["numpy_version"] = meta.numpy_version
    return evaluation


def rederive(recorded: Mapping[str, Any], predictions: StoredPredictions, labels: ArrayLike, *,
             metadata: Mapping[str, ArrayLike] | None = None) -> dict[str, Any]:
    """``build_evaluation(EvaluationMeta.from_recorded(recorded), predictions, labels)``."""
    return build_evaluation(EvaluationMeta.from_recorded(recorded), predictions, labels, metadata=metadata)


def _same_leaf(expected: Any, found: Any) -> bool:
    if isinstance(expected, bool) or isinstance(found, bool):
        return type(expected) is type(found) and expected == found
    if isinstance(expected, (int, float)) and isinstance(found, (int, float)):
        return expected == found  # JSON does not tell 1 from 1.0
    return type(expected) is type(found) and expected == found


def first_difference(expected: Any, found: Any, path: str = "") -> tuple[str, Any, Any] | None:
    """The first (in canonical key order) path at which two prepared JSON values differ, with both values
    there (``"<missing>"`` for an absent member); None when they are equal."""
    if isinstance(expected, Mapping) and isinstance(found, Mapping):
        for key in sorted(set(expected) | set(found)):
            child = f"{path}.{key}" if path else key
            if key not in expected or key not in found:
                return child, expected.get(key, "<missing>"), found.get(key, "<missing>")
            difference = first_difference(expected[key], found[key], child)
            if difference is not None:
                return difference
        return None
    if isinstance(expected, list) and isinstance(found, list):
        for index, (left, right) in enumerate(zip(expected, found, strict=False)):
            difference = first_difference(left, right, f"{path}[{index}]")
            if difference is not None:
                return difference
        if len(expected) != len(found):
            return f"{path}.length", len(expected), len(found)
        return None
    if isinstance(expected, (Mapping, list)) or isinstance(found, (Mapping, list)):
        return path or "$", expected, found
    return None if _same_leaf(expected, found) else (path or "$", expected, found)


def check_rederived(recorded: Mapping[str, Any], predictions: StoredPredictions, labels: ArrayLike, *,
                    metadata: Mapping[str, ArrayLike] | None = None) -> dict[str, Any]:
    """Re-derive and compare canonical forms (``seals.canonical.prepare`` of both). Returns the prepared
    re-derived object; raises VerificationError naming the first differing field path, with the re-derived
    value as ``expected`` and the recorded one as ``found``."""
    return require_same(rederive(recorded, predictions, labels, metadata=metadata), recorded)


def require_same(rederived_object: Mapping[str, Any], recorded: Mapping[str, Any]) -> dict[str, Any]:
    """Compare a re-derived evaluation with the recorded one in canonical form; returns the prepared
    re-derived object, raises VerificationError naming the first differing member."""
    rederived = prepare(rederived_object)
    recorded_prepared = prepare(recorded)
    difference = first_difference(rederived, recorded_prepared)
    if difference is None and canonical_bytes(rederived) != canonical_bytes(recorded_prepared):
        difference = ("$", "canonical bytes of the re-derived object", "different canonical bytes")
    if difference is not None:
        path, expected, found = difference
        raise VerificationError(
            f"re-derived evaluation differs at {path}: expected {expected!r} (re-derived), "
            f"found {found!r} (recorded)",
            path=path, expected=expected, found=found,
            task=recorded.get("task") if isinstance(recorded, Mapping) else None,
        )
    return rederived
