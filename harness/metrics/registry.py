"""The metrics of each MedEval-1 version, keyed by its ``spec_version`` string.

The harness evaluates, and the audit re-derives, a bundle with the implementation its evaluation names; the
version a new evaluation uses is the ledger's business (``heldout.specs.current_spec_version``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

import numpy as np
from numpy.typing import ArrayLike

from keys.errors import IncompleteError, MalformedInput, UsageError

from . import evaluation as v01
from . import evaluation_v02 as v02
from . import spec, spec_v02
from .core import IntArray
from .dimensions import composite as composite_v01
from .dimensions import subset_indices as subset_indices_v01
from .evaluation import EvaluationMeta
from .stored import StoredPredictions

BASE_SPEC_VERSION: Final = spec.SPEC_VERSION


@dataclass(frozen=True)
class SpecMetrics:
    """One spec version's metrics: how to build an evaluation and which draws it makes.

    ``numpy_streams``: its draws come from numpy ``Generator`` methods (stable only within a numpy version),
    so each evaluation records the numpy version it was computed with."""

    version: str
    build: Callable[[EvaluationMeta, StoredPredictions, ArrayLike], dict[str, Any]]
    subset_indices: Callable[[int, int], IntArray]
    numpy_streams: bool

    def build_evaluation(self, meta: EvaluationMeta, predictions: StoredPredictions,
                         labels: ArrayLike) -> dict[str, Any]:
        return self.build(meta, predictions, labels)

    def rederive(self, recorded: Mapping[str, Any], predictions: StoredPredictions,
                 labels: ArrayLike) -> dict[str, Any]:
        return self.build(EvaluationMeta.from_recorded(recorded), predictions, labels)

    def check_rederived(self, recorded: Mapping[str, Any], predictions: StoredPredictions,
                        labels: ArrayLike) -> dict[str, Any]:
        return v01.require_same(self.rederive(recorded, predictions, labels), recorded)

    def numpy_version_for_new_evaluation(self) -> str | None:
        """The numpy version a new evaluation records (a version whose draws are numpy's own); refused under a
        numpy no auditor could run (a development build, one older than the project supports): the audit
        reports such an evaluation, whose stream-dependent members nobody could ever check."""
        if not self.numpy_streams:
            return None
        release = numpy_release(np.__version__)
        if release is None or release < STREAMS_VERIFIED_FROM:
            raise UsageError(f"{self.version} records the numpy version its draws come from, and numpy "
                             f"{np.__version__} is not a release an auditor can install (numpy >= "
                             f"{STREAMS_VERIFIED_FROM[0]}.{STREAMS_VERIFIED_FROM[1]})", found=np.__version__)
        return np.__version__

    def stream_dependent_members(self, n_test: int) -> tuple[str, ...]:
        """Members whose value depends on numpy's ``Generator`` streams (empty for a version whose draws
        are its own): the accuracy bootstrap, and when there is a subset to draw everything computed on it
        and the composite that weighs them."""
        if not self.numpy_streams:
            return ()
        members: tuple[str, ...] = ("dimensions.accuracy.ci95",)
        if n_test > spec.ROBUSTNESS_SUBSET_MAX:
            members += ("dimensions.acquisition", "dimensions.corruption", "dimensions.spec_sensitivity",
                        "composite")
        return members

    def composite_of(self, dimensions: Mapping[str, Any]) -> dict[str, Any]:
        """The composite of recorded dimension objects, for a version whose composite is a function of the
        dimension scores alone (v0.1): the audit checks it when the dimensions themselves cannot be
        re-derived under another numpy. v0.2's composite also needs the bootstrap rows, and nothing in v0.2
        depends on numpy's streams, so it is never asked."""
        if not self.numpy_streams:
            raise MalformedInput(f"{self.version}: the composite is not a function of the recorded scores")
        return composite_v01(dimensions)


#: numpy release series (major, minor) whose ``Generator`` streams, as MedEval-1 v0.1 draws them (``choice``
#: without replacement, ``multinomial``), give byte-identical evaluations: the oldest numpy the project runs
#: under (pyproject: numpy>=1.26) through the newest the numpy matrix (``.ci/numpy_matrix.sh``, on the v0.1
#: corpus of ``tests/test_metrics_corpus.py``) has shown to draw the same. Within it, another numpy version
#: is no reason for an evaluation not to re-derive.
STREAMS_VERIFIED_FROM: Final = (1, 26)
STREAMS_VERIFIED_THROUGH: Final = (2, 4)
_RELEASE = re.compile(r"([0-9]+)\.([0-9]+)\.([0-9]+)(?:(?:a|b|rc)[0-9]+)?")


def numpy_release(version: str) -> tuple[int, int] | None:
    """(major, minor) of a numpy release version string ("2.4.6", "2.0.0rc1"); None for anything else (a
    development build, a made-up string)."""
    found = _RELEASE.fullmatch(version)
    return (int(found.group(1)), int(found.group(2))) if found else None


def streams_verified(version: str) -> bool:
    """Whether numpy ``version`` draws the streams v0.1 uses as every other verified version does."""
    release = numpy_release(version)
    return release is not None and STREAMS_VERIFIED_FROM <= release <= STREAMS_VERIFIED_THROUGH


METRICS: Final = MappingProxyType({
    spec.SPEC_VERSION: SpecMetrics(spec.SPEC_VERSION, v01.build_evaluation, subset_indices_v01,
                                   numpy_streams=True),
    spec_v02.SPEC_VERSION: SpecMetrics(spec_v02.SPEC_VERSION, v02.build_evaluation, v02.subset_indices,
                                       numpy_streams=False),
})


def metrics_for(spec_version: Any) -> SpecMetrics:
    """The implementation of ``spec_version``; IncompleteError (exit 5) for a version this code does not
    implement (an auditor cannot check what it cannot compute, which is not proof of tampering)."""
    found = METRICS.get(spec_version) if isinstance(spec_version, str) else None
    if found is None:
        raise IncompleteError(f"spec version {str(spec_version)[:60]!r} is not implemented here "
                              f"(implemented: {', '.join(METRICS)})", field="spec_version",
                              found=str(spec_version)[:60], expected=list(METRICS))
    return found
