"""Ledger benchmark: durable append rates beside raw sqlite3, and root/proof times on large ledgers.

Run: ``python bench/ledger_bench.py`` (full size, a few minutes; ``--quick`` for a smoke run; ``--json FILE``
also writes the figures as JSON; ``--dir DIR`` puts the databases on a chosen disk, default a temporary folder).

What is measured, in one run:

1. Durable appends per second, single-entry commits: ``Ledger.append`` of 1 KiB entries (validation, canonical
   JSON, leaf and node hashes, the consistency check and a signed checkpoint per append, one transaction,
   commit fsynced) beside raw sqlite3 inserting the same bytes one transaction each, with the same durability
   (WAL, ``synchronous=FULL``). Ratio = ledger rate / raw rate.
2. The same for batches of 256 entries (``Ledger.append_batch``: one transaction and one signed checkpoint
   per batch) beside raw sqlite3 ``executemany`` of the same 256 byte strings per transaction.
3. Time of a root, an inclusion proof and a consistency proof at 10^5 and 10^6 entries (random sizes and
   indices; median, 99th percentile and maximum over many calls on a freshly opened ledger; each proof is
   verified, untimed). Targets: batched appends >= 0.45x raw sqlite3 (issue 11; 0.3x in issue 3); root and
   each proof < 1 ms at 10^6 entries (judged on the median; the p99 and maximum are shown because a loaded
   machine stretches them). Ledger and raw commits alternate so that load and fsync drift fall on both sides alike.
4. ``Ledger.verify`` (what ``heldout ledger verify`` runs) on a ledger of ``--verify-size`` entries (default
   10^6) beside the leaf-hashing baseline in the same run: reading the same entry bytes from the same file with
   sqlite3 and SHA-256-hashing each (RFC 6962 leaf hash), nothing else. Each runs in a fresh subprocess, which
   reports its time and its peak resident memory (``VmHWM``; and for the replay's decoding workers, one per
   CPU by default, the largest one's ``ru_maxrss``, counted once per worker: an upper bound, as a forked
   worker's figure includes the pages it shares with its parent); baseline and verify alternate, four
   baselines around three verifies, and the ratio is of their medians. Targets (issue 11): verify within 3x
   of the baseline, under 300 MB peak. The ledger is built on the bulk path below with a signed checkpoint
   every ``--verify-checkpoint-every`` entries (default 256, a batch's worth: the replay verifies every
   checkpoint's signature, root and consistency with the one before).

Bulk path (documented shortcut): the 10^5/10^6-entry ledgers are built through ``Ledger._append_encoded``
in transactions of 50,000 entries, with entry bytes made from one canonical ``retire`` template whose
fixed-width number field is substituted per entry, so the entries are distinct and canonical without running
the canonicaliser 10^6 times. Everything else on that path is the normal write path (leaf hashes, stored
nodes, consistency check, signed checkpoint per transaction). Appends in (1) and (2) take the full path.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import heldout.entries  # noqa: F401  (registers the domain entry types the benchmark's entries use)
from keys import Signer
from ledger import Ledger
from ledger.replay import decoding_workers
from seals import canonical_bytes

NOW = datetime(2026, 3, 1, tzinfo=UTC)
ENTRY_BYTES = 1024
BATCH = 256
BULK_TRANSACTION = 50_000
console = Console(highlight=False)


def bench_signer() -> Signer:
    return Signer.from_seed(bytes([42]) * 32, name="bench-operator", key_id="bench")


def entry_of_size(i: int, size: int = ENTRY_BYTES) -> dict[str, Any]:
    """A valid bundle entry whose canonical bytes are exactly ``size`` bytes."""
    entry: dict[str, Any] = {"type": "bundle", "v": 1, "generation": "gen1", "model_id": f"model-{i:09d}",
                             "task": "pathmnist", "evaluation_sha256": f"{i:064x}",
                             "predictions_sha256": f"{i + 1:064x}", "created_utc": "2026-03-01T00:00:00Z",
                             "pad": ""}
    entry["pad"] = "p" * (size - len(canonical_bytes(entry)))
    return entry


def append_workload(singles: int, batches: int) -> tuple[list[dict[str, Any]], list[bytes],
                                                        list[list[dict[str, Any]]], list[list[bytes]]]:
    """The entries both append benchmarks write (and their canonical bytes, which the raw side inserts):
    ``singles`` single entries and ``batches`` batches of ``BATCH``, each entry ``ENTRY_BYTES`` long."""
    single_entries = [entry_of_size(i) for i in range(singles)]
    batch_entries = [[entry_of_size(b * BATCH + i) for i in range(BATCH)] for b in range(batches)]
    single_bytes = [canonical_bytes(e) for e in single_entries]
    batch_bytes = [[canonical_bytes(e) for e in batch] for batch in batch_entries]
    assert all(len(blob) == ENTRY_BYTES for blob in single_bytes)
    return single_entries, single_bytes, batch_entries, batch_bytes


def raw_connection(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE entries (idx INTEGER PRIMARY KEY, data BLOB NOT NULL) STRICT")
    return conn


def rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


def bench_appends(folder: Path, singles: int, batches: int) -> dict[str, Any]:
    """Ledger and raw sqlite3 commits alternate (one ledger commit, then the same bytes raw), so that drift in
    the machine's load or the disk's fsync latency falls on both sides alike."""
    signer = bench_signer()
    single_entries, single_bytes, batch_entries, batch_bytes = append_workload(singles, batches)

    folder.mkdir(parents=True, exist_ok=True)
    ledger_single = raw_single = 0.0
    raw = raw_connection(folder / "raw-single.sqlite")
    with Ledger.create(folder / "single", signer, name="bench single", now=NOW, nonce=bytes(32)) as ledger:
        for index, (entry, blob) in enumerate(zip(single_entries, single_bytes, strict=True)):
            start = time.perf_counter()
            ledger.append(entry, signer=signer, now=NOW)
            ledger_single += time.perf_counter() - start
            start = time.perf_counter()
            raw.execute("BEGIN IMMEDIATE")
            raw.execute("INSERT INTO entries (idx, data) VALUES (?, ?)", (index, blob))
            raw.execute("COMMIT")
            raw_single += time.perf_counter() - start
        assert ledger.entry_bytes(1) == single_bytes[0]
    raw.close()

    ledger_batch = raw_batch = 0.0
    raw = raw_connection(folder / "raw-batch.sqlite")
    with Ledger.create(folder / "batch", signer, name="bench batch", now=NOW, nonce=bytes(32)) as ledger:
        for number, (batch, blobs) in enumerate(zip(batch_entries, batch_bytes, strict=True)):
            start = time.perf_counter()
            ledger.append_batch(batch, signer=signer, now=NOW)
            ledger_batch += time.perf_counter() - start
            start = time.perf_counter()
            raw.execute("BEGIN IMMEDIATE")
            raw.executemany("INSERT INTO entries (idx, data) VALUES (?, ?)",
                            [(number * BATCH + k, blob) for k, blob in enumerate(blobs)])
            raw.execute("COMMIT")
            raw_batch += time.perf_counter() - start
        checkpoints = len(ledger.checkpoints())
    raw.close()
    assert checkpoints == batches + 1

    return append_figures(singles, ledger_single, raw_single, batches, ledger_batch, raw_batch)


def append_figures(singles: int, ledger_single: float, raw_single: float, batches: int, ledger_batch: float,
                   raw_batch: float) -> dict[str, Any]:
    """Rates and ledger/raw ratios of the single-entry and batched runs (seconds spent on each side)."""
    single = {"ledger_per_s": rate(singles, ledger_single), "raw_per_s": rate(singles, raw_single)}
    batched = {"ledger_per_s": rate(batches * BATCH, ledger_batch), "raw_per_s": rate(batches * BATCH, raw_batch)}
    for row in (single, batched):
        row["ratio"] = row["ledger_per_s"] / row["raw_per_s"]
    return {"single": {**single, "entries": singles}, "batch": {**batched, "entries": batches * BATCH,
                                                                 "batch_size": BATCH}}


def build_large(folder: Path, size: int, per_transaction: int = BULK_TRANSACTION,
                entry_bytes: int | None = None) -> Path:
    """Bulk-build a ledger of ``size`` entries, one signed checkpoint per ``per_transaction`` (see the module
    docstring): ``retire`` entries of about 100 bytes, or with ``entry_bytes`` ``bundle`` entries of exactly that
    many bytes (as the append benchmark writes)."""
    signer = bench_signer()
    if entry_bytes is None:
        kind, template = "retire", canonical_bytes({"type": "retire", "v": 1, "generation": "gen-000000000",
                                                    "reason": "bench", "created_utc": "2026-03-01T00:00:00Z"})
        marker = b"gen-000000000"
    else:
        kind, template = "bundle", canonical_bytes(entry_of_size(0, entry_bytes))
        marker = b"model-000000000"
    prefix, suffix = template.split(marker)
    stem = marker[:-9]
    with Ledger.create(folder, signer, name=f"bench {size}", now=NOW, nonce=bytes(32)) as ledger:
        while ledger.size < size:
            start = ledger.size
            count = min(per_transaction, size - start)
            encoded = [(kind, prefix + stem + b"%09d" % (start + k) + suffix) for k in range(count)]
            ledger._append_encoded(encoded, signer=signer, now=NOW)
        assert ledger.path is not None
        return ledger.path


def timed(call: Callable[[], Any], repeats: int) -> tuple[list[float], list[Any]]:
    times, results = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        results.append(call())
        times.append((time.perf_counter() - start) * 1000)
    return times, results


def summarize(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {"median_ms": statistics.median(ordered), "p99_ms": ordered[max(0, int(len(ordered) * 0.99) - 1)],
            "max_ms": ordered[-1], "calls": len(ordered)}


def bench_proofs(path: Path, samples: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    with Ledger.open(path) as ledger:
        n = ledger.size
        sizes = [rng.randint(1, n) for _ in range(samples)]
        indices = [rng.randrange(s) for s in sizes]
        olds = [rng.randint(1, s) for s in sizes]
        it = iter(range(samples))

        def root_call() -> bytes:
            return ledger.root(sizes[next(it)])

        root_times, _ = timed(root_call, samples)
        head_times, _ = timed(ledger.root, samples)
        it = iter(range(samples))

        def inclusion_call() -> Any:
            k = next(it)
            return ledger.inclusion_proof(indices[k], sizes[k])

        inclusion_times, inclusion_proofs = timed(inclusion_call, samples)
        it = iter(range(samples))

        def consistency_call() -> Any:
            k = next(it)
            return ledger.consistency_proof(olds[k], sizes[k])

        consistency_times, consistency_proofs = timed(consistency_call, samples)
        for proof in inclusion_proofs[:50]:
            proof.verify(ledger.root(proof.size))
        for cproof in consistency_proofs[:50]:
            cproof.verify(ledger.root(cproof.old_size), ledger.root(cproof.new_size))
    return {"size": n, "root_any_size": summarize(root_times), "root_head": summarize(head_times),
            "inclusion_proof": summarize(inclusion_times), "consistency_proof": summarize(consistency_times)}

def read_and_hash(path: Path) -> int:
    """The baseline: every entry's bytes read from the ledger file and SHA-256-hashed as an RFC 6962 leaf."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    count = 0
    sha256 = hashlib.sha256
    for (data,) in conn.execute("SELECT data FROM entries ORDER BY idx"):
        sha256(b"\x00" + data).digest()
        count += 1
    conn.close()
    return count


