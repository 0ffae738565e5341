"""Generations through the CLI, as an operator uses them: init, pools, seal, retire, reveal, status, proofs.

Every refusal is checked to write nothing (ledger size and root, and every file of the store, unchanged)."""

from __future__ import annotations

import base64
import json
import shutil
import stat
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from heldout.generations import (
    check_budget,
    generation_cases,
    ledger_signer,
    load_generations,
    open_ledger,
    parse_reveal,
    pool_case_ids,
    revealed_labels,
)
from heldout.generations.seal import SealRequest, seal_generation
from heldout.store import Store
from keys import LapsedError, Signer, UsageError, VerificationError
from ledger import BlobStore, Ledger
from seals import canonical_bytes, parse_json_object, parse_utc, sha256_hex
from seals.manifest import SealManifest
from tests.conftest import seeded_signer
from tests.generations_support import (
    EXPIRES,
    NOW,
    cli,
    openings,
    snapshot,
    store_with_pools,
    write_npz,
)


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    monkeypatch.setenv("HELDOUT_NOW", NOW)
    store, ledger_id, data = store_with_pools(tmp_path)
    return SimpleNamespace(store=store, ledger_id=ledger_id, data=data, key=seeded_signer(1).public_key.b64)


def seal(env: SimpleNamespace, name: str, *extra: str, tasks: str = "bloodmnist,breastmnist", per_task: int = 50,
         bits: str = "5000") -> dict:
    args = ["seal", name, "--tasks", tasks, "--expires", EXPIRES, "--json"]
    if name != "public":
        args += ["--per-task", str(per_task), "--budget-bits", bits]
    result = cli(*args, *extra, store=env.store)
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.output))


def ledger_entries(env: SimpleNamespace) -> list[dict]:
    with open_ledger(Store.open(env.store)) as ledger:
        return [entry for _, entry in ledger.entries()]


# --- init and pools -----------------------------------------------------------------------------------------

def test_init_prints_the_ledger_id_and_makes_it_the_default(env: SimpleNamespace) -> None:
    st = Store.open(env.store)
    assert st.default_ledger_id() == env.ledger_id
    with open_ledger(st) as ledger:
        assert ledger.ledger_id == env.ledger_id and ledger.size == 1
        assert ledger.entry(0)["key"]["key_id"] == "test-key-1"


def test_init_twice_is_refused_and_writes_nothing(env: SimpleNamespace) -> None:
    before = snapshot(env.store)
    result = cli("init", store=env.store)
    assert result.exit_code == 2 and "already initialised" in result.output
    assert snapshot(env.store) == before


def test_an_init_killed_before_it_named_the_default_is_finished_by_the_next(env: SimpleNamespace) -> None:
    """A kill between creating the ledger and recording it as the store's default: the next init takes that
    ledger (one ledger, the same id) instead of creating a second one beside it."""
    st = Store.open(env.store)
    st.default_ledger_file.unlink()  # where the killed init stopped
    result = cli("init", "--json", store=env.store)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["ledger_id"] == env.ledger_id and st.default_ledger_id() == env.ledger_id
    assert [p.name for p in st.ledgers.glob("*.sqlite")] == [f"{env.ledger_id}.sqlite"]
    assert cli("init", store=env.store).exit_code == 2  # and now it is initialised


def _init_when_released(root: str, barrier: Any, answers: Any) -> None:
    from heldout.generations.ledgers import initialise_store

    barrier.wait(timeout=60)
    try:
        made = initialise_store(Store(Path(root)), now=parse_utc("2026-03-01T00:00:00Z"))
        answers.put(("made", made.ledger_id))
    except UsageError as exc:
        answers.put(("refused", exc.message))


