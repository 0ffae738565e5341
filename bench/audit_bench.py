"""Audit benchmark: the whole operator audit of a ledger with N bundles, its throughput in MB/s of stored
predictions beside ``hashlib.sha256`` over the same bytes in the same run, and the total time.

Run: ``python bench/audit_bench.py`` (10,000 bundles, a few minutes on 2 cores; ``--bundles N``; ``--quick`` for
200), ``--jobs 1,2`` the worker counts the full audit is timed with (default 1 and 2), ``--new 100`` the bundles
appended after a first clean audit that the incremental audit (``--since``) re-derives, ``--cases N`` cases per
generation (default 1,000), ``--json-out FILE`` also writes the figures as JSON,
``--profile N`` then profiles a second audit (cProfile) and prints the N costliest functions and the share of
the time each audit phase takes, ``--dir DIR`` puts the store on a chosen disk (default: a temporary folder).

What is measured, in one run:

* the incremental audit: the ledger is built with N - ``--new`` bundles and audited in full (the report kept),
  then ``--new`` bundles are appended and ``run_audit(..., since=<that report>)`` re-derives only those; its time
  is reported beside the full audits' (target: 100 new bundles of a 10,000-bundle log under 2 s);
* the full audit of all N bundles with each ``--jobs`` value: bundles/s, and the reports must be the same bytes
  (the ratio jobs-2 / jobs-1 is the parallel speed-up; target: 10,000 bundles under 30 s on 2 cores);

* the audit: ``operator_source`` + ``run_audit`` + writing ``audit_report.json``, exactly what ``python audit.py
  <id>`` does without the terminal output: the ledger replay (every checkpoint signature, roots, consistency),
  seals, reveals, and for every bundle its blobs hash-checked and its whole evaluation re-derived from its
  stored predictions against the private labels. The audit must come out clean with every bundle re-derived.
* the re-derivation alone: ``rederive_bundle`` (what a worker does per bundle: parse the evaluation, read the
  npz, every dimension, canonical bytes, byte comparison) timed in this process over up to 60 of the distinct
  evaluations, in ms per bundle; the full audit's time per bundle less this is the audit's other checks, the
  parent's reads and hashing, and (with jobs > 1) the pool's round trips;
* throughput = the bytes of the stored predictions the audit covers (the predictions blob of every bundle
  entry, summed over the entries) / the audit's wall time; the baseline is ``hashlib.sha256`` over the same
  byte strings, in memory, timed in the same run. Ratio = audit MB/s / sha256 MB/s (issue 6 target: >= 0.3x).

Build shortcut (said in the output): the store is built like the tests' fixture (``tests/audit_support``: keys,
pool, ``public``, gen1, gen2 sealed through the CLI), then a few hundred distinct synthetic evaluations per
generation are made with the harness's own ``build_evaluation``, their blobs stored, and N ``bundle`` entries
appended with ``Ledger.append_batch`` (one signed checkpoint per batch), each naming its own model. Going through
``record_bundle`` for each would re-read the whole ledger for the generations' budget check (O(N^2)), which is
what the evaluate command must do and the benchmark must not time. The audit itself takes no shortcut.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import json
import os
import pstats
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from harness.bundle import bundle_entry
from harness.metrics import evaluation_bytes
from heldout.audit import AuditReport, operator_source, run_audit
from heldout.audit.rederive import RederiveJob, default_jobs, rederive_bundle
from heldout.generations import charge_bits, generation_cases, ledger_signer, load_generations, open_ledger
from heldout.passports import audit_report_path
from heldout.store import Store
from ledger import BlobStore
from seals import parse_utc
from tests.audit_support import NOW, TASK, build_store, synthetic_result

GENERATIONS = ("public", "gen1", "gen2")
#: Distinct evaluations the in-process re-derivation is timed on (``rederive_s``).
REDERIVE_SAMPLES = 60
AUDIT_AT = parse_utc("2026-09-02T00:00:00Z")
BATCH = 100
console = Console(highlight=False)


def append_bundles(st: Store, templates: list[tuple[dict[str, Any], int]], start: int, count: int) -> list[int]:
    """Append bundle entries ``start`` .. ``start + count - 1`` (each its own model) in signed batches; returns
    their predictions blobs' sizes."""
    now = parse_utc(NOW)
    sizes: list[int] = []
    with open_ledger(st) as ledger:
        signer = ledger_signer(st, ledger)
        batch: list[dict[str, Any]] = []
        for i in range(start, start + count):
            template, size = templates[i % len(templates)]
            batch.append({**template, "model_id": f"bench-model-{i:06d}"})
            sizes.append(size)
            if len(batch) == BATCH or i == start + count - 1:
                ledger.append_batch(batch, signer=signer, now=now)
                batch = []
    return sizes


