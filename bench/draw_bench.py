"""Commit-then-draw benchmark: what the unpredictable draw adds to a seal, beside the draw it replaced.

Run: ``python bench/draw_bench.py`` (pools of 10,000 and 100,000 cases, 500 drawn per task; ``--pool N`` to
choose one size, ``--draw K``).

What is measured, in one run, per pool size N:

* commit: a fresh salt and the ``heldout-commit-v1`` commitment for each of the N candidates, sorted, and the
  RFC 6962 pool root (``set_hash``): what ``heldout seal`` computes before it logs the ``pool`` entry;
* draw: ``heldout-draw-v1`` (SHA-256 stream, rejection sampling, partial Fisher-Yates) of K positions of N;
* baseline: the draw this replaced, ``numpy.random.default_rng(seed).choice(N, K, replace=False)`` sorted.

Ratios are against the baseline measured in the same run. Appending the ``pool`` and ``intent`` entries is one
more batched append (one checkpoint), measured by ``bench/ledger_bench.py``'s batched-append figures.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import time
from collections.abc import Callable

import numpy as np

from heldout.generations.commitments import SALT_BYTES, commitment, set_hash
from heldout.generations.draw import draw_positions


def _best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pool", type=int, action="append", help="pool size N (repeatable)")
    parser.add_argument("--draw", type=int, default=500, help="cases drawn K")
    args = parser.parse_args()
    sizes = args.pool or [10_000, 100_000]
    print(f"{'pool N':>9} {'draw K':>7} {'commit s':>9} {'draw ms':>8} {'baseline ms':>11} {'draw/baseline':>13} "
          f"{'(commit+draw)/baseline':>22}")
    for n in sizes:
        row(n, min(args.draw, n))


def row(n: int, k: int) -> None:
    """One pool size: commit, draw and baseline, timed in the same run."""
    cases = [(f"bloodmnist-{hashlib.sha256(str(i).encode()).hexdigest()[:16]}",
              hashlib.sha256(str(i).encode()).hexdigest(), i % 8) for i in range(n)]

    def commit() -> str:
        commitments = sorted(commitment(os.urandom(SALT_BYTES), cid, content, label) for cid, content, label in cases)
        return set_hash(commitments)

    seed = hashlib.sha256(b"bench").digest()
    commit_s = _best(commit, 3)
    draw_s = _best(lambda: draw_positions(seed, "bloodmnist", n, k), 5)
    base_s = _best(lambda: sorted(np.random.default_rng(7).choice(n, k, replace=False).tolist()), 5)
    print(f"{n:>9} {k:>7} {commit_s:>9.3f} {draw_s * 1e3:>8.2f} {base_s * 1e3:>11.2f} {draw_s / base_s:>13.1f} "
          f"{(commit_s + draw_s) / base_s:>22.0f}")


if __name__ == "__main__":
    main()