def test_inits_at_once_on_a_new_store_make_one_ledger_and_refuse_the_others(tmp_path: Path) -> None:
    """Three inits at once on a store that does not exist yet (processes forked with everything imported, then
    released together): each checked that the store had no default ledger and then made a key, a ledger and
    the default of its own, and every one reported success (red-team round 20), the store keeping the last.
    One init makes the store; the others wait for it and are refused (already initialised): one ledger, one
    key, the default the one that succeeded."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    store = tmp_path / "new" / "store"
    barrier, answers = context.Barrier(3), context.Queue()
    runs = [context.Process(target=_init_when_released, args=(str(store), barrier, answers)) for _ in range(3)]
    for run in runs:
        run.start()
    results = sorted(answers.get(timeout=120) for _ in runs)
    for run in runs:
        run.join(timeout=60)
    assert [kind for kind, _ in results] == ["made", "refused", "refused"], results
    assert all("already initialised" in text for kind, text in results if kind == "refused"), results
    st = Store.open(store)
    assert st.default_ledger_id() == results[0][1]
    assert [p.name for p in st.ledgers.glob("*.sqlite")] == [f"{results[0][1]}.sqlite"]
    assert len(list(st.private_keys.glob("*.key"))) == 1


def _init_in_turn(root: str, role: str, answers: Any) -> None:
    import time

    import heldout.generations.ledgers as ledgers

    real = ledgers._initialise

    def paced(store: Store, **options: Any) -> Any:
        if role == "first":
            time.sleep(1.0)
            raise UsageError("no private key 'typo'")  # as `heldout init --key-id typo` on a new store
        time.sleep(1.5 if role == "second" else 0.0)
        return real(store, **options)

    ledgers._initialise = paced
    try:
        made = ledgers.initialise_store(Store(Path(root)), now=parse_utc("2026-03-01T00:00:00Z"))
        answers.put((role, "made", made.ledger_id))
    except UsageError as exc:
        answers.put((role, "refused", exc.message))


def test_an_init_that_fails_and_removes_the_new_store_folder_does_not_free_two_others(tmp_path: Path) -> None:
    """The first init makes the store folder, holds it and fails (and removes the folder it made); a second
    waited on the folder it removed, and a third made a new one: each held a folder of its own and both made
    a ledger (red-team round 21). A holder checks, once it holds the folder, that it is still the folder at
    that path: the second makes the store, the third is refused."""
    import multiprocessing
    import time

    context = multiprocessing.get_context("fork")
    store = tmp_path / "new" / "store"
    answers = context.Queue()
    runs = []
    for role, delay in (("first", 0.0), ("second", 0.4), ("third", 1.4)):
        time.sleep(delay)
        runs.append(context.Process(target=_init_in_turn, args=(str(store), role, answers)))
        runs[-1].start()
    results = sorted(answers.get(timeout=120) for _ in runs)
    for run in runs:
        run.join(timeout=60)
    assert [(role, kind) for role, kind, _ in results] == [("first", "refused"), ("second", "made"),
                                                           ("third", "refused")], results
    st = Store.open(store)
    assert [p.name for p in st.ledgers.glob("*.sqlite")] == [f"{results[1][2]}.sqlite"]


def test_pool_add_hashes_cases_keeps_them_private_and_skips_known_ones(env: SimpleNamespace) -> None:
    st = Store.open(env.store)
    assert len(pool_case_ids(st, "bloodmnist")) == 200
    again = cli("pool", "add", "bloodmnist", str(env.data / "bloodmnist.npz"), "--split", "train", "--json",
                store=env.store)
    assert json.loads(again.output)["added"] == 0 and json.loads(again.output)["already_in_pool"] == 200
    more = cli("pool", "add", "bloodmnist", str(env.data / "bloodmnist.npz"), "--split", "val", "--json",
               store=env.store)
    assert json.loads(more.output)["added"] == 20 and len(pool_case_ids(st, "bloodmnist")) == 220
    for path in (st.private / "pools").rglob("*"):
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), path


def test_pool_add_refuses_a_file_of_another_image_shape(env: SimpleNamespace) -> None:
    write_npz(env.data / "other.npz", shape=(64, 64, 3))
    before = snapshot(env.store)
    result = cli("pool", "add", "bloodmnist", str(env.data / "other.npz"), store=env.store)
    assert result.exit_code == 2 and "shape" in result.output
    assert snapshot(env.store) == before


def _bad_pool_file(path: Path, kind: str) -> None:
    rng = np.random.default_rng(3)
    images = rng.integers(0, 256, size=(10, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 4, size=(10, 1)).astype(np.uint8)
    if kind == "a folder":
        path.mkdir()
    elif kind == "a FIFO":
        import os

        os.mkfifo(path)
    elif kind == "garbage":
        path.write_bytes(b"PK\x03\x04 not really a zip")
    elif kind == "object labels":
        np.savez(path, test_images=images, test_labels=np.array([["a"]] * 10, dtype=object))
    elif kind == "counts that differ":
        np.savez(path, test_images=images, test_labels=labels[:7])
    elif kind == "negative labels":
        np.savez(path, test_images=images, test_labels=-labels - 1)
    elif kind == "float images":
        np.savez(path, test_images=images.astype(np.float32), test_labels=labels)


@pytest.mark.parametrize("kind", ["a folder", "a FIFO", "garbage", "object labels", "counts that differ",
                                  "negative labels", "float images"])
def test_bad_input_to_pool_add_is_a_usage_error_and_writes_nothing(env: SimpleNamespace, kind: str) -> None:
    """The pool file is the operator's own input: whatever is wrong with it is exit 2 (bad input), never 1
    (which says something verified was tampered with)."""
    bad = env.data / "bad.npz"
    _bad_pool_file(bad, kind)
    before = snapshot(env.store)
    result = cli("pool", "add", "bloodmnist", str(bad), store=env.store)
    assert result.exit_code == 2, result.output
    assert result.output.startswith("heldout: error:") and len(result.output.strip().splitlines()) == 1
    assert snapshot(env.store) == before


# --- seal ---------------------------------------------------------------------------------------------------

def test_seal_publishes_a_signed_manifest_bound_to_its_entry(env: SimpleNamespace) -> None:
    out = seal(env, "gen1")
    st = Store.open(env.store)
    data = (st.seals / "gen1.seal.json").read_bytes()
    manifest = SealManifest.verify(parse_json_object(data), st.keyring.get("test-key-1"))
    assert canonical_bytes(parse_json_object(data)) == data  # the file is the canonical bytes
    entries = ledger_entries(env)
    seal_entry = entries[out["seal_index"]]
    assert seal_entry["type"] == "seal" and seal_entry["manifest_sha256"] == sha256_hex(data)
    assert manifest.entry_index == out["seal_index"] and manifest.ledger_id == env.ledger_id
    assert manifest.set_hash == seal_entry["set_hash"] and manifest.seed is None
    draw = manifest.draw or {}
    intent = entries[draw["intent_index"]]  # commit-then-draw: pools and intent logged before the seal
    assert intent["type"] == "intent" and intent["generation"] == "gen1" and draw["intent_index"] < out["seal_index"]
    assert draw["seed_source"] == "checkpoint-root" and draw["checkpoint"]["size"] == draw["intent_index"] + 1
    assert {entries[ref["index"]]["type"] for ref in draw["pools"].values()} == {"pool"}
    assert manifest.task_counts == {"bloodmnist": 50, "breastmnist": 50} and manifest.predecessor is None
    assert BlobStore(st.blobs).get(sha256_hex(data)) == data
    # The private opening recomputes the sealed set hash.
    reveal = parse_reveal(json.loads(next((st.private / "generations").rglob("*.reveal.json")).read_text()))
    assert reveal.set_hash == manifest.set_hash and len(reveal.openings) == 100
    second = seal(env, "gen2")
    manifest2 = SealManifest.from_json(json.loads((st.seals / "gen2.seal.json").read_text()))
    assert manifest2.predecessor == "gen1" and manifest2.entry_index == second["seal_index"]


def test_seal_records_budget_parameters_and_ladder_release(env: SimpleNamespace) -> None:
    seal(env, "gen1", "--ladder-step", "0.5", "--expected-models", "10", bits="250")
    manifest = SealManifest.from_json(json.loads((env.store / "seals" / "gen1.seal.json").read_text()))
    assert manifest.release.mode == "ladder" and manifest.release.step == 0.5
    assert manifest.leakage_budget.bits == 250.0 and manifest.leakage_budget.k == 10
    assert manifest.leakage_budget.basis == "explicit"
    # n is where the released score concentrates: the smallest class of the weakest task, not the 50 cases.
    smallest = min(min(sum(1 for c in openings(env.store, "gen1") if c["task"] == t and c["label"] == k)
                       for k in range(classes)) for t, classes in (("bloodmnist", 8), ("breastmnist", 2)))
    assert manifest.leakage_budget.n == max(1, smallest) < 50
    (family,) = manifest.leakage_budget.families
    assert family["per_evaluation"] == 1 and family["statistics"] == 10 * 2 * 1


REFUSALS = {
    "name already used": (["seal", "gen1", "--tasks", "bloodmnist", "--per-task", "5", "--expires", EXPIRES,
                           "--budget-bits", "10"], "already sealed"),
    "name gen0": (["seal", "gen0", "--tasks", "bloodmnist", "--per-task", "5", "--expires", EXPIRES], "genN"),
    "name Gen2": (["seal", "Gen2", "--tasks", "bloodmnist", "--per-task", "5", "--expires", EXPIRES], "genN"),
    "name holdout": (["seal", "holdout", "--tasks", "bloodmnist", "--per-task", "5", "--expires", EXPIRES], "genN"),
    "name gen-2": (["seal", "gen-2", "--tasks", "bloodmnist", "--per-task", "5", "--expires", EXPIRES], "genN"),
    "expiry now": (["seal", "gen2", "--tasks", "bloodmnist", "--per-task", "5", "--expires", NOW,
                    "--budget-bits", "10"], "not in the future"),
    "expiry past": (["seal", "gen2", "--tasks", "bloodmnist", "--per-task", "5", "--expires", "2026-01-01",
                     "--budget-bits", "10"], "not in the future"),
    "too few unused cases": (["seal", "gen2", "--tasks", "bloodmnist", "--per-task", "151", "--expires", EXPIRES,
                              "--budget-bits", "10"], "too few unused cases for bloodmnist: 150 left"),
    "unknown task": (["seal", "gen2", "--tasks", "bloodmnist,dermamnist", "--per-task", "5", "--expires", EXPIRES,
                      "--budget-bits", "10"], "no private pool"),
    "task MedEval-1 does not know": (["seal", "gen2", "--tasks", "nosuchmnist", "--per-task", "5", "--expires",
                                      EXPIRES, "--budget-bits", "5000"], "unknown task 'nosuchmnist'"),
    "public task MedEval-1 does not know": (["seal", "public", "--tasks", "nosuchmnist", "--data-root", "{data}",
                                             "--expires", EXPIRES], "unknown task 'nosuchmnist'"),
    "pool add of a task MedEval-1 does not know": (["pool", "add", "nosuchmnist", "{data}/bloodmnist.npz"],
                                                   "unknown task 'nosuchmnist'"),
    "evaluate a task MedEval-1 does not know": (["evaluate", "majority", "--generation", "gen1", "--tasks",
                                                 "nosuchmnist"], "unknown task 'nosuchmnist'"),
    "full budget that cannot pay for one evaluation": (
        ["seal", "gen2", "--tasks", "bloodmnist", "--per-task", "50", "--expires", EXPIRES, "--budget-bits", "100"],
        "a budget of 100.00 bits cannot pay for one evaluation in full release"),
    "--eps 0.1 on 50 cases: refused at the seal, with the numbers": (
        ["seal", "gen2", "--tasks", "bloodmnist", "--per-task", "50", "--expires", EXPIRES, "--eps", "0.1"],
        "and eps = 0.1 is"),
    "ladder budget that cannot pay for one answer": (
        ["seal", "gen2", "--tasks", "bloodmnist", "--per-task", "50", "--expires", EXPIRES, "--budget-bits", "5",
         "--ladder-step", "1"], "a budget of 5.00 bits cannot pay for one evaluation in ladder release"),
    "thresholdout without its parameters": (
        ["seal", "gen2", "--tasks", "bloodmnist", "--per-task", "50", "--expires", EXPIRES, "--budget-bits", "500",
         "--thresholdout"], "--thresholdout needs --threshold T and --sigma S"),
    "public task without a file": (["seal", "public", "--tasks", "dermamnist", "--data-root", "{data}", "--expires",
                             EXPIRES], "no file"),
    "default budget not positive": (["seal", "gen2", "--tasks", "bloodmnist", "--per-task", "50", "--expires",
                                     EXPIRES], "no release is covered"),
    "retire unknown generation": (["retire", "gen7", "--reason", "leaked"], "no generation 'gen7'"),
    "retire bad reason": (["retire", "gen1", "--reason", "bored"], "--reason is one of"),
    "retire --with-images without --reveal": (["retire", "gen1", "--reason", "leaked", "--with-images"],
                                              "goes with --reveal"),
    "verify-reveal of an unrevealed generation": (["verify-reveal", "gen1"], "has not been revealed"),
    "prove-member of a case not in the generation": (["prove-member", "gen1", "bloodmnist-0000000000000000"],
                                                     "is not in gen1"),
}


@pytest.mark.parametrize("name", list(REFUSALS))
def test_refusal_writes_nothing(env: SimpleNamespace, name: str) -> None:
    seal(env, "gen1")
    args, message = REFUSALS[name]
    args = [a.replace("{data}", str(env.data)) for a in args]
    before = snapshot(env.store)
    result = cli(*args, store=env.store)
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split()), result.output
    assert "Traceback" not in result.output
    assert snapshot(env.store) == before


def test_retiring_twice_is_refused_and_writes_nothing(env: SimpleNamespace) -> None:
    seal(env, "gen1")
    assert cli("retire", "gen1", "--reason", "superseded", store=env.store).exit_code == 0
    before = snapshot(env.store)
    result = cli("retire", "gen1", "--reason", "leaked", store=env.store)
    assert result.exit_code == 2 and "already retired" in result.output
    assert snapshot(env.store) == before


# --- disjointness -------------------------------------------------------------------------------------------

def test_generations_of_one_task_are_disjoint_across_seals_and_a_retire(env: SimpleNamespace) -> None:
    for name in ("gen1", "gen2", "gen3"):
        seal(env, name, tasks="bloodmnist", per_task=50)
    assert cli("retire", "gen1", "--reason", "superseded", "--reveal", store=env.store).exit_code == 0
    seal(env, "gen4", tasks="bloodmnist", per_task=50)  # the last 50 of 200: a retire frees nothing
    sets = {name: {c["case_id"] for c in openings(env.store, name)} for name in ("gen1", "gen2", "gen3", "gen4")}
    pool = set(pool_case_ids(Store.open(env.store), "bloodmnist"))
    for name, cases in sets.items():
        assert len(cases) == 50 and cases <= pool, name
    names = list(sets)
    for i, first in enumerate(names):
        for second in names[i + 1:]:
            assert not sets[first] & sets[second], (first, second)
    assert set().union(*sets.values()) == pool
    before = snapshot(env.store)
    result = cli("seal", "gen5", "--tasks", "bloodmnist", "--per-task", "1", "--expires", EXPIRES, "--budget-bits",
                 "1", store=env.store)
    assert result.exit_code == 2 and "0 left" in result.output
    assert snapshot(env.store) == before


def test_sealed_generations_never_draw_cases_of_the_public_split(env: SimpleNamespace) -> None:
    st = Store.open(env.store)
    assert cli("pool", "add", "bloodmnist", str(env.data / "bloodmnist.npz"), "--split", "test",
               store=env.store).exit_code == 0
    seal(env, "public", "--data-root", str(env.data), tasks="bloodmnist")
    public_ids = {c["case_id"] for c in openings(env.store, "public")}
    assert len(public_ids) == 60 and public_ids <= set(pool_case_ids(st, "bloodmnist"))
    seal(env, "gen1", tasks="bloodmnist", per_task=200)  # all 200 training cases, none of the 60 public ones
    assert not public_ids & {c["case_id"] for c in openings(env.store, "gen1")}


def test_the_operator_cannot_choose_the_draw_seed(env: SimpleNamespace) -> None:
    before = snapshot(env.store)
    result = cli("seal", "gen1", "--tasks", "bloodmnist", "--per-task", "20", "--seed", "7", "--expires", EXPIRES,
                 "--budget-bits", "1", store=env.store)
    assert result.exit_code == 2 and "--seed no longer applies" in result.output
    assert snapshot(env.store) == before  # nothing logged, nothing written


@pytest.mark.parametrize("numbers", [
    ["--budget-bits", "9007199254740992"],  # beyond 2^53: the seal entry cannot hold it
    ["--budget-bits", "50000", "--eps", "1e9"],  # (an explicit budget wins; the eps alone is the next case)
    ["--eps", "1e9"],  # a default budget beyond 2^53
    ["--eps", "nan"], ["--budget-bits", "5000", "--delta", "1e-320"],
    ["--budget-bits", "5000", "--expected-models", "99999999999999999999999"],
    ["--budget-bits", "5000", "--ladder-step", "1e-320"],
    ["--budget-bits", "5000", "--thresholdout", "--threshold", "0.02", "--sigma", "1e-320"],
], ids=["bits-2^53", "explicit-wins", "eps-1e9", "eps-nan", "delta-subnormal", "models-1e23", "step-subnormal",
        "sigma-subnormal"])
def test_seal_numbers_a_seal_cannot_record_are_refused_before_anything_is_logged(env: SimpleNamespace,
                                                                                 numbers: list[str]) -> None:
    """A budget beyond 2^53 logged the pools and the intent and then failed at the seal entry: an abandoned
    draw, an audit finding for good. Options the manifest cannot record (a step or sigma that rounds to 0) were
    exit 1, "verification failed". Each is bad input now: exit 2, nothing written."""
    before = snapshot(env.store)
    result = cli("seal", "gen1", "--tasks", "bloodmnist", "--per-task", "20", "--expires", EXPIRES, *numbers,
                 store=env.store)
    if numbers == ["--budget-bits", "50000", "--eps", "1e9"]:
        assert result.exit_code == 0, result.output  # the control: the same seal with a budget it can record
        return
    assert result.exit_code == 2, result.output
    assert snapshot(env.store) == before


# --- retire, reveal, verify-reveal -------------------------------------------------------------------------

def test_retire_with_reveal_appends_both_entries_and_the_reveal_verifies(env: SimpleNamespace) -> None:
    seal(env, "gen1")
    result = cli("retire", "gen1", "--reason", "expired", "--reveal", "--with-images", "--json", store=env.store)
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    entries = ledger_entries(env)
    assert [e["type"] for e in entries] == ["genesis", "pool", "pool", "intent", "seal", "retire", "reveal"]
    assert entries[out["retire_index"]]["reason"] == "expired"
    assert entries[out["reveal_index"]]["reveal_sha256"] == out["reveal_sha256"]
    verified = cli("verify-reveal", "gen1", "--json", store=env.store)
    assert verified.exit_code == 0, verified.output
    verdict = json.loads(verified.output)
    assert verdict["images_checked"] and verdict["ledger_checked"] and verdict["n_cases"] == 100


def test_a_retired_generation_can_be_revealed_later(env: SimpleNamespace) -> None:
    seal(env, "gen1")
    assert cli("retire", "gen1", "--reason", "leaked", store=env.store).exit_code == 0
    result = cli("retire", "gen1", "--reveal", store=env.store)
    assert result.exit_code == 0 and "revealing only" in result.output
    assert [e["type"] for e in ledger_entries(env)] == ["genesis", "pool", "pool", "intent", "seal", "retire",
                                                        "reveal"]
    assert cli("verify-reveal", "gen1", store=env.store).exit_code == 0


@pytest.fixture
def revealed_dir(env: SimpleNamespace, tmp_path: Path) -> Path:
    seal(env, "gen1")
    assert cli("retire", "gen1", "--reason", "expired", "--reveal", store=env.store).exit_code == 0
    folder = tmp_path / "published"
    folder.mkdir()
    for name in ("gen1.seal.json", "gen1.reveal.json"):
        shutil.copy(env.store / "seals" / name, folder / name)
    return folder


def test_verify_reveal_from_a_folder_with_an_explicit_key(env: SimpleNamespace, revealed_dir: Path) -> None:
    result = cli("verify-reveal", "gen1", "--from", str(revealed_dir), "--key", env.key, store=env.store)
    assert result.exit_code == 0, result.output
    assert "reveal of gen1 verified: 100 cases" in result.output
    other = cli("verify-reveal", "gen1", "--from", str(revealed_dir), "--key", seeded_signer(9).public_key.b64,
                store=env.store)
    assert other.exit_code == 1


@pytest.mark.parametrize("field", ["case_id", "content_sha256", "label", "salt"])
@pytest.mark.parametrize("position", ["first", "middle", "last"])
def test_changing_one_revealed_field_fails_and_names_the_case(env: SimpleNamespace, revealed_dir: Path, field: str,
                                                              position: str) -> None:
    path = revealed_dir / "gen1.reveal.json"
    doc = json.loads(path.read_text())
    i = {"first": 0, "middle": len(doc["cases"]) // 2, "last": len(doc["cases"]) - 1}[position]
    case = doc["cases"][i]
    if field == "label":
        case["label"] += 1
    else:
        value = case[field]
        case[field] = value[:-1] + ("0" if value[-1] != "0" else "1")
    path.write_bytes(canonical_bytes(doc))
    result = cli("verify-reveal", "gen1", "--from", str(revealed_dir), "--key", env.key, store=env.store)
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert f"case #{i} {case['case_id']}" in text


def test_a_tampered_reveal_blob_in_the_store_fails(env: SimpleNamespace) -> None:
    seal(env, "gen1")
    out = json.loads(cli("retire", "gen1", "--reason", "leaked", "--reveal", "--json", store=env.store).output)
    blob = BlobStore(Store.open(env.store).blobs).path(out["reveal_sha256"])
    data = bytearray(blob.read_bytes())
    data[200] ^= 1
    blob.chmod(0o644)
    blob.write_bytes(bytes(data))
    result = cli("verify-reveal", "gen1", store=env.store)
    assert result.exit_code == 1 and "altered" in result.output


def test_public_is_revealed_at_seal_and_verifies(env: SimpleNamespace) -> None:
    out = seal(env, "public", "--data-root", str(env.data))
    assert out["reveal_index"] == out["seal_index"] + 1
    doc = json.loads((env.store / "seals" / "public.reveal.json").read_text())
    assert doc["membership"] == "public" and all(c["salt"] == "" for c in doc["cases"])
    assert cli("verify-reveal", "public", store=env.store).exit_code == 0


# --- membership proofs -----------------------------------------------------------------------------------

def test_prove_member_and_verify_member(env: SimpleNamespace, tmp_path: Path) -> None:
    seal(env, "gen1")
    case = openings(env.store, "gen1")[17]
    proof_path = tmp_path / "proof.json"
    result = cli("prove-member", "gen1", case["case_id"], "--out", str(proof_path), store=env.store)
    assert result.exit_code == 0, result.output
    proof = json.loads(proof_path.read_text())
    assert proof["case"]["case_id"] == case["case_id"] and proof["tree_size"] == 100
    assert len(json.dumps(proof)) < 5000  # one opening and a log-size path, not the set
    ok = cli("verify-member", str(proof_path), store=env.store)
    assert ok.exit_code == 0 and "is a member of gen1" in ok.output
    proof["case"]["label"] += 1
    del proof["commitment"]
    proof_path.write_text(json.dumps(proof))
    bad = cli("verify-member", str(proof_path), store=env.store)
    assert bad.exit_code == 1, bad.output
    for not_a_file in (tmp_path, tmp_path / "missing.json"):  # the user named something that is no proof file
        wrong = cli("verify-member", str(not_a_file), store=env.store)
        said = "is a folder, not a member proof file" if not_a_file.is_dir() else "no member proof file"
        assert wrong.exit_code == 2 and said in wrong.output, wrong.output



def test_attack_a_member_proof_naming_another_task_than_its_case(env: SimpleNamespace, tmp_path: Path) -> None:
    """The commitment binds the case id, not the ``task`` member the verdict line prints: a genuine proof edited
    to say "pneumoniamnist" (a task gen1 does not have) was reported as a member "(pneumoniamnist, label 3)"
    (red-team round 10). The task is the case id's, and one the generation has."""
    seal(env, "gen1")
    case = openings(env.store, "gen1")[3]
    proof_path = tmp_path / "proof.json"
    assert cli("prove-member", "gen1", case["case_id"], "--out", str(proof_path), store=env.store).exit_code == 0
    proof = json.loads(proof_path.read_text())
    proof["case"]["task"] = "pneumoniamnist"
    proof_path.write_text(json.dumps(proof))
    result = cli("verify-member", str(proof_path), store=env.store)
    assert result.exit_code == 1 and "is not a case of task 'pneumoniamnist'" in result.output, result.output


