"""build_evaluation / rederive / check_rederived, a named test per tampered field, and the torch-free import."""

from __future__ import annotations

import ast
import copy
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import harness.metrics as m
from keys.errors import MalformedInput, VerificationError
from seals.canonical import canonical_bytes, parse_json_object, prepare

REPO_ROOT = Path(__file__).resolve().parent.parent


def random_bundle(seed: int, n_test: int, n_classes: int, *, templates: bool, fractions: bool,
                  skill: float = 1.5) -> tuple[m.EvaluationMeta, m.StoredPredictions, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, n_classes, n_test)

    def probs_for(y, strength):
        logits = rng.normal(size=(y.size, n_classes))
        logits[np.arange(y.size), y] += strength
        p = np.exp(logits)
        return p / p.sum(axis=1, keepdims=True)

    eval_seed = int(rng.integers(0, 2**31))
    clean = probs_for(labels, skill)
    subset = m.subset_indices(n_test, eval_seed)
    n_cases = subset.size
    clean_subset = np.argmax(clean, axis=1)[subset]
    perturbed = {name: np.where(rng.random((3, n_cases)) < 0.2 * (1 + np.arange(3))[:, None],
                                rng.integers(0, n_classes, (3, n_cases)), clean_subset)
                 for name in m.PERTURBATIONS}
    predictions = m.StoredPredictions(
        clean, perturbed,
        template_probs=np.stack([probs_for(labels[subset], skill * t / 5) for t in range(6)]) if templates
        else None,
        fraction_probs=np.stack([probs_for(labels, skill * f) for f in (0.2, 0.6, 1.0)]) if fractions else None,
    )
    meta = m.EvaluationMeta(
        code_fingerprint="0123456789ab", device="cpu", domain="medicine", kind="image",
        limitations={"n_train_available": 500, "notes": None, "train_capped": False},
        modality="Microscopy", n_classes=n_classes, n_test=n_test, runtime_s=float(rng.uniform(1, 500)),
        seed=eval_seed, split_origin="official released split", task="bloodmnist",
        task_name="Peripheral blood cells (8-class)", timestamp="2026-08-01T19:59:26+00:00",
        seconds_total=float(rng.uniform(0.5, 400)), parameters=int(rng.integers(1, 10**9)),
    )
    return meta, predictions, labels


def recorded_form(evaluation: dict) -> dict:
    """What a bundle holds: the canonical bytes, parsed back."""
    return parse_json_object(canonical_bytes(evaluation))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_test=st.integers(2, 300), n_classes=st.integers(2, 9),
       templates=st.booleans(), fractions=st.booleans(), skill=st.sampled_from([0.0, 0.5, 3.0]))
def test_rederive_of_random_predictions_equals_build_evaluation(seed, n_test, n_classes, templates, fractions,
                                                                 skill):
    meta, predictions, labels = random_bundle(seed, n_test, n_classes, templates=templates,
                                              fractions=fractions, skill=skill)
    built = m.build_evaluation(meta, predictions, labels)
    recorded = recorded_form(built)
    loaded = m.StoredPredictions.from_npz_bytes(predictions.to_npz_bytes())
    rederived = m.rederive(recorded, loaded, labels)
    assert prepare(rederived) == prepare(built)
    assert canonical_bytes(rederived) == canonical_bytes(recorded)
    assert m.check_rederived(recorded, loaded, labels) == prepare(built)


def test_rederive_above_the_subset_cap_with_everything_present():
    meta, predictions, labels = random_bundle(5, 1500, 8, templates=True, fractions=True)
    built = m.build_evaluation(meta, predictions, labels)
    assert built["dimensions"]["corruption"]["n_cases"] == 1200
    assert built["dimensions"]["cost"]["cases"] == 1500 + 36 * 1200 + 1200
    assert built["composite"]["coverage"] == pytest.approx(1.0)
    recorded = recorded_form(built)
    m.check_rederived(recorded, m.StoredPredictions.from_npz_bytes(predictions.to_npz_bytes()), labels)


