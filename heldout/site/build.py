"""Build the static site: verify first (``collect``), render every page and write each file as it is rendered
into a folder beside ``out`` (the whole site is never held in memory), then rename it into place, so a refused
build leaves nothing and a finished one is complete.

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
from heldout.site.collect import SiteBuildRefused, SiteData, collect, export_view
from heldout.site.pages import generations_page, keys_page, leaderboard, ledger_pages, passport_page
from heldout.site.paths import blob_path, check_output_path
from keys import HeldoutError, UsageError
from keys.files import exchange_paths, remove_stale_leftovers
from keys.safeio import DOCUMENT_LIMIT, read_named
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
    """The blobs the site links to: passports, what they cite, and reveals (only those the export holds, and only
    SHA-256 digests: :func:`heldout.site.paths.blob_path`)."""
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
    return {d for d in wanted if blob_path(d) is not None and site.export.has_blob(d)}


class Sink:
    """Where rendered files go, one at a time, as they are rendered; only each file's SHA-256 is kept (what
    ``manifest.json`` lists). A path outside the forms the site writes (:func:`heldout.site.paths.check_output_path`),
    or one written twice, refuses the build."""

    def __init__(self) -> None:
        self.hashes: dict[str, str] = {}

    def add(self, path: str, data: bytes) -> None:
        if not check_output_path(path):
            raise SiteBuildRefused(f"the site would write a file at {path[:300]!r}, which is not a plain relative "
                                   "path; nothing was published", found=path[:300])
        if path in self.hashes or path == MANIFEST:
            raise SiteBuildRefused(f"the site would write {path} twice; nothing was published", found=path)
        self.hashes[path] = hashlib.sha256(data).hexdigest()
        self.write(path, data)

    def finish(self, manifest: bytes) -> None:
        """The manifest: the one file not listed in itself."""
        self.write(MANIFEST, manifest)

    def write(self, path: str, data: bytes) -> None:
        raise NotImplementedError


class MemorySink(Sink):
    """Every file kept in memory (:func:`render`: for tests and small sites)."""

    def __init__(self) -> None:
        super().__init__()
        self.files: dict[str, bytes] = {}

    def write(self, path: str, data: bytes) -> None:
        self.files[path] = data


class DirectorySink(Sink):
    """Each file written under ``root`` as soon as it is rendered."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root

    def write(self, path: str, data: bytes) -> None:
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def render_into(site: SiteData, sink: Sink, progress: ProgressFn = _quiet) -> bytes:
    """Render every file of the site into ``sink`` as it is made, then ``manifest.json`` (each file's SHA-256
    by path); returns the manifest's bytes."""
    carried = _carried_blobs(site)
    for digest in sorted(carried):
        sink.add(f"blobs/sha256/{digest[:2]}/{digest}", site.export.blob(digest))
    for path, digest in sorted(site.seal_files.items()):
        data = site.export.seal_bytes(path.removeprefix("seals/"))
        if hashlib.sha256(data).hexdigest() != digest:  # changed since it was checked
            raise SiteBuildRefused(f"{path} changed during the build; nothing was published",
                                   file=site.export.location(path), expected=digest)
        sink.add(path, data)
    for name in STATIC_FILES:
        sink.add(f"static/{name}", (STATIC / name).read_bytes())
    document, index_html = leaderboard(site)
    sink.add("leaderboard.json", canonical_bytes(document) + b"\n")
    sink.add("index.html", index_html.encode("utf-8"))
    sink.add("keys.html", keys_page(site).encode("utf-8"))
    sink.add("ledger/generations.html", generations_page(site, carried).encode("utf-8"))
    for page_path, text in ledger_pages(site, carried):
        sink.add(page_path, text.encode("utf-8"))
    labels = RevealedLabels(site)
    for done, record in enumerate(site.passports, start=1):
        progress("rendering passport pages", done, len(site.passports))
        sink.add(record.page, passport_page(site, record, carried, labels.bins_for(record)).encode("utf-8"))
    manifest = {
        "format": SITE_FORMAT,
        "version": SITE_VERSION,
        "ledger_id": site.ledger_id,
        "checkpoint_size": site.head.size,
        "release_tag": site.release_tag,
        "reference_time": format_utc(site.at),
        "files": dict(sorted(sink.hashes.items())),
    }
    data = canonical_bytes(manifest) + b"\n"
    sink.finish(data)
    return data


