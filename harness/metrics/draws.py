"""MedEval-1 v0.2 random draws: raw PCG64 words through the project's own documented algorithms.

numpy promises bit-for-bit stable streams only for its bit generators (``SeedSequence`` and ``PCG64``'s raw
64-bit output), not for ``Generator.choice``/``multinomial``/``integers``, which may change between numpy
versions. v0.2 therefore takes nothing from numpy's random module but raw words, and turns them into draws
with the three algorithms below, each written out in ``docs/MEDEVAL-1.2.md`` ("Random draws") so that anyone
can reimplement them:

* :func:`uniform_below`: an integer uniform on 0..m-1 by rejection (``u mod m`` for the first 64-bit word
  ``u`` below ``2^64 - (2^64 mod m)``);
* :func:`sample_without_replacement`: a partial Fisher-Yates shuffle of 0..n-1 (``k`` swaps), sorted;
* :func:`stratified_bootstrap_counts`: for each replicate and each class, ``n_k`` index draws among that
  class's cases, returned as per-case multiplicities.

The streams are independent children of ``SeedSequence(seed)``: child 0 for the robustness subset, child 1
for the bootstrap (``SeedSequence(seed).spawn(2)``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import numpy as np
from numpy.typing import NDArray

from keys.errors import MalformedInput

#: Spawn index of each stream under ``SeedSequence(seed)``.
SUBSET_STREAM: Final = 0
BOOTSTRAP_STREAM: Final = 1
N_STREAMS: Final = 2
TWO_64: Final = 1 << 64

#: words(count) -> that many raw 64-bit words, the next ones of the stream, as uint64.
WordSource = Callable[[int], NDArray[np.uint64]]


def stream(seed: int, index: int) -> WordSource:
    """The raw word source of child ``index`` of ``SeedSequence(seed)`` (a PCG64 seeded from that child)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise MalformedInput(f"seed must be a non-negative integer (found {seed!r})", found=repr(seed))
    child = np.random.SeedSequence(int(seed)).spawn(N_STREAMS)[index]
    generator = np.random.PCG64(child)

    def words(count: int) -> NDArray[np.uint64]:
        return np.asarray(generator.random_raw(count), dtype=np.uint64).reshape(count)

    return words


def rejection_limit(m: int) -> int:
    """The first word value that is rejected for a draw below ``m``: ``2^64 - (2^64 mod m)``."""
    return TWO_64 - (TWO_64 % m)


def uniform_below(words: WordSource, bounds: NDArray[np.int64], repeats: int = 1) -> NDArray[np.int64]:
    """One uniform integer in ``0..m-1`` for each bound m of ``bounds`` repeated ``repeats`` times, in order:
    each draw takes the next word ``u``; if ``u >= 2^64 - (2^64 mod m)`` it is discarded and the next word is
    taken; the draw is ``u mod m``.

    Vectorised when no word is rejected (probability below ``m / 2^64`` per draw); otherwise the same
    definition is applied sequentially, so both paths give the same values from the same words."""
    pattern = np.asarray(bounds, dtype=np.int64)
    if pattern.ndim != 1 or (pattern.size and pattern.min() < 1) or repeats < 0:
        raise MalformedInput("uniform bounds must be a 1-D array of positive integers")
    bounds = np.tile(pattern, repeats)
    count = int(bounds.size)
    if count == 0:
        return np.zeros(0, dtype=np.int64)
    drawn = words(count)
    unsigned_bounds = bounds.astype(np.uint64)
    # 2^64 mod m == (2^64 - m) mod m, computed in uint64 without overflow, once per bound of the pattern; a
    # limit of 0 means m is a power of two and nothing is rejected.
    unsigned_pattern = pattern.astype(np.uint64)
    limits = np.tile(np.uint64(0) - (np.uint64(0) - unsigned_pattern) % unsigned_pattern, repeats)
    rejected = (limits != 0) & (drawn >= limits)
    if not rejected.any():
        return (drawn % unsigned_bounds).astype(np.int64)
    out = np.empty(count, dtype=np.int64)
    pending = [int(w) for w in drawn]
    position = 0
    for i, m in enumerate(int(b) for b in bounds):
        limit = rejection_limit(m)
        while True:
            if position == len(pending):
                pending.extend(int(w) for w in words(1))
            word = pending[position]
            position += 1
            if word < limit:
                out[i] = word % m
                break
    return out


def sample_without_replacement(words: WordSource, n: int, k: int) -> NDArray[np.int64]:
    """``k`` distinct integers from ``0..n-1``, sorted: the first ``k`` entries of ``a = [0, 1, ..., n-1]``
    after, for i = 0..k-1, ``j = i + uniform_below(n - i)`` and swapping ``a[i]`` and ``a[j]``."""
    if not 0 <= k <= n:
        raise MalformedInput(f"cannot draw {k} of {n} without replacement", expected=f"0..{n}", found=k)
    offsets = uniform_below(words, np.arange(n, n - k, -1, dtype=np.int64))
    pool = np.arange(n, dtype=np.int64)
    for i, offset in enumerate(offsets.tolist()):
        j = i + offset
        pool[i], pool[j] = pool[j], pool[i]
    return np.sort(pool[:k])


def stratified_bootstrap_counts(words: WordSource, labels: NDArray[np.int64], n_classes: int,
                                replicates: int) -> NDArray[np.int32]:
    """Per-case multiplicities (replicates, n) of a bootstrap stratified by class.

    Replicate r (0-based) takes its draws after replicate r-1's; within it, classes go in order 0..K-1, and
    class k (cases ``c_0 < c_1 < ... < c_{n_k-1}``, its positions in test order) takes ``n_k`` draws
    ``uniform_below(n_k)``, each adding one to the multiplicity of case ``c_draw``. Class sizes are kept."""
    n = int(labels.shape[0])
    order = np.argsort(labels, kind="stable")  # cases grouped by class, ascending within each class
    sizes = np.bincount(labels, minlength=n_classes)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    # bound of each draw position within one replicate: the size of the class the position belongs to
    bounds_one = np.repeat(sizes, sizes).astype(np.int64)
    draws = uniform_below(words, bounds_one, replicates).reshape(replicates, n)
    chosen = order[draws + np.repeat(starts, sizes)[None, :]]
    flat = chosen + (np.arange(replicates, dtype=np.int64) * n)[:, None]
    counts = np.bincount(flat.reshape(-1), minlength=replicates * n)
    return counts.reshape(replicates, n).astype(np.int32)
