"""PostgreSQL ledger benchmark: durable appends through the ledger beside raw psycopg inserts of the same bytes,
in the same run, on the same server.

Run: ``python bench/pg_bench.py`` (a private durable cluster in a temporary folder, as the tests start one:
fsync on, ``synchronous_commit`` on; needs Debian's ``postgresql``), or ``--database postgresql://...`` for an
existing server (a fresh database you may write to). ``--quick`` for a smoke run; ``--json FILE`` also writes
the figures.

What is measured:

1. Single-entry commits: ``Ledger.append`` of 1 KiB entries (validation, canonical JSON, leaf and node hashes,
   the advisory lock, the trigger checks, the consistency check and a signed checkpoint per append, one
   transaction) beside raw psycopg inserting the same bytes into a plain ``(idx bigint primary key, data
   bytea)`` table, one transaction each.
2. Batches of 256 entries: ``Ledger.append_batch`` (one transaction, one signed checkpoint per batch) beside
   raw psycopg ``executemany`` of the same 256 byte strings per transaction.

Ledger and raw commits alternate so that load and flush-latency drift fall on both sides alike. Ratio =
ledger rate / raw rate.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from ledger_bench import BATCH, ENTRY_BYTES, NOW, append_figures, append_workload, bench_signer

from ledger import LedgerBackend

console = Console(highlight=False)


def bench_appends(url: str, singles: int, batches: int) -> dict[str, Any]:
    import psycopg

    signer = bench_signer()
    single_entries, single_bytes, batch_entries, batch_bytes = append_workload(singles, batches)

    raw = psycopg.connect(url, autocommit=True)
    raw.execute("CREATE TABLE raw_single (idx bigint PRIMARY KEY, data bytea NOT NULL)")
    raw.execute("CREATE TABLE raw_batch (idx bigint PRIMARY KEY, data bytea NOT NULL)")
    backend = LedgerBackend(database=url)
    ledger_single = raw_single = 0.0
    with backend.create(signer, name="bench single", now=NOW, nonce=bytes(32)) as ledger:
        for index, (entry, blob) in enumerate(zip(single_entries, single_bytes, strict=True)):
            start = time.perf_counter()
            ledger.append(entry, signer=signer, now=NOW)
            ledger_single += time.perf_counter() - start
            start = time.perf_counter()
            with raw.transaction():
                raw.execute("INSERT INTO raw_single (idx, data) VALUES (%s, %s)", (index, blob))
            raw_single += time.perf_counter() - start
        assert ledger.entry_bytes(1) == single_bytes[0]

    ledger_batch = raw_batch = 0.0
    with backend.create(signer, name="bench batch", now=NOW, nonce=bytes([1]) * 32) as ledger:
        for number, (batch, blobs) in enumerate(zip(batch_entries, batch_bytes, strict=True)):
            start = time.perf_counter()
            ledger.append_batch(batch, signer=signer, now=NOW)
            ledger_batch += time.perf_counter() - start
            start = time.perf_counter()
            with raw.transaction(), raw.cursor() as cursor:
                cursor.executemany("INSERT INTO raw_batch (idx, data) VALUES (%s, %s)",
                                   [(number * BATCH + k, blob) for k, blob in enumerate(blobs)])
            raw_batch += time.perf_counter() - start
        checkpoints = len(ledger.checkpoints())
        ledger.verify()
    raw.close()
    assert checkpoints == batches + 1

    return append_figures(singles, ledger_single, raw_single, batches, ledger_batch, raw_batch)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: small sizes")
    parser.add_argument("--database", help="an existing server's fresh database (default: a private cluster)")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    singles, batches = (40, 4) if args.quick else (400, 40)

    cluster = None
    if args.database is None:
        from tests.postgres_support import PostgresCluster, pg_bin_dir

        bin_dir = pg_bin_dir()
        if bin_dir is None:
            console.print("no PostgreSQL server binaries (install Debian's postgresql) and no --database")
            return 2
        cluster = PostgresCluster(bin_dir, durable=True)
    try:
        url = args.database or (cluster.url(cluster.new_database()) if cluster is not None else "")
        console.print(f"appends: {singles} single-entry commits, {batches} batches of {BATCH} "
                      f"({'private durable cluster' if cluster else 'given database'})")
        results: dict[str, Any] = {"quick": args.quick, "entry_bytes": ENTRY_BYTES,
                                   "appends": bench_appends(url, singles, batches)}
    finally:
        if cluster is not None:
            cluster.stop()

    table = Table(title="PostgreSQL durable appends per second (fsync on, synchronous_commit on)")
    for column in ("mode", "ledger /s", "raw psycopg /s", "ratio"):
        table.add_column(column, justify="right" if column != "mode" else "left")
    a = results["appends"]
    table.add_row("single-entry commits", f"{a['single']['ledger_per_s']:,.0f}", f"{a['single']['raw_per_s']:,.0f}",
                  f"{a['single']['ratio']:.2f}x")
    table.add_row(f"batches of {BATCH}", f"{a['batch']['ledger_per_s']:,.0f}", f"{a['batch']['raw_per_s']:,.0f}",
                  f"{a['batch']['ratio']:.2f}x")
    console.print(table)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