def render(site: SiteData, progress: ProgressFn = _quiet) -> dict[str, bytes]:
    """Every file of the site (manifest included), by relative path, held in memory. The build itself writes
    each file as it is rendered (:func:`build_site`)."""
    sink = MemorySink()
    render_into(site, sink, progress)
    return sink.files


def _is_previous_site(out: Path) -> bool:
    try:  # (bounded, a regular file only: a FIFO or a link to a device is refused, never read or waited on)
        manifest = parse_json_object(read_named(out / MANIFEST, limit=DOCUMENT_LIMIT, what=MANIFEST), what=MANIFEST)
    except (OSError, HeldoutError):  # unreadable or not JSON: not a site of ours, so the caller refuses
        return False
    return manifest.get("format") == SITE_FORMAT


def _check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out} exists and is not a directory", path=str(out))
    if out.is_dir() and any(out.iterdir()) and not _is_previous_site(out):
        raise UsageError(f"{out} is not empty and not a heldout site; choose another folder", path=str(out))


def _publish(out: Path, site: SiteData, progress: ProgressFn) -> tuple[bytes, int]:
    """Render the site into a temporary folder beside ``out`` (``.<name>.tmp<pid>``), file by file, then put
    it in place: the previous site, if any, is replaced only once the new one is complete, and in one step
    where the system can (:func:`keys.files.exchange_paths`), so that ``out`` always holds a whole site, the
    old or the new, even when the build is killed; then the old one is removed. Elsewhere the old site is
    renamed aside (``.<name>.old<pid>``) first: a kill between the two renames leaves no site at ``out``.
    What killed builds left beside ``out`` is removed first (:func:`keys.files.remove_stale_leftovers`).
    Returns the manifest and the number of files."""
    _check_out(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_leftovers(out.parent, out.name)
    tmp = out.parent / f".{out.name}.tmp{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        tmp.mkdir()
        sink = DirectorySink(tmp)
        manifest = render_into(site, sink, progress)
        if not out.exists():
            os.rename(tmp, out)
        elif exchange_paths(tmp, out):  # tmp now holds the previous site
            shutil.rmtree(tmp)
        else:
            old = out.parent / f".{out.name}.old{os.getpid()}"
            os.rename(out, old)
            os.rename(tmp, out)
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest, len(sink.hashes) + 1


def build_site(out: Path, *, store: Path | None = None, from_dir: str | Path | None = None, at: datetime | None = None,
               release_tag: str | None = None, progress: ProgressFn | None = None) -> BuiltSite:
    """Verify the public data (an export, or the store seen through an export) and write the site to ``out``.
    Raises :class:`heldout.site.collect.SiteBuildRefused` (exit 1, naming the file) for anything that does not
    verify, and :class:`keys.UsageError` (exit 2) for bad arguments; in both cases nothing is written."""
    tick = progress or _quiet
    with export_view(store=store, from_dir=from_dir) as export:
        site = collect(export, at=at, release_tag=release_tag, progress=tick)
        manifest, count = _publish(Path(out), site, tick)
    return BuiltSite(out=Path(out), files=count, passports=len(site.passports), ledger_id=site.ledger_id,
                     manifest_sha256=hashlib.sha256(manifest).hexdigest())


def manifest_of(out: Path) -> dict[str, Any]:
    return parse_json_object((Path(out) / MANIFEST).read_bytes(), what=MANIFEST)