def test_zero_shot_bundle_has_null_limited_data_and_matching_limitations():
    meta, predictions, labels = random_bundle(6, 100, 3, templates=True, fractions=False)
    built = m.build_evaluation(meta, predictions, labels)
    assert built["dimensions"]["limited_data"] is None
    assert built["limitations"] == {"has_real_subgroup_metadata": False, "n_train_available": 500,
                                    "notes": None, "subgroup_basis": built["dimensions"]["subgroup"]["basis"],
                                    "train_capped": False}
    assert built["spec_version"] == "MedEval-1 v0.1" and built["runtime_s"] == round(meta.runtime_s, 1)


def test_trained_classifier_bundle_has_null_spec_sensitivity():
    meta, predictions, labels = random_bundle(7, 100, 3, templates=False, fractions=True)
    built = m.build_evaluation(meta, predictions, labels)
    assert built["dimensions"]["spec_sensitivity"] is None
    assert "limited_data" in built["composite"]["dimensions_scored"]


def test_from_recorded_reads_the_meta_back():
    meta, predictions, labels = random_bundle(8, 50, 2, templates=True, fractions=False)
    recorded = recorded_form(m.build_evaluation(meta, predictions, labels))
    again = m.EvaluationMeta.from_recorded(recorded)
    assert again.seed == meta.seed and again.parameters == meta.parameters
    assert again.seconds_total == round(meta.seconds_total, 4)
    assert again.runtime_s == round(meta.runtime_s, 1)
    assert dict(again.limitations) == dict(meta.limitations)


def test_meta_accepts_numpy_scalars_as_plain_values():
    meta, _, _ = random_bundle(8, 50, 2, templates=True, fractions=False)
    fields = {**meta.__dict__, "n_test": np.int64(50), "seed": np.int64(meta.seed),
              "limitations": {"n_train_available": np.int64(500), "notes": None, "train_capped": np.bool_(True)}}
    again = m.EvaluationMeta(**fields)
    assert type(again.n_test) is int and type(again.limitations["train_capped"]) is bool
    with pytest.raises(MalformedInput, match="limitations"):
        m.EvaluationMeta(**{**fields, "limitations": {"notes": None}})


def test_from_recorded_names_a_missing_field():
    meta, predictions, labels = random_bundle(8, 50, 2, templates=True, fractions=False)
    recorded = recorded_form(m.build_evaluation(meta, predictions, labels))
    del recorded["dimensions"]["cost"]["seconds_total"]
    with pytest.raises(MalformedInput, match=r"dimensions\.cost\.seconds_total"):
        m.EvaluationMeta.from_recorded(recorded)


def test_build_refuses_meta_that_disagrees_with_the_predictions():
    meta, predictions, labels = random_bundle(9, 50, 3, templates=True, fractions=False)
    wrong = m.EvaluationMeta(**{**meta.__dict__, "n_classes": 4})
    with pytest.raises(MalformedInput, match="n_classes"):
        m.build_evaluation(wrong, predictions, labels)
    with pytest.raises(MalformedInput, match="labels"):
        m.build_evaluation(meta, predictions, labels[:-1])


# --- a named test per tampered field ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def bundle():
    meta, predictions, labels = random_bundle(11, 400, 5, templates=True, fractions=False, skill=2.0)
    recorded = recorded_form(m.build_evaluation(meta, predictions, labels))
    return recorded, m.StoredPredictions.from_npz_bytes(predictions.to_npz_bytes()), labels


def tampered(recorded, path, value):
    out = copy.deepcopy(recorded)
    target = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return out


def test_tampered_score_is_named(bundle):
    recorded, predictions, labels = bundle
    forged = tampered(recorded, ["dimensions", "accuracy", "score"], 99.0)
    with pytest.raises(VerificationError, match=r"dimensions\.accuracy\.score") as caught:
        m.check_rederived(forged, predictions, labels)
    assert caught.value.evidence["found"] == 99.0
    assert caught.value.evidence["expected"] == recorded["dimensions"]["accuracy"]["score"]


def test_tampered_ci_bound_is_named_with_its_index(bundle):
    recorded, predictions, labels = bundle
    forged = tampered(recorded, ["dimensions", "accuracy", "ci95"], [0.1, recorded["dimensions"]["accuracy"]
                                                                     ["ci95"][1]])
    with pytest.raises(VerificationError, match=r"dimensions\.accuracy\.ci95\[0\]"):
        m.check_rederived(forged, predictions, labels)


