"""Names and numbers (issue 9, section 5), through the CLI as an operator types them.

Identifiers match whole strings (``gen7\\n`` is not ``gen7``), names are NFC, printable and without separators,
empty key ids are refused; integers beyond 2^53, an empty ``--at``, ``--budget-bits 0``, labels outside the
task's classes and a file of another task's shape are refused before anything is written; a refused ``init``
leaves nothing behind.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from heldout.store import Store
from keys.signer import check_key_id, check_key_name
from seals.manifest import check_generation_name
from tests.generations_support import BLOODMNIST, EXPIRES, NOW, cli, init_store, pooled_store, snapshot, write_npz

SOURCES = [Path(p) for p in ("keys", "seals", "ledger", "heldout", "harness")]


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    monkeypatch.setenv("HELDOUT_NOW", NOW)
    store, _, data = pooled_store(tmp_path, BLOODMNIST)
    return SimpleNamespace(store=store, data=data)


def refused(env: SimpleNamespace, *args: str, code: int = 2) -> str:
    before = snapshot(env.store)
    result = cli(*args, store=env.store)
    assert result.exit_code == code, result.output
    assert snapshot(env.store) == before, "a refused command changed the store"
    return result.output


# --- whole-string identifiers -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["gen7\n", "gen7\r\n", " gen7", "gen7 ", "gen\u0667", "ＧＥＮ7", "gen7/x", ""])
def test_a_generation_name_is_matched_as_a_whole(env: SimpleNamespace, name: str) -> None:
    refused(env, "seal", name, "--tasks", "bloodmnist", "--per-task", "10", "--expires", EXPIRES,
            "--budget-bits", "5000")


def test_gen7_with_a_newline_is_not_sealed_beside_gen7(env: SimpleNamespace) -> None:
    args = ("--tasks", "bloodmnist", "--per-task", "10", "--expires", EXPIRES, "--budget-bits", "5000")
    assert cli("seal", "gen7", *args, store=env.store).exit_code == 0
    refused(env, "seal", "gen7\n", *args)


@pytest.mark.parametrize("value", ["k1\n", "", "a/b", "../k", "k\x00", "k 1", "k\u00e9"])
def test_key_ids_are_whole_plain_names(value: str) -> None:
    with pytest.raises(Exception, match="key id"):
        check_key_id(value)


@pytest.mark.parametrize("value", ["op\n", "op\x07", "op\u200b", "o\u0301p", "op\\x", "", "op+1", "op\x85"])
def test_key_names_are_nfc_printable_without_separators(value: str) -> None:
    with pytest.raises(Exception, match="key name"):
        check_key_name(value)


@pytest.mark.parametrize("value", ["witness.example/w1", "sum.golang.org", "lab-operator"])
def test_key_names_may_be_schemaless_urls(value: str) -> None:
    assert check_key_name(value) == value  # C2SP signed-note names: '/' allowed, never used as a path


@pytest.mark.parametrize("key_id", ["", "bad\n", "../escape", "a/b"])
def test_keys_init_refuses_a_bad_key_id(tmp_path: Path, key_id: str) -> None:
    store = tmp_path / "store"
    result = cli("keys", "init", "--name", "op", "--key-id", key_id, store=store)
    assert result.exit_code == 2, result.output
    assert not list((store / "private").rglob("*.key")) if (store / "private").exists() else True
    assert not (tmp_path / "escape.key").exists()


def test_an_empty_key_id_never_selects_the_default_key(env: SimpleNamespace, tmp_path: Path) -> None:
    note = tmp_path / "note.json"
    note.write_text(json.dumps({"text": "hello"}))
    ledger_id = Store.open(env.store).default_ledger_id()
    refused(env, "ledger", "append", ledger_id, "--type", "note", "--json-file", str(note), "--key-id", "")


def test_every_identifier_pattern_is_anchored_at_both_ends() -> None:
    """A pattern with ``$`` and ``.match`` accepts a trailing newline: every compiled pattern in the core is
    used with ``fullmatch`` (or ``search`` for scanning text), never ``match``, and none ends in ``$``."""
    offenders = []
    for folder in SOURCES:
        for path in folder.rglob("*.py"):
            text = path.read_text()
            for name in re.findall(r"^(\w+) = re\.compile\(", text, flags=re.M):
                if re.search(rf"\b{name}\.match\(", text):
                    offenders.append(f"{path}: {name}")
            offenders += [f"{path}: $ anchor" for _ in re.findall(r're\.compile\(r?"[^"]*\$"\)', text)]
    assert not offenders, offenders


@pytest.mark.parametrize("name", ["gen7\n", "public\n", "gen01", "gen7 "])
def test_generation_names_in_documents_are_whole(name: str) -> None:
    with pytest.raises(Exception, match="generation"):
        check_generation_name(name)


# --- numbers ----------------------------------------------------------------------------------------------------

def test_an_empty_at_is_refused_not_taken_as_now(env: SimpleNamespace) -> None:
    output = refused(env, "seal", "gen3", "--tasks", "bloodmnist", "--per-task", "10", "--expires", EXPIRES,
                     "--budget-bits", "5000", "--at", "")
    assert "--at" in output


@pytest.mark.parametrize("bits", ["0", "-1", "nan", "inf", "0.0"])
def test_a_budget_of_zero_or_less_is_refused(env: SimpleNamespace, bits: str) -> None:
    refused(env, "seal", "gen3", "--tasks", "bloodmnist", "--per-task", "10", "--expires", EXPIRES,
            "--budget-bits", bits)


@pytest.mark.parametrize("value", [2**53, 2**53 + 1, -(2**53) - 1, 10**30])
def test_integers_beyond_2_53_in_an_entry_are_refused(env: SimpleNamespace, tmp_path: Path, value: int) -> None:
    note = tmp_path / "note.json"
    note.write_text('{"text": "n", "count": ' + str(value) + "}")
    ledger_id = Store.open(env.store).default_ledger_id()
    output = refused(env, "ledger", "append", ledger_id, "--type", "note", "--json-file", str(note))
    assert "2^53" in output or "safe range" in output


@pytest.mark.parametrize("seed", [str(2**53), str(2**64)])
def test_a_seed_beyond_2_53_is_refused_before_sealing(env: SimpleNamespace, seed: str) -> None:
    refused(env, "seal", "gen3", "--tasks", "bloodmnist", "--per-task", "10", "--expires", EXPIRES,
            "--budget-bits", "5000", "--seed", seed)


# --- pool files -------------------------------------------------------------------------------------------------

def test_labels_outside_the_tasks_classes_are_refused(env: SimpleNamespace) -> None:
    path = write_npz(env.data / "wide.npz", shape=(28, 28, 3), classes=8, seed=5)
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    arrays["train_labels"][0, 0] = 8  # bloodmnist has classes 0..7
    np.savez(path, **arrays)
    output = refused(env, "pool", "add", "bloodmnist", str(path), "--split", "train")
    assert "label" in output


@pytest.mark.parametrize(("shape", "why"), [((28, 28), "channels"), ((64, 64, 3), "shape"), ((28, 28, 1), "channels")])
def test_a_file_of_another_task_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           shape: tuple[int, ...], why: str) -> None:
    """An empty pool takes its shape from the task's INFO, not from the first file registered."""
    monkeypatch.setenv("HELDOUT_NOW", NOW)
    env = SimpleNamespace(store=tmp_path / "store", data=tmp_path / "data")
    init_store(env.store)
    path = write_npz(env.data / "other.npz", shape=shape, classes=2, seed=6)
    refused(env, "pool", "add", "bloodmnist", str(path), "--split", "train")


# --- a refused init leaves nothing ---------------------------------------------------------------------------------

@pytest.mark.parametrize("args", [["--name", ""], ["--name", "x\ny"], ["--at", ""], ["--at", "yesterday"],
                                  ["--key-id", "../k"]])
def test_a_refused_init_leaves_nothing_behind(tmp_path: Path, args: list[str]) -> None:
    store = tmp_path / "store"
    result = cli("init", *args, store=store)
    assert result.exit_code == 2, result.output
    assert not store.exists() or not any(store.rglob("*")), sorted(str(p) for p in store.rglob("*"))
