"""C2SP signed-note key hashes and verifier key strings (https://c2sp.org/signed-note).

A key hash (key id) is the first 4 bytes of SHA-256(name || 0x0A || type || public key), where the type byte
says what the key signs: 0x01 an Ed25519 signed note (a log's checkpoint), 0x04 an Ed25519 ``cosignature/v1``
(C2SP tlog-cosignature; a witness). The verifier key string ("vkey") is ``<name>+<hex key hash>+<base64(type ||
public key)>``.
"""

from __future__ import annotations

import hashlib
import re

from keys.errors import MalformedInput
from keys.names import NOTE_NAME
from keys.public import PublicKey, b64decode_strict, b64encode

ED25519_SIGNATURE_TYPE = b"\x01"
COSIGNATURE_V1_TYPE = b"\x04"
_TYPE_NAMES = {ED25519_SIGNATURE_TYPE: "Ed25519 (type 0x01)", COSIGNATURE_V1_TYPE: "cosignature/v1 (type 0x04)"}
_VKEY = re.compile(f"({NOTE_NAME.pattern})\\+([0-9a-f]{{8}})\\+([A-Za-z0-9+/=]+)")


def note_key_hash(name: str, key: PublicKey, signature_type: bytes = ED25519_SIGNATURE_TYPE) -> bytes:
    """First 4 bytes of SHA-256(name || 0x0A || type || public key)."""
    return hashlib.sha256(name.encode() + b"\n" + signature_type + key.raw).digest()[:4]


def verifier_key_string(name: str, key: PublicKey, signature_type: bytes = ED25519_SIGNATURE_TYPE) -> str:
    """``<name>+<hex key hash>+<base64(type || key)>``, the form Go's ``note.NewVerifier`` accepts (type 0x01)."""
    return f"{name}+{note_key_hash(name, key, signature_type).hex()}+{b64encode(signature_type + key.raw)}"


def parse_verifier_key(text: str, signature_type: bytes = ED25519_SIGNATURE_TYPE) -> tuple[str, bytes, PublicKey]:
    """Parse a verifier key string of the given type; check that its hash matches its name and key."""
    m = _VKEY.fullmatch(text.strip())
    if not m:
        raise MalformedInput("not a note verifier key (<name>+<8 hex>+<base64>)", found=text[:120])
    name, hexhash, b64 = m.groups()
    blob = b64decode_strict(b64, what="verifier key")
    if len(blob) != 33 or blob[:1] != signature_type:
        raise MalformedInput(f"verifier key is not an {_TYPE_NAMES.get(signature_type, signature_type.hex())} key",
                             found=f"{len(blob)} bytes, type {blob[:1].hex() or 'none'}")
    key = PublicKey(blob[1:])
    expected = note_key_hash(name, key, signature_type)
    if expected.hex() != hexhash:
        raise MalformedInput("verifier key hash does not match its name and key", expected=expected.hex(),
                             found=hexhash)
    return name, expected, key