def build(root: Path, bundles: int, distinct: int, cases: int) -> dict[str, Any]:
    """The store and its ledger of ``bundles`` bundle entries over ``distinct`` distinct evaluations."""
    start = time.perf_counter()
    fixture = build_store(root, bundles_per_generation=0, n_public=cases, per_task=cases, budget_bits=1e15)
    sealed = time.perf_counter()
    st = Store.open(fixture.store)
    now = parse_utc(NOW)
    blobs = BlobStore(st.blobs)
    templates: list[tuple[dict[str, Any], int]] = []
    samples: list[RederiveJob] = []
    per_generation = max(1, distinct // len(GENERATIONS))
    with open_ledger(st) as ledger:
        for g, generation in enumerate(GENERATIONS):
            labels = np.asarray(generation_cases(st, generation, TASK, ledger=ledger,
                                                 data_root=fixture.data_root).labels, dtype=np.int64)
            origin = load_generations(ledger, now)[generation].split_origin(TASK)
            for k in range(per_generation):
                result = synthetic_result(f"bench-{generation}-{k}", labels, generation=generation,
                                          seed=1000 * g + k, skill=0.3 + 0.5 * (k % 7) / 6, now=now,
                                          split_origin=origin)
                entry = bundle_entry(result, generation=generation, created_utc=now)
                entry["leakage_bits"] = round(charge_bits(result.evaluation), 6)
                blobs.put(evaluation_bytes(result.evaluation))
                blobs.put(result.predictions_npz)
                templates.append((entry, len(result.predictions_npz)))
                if len(samples) < REDERIVE_SAMPLES:
                    samples.append(RederiveJob(index=len(samples), evaluation=evaluation_bytes(result.evaluation),
                                               predictions=result.predictions_npz, labels=labels))
        made = time.perf_counter()
    predictions_sizes = append_bundles(st, templates, 0, bundles)
    with open_ledger(st) as ledger:
        size = ledger.size
    appended = time.perf_counter()
    return {"fixture": fixture, "store": st, "ledger_entries": size, "distinct": len(templates), "templates": templates,
            "samples": samples,
            "predictions_sizes": predictions_sizes, "cases_per_generation": cases,
            "seal_s": sealed - start, "evaluations_s": made - sealed, "append_s": appended - made,
            "build_s": appended - start}


def audit_once(st: Store, ledger_id: str, *, show: bool, jobs: int = 1, since: bytes | None = None,
               out: Path | None = None) -> tuple[AuditReport, float]:
    """The operator audit as ``python audit.py`` runs it (report written), timed."""
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True, disable=not show) as bar:
        tasks: dict[str, TaskID] = {}

        def tick(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total)
            bar.update(tasks[phase], completed=done, total=total)

        start = time.perf_counter()
        source = operator_source(st, ledger_id)
        try:
            # the report given as since is this benchmark's own (written by audit_once), so it is trusted
            report = run_audit(source, now=AUDIT_AT, audit_command=f"python audit.py {ledger_id}", progress=tick,
                               jobs=jobs, since=since,
                               own_reports=frozenset() if since is None else {hashlib.sha256(since).hexdigest()})
        finally:
            source.ledger.close()
        report.write(out or audit_report_path(st, ledger_id))
        return report, time.perf_counter() - start


def claim_gate_s(st: Store, ledger_id: str) -> float:
    """What ``passport verify`` and ``site build`` add (``heldout.audit.gate``): the audit with no bundle re-derived
    (a passport re-derives only its own few), timed; its report must be clean as the full audit's."""
    start = time.perf_counter()
    source = operator_source(st, ledger_id)
    try:
        report = run_audit(source, now=AUDIT_AT, audit_command="claim gate", rederive=())
    finally:
        source.ledger.close()
    assert not report.findings, [f.message for f in report.findings[:3]]
    return time.perf_counter() - start


