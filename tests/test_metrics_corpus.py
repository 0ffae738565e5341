"""MedEval-1 v0.2 re-derives byte for byte from a fixed corpus (tests/data/v02_corpus, with provenance).

Core-only on purpose (numpy, the standard library, keys/seals/harness.metrics; no torch, no hypothesis):
``.ci/numpy_matrix.sh`` runs this file in two fresh venvs, under the oldest numpy the project supports and the
newest, so a stranger's auditor gets the same bytes whatever numpy it has.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from harness.metrics import EvaluationMeta, StoredPredictions, evaluation_bytes
from harness.metrics.registry import metrics_for

CORPUS = Path(__file__).resolve().parent / "data" / "v02_corpus"
DOCUMENT = json.loads((CORPUS / "corpus.json").read_text("utf-8"))
CASES = DOCUMENT["cases"]


def test_corpus_is_v02_and_complete():
    print(f"numpy {np.__version__}; corpus generated with numpy {DOCUMENT['generated_with']['numpy']}")
    assert DOCUMENT["spec_version"] == "MedEval-1 v0.2"
    assert len(CASES) == 5


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_case_rederives_byte_for_byte(case):
    blob = (CORPUS / f"{case['name']}.npz").read_bytes()
    labels_json = (CORPUS / f"{case['name']}.labels.json").read_bytes()
    assert hashlib.sha256(blob).hexdigest() == case["predictions_sha256"]
    assert hashlib.sha256(labels_json).hexdigest() == case["labels_sha256"]
    predictions = StoredPredictions.from_npz_bytes(blob)
    labels = np.array(json.loads(labels_json), dtype=np.int64)
    evaluation = metrics_for(DOCUMENT["spec_version"]).build_evaluation(EvaluationMeta(**case["meta"]),
                                                                        predictions, labels)
    assert hashlib.sha256(evaluation_bytes(evaluation)).hexdigest() == case["evaluation_sha256"], (
        f"{case['name']}: v0.2 re-derivation under numpy {np.__version__} differs from the corpus")
