"""Content-addressed blobs: ``<folder>/<first two hex>/<sha256 hex>``.

Large data (prediction arrays, documents) lives here and ledger entries carry its SHA-256. Writing is atomic
(a temporary file in the same folder, fsynced, then linked into place), idempotent, and durable (the folder
is fsynced too). Reading re-hashes the content, so a tampered blob is never returned.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

from keys.files import fsync_dir, write_synced
from keys.names import SHA256_HEX
from keys.safeio import BLOB_LIMIT, UnsafeFile, file_in, read_in
from ledger.errors import BlobMissing, LedgerIntegrityError, LedgerUsageError


def check_sha256_hex(value: str) -> str:
    if not isinstance(value, str) or not SHA256_HEX.fullmatch(value):
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
        """Whether the blob is there; a link or a non-regular file in its place is refused (exit 1)."""
        check_sha256_hex(sha256_hex)
        try:
            return file_in(self.folder, [sha256_hex[:2], sha256_hex], what="blob store")
        except UnsafeFile as exc:
            raise LedgerIntegrityError(exc.message, **exc.evidence) from None

    def _read(self, sha256_hex: str) -> bytes | None:
        # confined to the blob folder, regular files only, bounded (keys.safeio)
        try:
            return read_in(self.folder, [sha256_hex[:2], sha256_hex], limit=BLOB_LIMIT, what="blob store")
        except UnsafeFile as exc:
            raise LedgerIntegrityError(exc.message, **exc.evidence) from None

    def put(self, data: bytes) -> str:
        """Store ``data``; returns its SHA-256 hex. Storing the same bytes twice is a no-op."""
        digest = hashlib.sha256(data).hexdigest()
        target = self.path(digest)
        if len(data) > BLOB_LIMIT:
            raise LedgerUsageError(f"a blob is at most {BLOB_LIMIT} bytes", expected=BLOB_LIMIT, found=len(data))
        existing = self._read(digest)
        if existing is not None:
            if hashlib.sha256(existing).hexdigest() == digest:
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
        data = self._read(sha256_hex)
        if data is None:
            raise BlobMissing(f"blob {sha256_hex} is not in {self.folder}", file=str(target), found="missing")
        found = hashlib.sha256(data).hexdigest()
        if found != sha256_hex:
            raise LedgerIntegrityError(f"blob {sha256_hex} has been altered", file=str(target),
                                       expected=sha256_hex, found=found)
        return data

    def verify(self, sha256_hex: str) -> None:
        """Raise unless the blob is present and intact."""
        self.get(sha256_hex)
