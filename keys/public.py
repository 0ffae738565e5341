"""Public Ed25519 keys: verification that raises, key ids and fingerprints."""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass

from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from keys.errors import InvalidSignature, MalformedInput

ALGO = "Ed25519"
PUBLIC_KEY_SIZE = 32
SIGNATURE_SIZE = 64


def b64decode_strict(text: str, *, what: str) -> bytes:
    """Decode standard base64, refusing anything but the canonical alphabet and padding."""
    if not isinstance(text, str):
        raise MalformedInput(f"{what} is not a base64 string", found=type(text).__name__)
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError) as exc:
        raise MalformedInput(f"{what} is not valid base64", found=text[:80]) from exc
    # Python ignores the unused low bits of the last character, so several texts decode to one value.
    # Accept only the canonical text, or a signed document could change without its signature failing.
    if base64.b64encode(raw).decode("ascii") != text:
        raise MalformedInput(f"{what} is not canonical base64", found=text[:80])
    return raw


def b64encode(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


@dataclass(frozen=True)
class PublicKey:
    """A raw 32-byte Ed25519 public key."""

    raw: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.raw, bytes) or len(self.raw) != PUBLIC_KEY_SIZE:
            raise MalformedInput(
                f"an Ed25519 public key is {PUBLIC_KEY_SIZE} bytes",
                expected=PUBLIC_KEY_SIZE,
                found=len(self.raw) if isinstance(self.raw, bytes) else type(self.raw).__name__,
            )

    @classmethod
    def from_b64(cls, text: str) -> PublicKey:
        return cls(b64decode_strict(text, what="public key"))

    @property
    def b64(self) -> str:
        return b64encode(self.raw)

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the raw key, hex: a name for the key that cannot collide with another key."""
        return hashlib.sha256(self.raw).hexdigest()

    def verify(self, message: bytes, signature: bytes) -> None:
        """Check an Ed25519 signature; raise :class:`InvalidSignature` when it does not verify."""
        if len(signature) != SIGNATURE_SIZE:
            raise InvalidSignature(
                f"an Ed25519 signature is {SIGNATURE_SIZE} bytes", expected=SIGNATURE_SIZE, found=len(signature)
            )
        try:
            VerifyKey(self.raw).verify(message, signature)
        except BadSignatureError as exc:
            raise InvalidSignature(
                "signature does not verify under the trusted key", key_fingerprint=self.fingerprint[:16]
            ) from exc

    def __repr__(self) -> str:
        return f"PublicKey({self.b64})"
