"""Content hashes, case ids, commitments, the set hash and membership proofs, recomputed from their
documented definitions with hashlib (not with the code under test)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from heldout.generations.cases import case_id, content_sha256, public_case_ids, read_split
from heldout.generations.commitments import MemberProof, commitment, inclusion_path, set_hash
from heldout.generations.reveal import CaseOpening, build_reveal, parse_reveal, verify_reveal
from keys import UsageError, VerificationError
from ledger.rfc6962 import reference_root
from seals.manifest import LeakageBudget, ReleasePolicy, SealManifest, TaskCount
from tests.generations_support import write_npz


def rfc6962_root(leaf_data: list[bytes]) -> bytes:
    """MTH written out independently (RFC 6962 section 2.1)."""
    if len(leaf_data) == 1:
        return hashlib.sha256(b"\x00" + leaf_data[0]).digest()
    k = 1
    while k * 2 < len(leaf_data):
        k *= 2
    return hashlib.sha256(b"\x01" + rfc6962_root(leaf_data[:k]) + rfc6962_root(leaf_data[k:])).digest()


def test_content_hash_follows_its_documented_definition() -> None:
    image = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    header = b'{"dtype":"uint8","label":5,"scheme":"heldout-case-v1","shape":[2,3,3]}'
    expected = hashlib.sha256(header + b"\n" + image.tobytes()).hexdigest()
    assert content_sha256(image, 5) == expected
    assert case_id("bloodmnist", expected) == f"bloodmnist-{expected[:16]}"
    # The label, the shape and every pixel are covered.
    assert content_sha256(image, 4) != expected
    assert content_sha256(image.reshape(3, 2, 3), 5) != expected
    changed = image.copy()
    changed[1, 2, 2] ^= 1
    assert content_sha256(changed, 5) != expected


def test_public_case_ids_number_repeated_cases() -> None:
    hashes = ["a" * 64, "b" * 64, "a" * 64, "a" * 64]
    ids = public_case_ids("t", hashes)
    assert ids == ["t-" + "a" * 16, "t-" + "b" * 16, "t-" + "a" * 16 + "-2", "t-" + "a" * 16 + "-3"]


def test_commitment_follows_its_documented_definition() -> None:
    salt = bytes(range(32))
    payload = json.dumps({"case_id": "t-0123456789abcdef", "content_sha256": "c" * 64, "label": 3},
                         separators=(",", ":"), sort_keys=True).encode()
    assert commitment(salt, "t-0123456789abcdef", "c" * 64, 3) == hashlib.sha256(salt + payload).digest()
    assert commitment(b"", "t-0123456789abcdef", "c" * 64, 3) == hashlib.sha256(payload).digest()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.binary(min_size=32, max_size=32), min_size=1, max_size=70, unique=True))
def test_set_hash_is_the_rfc6962_root_of_the_sorted_commitments(commitments: list[bytes]) -> None:
    expected = rfc6962_root(sorted(commitments)).hex()
    assert set_hash(commitments) == expected
    assert set_hash(list(reversed(commitments))) == expected  # order of the input does not matter


@settings(max_examples=40, deadline=None)
@given(st.lists(st.binary(min_size=32, max_size=32), min_size=1, max_size=70, unique=True), st.data())
def test_membership_proofs_verify_for_every_leaf_and_fail_when_changed(commitments: list[bytes],
                                                                      data: st.DataObject) -> None:
    root = set_hash(commitments)
    target = data.draw(st.sampled_from(commitments))
    index, path = inclusion_path(commitments, target)
    assert sorted(commitments)[index] == target
    # The set tree is the ledger's tree shape: the reference recursion gives the same root.
    assert reference_root([hashlib.sha256(b"\x00" + c).digest() for c in sorted(commitments)]).hex() == root
    if path:
        bad = list(path)
        bad[0] = bytes([bad[0][0] ^ 1]) + bad[0][1:]
        from ledger import root_from_inclusion_proof
        from ledger.rfc6962 import leaf_hash
        assert root_from_inclusion_proof(index, len(commitments), leaf_hash(target), bad).hex() != root


def _manifest_for(openings: list[CaseOpening], generation: str = "gen1") -> tuple[SealManifest, dict]:
    """A manifest and reveal drawn as a seal draws: each task's pool is its cases in ``openings`` plus as many
    others, committed, and the seed (from a checkpoint signed by a fixed key) selects as many as ``openings``
    has of the task. The reveal therefore lists ``len(openings)`` cases."""
    from datetime import UTC, datetime

    from heldout.generations.draw import DrawRecord, PoolRef, derive_seed, draw_cases, seed_material
    from ledger.checkpoint import sign_checkpoint
    from tests.conftest import seeded_signer

    counts: dict[str, int] = {}
    for o in openings:
        counts[o.task] = counts.get(o.task, 0) + 1
    extra = random_openings(2 * len(openings) + 2, seed=len(openings) + 1000)
    pools = {task: sorted([o for o in openings if o.task == task] + [o for o in extra if o.task == task][:n],
                          key=lambda o: o.commitment) for task, n in counts.items()}
    refs = {task: PoolRef(1 + i, set_hash([o.commitment for o in pool]), len(pool))
            for i, (task, pool) in enumerate(sorted(pools.items()))}
    intent = 1 + len(refs)
    note = sign_checkpoint("heldout/ledger/" + "0" * 20, intent + 1, hashlib.sha256(b"root").digest(),
                           seeded_signer(1)).note
    seed = derive_seed("checkpoint-root", seed_material("checkpoint-root", root=hashlib.sha256(b"root").digest()))
    drawn = draw_cases(seed, pools, counts)
    draw = DrawRecord(seed_source="checkpoint-root", intent_index=intent, pools=refs, checkpoint_size=intent + 1,
                      checkpoint_note=note, cosignatures=(), seed=seed.hex())
    doc = build_reveal(generation=generation, ledger_id="0" * 20, manifest_sha256="e" * 64, membership="sealed",
                       openings=drawn, pools={task: [o.commitment for o in pool] for task, pool in pools.items()})
    manifest = SealManifest(
        generation=generation, membership="sealed", tasks=tuple(TaskCount(t, n) for t, n in sorted(counts.items())),
        set_hash=doc["set_hash"], created=datetime(2026, 1, 1, tzinfo=UTC), expiry=datetime(2027, 1, 1, tzinfo=UTC),
        leakage_budget=_budget_of(drawn, counts),
        release=ReleasePolicy(), seed=None, predecessor=None, ledger_id="0" * 20, entry_index=intent + 1,
        draw=draw.to_json())
    return manifest, doc


def _budget_of(openings: list[CaseOpening], counts: dict[str, int]) -> LeakageBudget:
    """An explicit 10-bit budget with what its rule gives on these cases' labels (every verifier recomputes it)."""
    from heldout.generations.budget import TaskShape, budget_record, weakest

    shapes = [TaskShape.from_labels(task, [o.label for o in openings if o.task == task], 8 if task == "bloodmnist"
                                    else 2) for task in sorted(counts)]
    return budget_record(mode="full", weak=weakest(shapes), n=min(counts.values()), n_tasks=len(counts),
                         counts=[counts[task] for task in sorted(counts)], k=1, delta=0.05, eps=None, bits=10.0)


