"""Commit-then-draw (issue 10 section 2): the operator cannot choose the draw, and a retried or cooked draw shows.

Attack tests: a seal draw retried (the audit names both intents), a draw that is not the one the seed selects
(verify-reveal and the audit refuse it, naming the draw), and a manifest whose draw record disagrees with its
logged intent.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from heldout.generations import SealRequest, ledger_signer, open_ledger
from heldout.generations import seal as seal_module
from heldout.generations.draw import derive_seed, draw_positions, seed_material
from heldout.store import Store
from seals import parse_utc
from tests.conftest import seeded_signer
from tests.generations_support import EXPIRES, NOW, cli, store_with_pools


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    monkeypatch.setenv("HELDOUT_NOW", NOW)
    store, ledger_id, _ = store_with_pools(tmp_path, ("bloodmnist",))
    return SimpleNamespace(store=store, ledger_id=ledger_id, key=seeded_signer(1).public_key.b64)


def log_an_intent(env: SimpleNamespace, name: str) -> int:
    """The dishonest operator's own program: commit the pool and log a seal intent for ``name``, then look at
    the draw privately; returns the intent's index."""
    st = Store.open(env.store)
    with open_ledger(st) as ledger:
        request = SealRequest(generation=name, tasks=("bloodmnist",), per_task=20, budget_bits=10.0,
                              expiry=parse_utc(EXPIRES))
        candidates = seal_module._candidates(st, ledger, request, ("bloodmnist",), {})
        index, _ = seal_module._commit_and_intend(ledger, ledger_signer(st, ledger), request, name, candidates,
                                                  seal_module.ReleasePolicy(), parse_utc(NOW))
    return index


def seal(env: SimpleNamespace, name: str, per_task: int = 20) -> dict[str, Any]:
    result = cli("seal", name, "--tasks", "bloodmnist", "--per-task", str(per_task), "--budget-bits", "5000",
                 "--expires", EXPIRES, "--json", store=env.store)
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.output))


def audit_findings(env: SimpleNamespace) -> list[dict[str, Any]]:
    result = cli("audit", env.ledger_id, "--json", store=env.store)
    return list(json.loads(result.output)["findings"])


# --- the draw algorithm ----------------------------------------------------------------------------------------

@settings(max_examples=80, deadline=None)
@given(seed=st.binary(min_size=32, max_size=32), size=st.integers(1, 300), data=st.data())
def test_the_draw_is_k_distinct_sorted_positions_determined_by_seed_and_task(seed: bytes, size: int,
                                                                            data: st.DataObject) -> None:
    count = data.draw(st.integers(1, size))
    positions = draw_positions(seed, "bloodmnist", size, count)
    assert positions == sorted(set(positions)) and len(positions) == count
    assert all(0 <= p < size for p in positions)
    assert positions == draw_positions(seed, "bloodmnist", size, count)
    if count == size:
        assert positions == list(range(size))


def test_the_seed_depends_on_every_byte_of_its_material_and_on_its_source() -> None:
    root = bytes(range(32))
    seeds = {derive_seed("checkpoint-root", seed_material("checkpoint-root", root=root))}
    for i in range(32):
        flipped = bytearray(root)
        flipped[i] ^= 1
        seeds.add(derive_seed("checkpoint-root", bytes(flipped)))
    seeds.add(derive_seed("witness-cosignatures", root))
    assert len(seeds) == 34
    # cosignature order does not matter (sorted), their content does
    a = seed_material("witness-cosignatures", cosignatures=["— w1 AAAA", "— w2 BBBB"])
    assert a == seed_material("witness-cosignatures", cosignatures=["— w2 BBBB", "— w1 AAAA"])
    assert a != seed_material("witness-cosignatures", cosignatures=["— w1 AAAA", "— w2 BBBC"])


# --- the seal logs pools and an intent before it draws ---------------------------------------------------------

def test_a_sealed_draw_is_the_one_the_logged_checkpoint_selects_and_verifies_at_reveal(env: SimpleNamespace) -> None:
    out = seal(env, "gen1")
    st = Store.open(env.store)
    manifest = json.loads((st.seals / "gen1.seal.json").read_text())
    draw = manifest["draw"]
    with open_ledger(st) as ledger:
        checkpoint = ledger.checkpoint_at(draw["intent_index"] + 1)
        assert checkpoint is not None and checkpoint.note == draw["checkpoint"]["note"]
        pool = ledger.entry(draw["pools"]["bloodmnist"]["index"])
    assert pool["type"] == "pool" and pool["pool_size"] == 200 and out["seal_index"] == draw["intent_index"] + 1
    expected = derive_seed("checkpoint-root", seed_material("checkpoint-root", root=checkpoint.root))
    assert draw["seed"] == expected.hex()
    assert cli("retire", "gen1", "--reason", "expired", "--reveal", store=env.store).exit_code == 0
    result = cli("verify-reveal", "gen1", "--key", env.key, store=env.store)
    assert result.exit_code == 0, result.output
    reveal = json.loads((st.seals / "gen1.reveal.json").read_text())
    assert len(reveal["pools"]["bloodmnist"]) == 200  # the committed pool, salted: undrawn cases stay hidden
    assert not [f for f in audit_findings(env)]


