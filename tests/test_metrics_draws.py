"""MedEval-1 v0.2's random draws (docs/MEDEVAL-1.2.md, "Random draws"): the document is enough to reimplement
them. This file reimplements SeedSequence, PCG64 and the three draw algorithms in plain Python integers from
the document's text alone and requires the same words and the same draws as harness.metrics.draws; and the
algorithms' edge cases (rejection, power-of-two bounds, stratification) are checked with crafted words."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.metrics import draws
from harness.metrics.evaluation_v02 import bootstrap_weights, subset_indices
from keys.errors import MalformedInput

M32 = 0xFFFFFFFF
M64 = (1 << 64) - 1
M128 = (1 << 128) - 1
INIT_A, MULT_A, INIT_B, MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
MIX_MULT_L, MIX_MULT_R = 0xCA01F9DD, 0x4973F715
PCG_MULTIPLIER = 0x2360ED051FC65DA44385DF649FCCF645


def words32(value: int) -> list[int]:
    out = [value & M32]
    value >>= 32
    while value:
        out.append(value & M32)
        value >>= 32
    return out


class Hasher:
    def __init__(self, constant: int, multiplier: int) -> None:
        self.constant, self.multiplier = constant, multiplier

    def __call__(self, value: int) -> int:
        value = (value ^ self.constant) & M32
        self.constant = (self.constant * self.multiplier) & M32
        value = (value * self.constant) & M32
        return value ^ (value >> 16)


def mix(x: int, y: int) -> int:
    result = (MIX_MULT_L * x - MIX_MULT_R * y) & M32
    return result ^ (result >> 16)


def seed_sequence_state(seed: int, spawn_key: tuple[int, ...], n_words64: int) -> list[int]:
    entropy = words32(seed)
    spawn = [w for key in spawn_key for w in words32(key)]
    if spawn and len(entropy) < 4:
        entropy += [0] * (4 - len(entropy))
    entropy += spawn
    hash_a = Hasher(INIT_A, MULT_A)
    pool = [hash_a(entropy[i] if i < len(entropy) else 0) for i in range(4)]
    for source in range(4):
        for target in range(4):
            if source != target:
                pool[target] = mix(pool[target], hash_a(pool[source]))
    for source in range(4, len(entropy)):
        for target in range(4):
            pool[target] = mix(pool[target], hash_a(entropy[source]))
    hash_b = Hasher(INIT_B, MULT_B)
    state32 = [hash_b(pool[i % 4]) for i in range(2 * n_words64)]
    return [state32[2 * i] | (state32[2 * i + 1] << 32) for i in range(n_words64)]


class PlainPCG64:
    def __init__(self, seed: int, spawn_key: tuple[int, ...]) -> None:
        s = seed_sequence_state(seed, spawn_key, 4)
        initstate = (s[0] << 64) | s[1]
        initseq = (s[2] << 64) | s[3]
        self.increment = ((initseq << 1) | 1) & M128
        self.state = 0
        self.step()
        self.state = (self.state + initstate) & M128
        self.step()

    def step(self) -> None:
        self.state = (self.state * PCG_MULTIPLIER + self.increment) & M128

    def next(self) -> int:
        self.step()
        folded = ((self.state >> 64) ^ self.state) & M64
        rotation = self.state >> 122
        return ((folded >> rotation) | (folded << ((64 - rotation) % 64))) & M64

    def uniform(self, m: int) -> int:
        limit = (1 << 64) - ((1 << 64) % m)
        while True:
            word = self.next()
            if word < limit:
                return word % m


def plain_subset(seed: int, n: int, k: int) -> list[int]:
    generator = PlainPCG64(seed, (draws.SUBSET_STREAM,))
    pool = list(range(n))
    for i in range(k):
        j = i + generator.uniform(n - i)
        pool[i], pool[j] = pool[j], pool[i]
    return sorted(pool[:k])


@pytest.mark.parametrize("seed", [0, 1, 20260727, 2**32 + 5, 2**70 + 3])
@pytest.mark.parametrize("stream_index", [0, 1])
def test_documented_seed_sequence_and_pcg64_give_numpy_words(seed, stream_index):
    plain = PlainPCG64(seed, (stream_index,))
    expected = [plain.next() for _ in range(6)]
    assert draws.stream(seed, stream_index)(6).tolist() == expected


@pytest.mark.parametrize(("n", "k"), [(1500, 1200), (8268, 1200), (5, 5), (10, 0)])
def test_documented_partial_fisher_yates_gives_the_subset(n, k):
    ours = draws.sample_without_replacement(draws.stream(20260727, draws.SUBSET_STREAM), n, k)
    assert ours.tolist() == plain_subset(20260727, n, k)


def test_subset_of_v02_is_all_cases_up_to_1200_and_the_documented_draw_above():
    assert subset_indices(1200, 9).tolist() == list(range(1200))
    assert subset_indices(3421, 9).tolist() == plain_subset(9, 3421, 1200)


def test_documented_stratified_bootstrap_gives_the_weights():
    labels = np.array([2, 0, 1, 0, 2, 2, 1, 0, 0])
    weights = bootstrap_weights(labels, 3, seed=77)
    plain = PlainPCG64(77, (draws.BOOTSTRAP_STREAM,))
    members = [[i for i in range(labels.size) if labels[i] == k] for k in range(3)]
    assert weights[0].tolist() == [1.0] * labels.size
    for replicate in range(1, 1000):
        expected = [0] * labels.size
        for cases in members:
            for _ in cases:
                expected[cases[plain.uniform(len(cases))]] += 1
        assert weights[replicate].tolist() == expected
    # stratified: every class keeps its size in every replicate
    for k in range(3):
        assert set(weights[:, labels == k].sum(axis=1).tolist()) == {float((labels == k).sum())}


def crafted(words: list[int]) -> draws.WordSource:
    queue = list(words)

    def source(count: int) -> np.ndarray:
        taken, queue[:] = queue[:count], queue[count:]
        return np.array(taken, dtype=np.uint64)

    return source


def test_rejected_words_are_skipped_in_order():
    limit = draws.rejection_limit(3)  # 2^64 - 1: the single word 2^64 - 1 is rejected
    assert limit == 2**64 - 1
    values = draws.uniform_below(crafted([2**64 - 1, 7, 8, 2**64 - 1, 2**64 - 1, 10, 11]),
                                 np.array([3, 3, 3, 3]))
    assert values.tolist() == [7 % 3, 8 % 3, 10 % 3, 11 % 3]


def test_power_of_two_bounds_reject_nothing():
    values = draws.uniform_below(crafted([2**64 - 1, 5]), np.array([4, 1]))
    assert values.tolist() == [3, 0]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 2**40), min_size=1, max_size=20), st.integers(0, 2**63))
def test_vectorised_and_sequential_paths_agree(bounds, seed):
    fast = draws.uniform_below(draws.stream(seed, 0), np.array(bounds))
    plain = PlainPCG64(seed, (0,))
    assert fast.tolist() == [plain.uniform(b) for b in bounds]


def test_bad_requests_are_refused():
    with pytest.raises(MalformedInput):
        draws.sample_without_replacement(draws.stream(1, 0), 3, 4)
    with pytest.raises(MalformedInput):
        draws.uniform_below(draws.stream(1, 0), np.array([0]))
    with pytest.raises(MalformedInput):
        draws.stream(-1, 0)
