"""The constants of MedEval-1 v0.1 (docs/MEDEVAL-1.md), in one place.

Everything the harness and the audit must agree on that is not a formula lives here: the template texts,
the perturbation names in the spec's order, the composite weights, the subset cap and the bootstrap size.
The perturbation *parameters* (how strong each severity is) belong to the image code that applies them;
the metrics only ever see the predictions those perturbations produced.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

SPEC_VERSION: Final = "MedEval-1 v0.1"

#: The six faithful paraphrases of the task, in the spec's order; ``template_0`` is the default prompt.
TEMPLATES: Final[tuple[tuple[str, str], ...]] = (
    ("template_0", "this is a photo of {c}"),
    ("template_1", "an image of {c}"),
    ("template_2", "a medical image showing {c}"),
    ("template_3", "{c}"),
    ("template_4", "histology or clinical image, category: {c}"),
    ("template_5", "the correct label for this image is {c}"),
)
TEMPLATE_IDS: Final[tuple[str, ...]] = tuple(template_id for template_id, _ in TEMPLATES)
TEMPLATE_TEXTS: Final[tuple[str, ...]] = tuple(text for _, text in TEMPLATES)
DEFAULT_TEMPLATE: Final = TEMPLATES[0][1]

#: Corruption perturbations, alphabetical as the spec lists them.
CORRUPTIONS: Final[tuple[str, ...]] = (
    "brightness", "contrast", "defocus_blur", "gaussian_noise", "pixelate", "quantise", "shot_noise",
)
#: Acquisition (simulated re-acquisition) perturbations, alphabetical as the spec lists them.
ACQUISITIONS: Final[tuple[str, ...]] = (
    "detector_noise", "field_of_view", "gamma_shift", "resolution", "window_level",
)
#: All twelve perturbation names, sorted (the order stored predictions keep them in).
PERTURBATIONS: Final[tuple[str, ...]] = tuple(sorted(CORRUPTIONS + ACQUISITIONS))
SEVERITIES: Final = 3

#: Composite weights (sum 1), keyed by dimension name.
COMPOSITE_WEIGHTS: Final = MappingProxyType({
    "accuracy": 0.22,
    "acquisition": 0.17,
    "corruption": 0.14,
    "calibration": 0.13,
    "subgroup": 0.10,
    "spec_sensitivity": 0.08,
    "limited_data": 0.08,
    "uncertainty": 0.05,
    "cost": 0.03,
})
#: The nine dimension names, sorted (the key order of an evaluation's ``dimensions`` object).
DIMENSIONS: Final[tuple[str, ...]] = tuple(sorted(COMPOSITE_WEIGHTS))

ROBUSTNESS_SUBSET_MAX: Final = 1200
LATENCY_REFERENCE_SECONDS: Final = 0.02
TRAINING_FRACTIONS: Final[tuple[float, ...]] = (0.01, 0.1, 1.0)
#: Bootstrap resamples for the accuracy ``ci95``.
B: Final = 1000
BOOTSTRAP_PERCENTILES: Final[tuple[float, float]] = (2.5, 97.5)
#: ECE uses this many equal-width confidence bins over (0, 1].
ECE_BINS: Final = 15
#: The ECE at which the calibration score reaches 0.
ECE_ZERO_SCORE: Final = 0.2
#: Selective-accuracy coverages reported by the uncertainty dimension (field suffix, coverage).
SELECTIVE_COVERAGES: Final[tuple[tuple[str, float], ...]] = (("50", 0.5), ("80", 0.8))
#: Decimals of the arrays the spec rounds early (retention and agreement by severity).
EARLY_ROUND_DECIMALS: Final = 4

from harness.provenance import DOMAIN as DOMAIN  # noqa: E402  (one constant: the task table's)

#: ``split_origin`` of evaluations on the public generation (the official released test split).
PUBLIC_SPLIT_ORIGIN: Final = "official released split"


def split_origin_for(generation: str, *, public: bool, origin: str | None = None, sha256: str | None = None) -> str:
    """The spec's ``split_origin``: the generation's name for a sealed generation; for the public generation the
    official split's name only when its file was checked against medmnist's MD5 (``origin == "official"``),
    else ``"<origin> split sha256:<hex>"`` (synthetic or local files are never called official)."""
    if not public:
        return generation
    if origin == "official":
        return PUBLIC_SPLIT_ORIGIN
    return f"{origin or 'unrecorded'} split sha256:{sha256 or 'unrecorded'}"

SUBGROUP_BASIS_NO_METADATA: Final = "worst diagnostic class (no demographic metadata in source)"
SUBGROUP_BASIS_METADATA: Final = "worst demographic group balanced accuracy per attribute (real metadata)"
ACQUISITION_BASIS: Final = "simulated re-acquisition (gamma, window/level, resolution, FOV, detector noise)"
SPEC_SENSITIVITY_BASIS: Final = (
    "worst / best chance-corrected balanced accuracy across faithful paraphrases of the task specification"
)
LIMITED_DATA_BASIS: Final = (
    "chance-corrected balanced accuracy when trained on 1% and 10% of the training split, "
    "relative to training on 100%"
)
COST_CAVEAT: Final = (
    "hardware-dependent. This number must never be quoted without the device it was measured on."
)


def cost_basis(device: str) -> str:
    """The cost dimension's ``basis`` sentence, which names the device the time was measured on."""
    return (f"measured wall-clock inference over the evaluated cases on {device}; "
            "score = 2*ref/(ref+measured), capped at 100")


def robustness_not_scored_reason(clean_reference_cc: float) -> str:
    """Why corruption/acquisition are not scored when the clean model is at or below chance."""
    return (
        "the clean model scores at or below chance on this corpus (chance-corrected balanced accuracy "
        f"{clean_reference_cc:.4f}), so there is no retained discrimination to measure a ratio against; "
        "retention is reported as measured but not scored, because a 0.00 here would be the metric's "
        "arithmetic rather than the model's robustness"
    )


def spec_sensitivity_not_scored_reason(best_chance_corrected: float) -> str:
    """Why spec_sensitivity is not scored when every paraphrase is at or below chance (decided)."""
    return (
        "every paraphrase of the task specification scores at or below chance (best chance-corrected "
        f"balanced accuracy {best_chance_corrected:.4f}), so there is no worst/best ratio to measure"
    )


def limited_data_not_scored_reason(full_chance_corrected: float) -> str:
    """Why limited_data is not scored when the model trained on all the data is at or below chance."""
    return (
        "the model trained on 100% of the training split scores at or below chance (chance-corrected "
        f"balanced accuracy {full_chance_corrected:.4f}), so there is no full-data reference to measure "
        "retention against"
    )
