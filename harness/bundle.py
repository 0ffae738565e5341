"""The ``bundle`` ledger entry of one evaluation (pure: the heldout layer stores the blobs and appends it).

One bundle per (model, task, generation). The entry carries the SHA-256 of the two blobs it stands for:
``evaluation_sha256`` over :func:`evaluation_bytes` (the evaluation object in canonical JSON, floats rounded
once at emit) and ``predictions_sha256`` over the stored-predictions npz bytes, plus ``labels_hash`` over
:func:`labels_bytes`, so that a replay can tell that the labels it re-derives against are the ones scored
(named ``_hash``, not ``_sha256``: no blob holds the labels, and ``*_sha256`` members name blobs).
The entry stays far below the ledger's 64 KiB limit: everything large lives in the blobs.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from harness.metrics import evaluation_bytes, labels_bytes, n_cases_for
from harness.run import EvaluationResult
from keys.errors import UsageError
from seals.canonical import sha256_hex
from seals.timeutil import format_utc

BUNDLE_TYPE: Final = "bundle"
BUNDLE_VERSION: Final = 1


def bundle_entry(result: EvaluationResult, *, generation: str, created_utc: datetime) -> dict[str, Any]:
    """The ``bundle`` entry for ``result`` on ``generation`` (created at ``created_utc``, an injected time)."""
    if not generation:
        raise UsageError("a bundle needs a generation name", field="generation")
    evaluation = result.evaluation
    model = result.model
    return {
        "type": BUNDLE_TYPE,
        "v": BUNDLE_VERSION,
        "generation": generation,
        "model_id": model.model_id,
        "model_name": model.model_name,
        "family": model.family,
        "params": model.params,
        "behaviour_version": model.behaviour_version,
        "task": evaluation["task"],
        "spec_version": evaluation["spec_version"],
        "split_origin": evaluation["split_origin"],
        "seed": evaluation["seed"],
        "n_test": evaluation["n_test"],
        "n_cases": n_cases_for(evaluation["n_test"]),
        "device": evaluation["device"],
        "code_fingerprint": evaluation["code_fingerprint"],
        "evaluation_sha256": sha256_hex(evaluation_bytes(evaluation)),
        "predictions_sha256": sha256_hex(result.predictions_npz),
        "labels_hash": sha256_hex(labels_bytes(result.labels)),
        "created_utc": format_utc(created_utc),
    }