def test_attack_a_member_proof_stating_another_tree_size(env: SimpleNamespace, tmp_path: Path) -> None:
    """A path through the left subtree leads to the same root under many tree sizes: a genuine proof edited to
    say 120 of gen1's 100 cases verified, and the verdict printed "leaf 0 of 120" (red-team round 14). The size
    is the manifest's number of cases."""
    seal(env, "gen1")
    case = openings(env.store, "gen1")[0]
    proof_path = tmp_path / "proof.json"
    assert cli("prove-member", "gen1", case["case_id"], "--out", str(proof_path), store=env.store).exit_code == 0
    proof = json.loads(proof_path.read_text())
    leaf = proof["leaf_index"]
    proof["tree_size"] = 120 if leaf < 64 else 99
    proof_path.write_text(json.dumps(proof))
    result = cli("verify-member", str(proof_path), store=env.store)
    assert result.exit_code == 1 and "tree_size is not the number of cases gen1 holds" in result.output, result.output


# --- status, states, reopening ----------------------------------------------------------------------------

def test_every_state_change_is_a_ledger_entry_and_survives_reopening(env: SimpleNamespace) -> None:
    seal(env, "gen1")
    seal(env, "gen2", tasks="bloodmnist")
    seal(env, "public", "--data-root", str(env.data))
    assert cli("retire", "gen1", "--reason", "budget", "--reveal", store=env.store).exit_code == 0
    assert [e["type"] for e in ledger_entries(env)] == ["genesis", "pool", "pool", "intent", "seal", "pool",
                                                        "intent", "seal", "seal", "reveal", "retire", "reveal"]
    first = json.loads(cli("status", "--json", store=env.store).output)
    states = {g["generation"]: g["state"] for g in first["generations"]}
    assert states == {"gen1": "retired", "gen2": "current", "public": "current"}
    # Status is derived from the ledger alone: without the published files and the private folder it is
    # the same.
    shutil.rmtree(env.store / "seals")
    shutil.rmtree(env.store / "private" / "generations")
    again = json.loads(cli("status", "--json", store=env.store).output)
    assert again == first
    later = json.loads(cli("status", "--json", "--at", "2027-03-01T00:00:00Z", store=env.store).output)
    assert {g["generation"]: g["state"] for g in later["generations"]} == {
        "gen1": "retired", "gen2": "expired", "public": "expired"}
    assert all(g["due_for_retirement"] for g in later["generations"] if g["state"] == "expired")
    earlier = json.loads(cli("status", "--json", "--at", "2026-08-01", store=env.store).output)
    assert {g["generation"]: g["state"] for g in earlier["generations"]}["gen2"] == "sealed"
    table = cli("status", store=env.store)
    assert table.exit_code == 0 and "gen2" in table.output and "ledger head: size 12" in " ".join(
        table.output.split())


