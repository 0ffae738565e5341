"""A ledger's public copy, whichever way it is published: an export directory (``ledger export``) or a
C2SP tlog-tiles directory, local or served over HTTP(S) (``ledger tiles``). Every ``--from`` consumer
(audit, passport verify, verify-reveal, ledger verify) opens its source here and reads it through
:class:`PublicLog`, which both readers implement."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from keys import TrustedKey
from keys.safeio import UnsafeFile, file_in
from ledger.errors import LedgerIntegrityError, LedgerUsageError
from ledger.export import MANIFEST as EXPORT_MANIFEST
from ledger.export import open_export
from ledger.log import LogReader
from ledger.replay import EntryFn, ProgressFn, ReplayReport
from ledger.tiles import MANIFEST as TILES_MANIFEST
from ledger.tiles import is_tiles_dir, is_url, open_tiles


class PublicBlobs(Protocol):
    def get(self, sha256_hex: str) -> bytes: ...

    def has(self, sha256_hex: str) -> bool: ...


class PublicLog(LogReader, Protocol):
    """What a verifier reads from a published ledger (a :class:`LogReader` plus the published files: manifest,
    blobs, seal documents). Nothing is trusted before :meth:`verify`."""

    @property
    def manifest(self) -> dict[str, Any]: ...

    @property
    def blobs(self) -> PublicBlobs: ...

    @property
    def ledger_key(self) -> TrustedKey: ...

    def entry(self, index: int) -> dict[str, Any]: ...

    def blob(self, sha256_hex: str) -> bytes: ...

    def has_blob(self, sha256_hex: str) -> bool: ...

    def blob_file(self, sha256_hex: str) -> str: ...

    def public_keys(self) -> list[TrustedKey]: ...

    def seal_bytes(self, name: str) -> bytes: ...

    def has_seal(self, name: str) -> bool: ...

    def seal_names(self) -> list[str]: ...

    def location(self, relative: str) -> str: ...

    def manifest_problems(self) -> Iterator[LedgerIntegrityError]: ...

    def verify(self, *, expected_id: str | None = None, progress: ProgressFn | None = None,
               check_blobs: bool = True, check_manifest: bool = True, on_entry: EntryFn | None = None,
               jobs: int | None = None) -> ReplayReport:
        ...


#: ``scheme://`` at the start of a ``--from`` that is neither a folder nor an http(s) URL
_URL_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://.*", re.S)
#: the schemes of database URLs (``heldout init --database``)
DATABASE_SCHEMES = frozenset({"postgresql", "postgres", "sqlite", "mysql"})


def _has_export_manifest(folder: Path) -> bool:
    try:
        return file_in(folder, EXPORT_MANIFEST, what="ledger export")
    except UnsafeFile as exc:
        raise LedgerIntegrityError(exc.message, **exc.evidence) from None


def is_public_log(source: str | Path) -> bool:
    """An http(s) URL (of a tiles directory), an export directory, or a tiles directory."""
    text = str(source)
    if is_url(text):
        return True
    folder = Path(text)
    if not folder.is_dir():
        return False
    return _has_export_manifest(folder) or is_tiles_dir(folder)


def is_tiles_source(source: str | Path) -> bool:
    """Whether ``--from`` names tiles (an http(s) URL, or a folder with ``checkpoint`` and ``tile/``) rather than
    an export. A folder that is both (``export.json`` beside the tiles) is refused: it publishes two logs, and
    one verifier would certify the one, another the other (FORMATS section 16, "Reading")."""
    text = str(source)
    if is_url(text):
        return True
    folder = Path(text)
    if not is_tiles_dir(folder):
        return False
    if _has_export_manifest(folder):
        raise LedgerIntegrityError(f"{folder} holds both an export ({EXPORT_MANIFEST}) and tiles (checkpoint and "
                                   "tile/): two logs in one folder, and readers would differ on which is published",
                                   path=text, file=EXPORT_MANIFEST)
    return True


def open_public_log(source: str | Path) -> PublicLog:
    """Open what ``--from`` names: a tiles directory or URL, else an export directory."""
    text = str(source)
    if is_tiles_source(text):
        return open_tiles(text)
    folder = Path(text)
    if not folder.is_dir():
        scheme = _URL_SCHEME.fullmatch(text)
        if scheme is not None:  # (as a path, "postgresql:///db" reads "postgresql:/db": say what it is instead)
            database = scheme.group(1).lower() in DATABASE_SCHEMES
            raise LedgerUsageError(
                f"{text} is a {'database ' if database else ''}URL, not a public copy of a log: --from reads an "
                "export or tiles directory, or the http(s) URL of tiles" + (
                    "; a ledger in a database is read through the store that uses it (its --store, or "
                    "HELDOUT_DATABASE), without --from" if database else ""), path=text, found=scheme.group(1))
        raise LedgerUsageError(f"no export or tiles directory at {folder}", path=text)
    if not _has_export_manifest(folder) and (os.path.lexists(folder / TILES_MANIFEST)
                                             or os.path.lexists(folder / "tile")):
        # tiles whose first `ledger tiles` run stopped before it published the checkpoint: not "no export.json"
        raise LedgerUsageError(f"{folder} holds tiles but no checkpoint: nothing is published there yet (a `heldout "
                               "ledger tiles` run did not finish; run it again)", path=text, file="checkpoint")
    return open_export(folder)

