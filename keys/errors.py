"""The project's one error hierarchy.

It lives in the lowest layer (``keys``) because every other package imports downward from here, so all of
them can raise and catch the same classes. Each class carries the exit code of DESIGN.md's table, and each
instance carries its evidence (what was expected, what was found, where) as a dict the CLI can print or
emit as JSON. Messages never contain private key material.
"""

from __future__ import annotations

import errno
import math
from typing import Any

_LARGEST_EXACT = 2**53 - 1  # I-JSON's integers (RFC 7493): what every JSON reader takes exactly


def _text(value: str) -> str:
    """``value`` as text any UTF-8 writer can write: a lone surrogate (Python's stand-in for a byte of a file
    name that is not UTF-8) is written out as its escape, ``\\udcff``."""
    if value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def _json_safe(value: Any) -> Any:
    """Evidence as JSON every reader takes, whatever a hostile input put in it (red-team round 15: a file name
    that is not UTF-8, or a checkpoint file named by 250 digits, made the audit fail writing its report and
    ``--json`` print what no I-JSON reader accepts): text made writable (:func:`_text`), an integer beyond
    2^53 or a float that is not finite as its decimal text; containers member by member."""
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value if -_LARGEST_EXACT <= value <= _LARGEST_EXACT else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if type(value) is list or type(value) is tuple:
        return type(value)(_json_safe(item) for item in value)
    if type(value) is dict:
        return {(_text(key) if isinstance(key, str) else key): _json_safe(item) for key, item in value.items()}
    return value


class HeldoutError(Exception):
    """Root of every error this project raises on purpose."""

    exit_code: int = 1

    def __init__(self, message: str, **evidence: Any) -> None:
        message = _text(message)
        super().__init__(message)
        self.message = message
        self.evidence: dict[str, Any] = {key: _json_safe(value) for key, value in evidence.items()}

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
