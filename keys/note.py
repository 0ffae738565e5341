"""C2SP signed-note key hashes and verifier key strings (https://c2sp.org/signed-note)."""

from __future__ import annotations

import hashlib
import re

from keys.errors import MalformedInput
from keys.public import PublicKey, b64decode_strict, b64encode

ED25519_SIGNATURE_TYPE = b"\x01"
_VKEY = re.compile(r"([^\s+]+)\+([0-9a-f]{8})\+([A-Za-z0-9+/=]+)")


def note_key_hash(name: str, key: PublicKey) -> bytes:
    """First 4 bytes of SHA-256(name || 0x0A || 0x01 || public key)."""
    return hashlib.sha256(name.encode() + b"\n" + ED25519_SIGNATURE_TYPE + key.raw).digest()[:4]


def verifier_key_string(name: str, key: PublicKey) -> str:
    """``<name>+<hex key hash>+<base64(0x01 || key)>``, the form Go's ``note.NewVerifier`` accepts."""
    return f"{name}+{note_key_hash(name, key).hex()}+{b64encode(ED25519_SIGNATURE_TYPE + key.raw)}"


def parse_verifier_key(text: str) -> tuple[str, bytes, PublicKey]:
    """Parse a verifier key string; check that its hash matches its name and key."""
    m = _VKEY.fullmatch(text.strip())
    if not m:
        raise MalformedInput("not a note verifier key (<name>+<8 hex>+<base64>)", found=text[:120])
    name, hexhash, b64 = m.groups()
    blob = b64decode_strict(b64, what="verifier key")
    if len(blob) != 33 or blob[:1] != ED25519_SIGNATURE_TYPE:
        raise MalformedInput("verifier key is not an Ed25519 (type 0x01) key", found=len(blob))
    key = PublicKey(blob[1:])
    expected = note_key_hash(name, key)
    if expected.hex() != hexhash:
        raise MalformedInput("verifier key hash does not match its name and key", expected=expected.hex(),
                             found=hexhash)
    return name, expected, key
