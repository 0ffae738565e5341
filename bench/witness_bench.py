"""Witness benchmark: what one witness sustains, and what a 2-of-3 witness policy adds to an append.

Run: ``python bench/witness_bench.py`` (``--requests N`` add-checkpoint requests per client, default 200;
``--clients C`` concurrent clients (one log each), default 16; ``--appends N`` batched appends, default 60;
``--batch B`` entries per append, default 100; ``--json-out FILE``; ``--quick`` for a smoke run).

What is measured, in one run (witness servers are ``heldout witness serve`` subprocesses on 127.0.0.1, so the
client's and the server's Python do not share a GIL):

1. **add-checkpoint throughput**: C client threads, each driving its own log (a witness serialises requests per
   log, so one log is a sequence), each sending N valid requests in a row over one keep-alive connection: old
   size k-1, the consistency proof, the checkpoint of size k signed by the log; every one must come back 200
   with a cosignature, which means the witness verified the log signature and the proof and fsynced its state
   before answering. Baseline in the same run, same server, same connections: a request the witness answers
   without work (a GET, 404), so the ratio shows the price of the protocol over bare HTTP.
2. **latency a 2-of-3 policy adds to a batched append**: ``Ledger.append_batch`` of B entries with no witness
   (baseline) alternating with the same append with the store's witnesses attached (three witnesses, policy
   2-of-3; the append returns once two witnesses' cosignatures are verified and stored, as with ``heldout
   witness add``), so
   both see the same machine load. Median and p90 of each; added = the median of the paired differences
   (with - without). The last checkpoint must satisfy the policy.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from heldout.witness.operator import WitnessEndpoint, Witnessing
from heldout.witness.server import witness_key_path
from keys import Signer
from keys.files import ensure_private_dir
from ledger import Ledger
from ledger.cosignature import Cosigner
from ledger.policy import parse_policy
from ledger.witness import WitnessedLog, request_body, trust_log

console = Console(stderr=True)
T0 = datetime(2026, 3, 1, tzinfo=UTC)


def signer(i: int, name: str) -> Signer:
    return Signer.from_seed(bytes([i]) * 32, name=name, key_id=f"bench-{i}")


def entry(i: int) -> dict[str, Any]:
    return {"type": "bundle", "v": 1, "generation": "gen1", "model_id": f"model-{i}", "task": "bloodmnist",
            "evaluation_sha256": f"{i:064x}", "predictions_sha256": f"{i + 1:064x}",
            "created_utc": "2026-03-01T00:00:00Z"}


def witness_folder(root: Path, i: int, logs: list[Ledger]) -> tuple[Path, Cosigner]:
    folder = root / f"witness{i}"
    ensure_private_dir(folder / "private")
    ensure_private_dir(witness_key_path(folder).parent)
    key = signer(100 + i, f"w{i}.bench.example")
    key.save(witness_key_path(folder))
    for log in logs:
        trust_log(folder, WitnessedLog(log.origin, log.key.name, log.key.public_key))
    return folder, Cosigner.of(key)


def start_witness(folder: Path) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    process = subprocess.Popen([sys.executable, "-m", "heldout", "witness", "serve", "--store", str(folder),
                                "--listen", "127.0.0.1:0", "--max-seconds", "900"], stdout=subprocess.PIPE,
                               text=True, env=env)
    assert process.stdout is not None
    line = process.stdout.readline()
    if "listening on " not in line:
        process.kill()
        raise SystemExit(f"witness did not start: {line!r}")
    return process, line.split("listening on ")[1].split(" ")[0]


def build_log(root: Path, i: int, size: int) -> Ledger:
    """A ledger with a signed checkpoint at every size 1..size (one entry per append)."""
    key = signer(i, f"log{i}")
    ledger = Ledger.create(root / f"log{i}", key, name=f"bench log {i}", now=T0, nonce=bytes([i]) * 32)
    for k in range(1, size):
        ledger.append(entry(k), signer=key, now=T0)
    return ledger


def request_bodies(ledger: Ledger) -> list[bytes]:
    """The add-checkpoint requests that walk a witness from size 0 to the ledger's size, one size at a time."""
    bodies = [request_body(0, (), ledger.checkpoint_at(1).note)]  # type: ignore[union-attr]
    for size in range(2, ledger.size + 1):
        proof = ledger.consistency_proof(size - 1, size).path
        bodies.append(request_body(size - 1, proof, ledger.checkpoint_at(size).note))  # type: ignore[union-attr]
    return bodies


def drive(url: str, bodies: list[bytes], method: str, failures: list[str]) -> None:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    for body in bodies:
        if method == "POST":
            conn.request("POST", "/add-checkpoint", body=body)
        else:
            conn.request("GET", "/")
        response = conn.getresponse()
        data = response.read()
        expected = 200 if method == "POST" else 404
        if response.status != expected:
            failures.append(f"{response.status} {data[:80]!r}")
            return
    conn.close()