def random_openings(n: int, seed: int = 0) -> list[CaseOpening]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        h = hashlib.sha256(f"case {seed} {i}".encode()).hexdigest()
        task = "bloodmnist" if i % 3 else "breastmnist"
        classes = 8 if task == "bloodmnist" else 2
        out.append(CaseOpening(case_id=case_id(task, h), task=task, content_sha256=h,
                               label=int(rng.integers(0, classes)), salt=os.urandom(32)))
    return out


def mutate(case: dict, field: str) -> None:
    if field == "case_id":
        case["case_id"] = case["case_id"][:-1] + ("0" if case["case_id"][-1] != "0" else "1")
    elif field == "content_sha256":
        case["content_sha256"] = case["content_sha256"][:-1] + ("0" if case["content_sha256"][-1] != "0" else "1")
    elif field == "label":
        case["label"] += 1
    elif field == "salt":
        case["salt"] = ("0" if case["salt"][0] != "0" else "1") + case["salt"][1:]
    elif field == "commitment":
        case["commitment"] = ("0" if case["commitment"][0] != "0" else "1") + case["commitment"][1:]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 40), position=st.integers(0, 10**6),
       field=st.sampled_from(["case_id", "content_sha256", "label", "salt", "commitment"]))
def test_any_changed_case_field_fails_the_reveal_and_names_the_case(n: int, position: int, field: str) -> None:
    manifest, doc = _manifest_for(random_openings(n, seed=n))
    verify_reveal(doc, manifest, manifest_sha256="e" * 64)
    i = position % n
    tampered = json.loads(json.dumps(doc))
    mutate(tampered["cases"][i], field)
    with pytest.raises(VerificationError) as caught:
        verify_reveal(tampered, manifest)
    assert caught.value.evidence.get("index") == i
    assert f"case #{i} {tampered['cases'][i]['case_id']}" in caught.value.message


