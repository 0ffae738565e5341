"""A 10,000-case generation: the reveal is recomputed in under 2 s (through the CLI, as a verifier runs it),
and one changed case among 10,000 is still named."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from heldout.generations import verify_folder_reveal
from seals import canonical_bytes, parse_utc
from tests.conftest import seeded_signer
from tests.generations_support import EXPIRES, NOW, cli, init_store, write_npz

N_CASES = int(os.environ.get("HELDOUT_REVEAL_CASES", "10000"))
LIMIT_S = 2.0


@pytest.fixture(scope="module")
def revealed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HELDOUT_NOW", NOW)
        root = tmp_path_factory.mktemp("scale")
        store = root / "store"
        init_store(store)
        data = write_npz(root / "bloodmnist.npz", n_train=N_CASES, n_val=1, n_test=1, shape=(28, 28, 3), classes=8)
        assert cli("pool", "add", "bloodmnist", str(data), "--split", "train", store=store).exit_code == 0
        sealed = cli("seal", "gen1", "--tasks", "bloodmnist", "--per-task", str(N_CASES), "--expires", EXPIRES,
                     "--budget-bits", "5000", store=store)
        assert sealed.exit_code == 0, sealed.output
        assert cli("retire", "gen1", "--reason", "expired", "--reveal", store=store).exit_code == 0
        folder = root / "published"
        folder.mkdir()
        for name in ("gen1.seal.json", "gen1.reveal.json"):
            shutil.copy(store / "seals" / name, folder / name)
        return root


def test_reveal_of_10000_cases_is_recomputed_in_under_2_seconds(revealed: Path) -> None:
    key = seeded_signer(1).public_key
    started = time.perf_counter()
    verdict = verify_folder_reveal(revealed / "published", "gen1", key, parse_utc(NOW))
    library_s = time.perf_counter() - started
    assert verdict.n_cases == N_CASES
    started = time.perf_counter()
    result = cli("verify-reveal", "gen1", store=revealed / "store")
    cli_s = time.perf_counter() - started
    assert result.exit_code == 0, result.output
    print(f"\nreveal of {N_CASES} cases: library {library_s:.3f} s, CLI from the store {cli_s:.3f} s")
    assert library_s < LIMIT_S and cli_s < LIMIT_S


def test_one_changed_case_among_10000_is_named(revealed: Path, tmp_path: Path) -> None:
    folder = tmp_path / "copy"
    shutil.copytree(revealed / "published", folder)
    doc = json.loads((folder / "gen1.reveal.json").read_text())
    i = N_CASES * 2 // 3
    doc["cases"][i]["label"] = (doc["cases"][i]["label"] + 1) % 8
    (folder / "gen1.reveal.json").write_bytes(canonical_bytes(doc))
    result = cli("verify-reveal", "gen1", "--from", str(folder), "--key", seeded_signer(1).public_key.b64,
                 store=revealed / "store")
    assert result.exit_code == 1
    assert f"case #{i} {doc['cases'][i]['case_id']}" in " ".join(result.output.split())