def test_budget_is_charged_from_bundle_entries_and_refused_at_the_boundary(env: SimpleNamespace) -> None:
    seal(env, "gen1", bits="2000")
    st = Store.open(env.store)
    status_before = json.loads(cli("status", "--json", store=env.store).output)
    statement = status_before["generations"][0]["budget"]["statement_bits"]
    now = parse_utc(NOW)
    with open_ledger(st) as ledger:
        signer = ledger_signer(st, ledger)
        for bits in (1000.0, 990.0 - statement):
            check_budget(load_generations(ledger, now), "gen1", bits, now)
            ledger.append({"type": "bundle", "v": 1, "generation": "gen1", "model_id": "m", "task": "bloodmnist",
                           "evaluation_sha256": "c" * 64, "predictions_sha256": "d" * 64,
                           "created_utc": NOW, "leakage_bits": bits}, signer=signer, now=now)
        generations = load_generations(ledger, now)
        check_budget(generations, "gen1", 10.0, now)  # exactly what is left
        with pytest.raises(LapsedError) as caught:
            check_budget(generations, "gen1", 10.5, now)
        assert caught.value.exit_code == 4
    status = json.loads(cli("status", "--json", store=env.store).output)["generations"][0]
    assert {k: status["budget"][k] for k in ("bits", "used", "left")} == {"bits": 2000.0, "used": 1990.0, "left": 10.0}
    assert status["bundles"] == 2 and status["due_for_retirement"]