def throughput(url: str, per_client: list[list[bytes]], method: str) -> tuple[float, float]:
    failures: list[str] = []
    threads = [threading.Thread(target=drive, args=(url, bodies, method, failures)) for bodies in per_client]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    if failures:
        raise SystemExit(f"{method} requests failed: {failures[:3]}")
    total = sum(len(b) for b in per_client)
    return total / elapsed, elapsed


def append_latencies(ledger: Ledger, key: Signer, appends: int, batch: int, hook: Witnessing
                     ) -> tuple[list[float], list[float]]:
    """Alternate appends without and with the witnesses (so both see the same machine load); their times."""
    plain, witnessed = [], []
    for n in range(2 * appends):
        with_witnesses = n % 2 == 1
        ledger.after_checkpoint = hook if with_witnesses else None
        entries = [entry(n * batch + j) for j in range(batch)]
        began = time.perf_counter()
        ledger.append_batch(entries, signer=key, now=T0 + timedelta(seconds=n))
        (witnessed if with_witnesses else plain).append(time.perf_counter() - began)
        if ledger.witnessing_error is not None:
            raise SystemExit(f"witnessing failed: {ledger.witnessing_error}")
    return plain, witnessed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--appends", type=int, default=60)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    if args.quick:
        args.requests, args.clients, args.appends, args.batch = 60, 2, 10, 20
    results: dict[str, Any] = {"requests_per_client": args.requests, "clients": args.clients,
                               "appends": args.appends, "batch": args.batch}
    processes: list[subprocess.Popen[str]] = []
    with tempfile.TemporaryDirectory(prefix="witness-bench-") as tmp:
        root = Path(tmp)
        try:
            console.print(f"building {args.clients} logs of {args.requests} checkpoints ...")
            logs = [build_log(root, 1 + c, args.requests) for c in range(args.clients)]
            per_client = [request_bodies(log) for log in logs]
            folder, _ = witness_folder(root, 0, logs)
            process, url = start_witness(folder)
            processes.append(process)
            baseline_rps, _ = throughput(url, per_client, "GET")
            witness_rps, elapsed = throughput(url, per_client, "POST")
            results.update(bare_http_rps=round(baseline_rps, 1), add_checkpoint_rps=round(witness_rps, 1),
                           add_checkpoint_ratio=round(witness_rps / baseline_rps, 3),
                           add_checkpoint_seconds=round(elapsed, 2))
            for log in logs:
                log.close()

            console.print("batched appends without and with three witnesses (policy 2 of 3) ...")
            key = signer(50, "appender")
            ledger = Ledger.create(root / "appender", key, name="bench appender", now=T0, nonce=bytes(32))
            endpoints = []
            for i in range(3):
                wfolder, cosigner = witness_folder(root, 10 + i, [ledger])
                wprocess, wurl = start_witness(wfolder)
                processes.append(wprocess)
                endpoints.append(WitnessEndpoint(wurl, cosigner))
            policy = parse_policy("".join(f"witness W{i} {e.cosigner.vkey}\n" for i, e in enumerate(endpoints))
                                  + "group g 2 W0 W1 W2\nquorum g\n")
            hook = Witnessing(endpoints, clock=lambda: T0, policy=policy)  # as attach() makes it
            append_latencies(ledger, key, 3, args.batch, hook)  # warm-up (connections, caches)
            plain, witnessed = append_latencies(ledger, key, args.appends, args.batch, hook)
            policy.evaluate(ledger.cosigned_checkpoint(), origin=ledger.origin)  # the quorum was really met
            hook.close()
            ledger.close()

            def ms(values: list[float], q: float) -> float:
                ordered = sorted(values)
                return round(1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)

            results.update(append_median_ms=round(1000 * statistics.median(plain), 2), append_p90_ms=ms(plain, 0.9),
                           witnessed_append_median_ms=round(1000 * statistics.median(witnessed), 2),
                           witnessed_append_p90_ms=ms(witnessed, 0.9))
            results["added_median_ms"] = round(1000 * statistics.median(w - p for w, p in zip(witnessed, plain,
                                                                                              strict=True)), 2)
        finally:
            for process in processes:
                process.terminate()
                process.wait(timeout=10)

    table = Table(title="witness benchmark (one run)")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_column("baseline (same run)", justify="right")
    table.add_column("ratio / target", justify="right")
    table.add_row("add-checkpoint, one witness", f"{results['add_checkpoint_rps']:.0f} req/s",
                  f"{results['bare_http_rps']:.0f} req/s bare HTTP",
                  f"{results['add_checkpoint_ratio']:.2f}x; target >= 500 req/s")
    table.add_row("batched append, 3 witnesses 2-of-3 (median)", f"{results['witnessed_append_median_ms']} ms",
                  f"{results['append_median_ms']} ms without",
                  f"+{results['added_median_ms']} ms; target < 20 ms")
    table.add_row("batched append p90", f"{results['witnessed_append_p90_ms']} ms",
                  f"{results['append_p90_ms']} ms without", "")
    Console().print(table)
    print(json.dumps(results, sort_keys=True))
    if args.json_out:
        args.json_out.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
