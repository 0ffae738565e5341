"""Site benchmark: ``heldout site build`` over a synthetic ledger of 1,000 passports and 10,000 bundles, and the
weight of the largest passport page without its raw JSON.

Run: ``python bench/site_bench.py`` (1,000 passports, 10,000 bundles; ``--passports N --bundles M``; ``--quick``
for 50 and 500), ``--json-out FILE`` also writes the figures as JSON.

What is measured, in one run:

* the build from the public export (``build_site(--from)``): the export's replay with every blob re-hashed, every
  passport verified against the export (``check_passport_on_ledger``), every page rendered and written, the
  manifest. Target: < 60 s on this machine. Also the build from the store (export view + the same build).
* baseline, same run: ``LedgerExport.verify(check_blobs=True)`` alone (the replay any build must do); the table
  gives the build's time as a multiple of it.
* page weight: the largest passport page, in bytes, without its raw signed JSON (the ``<pre>`` and the JSON
  island that carry it). Target: < 200 KB.

Build shortcuts (said in the output; none is inside the timed build): bundles as ``bench/audit_bench.py`` makes
them (``Ledger.append_batch`` over a few dozen distinct synthetic evaluations); passports issued with the real
``issue_passport`` but without an audit before each (a clean audit report at the head is supplied, since
re-auditing 10,000 bundles before each of 1,000 passports is the issuance workflow, not the site), with the
generations and the bundle entries read once instead of once per passport.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from audit_bench import build as build_bundles

import heldout.passports as passports_module
from heldout.generations import ledger_signer, load_generations, open_ledger
from heldout.passports import issue_passport
from heldout.site import build_site
from heldout.store import Store
from ledger import BlobStore, export_ledger, open_export
from seals import canonical_bytes, parse_utc

ISSUE_AT = parse_utc("2026-09-02T00:00:00Z")
SITE_AT = parse_utc("2026-10-01T00:00:00Z")
console = Console(highlight=False)


class CachedEntries:
    """The ledger with ``entries()`` served from one read (passports appended later are not bundles)."""

    def __init__(self, ledger: Any) -> None:
        self._ledger = ledger
        self._entries = list(ledger.entries())

    def entries(self, start: int = 0, end: int | None = None) -> Any:
        return iter([(i, e) for i, e in self._entries[start:end]])

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ledger, name)


def issue_all(st: Store, count: int) -> int:
    """``count`` passports, one per model, spread over the bundle entries; returns how many were issued."""
    with open_ledger(st) as ledger:
        cached = CachedEntries(ledger)
        generations = load_generations(ledger, ISSUE_AT, blobs=BlobStore(st.blobs))
        models = [(e["model_id"], e["generation"]) for _, e in cached.entries() if e.get("type") == "bundle"]
        step = max(1, len(models) // count)
        chosen = models[::step][:count]
        signer = ledger_signer(st, ledger)

        def clean_audit(store: Any, opened: Any) -> tuple[dict[str, Any], bytes]:
            report = {"audit_command": f"python audit.py {ledger.ledger_id}", "bundles": len(models),
                      "ledger_entries": ledger.size, "ledger_head": ledger.root().hex(), "ledger_intact": True,
                      "rederived": len(models), "mode": "operator", "exit_code": 0,
                      "verdict": "supplied by the benchmark"}
            return report, canonical_bytes(report)

        with mock.patch.object(passports_module, "load_clean_audit", clean_audit), \
                mock.patch.object(passports_module, "load_generations", lambda *a, **k: generations), \
                mock.patch.object(passports_module, "load_supersessions", lambda *a, **k: {}), \
                Progress(console=console, transient=True) as bar:
            task = bar.add_task("issuing passports", total=len(chosen))
            for model, generation in chosen:
                issue_passport(st, cached, signer, model, generation=generation, now=ISSUE_AT)  # type: ignore[arg-type]
                bar.advance(task)
    return len(chosen)


def page_weight_without_raw(path: Path) -> int:
    text = path.read_text(encoding="utf-8")
    text = re.sub(r'<pre class="raw" id="raw-json">.*?</pre>', "", text, flags=re.S)
    text = re.sub(r'<script type="application/json" id="heldout-passport">.*?</script>', "", text, flags=re.S)
    return len(text.encode("utf-8"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passports", type=int, default=1_000)
    parser.add_argument("--bundles", type=int, default=10_000)
    parser.add_argument("--distinct", type=int, default=30, help="distinct synthetic evaluations")
    parser.add_argument("--cases", type=int, default=200, help="cases per generation")
    parser.add_argument("--quick", action="store_true", help="smoke run: 50 passports, 500 bundles")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args(argv)
    passports, bundles = (50, 500) if args.quick else (args.passports, args.bundles)
    base = Path(tempfile.mkdtemp(prefix="site-bench-"))
    try:
        console.print(f"building {bundles:,} bundles ({args.distinct} distinct synthetic evaluations, appended in "
                      f"batches) and {passports:,} passports (issue_passport with a supplied clean audit) in {base}")
        start = time.perf_counter()
        built = build_bundles(base, bundles, min(args.distinct, bundles), args.cases)
        st: Store = built["store"]
        issued = issue_all(st, passports)
        export = base / "export"
        with open_ledger(st) as ledger:
            export_ledger(ledger, export, blobs=BlobStore(st.blobs), seals=st.seals)
            entries = ledger.size
        setup_s = time.perf_counter() - start
        console.print(f"set up in {setup_s:.1f} s: {entries:,} entries")

        start = time.perf_counter()
        open_export(export).verify(check_blobs=True)
        replay_s = time.perf_counter() - start

        start = time.perf_counter()
        site = build_site(base / "site", from_dir=export, at=SITE_AT)
        build_s = time.perf_counter() - start
        start = time.perf_counter()
        build_site(base / "site-from-store", store=st.root, at=SITE_AT)
        store_build_s = time.perf_counter() - start

        pages = sorted((base / "site" / "passports").glob("*.html"))
        largest = max(pages, key=lambda p: p.stat().st_size)
        weight = page_weight_without_raw(largest)
        site_bytes = sum(p.stat().st_size for p in (base / "site").rglob("*") if p.is_file())
        same = all((base / "site" / p.relative_to(base / "site")).read_bytes() == (base / "site-from-store" /
                   p.relative_to(base / "site")).read_bytes() for p in (base / "site").rglob("*") if p.is_file())
        results = {
            "passports": issued, "bundles": bundles, "ledger_entries": entries, "files": site.files,
            "build_s": build_s, "store_build_s": store_build_s, "replay_s": replay_s,
            "build_over_replay": build_s / replay_s, "target_build_s": 60,
            "largest_passport_page": largest.name, "largest_page_bytes": largest.stat().st_size,
            "largest_page_without_raw_json_bytes": weight, "target_page_bytes": 200_000,
            "site_bytes": site_bytes, "store_build_equals_export_build": same, "cpus": os.cpu_count(),
        }
        table = Table(title=f"heldout site build: {issued:,} passports, {bundles:,} bundles, {entries:,} entries")
        table.add_column("measure")
        table.add_column("value", justify="right")
        table.add_row("build from the export (target < 60 s)", f"{build_s:.1f} s " + ("ok" if build_s < 60 else
                                                                                         "MISSED"))
        table.add_row("baseline: export replay with blobs re-hashed", f"{replay_s:.1f} s")
        table.add_row("build / replay", f"{build_s / replay_s:.1f}x")
        table.add_row("build from the store (export view)", f"{store_build_s:.1f} s (same bytes: {same})")
        table.add_row("files / site size", f"{site.files:,} / {site_bytes / 1e6:.1f} MB")
        table.add_row("largest passport page without raw JSON (target < 200 KB)",
                      f"{weight / 1e3:.1f} KB " + ("ok" if weight < 200_000 else "MISSED"))
        table.add_row("the same page with its raw JSON", f"{largest.stat().st_size / 1e3:.1f} KB")
        console.print(table)
        if args.json_out:
            args.json_out.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
