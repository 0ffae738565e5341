"""What the bounded, confined reader (``keys.safeio``) costs, beside the plain reads it replaced.

Run: ``python bench/safeio_bench.py`` (``--quick`` for a smoke run). Measured in one run, alternating the two
sides so that load falls on both alike, median of several rounds:

1. ``seals.parse_json`` of a typical 1 KiB ledger entry with the depth check (as every reader now parses)
   beside ``json.loads`` with the same hooks and no depth check: the cost on every replayed entry.
2. Reading a 1 KiB and a 4 MiB blob: ``keys.safeio.read_in`` (component walk from the root without following
   links, fstat, bounded read) beside ``Path.read_bytes``.
3. Loading a stored-predictions npz (n_test 3421, K 8, with templates) through ``harness.metrics.npz.load_npz``
   (zip members and every .npy header checked first) beside ``numpy.load`` of the same bytes.

Prints a table of microseconds per operation and the ratio safe / plain.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.metrics.npz import load_npz
from keys.safeio import BLOB_LIMIT, read_in
from seals import canonical_bytes, parse_json
from seals.canonical import _no_duplicates, _parse_int, _refuse_constant


def timed(func: Callable[[], object], repeat: int) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        func()
    return (time.perf_counter() - start) / repeat * 1e6


def compare(name: str, safe: Callable[[], object], plain: Callable[[], object], repeat: int,
            rounds: int) -> tuple[str, float, float]:
    safe_t, plain_t = [], []
    for _ in range(rounds):
        plain_t.append(timed(plain, repeat))
        safe_t.append(timed(safe, repeat))
    return name, statistics.median(safe_t), statistics.median(plain_t)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    repeat, rounds = (200, 3) if args.quick else (2000, 7)

    entry = canonical_bytes({"type": "bundle", "v": 1, "generation": "gen3", "model_id": "cnn_small",
                             "task": "bloodmnist", "evaluation_sha256": "a" * 64, "predictions_sha256": "b" * 64,
                             "created_utc": "2026-09-01T00:00:00Z", "leakage_bits": 12.5,
                             "metrics": {f"m{i}": i / 7 for i in range(40)}})

    def plain_parse() -> object:
        return json.loads(entry.decode(), object_pairs_hook=_no_duplicates, parse_constant=_refuse_constant,
                          parse_int=_parse_int)

    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(8), size=3421).astype("<f4")
    buffer = io.BytesIO()
    np.savez(buffer, clean_probs=probs, template_probs=np.stack([probs[:1200]] * 6))
    npz = buffer.getvalue()

    def plain_npz() -> object:
        with np.load(io.BytesIO(npz), allow_pickle=False) as data:
            return {k: data[k] for k in data.files}

    rows = [compare("parse 1 KiB entry", lambda: parse_json(entry), plain_parse, repeat, rounds)]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for label, size in (("read 1 KiB blob", 1024), ("read 4 MiB blob", 4 * 1024**2)):
            folder = root / "ab"
            folder.mkdir(exist_ok=True)
            path = folder / f"blob{size}"
            path.write_bytes(os.urandom(size))
            name = path.name
            n = repeat if size < 1024**2 else max(repeat // 50, 5)
            rows.append(compare(label, lambda name=name: read_in(root, ["ab", name], limit=BLOB_LIMIT, what="b"),
                                lambda path=path: path.read_bytes(), n, rounds))
    rows.append(compare("load predictions npz", lambda: load_npz(npz, what="bench"), plain_npz,
                        max(repeat // 20, 5), rounds))
    print(f"{'operation':28} {'safe us':>10} {'plain us':>10} {'ratio':>7}")
    for name, safe, plain in rows:
        print(f"{name:28} {safe:10.1f} {plain:10.1f} {safe / plain:7.2f}")


if __name__ == "__main__":
    main()
