"""Tasks, synthetic files and the loader: official names, keys, dtypes and shapes; clear errors; no side
effects (no torch for synth and --help, no ~/.medmnist)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from heldout.cli import app
from keys.errors import UsageError

pytestmark = pytest.mark.skipif(importlib.util.find_spec("medmnist") is None,
                                reason="needs the harness extra (medmnist)")
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch (harness extra)")

from harness.data import load_task, task_file  # noqa: E402
from harness.synth import synth_arrays, write_synth  # noqa: E402
from harness.tasks import TRAIN_CAP, capped_train_indices, in_scope_datasets, task_spec  # noqa: E402

runner = CliRunner()
REPO = Path(__file__).resolve().parent.parent
OFFICIAL_KEYS = {f"{s}_{k}" for s in ("train", "val", "test") for k in ("images", "labels")}


def test_task_spec_reads_medmnist_info_at_both_sizes() -> None:
    small, large = task_spec("bloodmnist"), task_spec("bloodmnist_224")
    assert (small.task, small.kind, small.file_name, small.size) == ("bloodmnist", "image", "bloodmnist.npz", 28)
    assert (large.task, large.kind, large.file_name) == ("bloodmnist_224", "image224", "bloodmnist_224.npz")
    assert large.task_name == "Peripheral blood cells (8-class) @224px"  # the reference passport's wording
    assert small.task_name == "Peripheral blood cells (8-class)"
    assert small.n_classes == 8 and small.channels == 3 and small.class_names[0] == "basophil"
    assert task_spec("pneumoniamnist").channels == 1 and task_spec("pneumoniamnist").n_classes == 2
    assert task_spec("bloodmnist", 224) == large
    assert task_spec("organcmnist_224").task_name == "Abdominal CT organs — coronal (C) @224px"


@pytest.mark.parametrize("task, fragment", [
    ("chestmnist", "single-label"), ("organmnist3d", "3D"), ("bloodmnist_64", "size 64"),
    ("nosuchmnist", "unknown MedMNIST"), ("bloodmnist_28", "without a suffix"),
])
def test_out_of_scope_tasks_are_usage_errors(task: str, fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment):
        task_spec(task)


def test_conflicting_size_is_refused() -> None:
    with pytest.raises(UsageError, match="--size"):
        task_spec("bloodmnist_224", 28)


def test_every_in_scope_dataset_has_a_spec() -> None:
    flags = in_scope_datasets()
    assert "chestmnist" not in flags and "retinamnist" in flags and len(flags) == 11
    for flag in flags:
        spec = task_spec(flag)
        assert spec.n_classes >= 2 and spec.channels in (1, 3) and spec.modality != "unknown"


@pytest.mark.parametrize("task", ["bloodmnist", "pneumoniamnist_224"])
def test_synth_file_has_the_official_layout_and_loads(tmp_path: Path, task: str) -> None:
    spec = task_spec(task)
    path = write_synth(spec, tmp_path, seed=5, n_train=24, n_val=8, n_test=16)
    assert path.name == spec.file_name
    with np.load(path) as npz:
        assert set(npz.files) == OFFICIAL_KEYS
        for split, n in (("train", 24), ("val", 8), ("test", 16)):
            images, labels = npz[f"{split}_images"], npz[f"{split}_labels"]
            assert images.dtype == np.uint8 and images.shape == (n, *spec.image_shape)
            assert labels.dtype == np.uint8 and labels.shape == (n, 1)
            assert labels.max() < spec.n_classes
    data = load_task(spec, tmp_path)
    assert data.loaded_with.startswith("numpy")  # non-official counts cannot go through medmnist's classes
    assert data.test_images.shape == (16, *spec.image_shape) and data.test_labels.shape == (16,)
    assert data.test_labels.dtype == np.int64
    assert set(np.unique(data.test_labels)) == set(range(spec.n_classes))  # every class present


def test_synth_is_deterministic_in_its_seed() -> None:
    spec = task_spec("dermamnist")
    counts = {"train": 10, "val": 3, "test": 7}
    first, again, other = (synth_arrays(spec, counts, s) for s in (3, 3, 4))
    assert all(np.array_equal(first[k], again[k]) for k in OFFICIAL_KEYS)
    assert not np.array_equal(first["train_images"], other["train_images"])


def test_synth_classes_differ_in_what_they_look_like() -> None:
    # The class structure is real: per-class mean images are far apart compared to the pixel noise.
    spec = task_spec("bloodmnist")
    arrays = synth_arrays(spec, {"train": 800, "val": 0, "test": 8}, 1)
    images = arrays["train_images"].astype(np.float64)
    labels = arrays["train_labels"][:, 0]
    means = np.stack([images[labels == k].mean(axis=0) for k in range(spec.n_classes)])
    gaps = [np.abs(means[a] - means[b]).mean() for a in range(8) for b in range(a + 1, 8)]
    assert min(gaps) > 2.0


def test_missing_file_is_a_clear_error_naming_it(tmp_path: Path) -> None:
    spec = task_spec("bloodmnist_224")
    started = time.monotonic()
    with pytest.raises(UsageError) as caught:
        load_task(spec, tmp_path)
    assert time.monotonic() - started < 2
    message = str(caught.value)
    assert str(task_file(spec, tmp_path)) in message and "--download" in message and "heldout data synth" in message
    assert caught.value.evidence["file"] == str(tmp_path / "bloodmnist_224.npz")


def test_download_offline_fails_without_hanging(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELDOUT_OFFLINE", "1")
    with pytest.raises(UsageError, match="HELDOUT_OFFLINE"):
        load_task(task_spec("bloodmnist"), tmp_path, download=True)


def test_wrong_keys_dtype_or_labels_are_the_operators_bad_input(tmp_path: Path) -> None:
    spec = task_spec("pneumoniamnist")
    good: dict[str, Any] = dict(synth_arrays(spec, {"train": 4, "val": 2, "test": 3}, 0))
    path = tmp_path / spec.file_name
    np.savez(path, **{k: v for k, v in good.items() if k != "val_labels"})
    with pytest.raises(UsageError, match="official keys"):
        load_task(spec, tmp_path)
    np.savez(path, **{**good, "test_images": good["test_images"].astype(np.float32)})
    with pytest.raises(UsageError, match="uint8"):
        load_task(spec, tmp_path)
    np.savez(path, **{**good, "test_labels": np.full((3, 1), 7, dtype=np.uint8)})
    with pytest.raises(UsageError, match=r"0\.\.1"):
        load_task(spec, tmp_path)
    path.write_bytes(b"not a zip")
    with pytest.raises(UsageError, match="not a readable npz"):
        load_task(spec, tmp_path)


MEDMNIST_PROBE = """
import json, sys
from pathlib import Path
import hashlib
import harness.provenance as provenance
from harness.data import load_task
from harness.tasks import task_spec
# Stand-in for the official file (not downloadable here): its MD5 is made the catalogue's, as the real file's is.
md5 = hashlib.md5((Path(sys.argv[1]) / "breastmnist.npz").read_bytes(), usedforsecurity=False).hexdigest()
provenance.CATALOGUE["breastmnist"] = (2, md5, provenance.CATALOGUE["breastmnist"][2])
data = load_task(task_spec("breastmnist"), Path(sys.argv[1]))
print("PROBE", json.dumps({"loaded_with": data.loaded_with, "n": [data.n_train, data.n_test],
                           "shape": list(data.train_images.shape[1:]), "torch": "torch" in sys.modules}))