def peak_rss_bytes() -> int:
    """This process's peak resident memory: ``VmHWM`` (its own address space), not ``ru_maxrss``, which Linux
    carries over an exec from the parent that launched it (a large benchmark parent made the children's
    figures its own)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:  # pragma: no cover (not Linux)
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # pragma: no cover


def measure_child(kind: str, path: Path) -> None:
    """In a fresh process: run ``kind`` on ``path``; print its time and this process's peak memory as JSON."""
    start = time.perf_counter()
    if kind == "baseline":
        count = read_and_hash(path)
    else:
        with Ledger.open(path, read_only=True) as ledger:
            count = ledger.verify().size
    seconds = time.perf_counter() - start
    peak = peak_rss_bytes()
    # the replay's decoding workers (ledger.replay), joined by now: the largest one's peak
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    print(json.dumps({"kind": kind, "seconds": seconds, "entries": count, "peak_rss_bytes": peak,
                      "worker_peak_rss_bytes": workers}))


def run_child(kind: str, path: Path) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--measure", kind, str(path)], check=True,
                         capture_output=True, text=True).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def bench_verify(folder: Path, size: int, checkpoint_every: int, entry_bytes: int | None) -> dict[str, Any]:
    start = time.perf_counter()
    path = build_large(folder, size, checkpoint_every, entry_bytes)
    built = time.perf_counter() - start
    with Ledger.open(path, read_only=True) as ledger:
        mean_bytes = len(ledger.entry_bytes(size - 1))
    console.print(f"built a {size:,}-entry ledger for verify in {built:.1f} s, {path.stat().st_size / 2**20:.0f} "
                  f"MiB, entries of {mean_bytes} bytes, a checkpoint every {checkpoint_every} entries")
    # Baseline and verify alternate, three of each (a load spike falls on one run, not on one side), and the
    # ratio is of the medians.
    baselines, verifies = [], []
    for _ in range(3):
        baselines.append(run_child("baseline", path))
        verifies.append(run_child("verify", path))
    baselines.append(run_child("baseline", path))
    baseline_s = statistics.median(run["seconds"] for run in baselines)
    verify_s = statistics.median(run["seconds"] for run in verifies)
    return {"entries": verifies[0]["entries"], "checkpoints": 1 + -(-(size - 1) // checkpoint_every),
            "verify_s": verify_s, "verify_runs_s": [run["seconds"] for run in verifies], "baseline_s": baseline_s,
            "baseline_runs_s": [run["seconds"] for run in baselines], "ratio": verify_s / baseline_s,
            "verify_peak_rss_mb": max(run["peak_rss_bytes"] for run in verifies) / 1e6,
            "verify_worker_peak_rss_mb": max(run["worker_peak_rss_bytes"] for run in verifies) / 1e6,
            "verify_workers": decoding_workers(size),  # Ledger.verify's default (0: it decodes in-process)
            "baseline_peak_rss_mb": max(run["peak_rss_bytes"] for run in baselines) / 1e6,
            "build_s": built, "entry_bytes": mean_bytes}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: small sizes")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    parser.add_argument("--dir", type=Path, help="where to put the databases (default: a temporary folder)")
    parser.add_argument("--verify-size", type=int, help="entries of the verify benchmark's ledger (default 10^6; "
                        "20,000 with --quick)")
    parser.add_argument("--verify-checkpoint-every", type=int, default=BATCH,
                        help=f"entries per signed checkpoint in the verify benchmark's ledger (default {BATCH})")
    parser.add_argument("--verify-entry-bytes", type=int, help="bundle entries of this many bytes in the verify "
                        "benchmark's ledger (default: retire entries of about 100 bytes)")
    parser.add_argument("--only-verify", action="store_true", help="run the verify benchmark alone")
    parser.add_argument("--measure", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        measure_child(args.measure[0], Path(args.measure[1]))
        return 0
    verify_size = args.verify_size or (20_000 if args.quick else 1_000_000)
    # 160 batches: with 40, a few slow fsyncs on either side moved the batched ratio by +-0.1 between runs
    singles, batches = (40, 4) if args.quick else (400, 160)
    large = [2_000, 20_000] if args.quick else [100_000, 1_000_000]
    samples = 200 if args.quick else 2_000

    base = Path(tempfile.mkdtemp(prefix="ledger-bench-", dir=args.dir))
    results: dict[str, Any] = {"quick": args.quick, "entry_bytes": ENTRY_BYTES, "python": sys.version.split()[0],
                               "sqlite": sqlite3.sqlite_version}
    try:
        if not args.only_verify:
            console.print(f"appends: {singles} single-entry commits, {batches} batches of {BATCH} ({base})")
            results["appends"] = bench_appends(base / "appends", singles, batches)
            results["proofs"] = []
            for size in large:
                start = time.perf_counter()
                path = build_large(base / f"large-{size}", size)
                built = time.perf_counter() - start
                console.print(f"built a {size:,}-entry ledger in {built:.1f} s (bulk path), "
                              f"{path.stat().st_size / 2**20:.0f} MiB")
                row = bench_proofs(path, samples, seed=size)
                row["build_s"] = built
                results["proofs"].append(row)
                shutil.rmtree(base / f"large-{size}")
        results["verify"] = bench_verify(base / "verify", verify_size, args.verify_checkpoint_every,
                                         args.verify_entry_bytes)
    finally:
        shutil.rmtree(base, ignore_errors=True)

    if not args.only_verify:
        print_append_and_proof_tables(results)
    v = results["verify"]
    table = Table(title=f"ledger verify of {v['entries']:,} entries of {v['entry_bytes']} bytes ({v['checkpoints']:,} "
                        "checkpoints) beside "
                        "reading + SHA-256-hashing the same entry bytes, same run")
    for column in ("run", "seconds", "peak memory", "target"):
        table.add_column(column, justify="right" if column != "run" else "left")
    table.add_row("baseline: read + leaf-hash (median of 4)", f"{v['baseline_s']:.2f}",
                  f"{v['baseline_peak_rss_mb']:.0f} MB", "")
    total_mb = v["verify_peak_rss_mb"] + v["verify_workers"] * v["verify_worker_peak_rss_mb"]
    table.add_row("Ledger.verify (heldout ledger verify, median of 3)", f"{v['verify_s']:.2f}",
                  f"{v['verify_peak_rss_mb']:.0f} MB + {v['verify_workers']} x "
                  f"{v['verify_worker_peak_rss_mb']:.0f} MB", "< 300 MB " + ("ok" if total_mb < 300 else "MISSED"))
    table.add_row("verify / baseline", f"{v['ratio']:.2f}x", "", "<= 3x " + ("ok" if v["ratio"] <= 3 else "MISSED"))
    console.print(table)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    return 0


def print_append_and_proof_tables(results: dict[str, Any]) -> None:
    appends = Table(title="durable appends per second (WAL, synchronous=FULL)")
    for column in ("mode", "ledger /s", "raw sqlite3 /s", "ratio", "target"):
        appends.add_column(column, justify="right" if column != "mode" else "left")
    a = results["appends"]
    appends.add_row("single-entry commits", f"{a['single']['ledger_per_s']:,.0f}", f"{a['single']['raw_per_s']:,.0f}",
                    f"{a['single']['ratio']:.2f}x", "")
    appends.add_row(f"batches of {BATCH}", f"{a['batch']['ledger_per_s']:,.0f}", f"{a['batch']['raw_per_s']:,.0f}",
                    f"{a['batch']['ratio']:.2f}x", ">= 0.45x " + ("ok" if a["batch"]["ratio"] >= 0.45 else "MISSED"))
    console.print(appends)

    proofs = Table(title="root and proof time (ms): median / p99 / max")
    for column in ("entries", "root (any size)", "root (head)", "inclusion proof", "consistency proof",
                   "median < 1 ms"):
        proofs.add_column(column, justify="right")
    for row in results["proofs"]:
        cells = [row[k] for k in ("root_any_size", "root_head", "inclusion_proof", "consistency_proof")]
        ok = all(c["median_ms"] < 1 for c in cells)
        proofs.add_row(f"{row['size']:,}", *(f"{c['median_ms']:.3f} / {c['p99_ms']:.3f} / {c['max_ms']:.3f}"
                                             for c in cells), "ok" if ok else "MISSED")
    console.print(proofs)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
