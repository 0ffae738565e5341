"""Zero-shot models: an open_clip architecture with random weights through the whole zero-shot path on a tiny
set; BiomedCLIP offline without weights failing at once (before torch) with how to supply them; the run's
subset and template logic with a fast stand-in prompt model."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from harness.data import TaskData
from harness.metrics import ROBUSTNESS_SUBSET_MAX, TEMPLATE_TEXTS, StoredPredictions, check_rederived
from harness.models import create_model
from harness.models.base import Images, Labels, Model, Probs
from harness.models.sources import BIOMEDCLIP_REPO
from harness.run import evaluate
from harness.tasks import TaskSpec
from keys.errors import UsageError
from seals.canonical import canonical_bytes, parse_json_object

has_medmnist = importlib.util.find_spec("medmnist") is not None
needs_torch = [pytest.mark.harness,
               pytest.mark.skipif(importlib.util.find_spec("torch") is None or importlib.util.find_spec("open_clip")
                                  is None, reason="needs torch and open_clip (harness extra)")]
REPO = Path(__file__).resolve().parent.parent
SEED = 20260727


def fixed_clock() -> datetime:
    return datetime(2026, 8, 1, 12, 0, 0, tzinfo=UTC)


def synthetic_task_data(spec: TaskSpec, n_test: int, seed: int = 1) -> TaskData:
    from harness.synth import synth_arrays

    arrays = synth_arrays(spec, {"train": 4, "val": 2, "test": n_test}, seed)
    return TaskData(task=spec.task, train_images=arrays["train_images"],
                    train_labels=arrays["train_labels"][:, 0].astype(np.int64),
                    val_images=arrays["val_images"], val_labels=arrays["val_labels"][:, 0].astype(np.int64),
                    test_images=arrays["test_images"], test_labels=arrays["test_labels"][:, 0].astype(np.int64),
                    source="synthetic (in memory)", loaded_with="numpy (non-official sample counts)")


def assert_rederives(evaluation: dict, npz: bytes, labels: np.ndarray) -> None:
    recorded = parse_json_object(canonical_bytes(evaluation))
    check_rederived(recorded, StoredPredictions.from_npz_bytes(npz), labels)


@pytest.mark.skipif(not has_medmnist, reason="needs medmnist")
@pytest.mark.harness
@pytest.mark.skipif(importlib.util.find_spec("open_clip") is None, reason="needs open_clip")
def test_open_clip_random_weights_zero_shot_end_to_end() -> None:
    from harness.tasks import task_spec

    spec = task_spec("pneumoniamnist")  # two classes keep the text tower's work (6 x K prompts) small
    data = synthetic_task_data(spec, n_test=4)
    model = create_model("clip_zeroshot", arch="ViT-S-32", weights="random")
    result = evaluate(model, data, spec, seed=SEED, clock=fixed_clock)
    stored = result.predictions
    assert stored.template_probs is not None and stored.template_probs.shape == (6, 4, 2)
    assert np.allclose(stored.template_probs[0], stored.clean_probs)  # one pass, template_0 is the default
    assert stored.fraction_probs is None
    dimensions = result.evaluation["dimensions"]
    assert dimensions["limited_data"] is None
    assert dimensions["spec_sensitivity"] is not None and dimensions["spec_sensitivity"]["n_specs"] == 6
    assert dimensions["cost"]["cases"] == 4 + 36 * 4
    assert result.model.model_name == "CLIP ViT-S-32 (random weights), zero-shot"
    assert result.model.parameters is not None and result.model.parameters > 10_000_000
    assert "random" in result.model.params and "random" in result.evaluation["limitations"]["notes"]
    assert_rederives(result.evaluation, result.predictions_npz, result.labels)


PROBE = """
import json, sys, time
from keys.errors import UsageError
from harness.models import create_model
started = time.perf_counter()
try:
    create_model("biomedclip_zeroshot")
    outcome = {"error": None}
except UsageError as exc:
    outcome = {"error": exc.message, "exit_code": exc.exit_code}
