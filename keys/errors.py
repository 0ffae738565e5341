"""The project's one error hierarchy.

It lives in the lowest layer (``keys``) because every other package imports downward from here, so all of
them can raise and catch the same classes. Each class carries the exit code of DESIGN.md's table, and each
instance carries its evidence (what was expected, what was found, where) as a dict the CLI can print or
emit as JSON. Messages never contain private key material.
"""

from __future__ import annotations

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