def rederive_s(samples: list[RederiveJob], rounds: int = 3) -> float:
    """Seconds to re-derive one bundle in this process (``rederive_bundle``: parse the evaluation, read the
    npz, compute every dimension, canonical bytes, compare), the mean over ``samples``, best of ``rounds``:
    the worker's share of a bundle, without the audit's other checks or the pool."""
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for job in samples:
            if rederive_bundle(job).problem is not None:
                raise SystemExit(f"sample {job.index} does not re-derive")
        best = min(best, time.perf_counter() - start)
    return best / max(1, len(samples))


def sha256_baseline(st: Store, ledger_id: str, rounds: int = 3) -> tuple[int, float]:
    """``hashlib.sha256`` over every bundle's predictions bytes (read beforehand, untimed): best of ``rounds``."""
    blobs = BlobStore(st.blobs)
    cache: dict[str, bytes] = {}
    with open_ledger(st, ledger_id) as ledger:
        data = [cache.setdefault(e["predictions_sha256"], blobs.get(e["predictions_sha256"]))
                for _, e in ledger.entries() if e.get("type") == "bundle"]
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for chunk in data:
            hashlib.sha256(chunk).digest()
        best = min(best, time.perf_counter() - start)
    return sum(len(chunk) for chunk in data), best


PHASES = {"ledger replay": ("_replay",), "entries": ("_decode_entries",), "generations": ("_load_generations",),
          "seals and reveals": ("_check_seals", "_check_reveals"), "bundles": ("_check_bundles",),
          "passports": ("_check_passports",), "blob sweep": ("_check_blob_files",)}