def test_tampered_composite_index_is_caught(bundle):
    recorded, predictions, labels = bundle
    forged = tampered(recorded, ["composite", "index"], recorded["composite"]["index"] + 0.000001)
    with pytest.raises(VerificationError, match=r"composite\.index"):
        m.check_rederived(forged, predictions, labels)


def test_removed_field_is_named(bundle):
    recorded, predictions, labels = bundle
    forged = copy.deepcopy(recorded)
    del forged["dimensions"]["uncertainty"]["selective_acc_at_80"]
    with pytest.raises(VerificationError, match=r"dimensions\.uncertainty\.selective_acc_at_80"):
        m.check_rederived(forged, predictions, labels)


def test_tampered_spec_version_is_caught(bundle):
    recorded, predictions, labels = bundle
    with pytest.raises(VerificationError, match="spec_version"):
        m.check_rederived(tampered(recorded, ["spec_version"], "MedEval-1 v0.2"), predictions, labels)


def test_tampered_subgroup_claim_in_limitations_is_caught(bundle):
    recorded, predictions, labels = bundle
    forged = tampered(recorded, ["limitations", "has_real_subgroup_metadata"], True)
    with pytest.raises(VerificationError, match=r"limitations\.has_real_subgroup_metadata"):
        m.check_rederived(forged, predictions, labels)


def test_changed_seed_changes_the_bootstrap(bundle):
    recorded, predictions, labels = bundle
    with pytest.raises(VerificationError, match=r"dimensions\.accuracy\.ci95"):
        m.check_rederived(tampered(recorded, ["seed"], recorded["seed"] + 1), predictions, labels)


def test_tampered_cost_rate_is_caught(bundle):
    recorded, predictions, labels = bundle
    forged = tampered(recorded, ["dimensions", "cost", "cases_per_second"],
                      recorded["dimensions"]["cost"]["cases_per_second"] + 1)
    with pytest.raises(VerificationError, match=r"dimensions\.cost\.cases_per_second"):
        m.check_rederived(forged, predictions, labels)


def test_swapped_labels_are_caught(bundle):
    recorded, predictions, labels = bundle
    other = labels.copy()
    other[:10] = (other[:10] + 1) % 5
    with pytest.raises(VerificationError, match=r"differs at composite\.index"):  # first in key order
        m.check_rederived(recorded, predictions, other)


def test_substituted_predictions_are_caught(bundle):
    recorded, _, labels = bundle
    _, other_predictions, _ = random_bundle(12, 400, 5, templates=True, fractions=False, skill=2.0)
    with pytest.raises(VerificationError):
        m.check_rederived(recorded, other_predictions, labels)


# --- import hygiene ---------------------------------------------------------------------------------------

def test_import_leaves_torch_out_in_a_fresh_interpreter():
    """Even with torch importable, harness.metrics must not touch it: a finder refuses torch and friends."""
    script = textwrap.dedent("""
        import importlib, pkgutil, sys
        FORBIDDEN = ("torch", "torchvision", "open_clip", "medmnist", "sklearn", "PIL")
        attempts = []
        class Refuse:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in FORBIDDEN:
                    attempts.append(name)
                    raise ImportError("forbidden in harness.metrics: " + name)
                return None
        sys.meta_path.insert(0, Refuse())
        import harness.metrics
        for info in pkgutil.walk_packages(harness.metrics.__path__, "harness.metrics."):
            importlib.import_module(info.name)
        assert not attempts, attempts
        assert not [n for n in sys.modules if n.split(".")[0] in FORBIDDEN]
        print("torch-free", sorted(n for n in sys.modules if n.startswith("harness.metrics")))
    """)
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert "torch-free" in result.stdout and "harness.metrics.dimensions" in result.stdout


def test_metrics_modules_import_only_numpy_stdlib_seals_and_keys():
    allowed = set(sys.stdlib_module_names) | {"numpy", "seals", "keys", "harness"}
    for path in sorted((REPO_ROOT / "harness" / "metrics").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Import):
                roots = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                roots = [(node.module or "").split(".")[0]]
            else:
                continue
            assert set(roots) <= allowed, f"{path.name} imports {roots}"
