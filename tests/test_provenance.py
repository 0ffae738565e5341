"""Provenance: only a file with medmnist's MD5 is official; synthetic files are labelled synthetic with their
SHA-256, anything else local; the public generation's manifest, seal entry and evaluations say which."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

import harness.provenance as provenance
from harness.data import load_task
from harness.metrics import PUBLIC_SPLIT_ORIGIN
from harness.provenance import CATALOGUE, LOCAL, OFFICIAL, SYNTHETIC, file_provenance, known_tasks
from harness.synth import write_synth
from harness.tasks import task_spec
from heldout.generations import load_generations, open_ledger
from heldout.store import Store
from seals import parse_utc
from tests.audit_support import NOW, command_clock
from tests.generations_support import cli, init_store, write_npz


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_synthetic_file_is_labelled_synthetic_with_its_sha256(tmp_path: Path) -> None:
    path = write_synth(task_spec("breastmnist"), tmp_path, n_train=6, n_val=2, n_test=4)
    found = file_provenance(path, "breastmnist")
    assert found.origin == SYNTHETIC and found.sha256 == sha256_of(path) and not found.official
    data = load_task(task_spec("breastmnist"), tmp_path)
    assert data.provenance == found and f"synthetic file sha256:{found.sha256}" in data.loaded_with


def test_a_file_with_the_official_counts_but_not_the_official_md5_is_not_official(tmp_path: Path) -> None:
    spec = task_spec("breastmnist")
    path = write_npz(tmp_path / "breastmnist.npz", n_train=546, n_val=78, n_test=156, classes=2, seed=3)
    assert spec.official_counts == {"train": 546, "val": 78, "test": 156}  # it looks official
    found = file_provenance(path, "breastmnist")
    assert found.origin == LOCAL and found.sha256 == sha256_of(path)
    data = load_task(spec, tmp_path)
    assert data.loaded_with.startswith("numpy (local file") and data.provenance == found


def test_only_the_official_md5_makes_a_file_official(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_npz(tmp_path / "breastmnist.npz", n_test=10, classes=2)
    md5 = hashlib.md5(path.read_bytes(), usedforsecurity=False).hexdigest()
    classes, _, md5_224 = CATALOGUE["breastmnist"]
    monkeypatch.setitem(provenance.CATALOGUE, "breastmnist", (classes, md5, md5_224))
    assert file_provenance(path, "breastmnist").origin == OFFICIAL
    assert file_provenance(path, "breastmnist_224").origin == LOCAL  # the 224 px file has its own MD5


def test_unknown_tasks_are_not_known() -> None:
    assert "bloodmnist" in known_tasks() and "bloodmnist_224" in known_tasks()
    assert "nosuchmnist" not in known_tasks() and "chestmnist" not in known_tasks()  # multi-label: out of scope


@pytest.mark.harness
def test_the_catalogue_is_medmnists_info() -> None:
    from harness.tasks import in_scope_datasets, medmnist_info

    info = medmnist_info()
    assert sorted(CATALOGUE) == in_scope_datasets()
    for flag, (classes, md5, md5_224) in CATALOGUE.items():
        assert (classes, md5, md5_224) == (len(info[flag]["label"]), info[flag]["MD5"], info[flag]["MD5_224"])


def test_public_generation_sealed_from_synthetic_data_is_never_official(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with command_clock(NOW):
        init_store(store)
        path = write_synth(task_spec("breastmnist"), tmp_path / "data", n_train=6, n_val=2, n_test=8)
        result = cli("seal", "public", "--tasks", "breastmnist", "--data-root", str(tmp_path / "data"), "--expires",
                     "2027-06-01", "--json", store=store)
    assert result.exit_code == 0, result.output
    manifest = json.loads((store / "seals" / "public.seal.json").read_text())
    assert manifest["tasks"]["breastmnist"] == {"cases": 8, "origin": "synthetic", "sha256": sha256_of(path)}
    with open_ledger(Store.open(store)) as ledger:
        state = load_generations(ledger, parse_utc(NOW))["public"]
    origin = state.split_origin("breastmnist")
    assert origin == f"synthetic split sha256:{sha256_of(path)}" and origin != PUBLIC_SPLIT_ORIGIN
