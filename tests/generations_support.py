"""Helpers for the generations tests: MedMNIST-layout npz files, a store initialised through the CLI with a
deterministic operator key, and a snapshot of everything a refused command must leave unchanged."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
from typer.testing import CliRunner, Result

from heldout.cli import app
from heldout.generations import open_ledger
from heldout.store import Store
from keys import TrustedKey
from tests.conftest import seeded_signer

NOW = "2026-09-01T00:00:00Z"
EXPIRES = "2027-03-01"
runner = CliRunner()


def write_npz(path: Path, *, n_test: int = 60, n_val: int = 20, n_train: int = 200, shape: tuple[int, ...] = (28, 28),
              classes: int = 4, seed: int = 0) -> Path:
    """A small file in the official MedMNIST layout: uint8 images, labels N x 1."""
    rng = np.random.default_rng(seed)
    arrays: dict[str, Any] = {}
    for split, n in (("train", n_train), ("val", n_val), ("test", n_test)):
        arrays[f"{split}_images"] = rng.integers(0, 256, size=(n, *shape), dtype=np.uint8)
        arrays[f"{split}_labels"] = rng.integers(0, classes, size=(n, 1)).astype(np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **arrays)
    return path


def cli(*args: str, store: Path) -> Result:
    return runner.invoke(app, [*args, "--store", str(store)], catch_exceptions=False)


def init_store(store: Path, seed_byte: int = 1) -> str:
    """A store with a deterministic operator key, initialised by ``heldout init``; returns the ledger id."""
    st = Store.open(store)
    st.create()
    signer = seeded_signer(seed_byte, name="test-operator", key_id=f"test-key-{seed_byte}")
    signer.save(st.private_key_path(signer.key_id))
    st.keyring.add(TrustedKey(key_id=signer.key_id, name=signer.name, public_key=signer.public_key))
    result = cli("init", "--json", store=store)
    assert result.exit_code == 0, result.output
    return str(json.loads(result.output)["ledger_id"])


def store_with_pools(root: Path, tasks: tuple[str, ...] = ("bloodmnist", "breastmnist")) -> tuple[Path, str, Path]:
    """``root/store`` initialised, with each task's synthetic training split registered as its pool (from
    ``root/data/<task>.npz``); returns (store, ledger id, data folder). The caller sets ``HELDOUT_NOW``."""
    store = root / "store"
    ledger_id = init_store(store)
    data = root / "data"
    for task in tasks:
        if task == "bloodmnist":
            write_npz(data / f"{task}.npz", shape=(28, 28, 3), classes=8, seed=1)
        else:
            write_npz(data / f"{task}.npz", n_test=40, classes=2, seed=2)
        result = cli("pool", "add", task, str(data / f"{task}.npz"), "--split", "train", store=store)
        assert result.exit_code == 0, result.output
    return store, ledger_id, data


def snapshot(store: Path) -> dict[str, Any]:
    """Every file's SHA-256 (the SQLite files aside) plus the ledger's size and root."""
    files = {}
    for path in sorted(store.rglob("*")):
        if path.is_file() and ".sqlite" not in path.name:
            files[str(path.relative_to(store))] = hashlib.sha256(path.read_bytes()).hexdigest()
    with open_ledger(Store.open(store)) as ledger:
        head = (ledger.size, ledger.root().hex())
    return {"files": files, "ledger": head}


def openings(store: Path, generation: str) -> list[dict[str, Any]]:
    """The cases of a generation's private opening (the test looks inside the private folder on purpose)."""
    found = sorted((store / "private" / "generations").glob(f"*/{generation}/*.reveal.json"))
    assert len(found) == 1, found
    return list(json.loads(found[0].read_text())["cases"])


def pooled_store(tmp_path: Path, *pools: tuple[str, dict[str, Any]]) -> tuple[Path, str, Path]:
    """A store initialised by :func:`init_store` whose pools hold the train split of one MedMNIST-layout file
    per ``(task, write_npz options)``; returns ``(store, ledger id, data folder)``. The caller sets the clock."""
    store = tmp_path / "store"
    ledger_id = init_store(store)
    data = tmp_path / "data"
    for task, options in pools:
        write_npz(data / f"{task}.npz", **options)
        result = cli("pool", "add", task, str(data / f"{task}.npz"), "--split", "train", store=store)
        assert result.exit_code == 0, result.output
    return store, ledger_id, data


BLOODMNIST = ("bloodmnist", {"shape": (28, 28, 3), "classes": 8, "seed": 1})