# --- attacks ---------------------------------------------------------------------------------------------------

def test_attack_a_retried_draw_is_reported_naming_both_intents(env: SimpleNamespace) -> None:
    """The dishonest operator commits and draws gen1, dislikes the draw, and seals gen1 again for another."""
    first = log_an_intent(env, "gen1")
    st = Store.open(env.store)
    # the retry: a second intent (the first one's pending draw is not in the store), the draw it gives is sealed
    refused = cli("seal", "gen1", "--tasks", "bloodmnist", "--per-task", "20", "--budget-bits", "5000",
                  "--expires", EXPIRES, store=env.store)
    assert refused.exit_code == 2 and "--retry-draw" in refused.output
    retried = cli("seal", "gen1", "--tasks", "bloodmnist", "--per-task", "20", "--budget-bits", "5000",
                  "--expires", EXPIRES, "--retry-draw", store=env.store)
    assert retried.exit_code == 0, retried.output
    findings = [f for f in audit_findings(env) if f["check"] == "draw"]
    assert len(findings) == 1
    second = json.loads((st.seals / "gen1.seal.json").read_text())["draw"]["intent_index"]
    assert f"entries {first}, {second}" in findings[0]["message"] and "retried" in findings[0]["message"]
    assert findings[0]["index"] == second


def test_attack_an_abandoned_draw_under_another_name_is_reported(env: SimpleNamespace) -> None:
    abandoned = log_an_intent(env, "gen1")
    seal(env, "gen2")
    findings = [f for f in audit_findings(env) if f["check"] == "draw"]
    assert [f["index"] for f in findings] == [abandoned] and "never sealed" in findings[0]["message"]


def test_attack_a_draw_not_matching_the_seed_is_refused_at_reveal(env: SimpleNamespace,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator seals the cases it likes (the first of the pool) instead of those the seed selects."""
    def cherry_pick(seed: bytes, pools: Any, counts: Any) -> list[Any]:
        return [case for task in sorted(pools) for case in pools[task][:counts[task]]]

    monkeypatch.setattr(seal_module, "draw_cases", cherry_pick)
    seal(env, "gen1")
    monkeypatch.undo()
    # the operator's own audit sees it while gen1 is still sealed (from the private opening's committed pool)
    sealed = [f for f in audit_findings(env) if f["check"] == "draw"]
    assert len(sealed) == 1 and "does not match the seed" in sealed[0]["message"]
    # retire --reveal runs the reveal's checks first: it refuses to log this reveal, and writes nothing
    refused = cli("retire", "gen1", "--reason", "expired", "--reveal", store=env.store)
    assert refused.exit_code == 1 and "does not match the seed" in refused.output, refused.output
    # the operator's own tooling, without that check, logs it anyway: every verifier refuses it
    import heldout.generations.retire as retire_module
    monkeypatch.setattr(retire_module, "verify_reveal", lambda *args, **kwargs: None)
    assert cli("retire", "gen1", "--reason", "expired", "--reveal", store=env.store).exit_code == 0
    monkeypatch.undo()
    result = cli("verify-reveal", "gen1", "--key", env.key, store=env.store)
    assert result.exit_code == 1
    assert "not one the draw's seed selects" in result.output and "does not match the seed" in result.output
    findings = audit_findings(env)
    assert any(f["check"] == "reveal" and "does not match the seed" in f["message"] for f in findings)


def test_attack_a_manifest_whose_draw_disagrees_with_its_intent_is_refused(env: SimpleNamespace,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The manifest claims a larger expiry than the intent committed to (the intent binds it before the draw)."""
    original = seal_module._commit_and_intend

    def early_intent(ledger: Any, signer: Any, request: SealRequest, *args: Any) -> Any:
        return original(ledger, signer, SealRequest(**{**request.__dict__,
                                                        "expiry": datetime(2026, 12, 1)}), *args)

    monkeypatch.setattr(seal_module, "_commit_and_intend", early_intent)
    seal(env, "gen1")
    monkeypatch.undo()
    findings = [f for f in audit_findings(env) if f["check"] == "seal"]
    assert findings and "disagrees with its intent entry" in findings[0]["message"]
    assert findings[0]["evidence"]["field"] == "expiry_utc"


@settings(max_examples=60, deadline=None)
@given(seed=st.binary(min_size=32, max_size=32), size=st.integers(1, 2000), data=st.data())
def test_the_independent_replay_draws_the_same_positions(seed: bytes, size: int, data: st.DataObject) -> None:
    """tests/independent/replay.py implements heldout-draw-v1 from FORMATS.md alone: both must agree."""
    from tests.independent.replay import draw_positions as documented_draw
    from tests.independent.replay import draw_seed

    count = data.draw(st.integers(1, min(size, 300)))
    assert documented_draw(seed, "breastmnist", size, count) == draw_positions(seed, "breastmnist", size, count)
    assert draw_seed("checkpoint-root", seed) == derive_seed("checkpoint-root", seed)
