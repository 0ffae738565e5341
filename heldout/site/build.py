"""Build the static site: verify first (``collect``), render every page, write the tree beside ``out`` and
rename it into place, so a refused build leaves nothing and a finished one is complete.

Determinism: inputs are read in sorted order, no clock is read (the reference time comes from the caller or
from the ledger), numbers are formatted by one function, and ``manifest.json`` lists every file's SHA-256. The
same export and reference time give the same bytes, file for file.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from heldout.site.calibration import RevealedLabels
from heldout.site.collect import SiteData, collect, export_view
from heldout.site.pages import generations_page, keys_page, leaderboard, ledger_pages, passport_page
from keys import HeldoutError, UsageError
from seals import canonical_bytes, format_utc, parse_json_object

SITE_FORMAT = "heldout-site"
SITE_VERSION = 1
MANIFEST = "manifest.json"
STATIC = Path(__file__).resolve().parent / "static"
STATIC_FILES = ("site.css", "verify.js")

ProgressFn = Callable[[str, int, int], None]  # (phase, done, total)


def _quiet(phase: str, done: int, total: int) -> None:
    return None


@dataclass(frozen=True)
class BuiltSite:
    out: Path
    files: int
    passports: int
    ledger_id: str
    manifest_sha256: str

    @property
    def index(self) -> Path:
        return self.out / "index.html"


def _carried_blobs(site: SiteData) -> set[str]:
    """The blobs the site links to: passports, what they cite, and reveals (only those the export holds)."""
    wanted: set[str] = set()
    for record in site.passports:
        wanted.add(record.sha256)
        for ref in (record.verdict.passport.heldout or {}).get("bundles") or []:
            for member in ("evaluation_sha256", "predictions_sha256"):
                if isinstance(ref.get(member), str):
                    wanted.add(ref[member])
    for g in site.generations.values():
        if g.reveal_sha256:
            wanted.add(g.reveal_sha256)
    return {d for d in wanted if site.export.has_blob(d)}


def render(site: SiteData, progress: ProgressFn = _quiet) -> dict[str, bytes]:
    """Every file of the site (manifest included), by relative path."""
    files: dict[str, bytes] = {}
    carried = _carried_blobs(site)
    for digest in sorted(carried):
        files[f"blobs/sha256/{digest[:2]}/{digest}"] = site.export.blob(digest)
    for name in site.export.seal_names():
        files[f"seals/{name}"] = site.export.seal_bytes(name)
    for name in STATIC_FILES:
        files[f"static/{name}"] = (STATIC / name).read_bytes()
    document, index_html = leaderboard(site)
    files["leaderboard.json"] = canonical_bytes(document) + b"\n"
    files["index.html"] = index_html.encode("utf-8")
    files["keys.html"] = keys_page(site).encode("utf-8")
    files["ledger/generations.html"] = generations_page(site, carried).encode("utf-8")
    for page_path, text in ledger_pages(site, carried).items():
        files[page_path] = text.encode("utf-8")
    labels = RevealedLabels(site)
    for done, record in enumerate(site.passports, start=1):
        progress("rendering passport pages", done, len(site.passports))
        files[record.page] = passport_page(site, record, carried, labels.bins_for(record)).encode("utf-8")
    manifest = {
        "format": SITE_FORMAT,
        "version": SITE_VERSION,
        "ledger_id": site.ledger_id,
        "checkpoint_size": site.head.size,
        "release_tag": site.release_tag,
        "reference_time": format_utc(site.at),
        "files": {path: hashlib.sha256(data).hexdigest() for path, data in sorted(files.items())},
    }
    files[MANIFEST] = canonical_bytes(manifest) + b"\n"
    return files


def _is_previous_site(out: Path) -> bool:
    try:
        manifest = parse_json_object((out / MANIFEST).read_bytes(), what=MANIFEST)
    except (OSError, HeldoutError):  # unreadable or not JSON: not a site of ours, so the caller refuses
        return False
    return manifest.get("format") == SITE_FORMAT


def _write_tree(out: Path, files: dict[str, bytes]) -> None:
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out} exists and is not a directory", path=str(out))
    if out.is_dir() and any(out.iterdir()) and not _is_previous_site(out):
        raise UsageError(f"{out} is not empty and not a heldout site; choose another folder", path=str(out))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        for path in sorted(files):
            target = tmp / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(files[path])
        if out.exists():
            old = out.parent / f".{out.name}.old{os.getpid()}"
            os.rename(out, old)
            os.rename(tmp, out)
            shutil.rmtree(old)
        else:
            os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def build_site(out: Path, *, store: Path | None = None, from_dir: str | Path | None = None, at: datetime | None = None,
               release_tag: str | None = None, progress: ProgressFn | None = None) -> BuiltSite:
    """Verify the public data (an export, or the store seen through an export) and write the site to ``out``.
    Raises :class:`heldout.site.collect.SiteBuildRefused` (exit 1, naming the file) for anything that does not
    verify, and :class:`keys.UsageError` (exit 2) for bad arguments; in both cases nothing is written."""
    tick = progress or _quiet
    with export_view(store=store, from_dir=from_dir) as export:
        site = collect(export, at=at, release_tag=release_tag, progress=tick)
        files = render(site, tick)
    _write_tree(Path(out), files)
    manifest = files[MANIFEST]
    return BuiltSite(out=Path(out), files=len(files), passports=len(site.passports), ledger_id=site.ledger_id,
                     manifest_sha256=hashlib.sha256(manifest).hexdigest())


def manifest_of(out: Path) -> dict[str, Any]:
    return parse_json_object((Path(out) / MANIFEST).read_bytes(), what=MANIFEST)
