"""The only holder of private key material.

A :class:`Signer` wraps a ``nacl.signing.SigningKey``; nothing else in the project imports that class. The
seed never appears in ``repr``, ``str`` or an exception, and is written only to 0600 files (see ``files``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from nacl.signing import SigningKey

from keys.errors import HeldoutError, KeyFileError
from keys.files import read_private_file, write_private_file
from keys.names import NOTE_NAME_SPACE, plain_name_problem
from keys.public import ALGO, PublicKey, b64encode
from keys.safeio import KEY_FILE_LIMIT, check_json_depth

KEY_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# a note key name: no whitespace (as Go's note package reads it), no '+' (C2SP signed-note)
NAME_PATTERN = re.compile(f"[^{NOTE_NAME_SPACE}+]{{1,128}}")
SEED_SIZE = 32


def check_key_id(key_id: str) -> str:
    if not isinstance(key_id, str) or not KEY_ID_PATTERN.fullmatch(key_id):
        raise KeyFileError(
            "a key id is 1-64 characters of letters, digits, '.', '_' or '-', starting with a letter or digit",
            found=repr(key_id)[:80],
        )
    return key_id


def check_key_name(name: str) -> str:
    """A C2SP signed-note key name: printable NFC, no whitespace, no '+'. A '/' is allowed (the spec
    recommends schemaless URLs such as ``witness.example/w1``): a name is never a file name (the key id is)."""
    problem = plain_name_problem(name.replace("/", "_") if isinstance(name, str) else name, refuse="+")
    if problem is not None or not NAME_PATTERN.fullmatch(name):
        raise KeyFileError(f"a key name is 1-128 printable NFC characters without spaces, '+' or separators "
                           f"other than '/' ({problem or 'refused'})", found=repr(name)[:80])
    return name


class Signer:
    """An Ed25519 private key with the name and key id it signs under."""

    __slots__ = ("_key", "key_id", "name")

    def __init__(self, signing_key: SigningKey, *, name: str, key_id: str) -> None:
        self._key = signing_key
        self.name = check_key_name(name)
        self.key_id = check_key_id(key_id)

    @classmethod
    def generate(cls, *, name: str, key_id: str) -> Signer:
        return cls(SigningKey.generate(), name=name, key_id=key_id)

    @classmethod
    def from_seed(cls, seed: bytes, *, name: str, key_id: str) -> Signer:
        """Deterministic keys for tests and fixtures."""
        if len(seed) != SEED_SIZE:
            raise KeyFileError(f"an Ed25519 seed is {SEED_SIZE} bytes", expected=SEED_SIZE, found=len(seed))
        return cls(SigningKey(seed), name=name, key_id=key_id)

    @classmethod
    def with_key_id(cls, signer: Signer, key_id: str) -> Signer:
        """The same private key under another key id (before it is saved)."""
        return cls(signer._key, name=signer.name, key_id=key_id)

    @property
    def public_key(self) -> PublicKey:
        return PublicKey(bytes(self._key.verify_key))

    def sign(self, message: bytes) -> bytes:
        """Return the 64-byte Ed25519 signature of ``message``."""
        return bytes(self._key.sign(message).signature)

    def save(self, path: Path) -> None:
        """Write the key to a new 0600 file inside a 0700 folder; refuses to overwrite."""
        body = {
            "algo": ALGO,
            "key_id": self.key_id,
            "name": self.name,
            "public_key_b64": self.public_key.b64,
            "seed_b64": b64encode(bytes(self._key)),
        }
        write_private_file(path, (json.dumps(body, sort_keys=True, indent=1) + "\n").encode())

    @classmethod
    def load(cls, path: Path) -> Signer:
        """Load a key file written by :meth:`save`, refusing files or folders open to others."""
        raw = read_private_file(path, limit=KEY_FILE_LIMIT)
        try:
            check_json_depth(raw, what="private key file")
            body = json.loads(raw.decode("utf-8"))  # (UTF-8 only, as the depth check reads it)
            from base64 import b64decode

            seed = b64decode(body["seed_b64"], validate=True)
            signer = cls.from_seed(seed, name=body["name"], key_id=body["key_id"])
        except (ValueError, KeyError, TypeError, RecursionError, HeldoutError):
            # Deliberately no detail from the file: it holds the seed.
            raise KeyFileError(f"private key file {path} is not a heldout key file", path=str(path)) from None
        if body.get("public_key_b64") != signer.public_key.b64:
            raise KeyFileError(f"private key file {path} is inconsistent with its public key", path=str(path))
        return signer

    def __repr__(self) -> str:
        return f"Signer(name={self.name!r}, key_id={self.key_id!r}, public_key={self.public_key.b64})"

    __str__ = __repr__

    def __reduce__(self) -> None:  # type: ignore[override]
        raise TypeError("a Signer cannot be pickled: private keys do not leave keys/")
