"""The constants of MedEval-1 v0.2 (docs/MEDEVAL-1.2.md) that differ from or add to v0.1's (``spec.py``).

Template texts, perturbation names, severities, the subset cap, the training fractions, ECE bins, the
latency reference and the basis sentences are v0.1's and are imported from there.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

from . import spec

SPEC_VERSION: Final = "MedEval-1 v0.2"

#: Composite weights: v0.1's without cost (cost is reported beside the index, not in it), in v0.1's order.
COMPOSITE_WEIGHTS: Final = MappingProxyType({name: weight for name, weight in spec.COMPOSITE_WEIGHTS.items()
                                             if name != "cost"})
#: Bootstrap replicates: B + 1 = 1000 puts both percentile bounds on order statistics (25th and 975th).
B: Final = 999
CI_LEVEL: Final = 0.95
#: A class smaller than this is reported but not used for the worst-subgroup score.
MIN_SUBGROUP_SIZE: Final = 20
#: Confidences are compared as exact integers at this binary scale (float32 max-probabilities >= 2^-16 are
#: multiples of 2^-40, so ``conf * 2^40`` is an exact integer and n * 2^40 stays below 2^63).
CONFIDENCE_SCALE_BITS: Final = 40
MAX_TEST_CASES: Final = 1 << 22
#: MedMNIST datasets whose labels are ordinal grades: quadratic weighted kappa is reported for them.
ORDINAL_DATASETS: Final = frozenset({"retinamnist"})

SKILL_GATE_BASIS: Final = (
    "dimensions other than accuracy count only when the lower ci95 bound of balanced accuracy is above chance"
)
COST_BESIDE_INDEX: Final = "cost is reported beside the index and is not part of it (hardware-dependent)"


def uncertainty_not_applicable_reason(correct: int, n: int) -> str:
    return (f"{correct} of {n} cases are correct, so there is no ordering of correct before wrong cases to "
            "reward: the dimension is not applicable and is left out of the index")


def subgroup_not_applicable_reason(eligible: int) -> str:
    return (f"only {eligible} class(es) have at least {MIN_SUBGROUP_SIZE} cases, so there is no worst "
            "subgroup to compare: the dimension is not applicable and is left out of the index")


def dataset_of(task: str) -> str:
    """The MedMNIST dataset of a task flag (``retinamnist_224`` -> ``retinamnist``)."""
    return task[: -len("_224")] if task.endswith("_224") else task
