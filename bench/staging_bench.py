"""Staging benchmark: what crash atomicity costs an operation's writes (heldout/staging.py).

Run: ``python bench/staging_bench.py`` (``--repeat N`` operations per size, default 20; ``--dir DIR`` puts the
store on a chosen disk, default a temporary folder).

For each size of published file (a 4 KiB seal manifest, a 256 KiB predictions file, a 4 MiB image blob), in one
run and alternating so that disk state and load affect both alike:

* baseline: what the operations did before staging, publish first, then log: ``BlobStore.put`` of the blob,
  ``keys.files.write_atomic`` of a public copy, ``Ledger.append`` of an entry naming it;
* staged: ``staged_operation``: the blob and the copy written (fsynced) to ``private/staging``, the intent
  written, the entry appended, both published with the same durable writers, the staging folder removed.

Prints the median wall time of each and the ratio staged / baseline.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from heldout.staging import staged_operation
from heldout.store import Store
from keys import Signer
from keys.files import write_atomic
from ledger import BlobStore, Ledger

SIZES = {"manifest 4 KiB": 4 << 10, "predictions 256 KiB": 256 << 10, "images 4 MiB": 4 << 20}
NOW = datetime(2026, 9, 1, tzinfo=UTC)


def entry(digest: str) -> dict[str, object]:
    """A ledger entry naming the published file (the passport shape: one blob)."""
    return {"type": "passport", "v": 1, "model_id": "bench", "generation": "gen1", "passport_sha256": digest,
            "created_utc": "2026-09-01T00:00:00Z"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        store = Store.open(Path(tmp) / "store")
        store.create()
        signer = Signer.from_seed(bytes([7]) * 32, name="bench", key_id="bench")
        blobs = BlobStore(store.blobs)
        with Ledger.create(store.ledgers, signer, name="bench", now=NOW) as ledger:
            print(f"{'size':<22}{'baseline ms':>12}{'staged ms':>12}{'ratio':>8}")
            for label, size in SIZES.items():
                baseline, staged = [], []
                for i in range(args.repeat):
                    for mode in ("baseline", "staged"):
                        data = os.urandom(size)
                        target = store.seals / f"{mode}-{size}-{i}.json"
                        start = time.perf_counter()
                        if mode == "baseline":
                            digest = blobs.put(data)
                            write_atomic(target, data)
                            ledger.append(entry(digest), signer=signer, now=NOW)
                            baseline.append(time.perf_counter() - start)
                        else:
                            with staged_operation(store, ledger, "bench") as operation:
                                digest = operation.blob(data, label="blob")
                                operation.public_file(target, data, label="file")
                                operation.commit([entry(digest)], signer=signer, now=NOW)
                            staged.append(time.perf_counter() - start)
                base, stag = statistics.median(baseline) * 1e3, statistics.median(staged) * 1e3
                print(f"{label:<22}{base:>12.2f}{stag:>12.2f}{stag / base:>7.2f}x")


if __name__ == "__main__":
    main()