# --- private access for evaluation and audit ---------------------------------------------------------------

def test_generation_cases_returns_the_sealed_cases_with_their_labels(env: SimpleNamespace) -> None:
    seal(env, "gen1")
    seal(env, "public", "--data-root", str(env.data))
    st = Store.open(env.store)
    cases = generation_cases(st, "gen1", "breastmnist")
    assert cases.case_ids == sorted(c["case_id"] for c in openings(env.store, "gen1") if c["task"] == "breastmnist")
    by_id = {c["case_id"]: c["label"] for c in openings(env.store, "gen1")}
    assert cases.labels.tolist() == [by_id[c] for c in cases.case_ids]
    assert cases.images.shape == (50, 28, 28) and cases.images.dtype == np.uint8
    public = generation_cases(st, "public", "bloodmnist", data_root=env.data)
    with np.load(env.data / "bloodmnist.npz") as official:
        assert np.array_equal(public.images, official["test_images"])
        assert public.labels.tolist() == official["test_labels"][:, 0].tolist()
    # The public reveal records the official order; sealed generations are in case-id order. A third
    # party rebuilds the evaluation's labels from the reveal alone.
    public_reveal = parse_reveal(json.loads((env.store / "seals" / "public.reveal.json").read_text()))
    assert revealed_labels(public_reveal, "bloodmnist")[0] == public.case_ids
    assert revealed_labels(public_reveal, "bloodmnist")[1].tolist() == public.labels.tolist()
    assert cli("retire", "gen1", "--reason", "expired", "--reveal", store=env.store).exit_code == 0
    gen1_reveal = parse_reveal(json.loads((env.store / "seals" / "gen1.reveal.json").read_text()))
    assert revealed_labels(gen1_reveal, "breastmnist")[0] == cases.case_ids
    assert revealed_labels(gen1_reveal, "breastmnist")[1].tolist() == cases.labels.tolist()
    write_npz(env.data / "swapped" / "bloodmnist.npz", shape=(28, 28, 3), classes=8, seed=99)
    with pytest.raises(VerificationError, match="not the sealed public split"):
        generation_cases(st, "public", "bloodmnist", data_root=env.data / "swapped")