def test_reveal_refuses_reordered_dropped_or_added_cases() -> None:
    manifest, doc = _manifest_for(random_openings(12))
    swapped = json.loads(json.dumps(doc))
    swapped["cases"][3], swapped["cases"][4] = swapped["cases"][4], swapped["cases"][3]
    with pytest.raises(VerificationError, match="leaf order"):
        verify_reveal(swapped, manifest)
    dropped = json.loads(json.dumps(doc))
    dropped["cases"].pop(5)
    dropped["n_cases"] -= 1
    with pytest.raises(VerificationError, match="counts per task"):
        verify_reveal(dropped, manifest)
    other_manifest, _ = _manifest_for(random_openings(12, seed=99))
    with pytest.raises(VerificationError, match="set_hash"):
        verify_reveal(doc, other_manifest)


def test_member_proof_round_trip_and_tamper() -> None:
    openings = random_openings(25)
    manifest, doc = _manifest_for(openings)
    reveal = parse_reveal(doc)
    target = reveal.openings[7]
    index, path = inclusion_path(list(reveal.listed_commitments), target.commitment)
    proof = MemberProof(generation="gen1", set_hash=manifest.set_hash, case_id=target.case_id, task=target.task,
                        content_sha256=target.content_sha256, label=target.label, salt=target.salt, leaf_index=index,
                        tree_size=25, path=tuple(path))
    parsed = MemberProof.from_json(json.loads(json.dumps(proof.to_json())))
    parsed.verify(manifest.set_hash)
    body = proof.to_json()
    body["case"]["label"] += 1
    with pytest.raises(VerificationError):
        MemberProof.from_json(body)  # the listed commitment no longer opens
    del body["commitment"]
    with pytest.raises(VerificationError):
        MemberProof.from_json(body).verify(manifest.set_hash)


def test_read_split_accepts_the_medmnist_layout_and_refuses_others(tmp_path: Path) -> None:
    path = write_npz(tmp_path / "t.npz", n_test=5, shape=(6, 6, 3))
    split = read_split(path, "test")
    assert split.images.shape == (5, 6, 6, 3) and split.labels.shape == (5,)
    # the file is the operator's own input: anything wrong with it is bad input (exit 2), not tampering
    np.savez(tmp_path / "bad.npz", test_images=np.zeros((3, 4, 4), dtype=np.float32), test_labels=np.zeros((3, 1)))
    with pytest.raises(UsageError, match="uint8"):
        read_split(tmp_path / "bad.npz", "test")
    np.savez(tmp_path / "multi.npz", test_images=np.zeros((3, 4, 4), dtype=np.uint8),
             test_labels=np.zeros((3, 14), dtype=np.uint8))
    with pytest.raises(UsageError, match="multi-label"):
        read_split(tmp_path / "multi.npz", "test")
    with pytest.raises(UsageError, match="val_images"):
        np.savez(tmp_path / "nosplit.npz", test_images=np.zeros((3, 4, 4), dtype=np.uint8),
                 test_labels=np.zeros((3, 1), dtype=np.uint8))
        read_split(tmp_path / "nosplit.npz", "val")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(UsageError):
        read_split(tmp_path / "junk.npz", "test")
    with pytest.raises(UsageError):
        read_split(path, "holdout")
