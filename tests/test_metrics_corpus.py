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


# MedEval-1 v0.1 draws its bootstrap and robustness subset with numpy Generator methods (choice without
# replacement, multinomial), which numpy promises stable only within a version. The same corpus inputs, scored
# under v0.1 with numpy_version "1.26.4" recorded, gave these evaluations byte for byte under numpy 1.26.4 and
# 2.4.6 (organc_subset_trained has 1,500 cases, so its subset is drawn too). Under the numpy matrix this is what
# lets the audit treat every version of harness.metrics.registry.streams_verified alike: a v0.1 evaluation
# claiming another numpy of that series must still re-derive exactly.
V01_EVALUATION_SHA256 = {
    "blood_small_prompts": "9e6d5c9cafac1879718e314daeee56777dc9c170bb41e041f18be5e29e08ea53",
    "organc_subset_trained": "8057e227d8a2b786f52dfe25d6ce8c0e399216c36061634a961dac69cdcfae01",
    "retina_ordinal": "5867add8fc63f5028adbab0fecf59fe713f9353c969c4e8e600437b79110922c",
    "pneumonia_ties": "16c80b86d7380666a2ebefe1335bdea3cfe73337833202e3428dffa8e5d3db15",
    "breast_weak": "9e9503adb06e9e39e88bafc6661b19e4a9aaa180e90c76bd22f4160a37b5c464",
}


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_v01_streams_are_the_same_under_every_verified_numpy(case):
    from harness.metrics.registry import STREAMS_VERIFIED_THROUGH, numpy_release, streams_verified

    predictions = StoredPredictions.from_npz_bytes((CORPUS / f"{case['name']}.npz").read_bytes())
    labels = np.array(json.loads((CORPUS / f"{case['name']}.labels.json").read_bytes()), dtype=np.int64)
    meta = EvaluationMeta(**{**case["meta"], "numpy_version": "1.26.4"})
    evaluation = metrics_for("MedEval-1 v0.1").build_evaluation(meta, predictions, labels)
    digest = hashlib.sha256(evaluation_bytes(evaluation)).hexdigest()
    if not streams_verified(np.__version__):  # a newer numpy: say whether the series may be extended to it
        print(f"numpy {np.__version__} is beyond the verified series (through {STREAMS_VERIFIED_THROUGH}); "
              f"v0.1 streams {'the same' if digest == V01_EVALUATION_SHA256[case['name']] else 'DIFFER'}")
        assert numpy_release(np.__version__) is None or numpy_release(np.__version__) > STREAMS_VERIFIED_THROUGH
        return
    assert digest == V01_EVALUATION_SHA256[case["name"]], (
        f"{case['name']}: v0.1 under numpy {np.__version__} draws other streams than 1.26.4 and 2.4.6")