def test_a_seal_raced_by_another_writer_is_refused_and_undone(env: SimpleNamespace,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    st = Store.open(env.store)
    original = Ledger.append_batch

    def interleaved(self: Ledger, entries: list, *, signer: Signer, now: datetime,
                    expected_size: int | None = None) -> list[int]:
        # another writer gets in between the seal's reading of the size and its append
        original(self, [{"type": "key", "v": 1, "key": self.genesis["key"], "role": "test",
                         "created_utc": NOW}], signer=signer, now=now)
        monkeypatch.setattr(Ledger, "append_batch", original)
        return original(self, entries, signer=signer, now=now, expected_size=expected_size)

    monkeypatch.setattr(Ledger, "append_batch", interleaved)
    with open_ledger(st) as ledger:
        before = ledger.size
        request = SealRequest(generation="gen1", tasks=("bloodmnist",), per_task=5, budget_bits=5000.0,
                              expiry=parse_utc(EXPIRES))
        with pytest.raises(UsageError, match=r"nothing was (sealed|logged)"):
            seal_generation(st, ledger, ledger_signer(st, ledger), request, parse_utc(NOW))
        assert ledger.size == before + 1  # only the other writer's entry
        assert "gen1" not in load_generations(ledger, parse_utc(NOW))
    assert not (env.store / "seals" / "gen1.seal.json").exists()
    assert not list((env.store / "private" / "generations").glob("*/gen1/*"))
    # and the name is still free: sealing again works
    assert cli("seal", "gen1", "--tasks", "bloodmnist", "--per-task", "5", "--budget-bits", "5000", "--expires",
               EXPIRES, store=env.store).exit_code == 0


def test_a_third_party_verifies_a_reveal_from_a_ledger_export(env: SimpleNamespace, tmp_path: Path) -> None:
    seal(env, "gen1")
    seal(env, "public", "--data-root", str(env.data))
    assert cli("retire", "gen1", "--reason", "expired", "--reveal", "--with-images", store=env.store).exit_code == 0
    export = tmp_path / "export"
    assert cli("ledger", "export", env.ledger_id, str(export), store=env.store).exit_code == 0
    # A stranger's machine: an empty store of their own and the operator's public key given explicitly.
    stranger = tmp_path / "stranger"
    for name in ("gen1", "public"):
        result = cli("verify-reveal", name, "--from", str(export), "--key", env.key, "--json", store=stranger)
        assert result.exit_code == 0, result.output
        verdict = json.loads(result.output)
        assert verdict["ledger_checked"] and verdict["images_checked"] == (name == "gen1")
    # The export's reveal copy must be the one its ledger entry names, even when it is self-consistent.
    doc = json.loads((export / "seals" / "gen1.reveal.json").read_text())
    doc["images"] = None
    (export / "seals" / "gen1.reveal.json").write_bytes(canonical_bytes(doc))
    result = cli("verify-reveal", "gen1", "--from", str(export), "--key", env.key, store=stranger)
    # (named by the check every verifier of a published log runs first: seals/ is what the entries log)
    assert result.exit_code == 1 and "seals/gen1.reveal.json is not the document the ledger logs" in result.output


def test_attack_verify_reveal_refuses_an_export_whose_checkpoint_is_forged(env: SimpleNamespace,
                                                                           tmp_path: Path) -> None:
    """A stranger's export whose reveal and entries are intact but whose checkpoint signature is not the log's:
    verify-reveal replays the published log first, so it refuses rather than trust unsigned entries."""
    seal(env, "gen1")
    assert cli("retire", "gen1", "--reason", "expired", "--reveal", store=env.store).exit_code == 0
    export = tmp_path / "export"
    assert cli("ledger", "export", env.ledger_id, str(export), store=env.store).exit_code == 0
    stranger = tmp_path / "stranger"
    assert cli("verify-reveal", "gen1", "--from", str(export), "--key", env.key, store=stranger).exit_code == 0
    notes = sorted((export / "checkpoints").glob("*.note"))
    text = notes[-1].read_text()
    body, _, signature = text.rpartition("\n\u2014 ")
    line, _, rest = signature.partition(" ")
    raw = bytearray(base64.b64decode(rest.strip()))
    raw[-1] ^= 0x01  # one bit of the Ed25519 signature
    notes[-1].write_text(f"{body}\n\u2014 {line} {base64.b64encode(bytes(raw)).decode()}\n")
    result = cli("verify-reveal", "gen1", "--from", str(export), "--key", env.key, store=stranger)
    assert result.exit_code in (1, 2) and "checkpoint" in result.output.lower(), result.output