def profile(st: Store, ledger_id: str, top: int) -> dict[str, Any]:
    profiler = cProfile.Profile()
    profiler.enable()
    _, elapsed = audit_once(st, ledger_id, show=False)
    profiler.disable()
    stats = pstats.Stats(profiler)
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]

    def cumulative(name: str, module: str = "") -> float:
        return sum(v[3] for (file, _, func), v in raw.items() if func == name and module in file)

    def called_from(name: str, caller: str) -> float:
        """Cumulative time of ``name`` in calls made by ``caller`` (pstats keeps per-caller figures)."""
        return sum(ct for (_, _, func), v in raw.items() if func == name
                   for (_, _, by), (_, _, _, ct) in v[4].items() if by == caller)

    total = cumulative("run_audit")
    phases = {label: sum(cumulative(f, "heldout/audit/run.py") for f in funcs) for label, funcs in PHASES.items()}
    inner = {
        "re-derive the metrics (harness.metrics.rederive)": cumulative("rederive", "harness/metrics"),
        "read the npz (StoredPredictions.from_npz_bytes)": called_from("from_npz_bytes", "rederive_bundle"),
        "canonical bytes of the re-derived evaluation": called_from("evaluation_bytes", "rederive_bundle"),
        "parse the evaluation JSON (twice: checks, re-derivation)": (
            called_from("parse_json_object", "_start_bundle") + called_from("parse_json_object", "rederive_bundle")),
        "recompute the leakage charge (_check_charge)": called_from("_check_charge", "_start_bundle"),
        "read and hash blobs (_Context.blob)": called_from("blob", "_start_bundle"),
        "labels, once per generation (_labels_for)": called_from("_labels_for", "_start_bundle"),
    }
    inner["everything else in the bundle checks"] = phases["bundles"] - sum(inner.values())
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(top)
    return {"profiled_s": elapsed, "run_audit_s": total, "phases_s": phases, "within_bundles_s": inner,
            "top": out.getvalue()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundles", type=int, default=10_000, help="bundle entries in the ledger")
    parser.add_argument("--quick", action="store_true", help="smoke run: 200 bundles")
    parser.add_argument("--distinct", type=int, default=300, help="distinct synthetic evaluations")
    parser.add_argument("--cases", type=int, default=1_000, help="cases per generation (public, gen1, gen2)")
    parser.add_argument("--jobs", default="1,2", help="worker counts to time the full audit with (comma list; "
                        "empty: only the first audit and the incremental one)")
    parser.add_argument("--new", type=int, default=100, help="bundles appended after a first clean audit, which "
                        "the incremental audit re-derives")
    parser.add_argument("--json-out", type=Path, help="also write the figures to this JSON file")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="profile a second audit and print its N costliest functions")
    parser.add_argument("--dir", type=Path, help="where to put the store (default: a temporary folder)")
    args = parser.parse_args(argv)
    bundles = 200 if args.quick else args.bundles
    distinct = min(args.distinct, bundles)
    new = min(max(0, args.new), bundles - 1)
    job_counts = [int(j) for j in args.jobs.split(",") if j.strip()]
    first_jobs = max(job_counts, default=default_jobs())

    base = Path(tempfile.mkdtemp(prefix="audit-bench-", dir=args.dir))
    try:
        console.print(f"building a ledger of {bundles - new:,} bundles in {base}: store, pool and three generations "
                      f"({args.cases:,} cases each) through the CLI, {distinct} distinct synthetic evaluations "
                      f"(harness.metrics.build_evaluation), then the bundle entries appended directly with "
                      f"Ledger.append_batch in batches of {BATCH} (not record_bundle: its budget check re-reads "
                      "the ledger per bundle)")
        built = build(base, bundles - new, distinct, args.cases)
        fixture = built["fixture"]
        st: Store = built["store"]
        console.print(f"built in {built['build_s']:.1f} s (seals {built['seal_s']:.1f} s, evaluations "
                      f"{built['evaluations_s']:.1f} s, appends {built['append_s']:.1f} s): "
                      f"{built['ledger_entries']:,} entries")
        first_path = base / "first-report.json"
        first, first_s = audit_once(st, fixture.ledger_id, show=True, jobs=first_jobs, out=first_path)
        if not first.clean:
            console.print(f"[red]the first audit is not clean[/]: {first.verdict}")
            return 1
        console.print(f"first full audit of {bundles - new:,} bundles (jobs {first_jobs}): {first_s:.1f} s; "
                      f"appending {new} bundles")
        built["predictions_sizes"] += append_bundles(st, built["templates"], bundles - new, new)

        incremental, incremental_s = audit_once(st, fixture.ledger_id, show=True, jobs=first_jobs,
                                                since=first_path.read_bytes(), out=base / "incremental.json")
        if not incremental.clean or incremental.since is None or incremental.since.rederived_now != new:
            console.print(f"[red]the incremental audit did not carry the first forward[/]: {incremental.verdict}, "
                          f"{[f.message for f in incremental.findings[:3]]}")
            return 1

        full: dict[int, tuple[AuditReport, float, bytes]] = {}
        for jobs in job_counts:
            out = base / f"full-jobs{jobs}.json"
            report, seconds = audit_once(st, fixture.ledger_id, show=True, jobs=jobs, out=out)
            full[jobs] = (report, seconds, out.read_bytes())
            if report.exit_code != 0 or report.rederived != bundles or report.bundles != bundles:
                console.print(f"[red]the audit is not clean[/]: {report.verdict}, {report.rederived} of "
                              f"{report.bundles} re-derived, findings {[f.message for f in report.findings[:3]]}")
                return 1
        if not full:  # only the incremental audit was asked for
            console.print(f"incremental audit of {new} new bundles of {bundles:,} (jobs {first_jobs}): "
                          f"{incremental_s:.2f} s (target < 2 s at 10,000); first full audit of {bundles - new:,}: "
                          f"{first_s:.1f} s ({(bundles - new) / first_s:,.0f} bundles/s)")
            if args.json_out:
                args.json_out.write_text(json.dumps({"bundles": bundles, "new_bundles": new, "jobs": first_jobs,
                                                     "incremental_s": incremental_s, "first_full_audit_s": first_s},
                                                    indent=1, sort_keys=True) + "\n")
            return 0
        identical = len({data for _, _, data in full.values()}) == 1
        report, audit_s, _ = full[job_counts[0]]
        predictions_bytes = sum(built["predictions_sizes"])
        hashed_bytes, sha_s = sha256_baseline(st, fixture.ledger_id)
        assert hashed_bytes == predictions_bytes
        audit_mb_s = predictions_bytes / audit_s / 1e6
        sha_mb_s = predictions_bytes / sha_s / 1e6
        ratio = audit_mb_s / sha_mb_s
        rederive_one_s = rederive_s(built["samples"])
        gate_s = claim_gate_s(st, fixture.ledger_id)
        results: dict[str, Any] = {
            "claim_gate": {"seconds": gate_s, "ratio_to_full_audit": gate_s / audit_s},
            "bundles": bundles, "ledger_entries": report.ledger_entries, "checkpoints": report.checkpoints,
            "distinct_evaluations": built["distinct"], "cases_per_generation": args.cases,
            "predictions_bytes": predictions_bytes,
            "predictions_bytes_per_bundle": predictions_bytes / bundles,
            "full_audit": {str(jobs): {"seconds": seconds, "bundles_per_s": bundles / seconds}
                           for jobs, (_, seconds, _) in full.items()},
            "reports_identical_across_jobs": identical,
            "incremental": {"new_bundles": new, "seconds": incremental_s, "base_bundles": bundles - new,
                            "target_s": 2.0, "first_full_audit_s": first_s},
            "audit_s": audit_s, "audit_mb_s": audit_mb_s, "bundles_per_s": bundles / audit_s,
            "sha256_s": sha_s, "sha256_mb_s": sha_mb_s, "ratio": ratio, "target_ratio": 0.3,
            "rederive_ms_per_bundle": rederive_one_s * 1e3, "rederive_samples": len(built["samples"]),
            "build_s": built["build_s"], "verdict": report.verdict, "rederived": report.rederived,
            "python": sys.version.split()[0], "cpus": os.cpu_count(),
            "build_shortcut": "bundle entries appended with Ledger.append_batch (batches of "
                              f"{BATCH}) over {built['distinct']} distinct synthetic evaluations",
        }

        table = Table(title=f"operator audit of {bundles:,} bundles (clean: {report.rederived:,} re-derived)")
        for column in ("measure", "value"):
            table.add_column(column, justify="left" if column == "measure" else "right")
        table.add_row("ledger entries / checkpoints", f"{report.ledger_entries:,} / {report.checkpoints:,}")
        table.add_row("stored predictions covered", f"{predictions_bytes / 1e6:,.1f} MB "
                                                     f"({predictions_bytes / bundles / 1e3:,.1f} kB per bundle)")
        base_s = full[job_counts[0]][1]
        for jobs, (_, seconds, _) in full.items():
            scaled = seconds * 10_000 / bundles
            table.add_row(f"full audit, --jobs {jobs}", f"{seconds:,.1f} s ({bundles / seconds:,.0f} bundles/s; "
                          f"x{base_s / seconds:.2f} vs --jobs {job_counts[0]}; ~{scaled:,.0f} s per 10,000)")
        table.add_row("reports identical across --jobs", "yes" if identical else "NO")
        table.add_row(f"incremental audit, {new} new of {bundles:,}",
                      f"{incremental_s:,.2f} s (target < 2 s at 10,000) "
                      f"{'ok' if incremental_s < 2.0 else 'MISSED'} at this size")
        table.add_row(f"first full audit of {bundles - new:,} (--jobs {first_jobs})", f"{first_s:,.1f} s")
        table.add_row("audit throughput (first --jobs)", f"{audit_mb_s:,.2f} MB/s")
        table.add_row("hashlib.sha256, same bytes", f"{sha_mb_s:,.0f} MB/s ({sha_s * 1e3:,.1f} ms)")
        table.add_row("ratio (target >= 0.30x)", f"{ratio:.4f}x " + ("ok" if ratio >= 0.3 else "MISSED"))
        table.add_row("re-derive one bundle in-process", f"{rederive_one_s * 1e3:,.2f} ms (mean of "
                      f"{len(built['samples'])} distinct evaluations, best of 3)")
        table.add_row("claim gate (the audit, nothing re-derived)",
                      f"{gate_s:,.2f} s (x{gate_s / audit_s:.2f} of the full audit, --jobs {job_counts[0]})")
        table.add_row("build time (shortcut)", f"{built['build_s']:,.1f} s")
        console.print(table)
        if not identical:
            console.print("[red]the reports differ between --jobs values[/]")
            return 1

        if args.profile:
            console.print("profiling a second audit (cProfile; its times are inflated by the profiler)...")
            profiled = profile(st, fixture.ledger_id, args.profile)
            results["profile"] = {k: v for k, v in profiled.items() if k != "top"}
            shares = Table(title=f"where the audit's time goes (profiled run, {profiled['profiled_s']:.1f} s)")
            for column in ("part", "seconds", "share"):
                shares.add_column(column, justify="left" if column == "part" else "right")
            total = profiled["run_audit_s"] or 1.0
            for label, seconds in profiled["phases_s"].items():
                shares.add_row(f"phase: {label}", f"{seconds:.2f}", f"{100 * seconds / total:.1f}%")
            for label, seconds in profiled["within_bundles_s"].items():
                if seconds:
                    shares.add_row(f"  bundles: {label}", f"{seconds:.2f}", f"{100 * seconds / total:.1f}%")
            console.print(shares)
            console.print(profiled["top"], markup=False)
        if args.json_out:
            args.json_out.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
            console.print(f"figures written to {args.json_out}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
