"""The project's one error hierarchy.

It lives in the lowest layer (``keys``) because every other package imports downward from here, so all of
them can raise and catch the same classes. Each class carries the exit code of DESIGN.md's table, and each
instance carries its evidence (what was expected, what was found, where) as a dict the CLI can print or
emit as JSON. Messages never contain private key material.
"""

from __future__ import annotations

import errno
from typing import Any


class HeldoutError(Exception):
    """Root of every error this project raises on purpose."""

    exit_code: int = 1

    def __init__(self, message: str, **evidence: Any) -> None:
        super().__init__(message)
        self.message = message
        self.evidence: dict[str, Any] = evidence

    def __str__(self) -> str:
        return self.message

    def to_json(self) -> dict[str, Any]:
        return {"error": type(self).__name__, "message": self.message, "exit_code": self.exit_code,
                **({"evidence": self.evidence} if self.evidence else {})}


class VerificationError(HeldoutError):
    """A check failed: bad signature, tampered bytes, broken chain, mismatch on re-derivation (exit 1)."""

    exit_code = 1


class InvalidSignature(VerificationError):
    """An Ed25519 signature does not verify under the trusted key."""


class UntrustedKey(VerificationError):
    """A document names or embeds a key that is not the trusted one."""


class MalformedInput(VerificationError):
    """A document or file could not be parsed into the shape it must have (exit 1: the input fails)."""


class UsageError(HeldoutError):
    """The command was asked for something it cannot do as given (exit 2)."""

    exit_code = 2


class KeyFileError(UsageError):
    """A key file is missing, unreadable, of the wrong size or too openly readable."""


class ExpiredError(HeldoutError):
    """Valid, but past its expiry at the reference time (exit 3)."""

    exit_code = 3


class LapsedError(HeldoutError):
    """Valid, but its generation was retired or its spec superseded (exit 4)."""

    exit_code = 4


class IncompleteError(HeldoutError):
    """Intact, but something could not be checked (exit 5)."""

    exit_code = 5


class StorageError(UsageError):
    """The file system refused: disk full, read-only, I/O error, permission denied, a path of the wrong kind
    (a file where a folder is needed, a folder where a file is, nothing there). The environment is at fault,
    not the data: exit 2, never the "verification failed" of exit 1."""


#: What each errno means to someone running a command (one line, no jargon beyond the path).
_ERRNO_WORDS: dict[int, str] = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EIO: "input/output error (failing disk?)",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EISDIR: "is a folder where a file is needed",
    errno.ENOENT: "does not exist",
    errno.EEXIST: "exists already",
    errno.ENOTEMPTY: "folder is not empty",
    errno.ENAMETOOLONG: "name too long",
    errno.EMFILE: "too many open files",
    errno.ELOOP: "too many symbolic links",
    errno.EXDEV: "crosses file systems",
}


def storage_error(exc: OSError) -> StorageError:
    """The project's error for an ``OSError`` from the file system: one line naming the path and what went
    wrong, with ``errno`` and ``path`` as evidence."""
    words = _ERRNO_WORDS.get(exc.errno or -1) or (exc.strerror or type(exc).__name__).lower()
    paths = [str(p) for p in (exc.filename, exc.filename2) if p is not None]
    where = " -> ".join(paths)
    message = f"{where}: {words}" if where else f"file system error: {words}"
    evidence: dict[str, Any] = {"errno": errno.errorcode.get(exc.errno or -1, str(exc.errno))}
    if paths:
        evidence["path"] = paths[0]
    return StorageError(message, **evidence)
