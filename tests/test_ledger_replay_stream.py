"""The streamed replay (ledger.replay): the consistency proofs it assembles from its compact range are the RFC's,
it holds no state that grows with the log, it reads entries, nodes and checkpoints as streams, and it refuses a
database whose stored tree nodes are missing, extra or out of place; the compact range agrees with the
reference tree at every size."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger.replay as replay_module
from keys import Signer
from ledger import Ledger, LedgerIntegrityError
from ledger.checkpoint import sign_checkpoint
from ledger.entries import encode_entry, ledger_id_of, make_genesis, origin_of
from ledger.replay import CheckpointClaim, locate_damage, replay
from ledger.rfc6962 import leaf_hash, reference_consistency_proof, reference_root
from ledger.tree import CompactRange
from tests.test_ledger_attacks import tamper_database
from tests.test_ledger_support import T0, bundle_entry, ledger_signer, new_ledger


def signed_log(signer: Signer, count: int) -> list[bytes]:
    """Entry bytes of a log of ``count`` entries (genesis first), without a database."""
    genesis = make_genesis(name="stream", signer=signer, now=T0, nonce=bytes(32))
    return [encode_entry(genesis, index=0)[1]] + [encode_entry(bundle_entry(i))[1] for i in range(1, count)]


def claims_for(entries: list[bytes], sizes: list[int], signer: Signer) -> list[CheckpointClaim]:
    origin = origin_of(ledger_id_of(entries[0]))
    leaves = [leaf_hash(data) for data in entries]
    return [CheckpointClaim(size, sign_checkpoint(origin, size, reference_root(leaves[:size]), signer,
                                                  created_utc="2026-03-01T12:00:00Z").note) for size in sizes]


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_streamed_consistency_proofs_are_the_rfc_proofs(data: st.DataObject) -> None:
    signer = ledger_signer()
    count = data.draw(st.integers(min_value=1, max_value=70))
    sizes = sorted(data.draw(st.sets(st.integers(min_value=1, max_value=count - 1), max_size=8)) | {count}) \
        if count > 1 else [1]
    entries = signed_log(signer, count)
    seen: list[tuple[int, int, list[bytes]]] = []
    real = replay_module.verify_consistency

    def spy(old: int, new: int, old_root: bytes, new_root: bytes, proof: list[bytes]) -> None:
        seen.append((old, new, list(proof)))
        real(old, new, old_root, new_root, proof)

    replay_module.verify_consistency = spy  # type: ignore[assignment]
    try:
        report = replay(((e, None) for e in entries), count, iter(claims_for(entries, sizes, signer)))
    finally:
        replay_module.verify_consistency = real
    leaves = [leaf_hash(e) for e in entries]
    assert report.size == count and report.checkpoints == len(sizes)
    assert report.root == reference_root(leaves)
    assert [(old, new) for old, new, _ in seen] == list(pairwise(sizes))
    for old, new, proof in seen:
        assert proof == reference_consistency_proof(old, leaves[:new])


@given(st.integers(min_value=0, max_value=300))
def test_compact_range_root_and_frontier_at_every_size(size: int) -> None:
    leaves = [leaf_hash(i.to_bytes(4, "big")) for i in range(size)]
    tree = CompactRange()
    for leaf in leaves[: size // 2]:
        tree.push(leaf)
    tree.extend(leaves[size // 2:], keep_level=1)
    assert tree.size == size and tree.root() == reference_root(leaves)
    assert CompactRange.of(tree.frontier()).root() == tree.root()
    assert len(tree.hashes) == size.bit_count()


def test_a_forged_intermediate_checkpoint_is_refused_in_the_stream() -> None:
    signer, other = ledger_signer(), Signer.from_seed(bytes([9]) * 32, name="ledger-operator", key_id="ledger-op")
    entries = signed_log(signer, 12)
    claims = claims_for(entries, [1, 5, 12], signer)
    claims[1] = claims_for(entries, [5], other)[0]  # same name and key id, another key
    with pytest.raises(LedgerIntegrityError, match="checkpoint 5") as caught:
        replay(((e, None) for e in entries), 12, claims)
    assert caught.value.evidence["checkpoint"] == 5


def test_replay_reads_its_inputs_as_streams() -> None:
    """Entries and claims are consumed once, lazily: the replay never asks for a length or a second pass."""
    signer = ledger_signer()
    entries = signed_log(signer, 40)
    pulled: list[int] = []

    def stream() -> Iterator[tuple[bytes, None]]:
        for index, data in enumerate(entries):
            pulled.append(index)
            yield data, None

    report = replay(stream(), 40, iter(claims_for(entries, [1, 17, 40], signer)))
    assert report.size == 40 and pulled == list(range(40))


def test_locate_damage_names_the_entries_between_the_last_good_and_first_bad_checkpoint() -> None:
    signer = ledger_signer()
    entries = signed_log(signer, 30)
    claims = claims_for(entries, [1, 10, 20, 30], signer)
    checkpoints = [replay_module.verify_checkpoint(c.note, name=signer.name, key=signer.public_key,
                                                   origin=origin_of(ledger_id_of(entries[0]))) for c in claims]
    entries[14] = encode_entry(bundle_entry(999))[1]
    key = replay_module.genesis_key(replay_module.decode_entry(entries[0], index=0))
    verified, damaged = locate_damage(iter(entries), iter(checkpoints), key, origin_of(ledger_id_of(entries[0])))
    assert verified == {1, 10, 20, 30} and damaged == (10, 19)


def _peak_during_verify(path: Path) -> int:
    with Ledger.open(path, read_only=True) as opened:
        tracemalloc.start()
        try:
            opened.verify()
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()


def _bulk(folder: Path, size: int) -> Path:
    signer = ledger_signer()
    with new_ledger(folder) as ledger:
        while ledger.size < size:
            count = min(997, size - ledger.size)
            ledger._append_encoded([encode_entry(bundle_entry(ledger.size + k))
                                    for k in range(count)], signer=signer, now=T0)
        assert ledger.path is not None
        return ledger.path


def test_verify_memory_does_not_grow_with_the_log(tmp_path: Path) -> None:
    """Python memory the verify allocates (tracemalloc's peak) is the same for 2,000 and 20,000 entries: no
    per-entry map or list of leaf hashes (the replay before streaming held 64 bytes a leaf, 1.2 MB more here)."""
    small = _peak_during_verify(_bulk(tmp_path / "small", 2_000))
    large = _peak_during_verify(_bulk(tmp_path / "large", 20_000))
    assert large < small + 256 * 1024, (small, large)


@pytest.mark.parametrize(("statement", "match"), [
    ("INSERT INTO nodes (level, idx, hash) VALUES (2, 0, zeroblob(32))", "tree node the entries do not make"),
    ("INSERT INTO nodes (level, idx, hash) VALUES (5, 1, zeroblob(32))", "beyond the entries"),
    ("DELETE FROM nodes WHERE level = 4 AND idx = 1", "tree nodes are missing"),
])
def test_attack_stored_tree_nodes_out_of_place_extra_or_deleted(tmp_path: Path, statement: str, match: str) -> None:
    """A node below the stored levels, one past the entries, one deleted: each is named by the streamed check."""
    with new_ledger(tmp_path, entries=40, batch=7) as ledger:
        tamper_database(ledger, "DROP TRIGGER IF EXISTS nodes_write_once", statement)
        with pytest.raises(LedgerIntegrityError, match=match):
            ledger.verify()


def test_many_checkpoints_and_cosignature_free_ledger_verifies(tmp_path: Path) -> None:
    """One checkpoint per append (the most a log can have): every one checked in the stream."""
    signer = ledger_signer()
    with new_ledger(tmp_path) as ledger:
        for i in range(1, 60):
            ledger.append(bundle_entry(i), signer=signer, now=T0)
        report = ledger.verify()
    assert report.size == 60 and report.checkpoints == 60