outcome["seconds"] = time.perf_counter() - started
outcome["torch"] = "torch" in sys.modules or "open_clip" in sys.modules
print("PROBE", json.dumps(outcome))
"""


def test_biomedclip_offline_without_weights_fails_at_once(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), "HOME": str(tmp_path)}
    env.pop("HF_HUB_CACHE", None)
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=False,
                            env=env, cwd=REPO)
    line = next(line for line in result.stdout.splitlines() if line.startswith("PROBE "))
    outcome = json.loads(line[len("PROBE "):])
    assert outcome["error"] is not None and outcome["exit_code"] == 2
    assert "--weights" in outcome["error"] and BIOMEDCLIP_REPO in outcome["error"]
    assert "HF_HUB_OFFLINE" in outcome["error"]
    assert outcome["seconds"] < 1.0 and outcome["torch"] is False


def test_biomedclip_weights_directory_is_checked(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not a directory"):
        create_model("biomedclip_zeroshot", weights=str(tmp_path / "missing"))
    with pytest.raises(UsageError, match=r"lacks open_clip_config\.json"):
        create_model("biomedclip_zeroshot", weights=str(tmp_path))


@pytest.mark.skipif(importlib.util.find_spec("open_clip") is None, reason="needs open_clip")
def test_clip_zeroshot_needs_explicit_weights(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="'random'"):
        create_model("clip_zeroshot", arch="ViT-S-32")
    with pytest.raises(UsageError, match="unknown open_clip architecture"):
        create_model("clip_zeroshot", arch="ViT-Q-99", weights="random")
    with pytest.raises(UsageError, match="not found"):
        create_model("clip_zeroshot", arch="ViT-S-32", weights=str(tmp_path / "nothing.pt"))


@pytest.mark.skipif(importlib.util.find_spec("open_clip") is None, reason="needs open_clip")
@pytest.mark.parametrize("content", [b"", b'{"a": [1, 2, ', b"PK\x03\x04 not a zip"], ids=["empty", "text", "zip"])
def test_clip_zeroshot_weights_that_are_not_a_checkpoint_are_a_usage_error(tmp_path: Path, content: bytes) -> None:
    """A weights file torch cannot read is the operator's bad input (exit 2), whatever torch raises for it: an
    empty file's EOFError was taken by click for Ctrl-C (exit 130), a text file's UnpicklingError a traceback."""
    path = tmp_path / "weights.pt"
    path.write_bytes(content)
    model = create_model("clip_zeroshot", arch="ViT-S-32", weights=str(path))
    with pytest.raises(UsageError, match="could not load") as caught:
        model.parameter_count()  # (the weights are loaded on first use)
    assert caught.value.exit_code == 2


class StandInPromptModel(Model):
    """A numpy prompt model: the class score is a template-dependent mix of per-class mean brightness."""

    model_id = "stand_in_prompt"
    model_name = "stand-in prompt model"
    family = "test"
    uses_prompts = True

    def __init__(self, *, jitter: bool = False) -> None:
        super().__init__()
        self.jitter = jitter
        self.calls: list[tuple[int, int]] = []  # (images, templates) per call
        self.rng = np.random.default_rng(0)

    def prepare(self, task: TaskSpec, train_images: Images, train_labels: Labels, *, seed: int) -> None:
        self.task = task

    def predict_proba_templates(self, images: Images, templates: Sequence[str] = TEMPLATE_TEXTS) -> Probs:
        task = self._require_task()
        self.calls.append((images.shape[0], len(templates)))
        brightness = images.reshape(images.shape[0], -1).mean(axis=1) / 255.0
        centres = np.linspace(0.2, 0.6, task.n_classes)
        out = []
        for t, _ in enumerate(templates):
            logits = -((brightness[:, None] - centres[None, :]) ** 2) * (200.0 + 20 * t)
            if self.jitter:
                logits = logits + self.rng.normal(0, 5.0, size=logits.shape)
            e = np.exp(logits - logits.max(axis=1, keepdims=True))
            out.append(e / e.sum(axis=1, keepdims=True))
        return np.stack(out).astype(np.float32)

    def predict_proba(self, images: Images) -> Probs:
        return self.predict_proba_templates(images, TEMPLATE_TEXTS[:1])[0]

    def parameter_count(self) -> int | None:
        return 0

    def params_sentence(self) -> str:
        return "no parameters"


@pytest.mark.skipif(not has_medmnist, reason="needs medmnist")
def test_strict_subset_runs_templates_on_the_subset_once() -> None:
    from harness.tasks import task_spec

    spec = task_spec("pneumoniamnist")
    n_test = ROBUSTNESS_SUBSET_MAX + 40
    data = synthetic_task_data(spec, n_test=n_test)
    model = StandInPromptModel()
    result = evaluate(model, data, spec, seed=SEED, clock=fixed_clock)
    stored = result.predictions
    assert stored.template_probs is not None and stored.template_probs.shape == (6, ROBUSTNESS_SUBSET_MAX, 2)
    assert model.calls[0] == (n_test, 1) and model.calls[1] == (ROBUSTNESS_SUBSET_MAX, 6)
    assert len(model.calls) == 2 + 36
    cost = result.evaluation["dimensions"]["cost"]
    assert cost["cases"] == n_test + 36 * ROBUSTNESS_SUBSET_MAX + ROBUSTNESS_SUBSET_MAX
    assert result.evaluation["limitations"]["notes"] is None
    assert_rederives(result.evaluation, result.predictions_npz, result.labels)


@pytest.mark.skipif(not has_medmnist, reason="needs medmnist")
def test_unrepeatable_inference_is_noted() -> None:
    from harness.tasks import task_spec

    spec = task_spec("pneumoniamnist")
    data = synthetic_task_data(spec, n_test=ROBUSTNESS_SUBSET_MAX + 10)
    result = evaluate(StandInPromptModel(jitter=True), data, spec, seed=SEED, clock=fixed_clock)
    assert "did not repeat" in result.evaluation["limitations"]["notes"]