"""


@pytest.mark.harness
@needs_torch
def test_the_official_file_goes_through_medmnist_dataset_classes(tmp_path: Path) -> None:
    """A file whose MD5 is medmnist's goes through medmnist's own classes (the counts alone do not suffice:
    tests/test_provenance.py)."""
    spec = task_spec("breastmnist")  # the smallest official 2D set: 546 / 78 / 156
    write_synth(spec, tmp_path / "data", seed=2, n_train=546, n_val=78, n_test=156)
    home = tmp_path / "home"
    home.mkdir()
    result = subprocess.run([sys.executable, "-c", MEDMNIST_PROBE, str(tmp_path / "data")], capture_output=True,
                            text=True, timeout=120, check=False, env={**os.environ, "HOME": str(home)}, cwd=REPO)
    line = next(line for line in result.stdout.splitlines() if line.startswith("PROBE "))
    probe = json.loads(line[len("PROBE "):])
    assert probe == {"loaded_with": "medmnist.BreastMNIST", "n": [546, 156], "shape": [28, 28], "torch": True}
    assert not (home / ".medmnist").exists()  # medmnist's import-time default root was not created


def test_train_cap_is_a_seeded_sorted_subset() -> None:
    assert np.array_equal(capped_train_indices(100, 28, 1), np.arange(100))
    capped = capped_train_indices(5000, 224, 7)
    assert capped.shape == (TRAIN_CAP[224],) and np.all(np.diff(capped) > 0)
    assert np.array_equal(capped, capped_train_indices(5000, 224, 7))
    assert not np.array_equal(capped, capped_train_indices(5000, 224, 8))


def test_cli_synth_writes_the_file(tmp_path: Path) -> None:
    result = runner.invoke(app, ["data", "synth", "bloodmnist", "--size", "224", "--out", str(tmp_path),
                                 "--n-train", "6", "--n-val", "2", "--n-test", "4", "--seed", "9", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["counts"] == {"train": 6, "val": 2, "test": 4} and summary["task"] == "bloodmnist_224"
    assert (tmp_path / "bloodmnist_224.npz").is_file()


@pytest.mark.parametrize("args, code", [
    (["data", "synth", "chestmnist"], 2), (["data", "synth", "bloodmnist", "--size", "64"], 2),
    (["data", "synth", "bloodmnist", "--n-test", "0"], 2),
])
def test_cli_synth_refusals_write_nothing(tmp_path: Path, args: list[str], code: int) -> None:
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "out")])
    assert result.exit_code == code and "Traceback" not in result.output
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_cli_synth_into_a_file_is_a_usage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = runner.invoke(app, ["data", "synth", "bloodmnist", "--out", str(blocker), "--n-test", "2"])
    assert result.exit_code == 2 and "cannot write into" in result.output and "Traceback" not in result.output
