"""ledger.verify: every public RFC 6962/9162 probe (happy paths accepted, every mutation rejected), the rule
for size 0, and property tests against the RFC's reference recursions."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger import ProofError, root_from_inclusion_proof, verify_consistency, verify_inclusion
from ledger.rfc6962 import (
    EMPTY_ROOT,
    leaf_hash,
    reference_consistency_proof,
    reference_inclusion_path,
    reference_root,
)
from tests.test_ledger_support import load_vector, unb64, vector_files


def _proof(value: list[str] | None) -> list[bytes]:
    return [unb64(item) for item in value or []]


def _run_inclusion(probe: dict) -> None:
    verify_inclusion(probe["leafIdx"], probe["treeSize"], unb64(probe["leafHash"]), _proof(probe["proof"]),
                     unb64(probe["root"]))


def _run_consistency(probe: dict) -> None:
    verify_consistency(probe["size1"], probe["size2"], unb64(probe["root1"]), unb64(probe["root2"]),
                       _proof(probe["proof"]))


@pytest.mark.parametrize("path", list(vector_files("inclusion")), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_inclusion_vector(path: Path) -> None:
    probe = load_vector(path)
    if probe["wantErr"]:
        with pytest.raises(ProofError):
            _run_inclusion(probe)
    else:
        _run_inclusion(probe)  # raises on failure


@pytest.mark.parametrize("path", list(vector_files("consistency")), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_consistency_vector(path: Path) -> None:
    probe = load_vector(path)
    if probe["wantErr"]:
        with pytest.raises(ProofError):
            _run_consistency(probe)
    else:
        _run_consistency(probe)


def test_vectors_include_happy_paths_and_mutations() -> None:
    probes = [load_vector(p) for p in [*vector_files("inclusion"), *vector_files("consistency")]]
    assert sum(not p["wantErr"] for p in probes) >= 10
    assert sum(p["wantErr"] for p in probes) >= 150


# --- the rule for size 0 (module docstring of ledger.verify) -------------------------------------------------

def test_size0_to_size0_with_empty_root_and_empty_proof_is_accepted() -> None:
    verify_consistency(0, 0, EMPTY_ROOT, EMPTY_ROOT, [])


def test_size0_with_another_root_is_refused() -> None:
    other = hashlib.sha256(b"not empty").digest()
    with pytest.raises(ProofError, match="empty tree"):
        verify_consistency(0, 0, other, other, [])


def test_size0_to_larger_is_refused_even_with_the_right_roots() -> None:
    leaf = leaf_hash(b"entry")
    with pytest.raises(ProofError, match="empty tree"):
        verify_consistency(0, 1, EMPTY_ROOT, leaf, [])
    with pytest.raises(ProofError):
        verify_consistency(0, 1, EMPTY_ROOT, leaf, [leaf])


def test_inclusion_in_the_empty_tree_is_refused() -> None:
    with pytest.raises(ProofError, match="outside"):
        verify_inclusion(0, 0, leaf_hash(b"x"), [], EMPTY_ROOT)


def test_negative_and_non_integer_sizes_are_refused() -> None:
    leaf = leaf_hash(b"x")
    with pytest.raises(ProofError):
        verify_inclusion(-1, 1, leaf, [], leaf)
    with pytest.raises(ProofError):
        verify_consistency(True, 1, leaf, leaf, [])


def test_proof_elements_must_be_32_bytes() -> None:
    leaves = [leaf_hash(bytes([i])) for i in range(2)]
    with pytest.raises(ProofError, match="32-byte"):
        verify_inclusion(0, 2, leaves[0], [leaves[1][:31]], reference_root(leaves))


# --- properties against the RFC reference recursions ---------------------------------------------------------

@st.composite
def tree_and_index(draw: st.DrawFn) -> tuple[list[bytes], int]:
    size = draw(st.integers(min_value=1, max_value=70))
    leaves = [leaf_hash(draw(st.binary(max_size=8)) + bytes([i])) for i in range(size)]
    return leaves, draw(st.integers(min_value=0, max_value=size - 1))


@settings(max_examples=150, deadline=None)
@given(tree_and_index())
def test_reference_inclusion_paths_verify(case: tuple[list[bytes], int]) -> None:
    leaves, index = case
    root = reference_root(leaves)
    path = reference_inclusion_path(index, leaves)
    assert root_from_inclusion_proof(index, len(leaves), leaves[index], path) == root
    verify_inclusion(index, len(leaves), leaves[index], path, root)


@settings(max_examples=150, deadline=None)
@given(tree_and_index(), st.integers(min_value=0, max_value=10_000), st.integers(min_value=0, max_value=255))
def test_any_single_bit_flip_in_an_inclusion_proof_is_rejected(case: tuple[list[bytes], int], where: int,
                                                              bit: int) -> None:
    leaves, index = case
    path = reference_inclusion_path(index, leaves)
    root = reference_root(leaves)
    if not path:
        with pytest.raises(ProofError):
            verify_inclusion(index, len(leaves), leaves[index], [leaves[index]], root)  # padded proof
        return
    position = where % len(path)
    flipped = bytearray(path[position])
    flipped[bit % 32] ^= 1 << (bit % 8)
    bad = [*path[:position], bytes(flipped), *path[position + 1:]]
    with pytest.raises(ProofError):
        verify_inclusion(index, len(leaves), leaves[index], bad, root)
    other = index + 1 if index + 1 < len(leaves) else index - 1
    with pytest.raises(ProofError):  # the same proof cannot place the leaf at another index
        verify_inclusion(other, len(leaves), leaves[index], path, root)


@settings(max_examples=150, deadline=None)
@given(tree_and_index(), st.integers(min_value=0, max_value=10_000))
def test_reference_consistency_proofs_verify_and_truncation_is_rejected(case: tuple[list[bytes], int],
                                                                        salt: int) -> None:
    leaves, _ = case
    new = len(leaves)
    old = 1 + salt % new
    proof = reference_consistency_proof(old, leaves)
    old_root, new_root = reference_root(leaves[:old]), reference_root(leaves)
    verify_consistency(old, new, old_root, new_root, proof)
    if proof:
        with pytest.raises(ProofError):
            verify_consistency(old, new, old_root, new_root, proof[:-1])
        with pytest.raises(ProofError):
            verify_consistency(old, new, old_root, new_root, [*proof, proof[0]])
    if old < new:
        with pytest.raises(ProofError):
            verify_consistency(old, new, new_root, old_root, proof)  # swapped roots
