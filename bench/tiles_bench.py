"""Tiles benchmark: writing and reading the C2SP tlog-tiles layout against the export of the same ledger.

Run: ``python bench/tiles_bench.py`` (``--entries N`` default 100000; ``--batch B`` entries per append and
checkpoint, default 1000; ``--json FILE``; ``--quick`` for a smoke run of 5000 entries).

One ledger of N bundle entries (about 330 bytes each) appended in batches of B, then, in the same run:

1. ``ledger export`` of the ledger (the baseline);
2. ``ledger tiles`` of the same ledger into an empty folder;
3. one more batch appended, then ``ledger tiles`` again into the same folder (the incremental run: it writes
   only what the batch completes or extends) and, for comparison, a fresh export of the grown ledger (an
   export has no incremental mode);
4. reading back: ``LedgerExport.verify`` and ``TilesLog.verify`` (every tile and entry checked, every
   checkpoint replayed) of the grown ledger, the tiles also over HTTP from Python's ``http.server`` on
   127.0.0.1 (one connection per file, as ``urllib`` makes them).

Ratios are against the export measured in the same run.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import heldout.entries  # noqa: F401  (registers the domain entry types the benchmark's entries use)
from keys import Signer
from ledger import Ledger, export_ledger, open_export
from ledger.tiles import open_tiles, write_tiles

console = Console(stderr=True)
T0 = datetime(2026, 3, 1, tzinfo=UTC)


def bundle(i: int) -> dict[str, Any]:
    def digest(label: str) -> str:
        return hashlib.sha256(f"{label} {i}".encode()).hexdigest()

    return {"type": "bundle", "v": 1, "generation": "gen1", "model_id": f"model-{i % 97}", "task": "pathmnist",
            "evaluation_sha256": digest("evaluation"), "predictions_sha256": digest("predictions"),
            "created_utc": "2026-03-01T00:00:00Z"}


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def run(entries: int, batch: int, work: Path) -> dict[str, Any]:
    signer = Signer.from_seed(bytes([7]) * 32, name="bench-operator", key_id="bench-7")
    ledger = Ledger.create(work / "ledgers", signer, name="tiles bench", now=T0, nonce=bytes(32))
    with console.status(f"appending {entries} entries in batches of {batch}"):
        for first in range(1, entries, batch):
            ledger.append_batch([bundle(i) for i in range(first, min(first + batch, entries))], signer=signer,
                                now=T0 + timedelta(seconds=first))
    size = ledger.size
    figures: dict[str, Any] = {"entries": size, "batch": batch, "checkpoints": len(ledger.checkpoints())}
    with console.status("export (baseline), then tiles"):
        figures["export_s"] = timed(lambda: export_ledger(ledger, work / "export"))
        figures["tiles_s"] = timed(lambda: write_tiles(ledger, work / "tiles"))
    figures["export_bytes"] = folder_bytes(work / "export")
    figures["tiles_bytes"] = folder_bytes(work / "tiles")
    ledger.append_batch([bundle(size + i) for i in range(batch)], signer=signer, now=T0 + timedelta(days=1))
    with console.status("one more batch: tiles again, fresh export"):
        result: dict[str, Any] = {}
        figures["tiles_incremental_s"] = timed(lambda: result.update(write_tiles(ledger, work / "tiles").to_json()))
        figures["export_grown_s"] = timed(lambda: export_ledger(ledger, work / "export2"))
    figures["incremental_files_written"] = result["written"]
    figures["incremental_full_tiles_written"] = result["full_tiles_written"]
    with console.status("reading back: export verify, tiles verify"):
        figures["export_verify_s"] = timed(lambda: open_export(work / "export2").verify())
        figures["tiles_verify_s"] = timed(lambda: open_tiles(work / "tiles").verify())
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(work / "tiles")))
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        try:
            url = f"http://127.0.0.1:{httpd.server_address[1]}"
            figures["tiles_verify_http_s"] = timed(lambda: open_tiles(url).verify())
        finally:
            httpd.shutdown()
            httpd.server_close()
    ledger.close()
    figures["tiles_vs_export"] = figures["tiles_s"] / figures["export_s"]
    figures["incremental_vs_export"] = figures["tiles_incremental_s"] / figures["export_grown_s"]
    figures["tiles_verify_vs_export_verify"] = figures["tiles_verify_s"] / figures["export_verify_s"]
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="smoke run: 5000 entries")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    entries = 5000 if args.quick else args.entries
    with tempfile.TemporaryDirectory(prefix="heldout-tiles-bench-") as tmp:
        figures = run(entries, args.batch, Path(tmp))
    table = Table(title=f"tiles vs export: {figures['entries']} entries, {figures['checkpoints']} checkpoints")
    table.add_column("operation")
    table.add_column("seconds", justify="right")
    table.add_column("ratio to the export", justify="right")
    table.add_row("export (baseline)", f"{figures['export_s']:.2f}", "1.00")
    table.add_row("tiles, fresh", f"{figures['tiles_s']:.2f}", f"{figures['tiles_vs_export']:.2f}")
    table.add_row(f"tiles, incremental (+{args.batch}; {figures['incremental_files_written']} files)",
                  f"{figures['tiles_incremental_s']:.3f}", f"{figures['incremental_vs_export']:.3f} of a fresh export")
    table.add_row("export of the grown ledger", f"{figures['export_grown_s']:.2f}", "")
    table.add_row("verify export", f"{figures['export_verify_s']:.2f}", "1.00")
    table.add_row("verify tiles", f"{figures['tiles_verify_s']:.2f}", f"{figures['tiles_verify_vs_export_verify']:.2f}")
    table.add_row("verify tiles over HTTP (127.0.0.1)", f"{figures['tiles_verify_http_s']:.2f}",
                  f"{figures['tiles_verify_http_s'] / figures['export_verify_s']:.2f}")
    table.add_row("size on disk (MB): export / tiles",
                  f"{figures['export_bytes'] / 1e6:.1f} / {figures['tiles_bytes'] / 1e6:.1f}", "")
    Console().print(table)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
