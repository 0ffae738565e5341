"""MedEval-1 metrics: every formula of docs/MEDEVAL-1.md (v0.1) and docs/MEDEVAL-1.2.md (v0.2) as pure numpy.

The names below are v0.1's (its functions, kept exactly as the reference passport fixed them); v0.2 lives in
``evaluation_v02``/``dimensions_v02``/``draws``, and :func:`metrics_for` selects a version's implementation by
its ``spec_version`` string (:data:`METRICS`).

Imports only numpy, the standard library and ``seals``/``keys`` (never torch), so the audit can re-derive
every evaluation object from stored predictions without a model. Public surface:

* constants: :data:`SPEC_VERSION`, :data:`TEMPLATES`, :data:`CORRUPTIONS`, :data:`ACQUISITIONS`,
  :data:`SEVERITIES`, :data:`COMPOSITE_WEIGHTS`, :data:`ROBUSTNESS_SUBSET_MAX`,
  :data:`LATENCY_REFERENCE_SECONDS`, :data:`TRAINING_FRACTIONS`, :data:`B`;
* :func:`subset_indices` and one function per dimension plus :func:`composite`;
* :class:`StoredPredictions` (the npz blob), :class:`EvaluationMeta`, :func:`build_evaluation`,
  :func:`rederive`, :func:`check_rederived`.
"""

from .blobs import evaluation_bytes, labels_bytes
from .dimensions import (
    accuracy,
    acquisition,
    calibration,
    calibration_bins,
    composite,
    corruption,
    cost,
    evaluated_cases,
    limited_data,
    n_cases_for,
    spec_sensitivity,
    subgroup,
    subset_indices,
    uncertainty,
)
from .evaluation import (
    LIMITATION_INPUT_FIELDS,
    EvaluationMeta,
    build_evaluation,
    check_rederived,
    compute_dimensions,
    first_difference,
    rederive,
)
from .registry import BASE_SPEC_VERSION, METRICS, SpecMetrics, metrics_for
from .spec import (
    ACQUISITIONS,
    COMPOSITE_WEIGHTS,
    CORRUPTIONS,
    DIMENSIONS,
    LATENCY_REFERENCE_SECONDS,
    PERTURBATIONS,
    PUBLIC_SPLIT_ORIGIN,
    ROBUSTNESS_SUBSET_MAX,
    SEVERITIES,
    SPEC_VERSION,
    TEMPLATE_IDS,
    TEMPLATE_TEXTS,
    TEMPLATES,
    TRAINING_FRACTIONS,
    B,
    split_origin_for,
)
from .stored import StoredPredictions

__all__ = [
    "ACQUISITIONS",
    "BASE_SPEC_VERSION",
    "COMPOSITE_WEIGHTS",
    "CORRUPTIONS",
    "DIMENSIONS",
    "LATENCY_REFERENCE_SECONDS",
    "LIMITATION_INPUT_FIELDS",
    "METRICS",
    "PERTURBATIONS",
    "PUBLIC_SPLIT_ORIGIN",
    "ROBUSTNESS_SUBSET_MAX",
    "SEVERITIES",
    "SPEC_VERSION",
    "TEMPLATES",
    "TEMPLATE_IDS",
    "TEMPLATE_TEXTS",
    "TRAINING_FRACTIONS",
    "B",
    "EvaluationMeta",
    "SpecMetrics",
    "StoredPredictions",
    "accuracy",
    "acquisition",
    "build_evaluation",
    "calibration",
    "calibration_bins",
    "check_rederived",
    "composite",
    "compute_dimensions",
    "corruption",
    "cost",
    "evaluated_cases",
    "evaluation_bytes",
    "first_difference",
    "labels_bytes",
    "limited_data",
    "metrics_for",
    "n_cases_for",
    "rederive",
    "spec_sensitivity",
    "split_origin_for",
    "subgroup",
    "subset_indices",
    "uncertainty",
]
