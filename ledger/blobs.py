"""Content-addressed blobs: ``<folder>/<first two hex>/<sha256 hex>``.

Large data (prediction arrays, documents) lives here and ledger entries carry its SHA-256. Writing is atomic
(a temporary file in the same folder, fsynced, then linked into place), idempotent, and durable (the folder
is fsynced too). Reading re-hashes the content, so a tampered blob is never returned.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from pathlib import Path

from keys.files import fsync_dir, write_synced
from ledger.errors import BlobMissing, LedgerIntegrityError, LedgerUsageError

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def check_sha256_hex(value: str) -> str:
    if not isinstance(value, str) or not _HEX64.match(value):
        raise LedgerUsageError("a blob name is 64 lowercase hex characters (a SHA-256)", found=str(value)[:80])
    return value


class BlobStore:
    """The store's ``blobs/sha256`` folder (or an export's copy of it)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    def path(self, sha256_hex: str) -> Path:
        check_sha256_hex(sha256_hex)
        return self.folder / sha256_hex[:2] / sha256_hex

    def has(self, sha256_hex: str) -> bool:
        return self.path(sha256_hex).is_file()

    def put(self, data: bytes) -> str:
        """Store ``data``; returns its SHA-256 hex. Storing the same bytes twice is a no-op."""
        digest = hashlib.sha256(data).hexdigest()
        target = self.path(digest)
        if target.is_file():
            if hashlib.sha256(target.read_bytes()).hexdigest() == digest:
                return digest
            raise LedgerIntegrityError("a stored blob does not match its name", file=str(target),
                                       expected=digest)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{digest}.tmp{os.getpid()}")
        try:  # the temporary file goes whatever happens (a full disk, an I/O error)
            write_synced(tmp, data, 0o644, exclusive=False)
            with contextlib.suppress(FileExistsError):  # a concurrent writer stored the same bytes first
                os.link(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        fsync_dir(target.parent)
        return digest

    def get(self, sha256_hex: str) -> bytes:
        """The blob's bytes; raises :class:`BlobMissing` (exit 5) when absent and
        :class:`LedgerIntegrityError` (exit 1) when its content does not hash to its name."""
        target = self.path(sha256_hex)
        if not target.is_file():
            raise BlobMissing(f"blob {sha256_hex} is not in {self.folder}", file=str(target), found="missing")
        data = target.read_bytes()
        found = hashlib.sha256(data).hexdigest()
        if found != sha256_hex:
            raise LedgerIntegrityError(f"blob {sha256_hex} has been altered", file=str(target),
                                       expected=sha256_hex, found=found)
        return data

    def verify(self, sha256_hex: str) -> None:
        """Raise unless the blob is present and intact."""
        self.get(sha256_hex)
