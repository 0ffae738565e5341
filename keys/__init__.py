"""Ed25519 keys. Only this package touches private keys (``Signer``)."""

from keys.errors import (
    ExpiredError,
    HeldoutError,
    IncompleteError,
    InvalidSignature,
    KeyFileError,
    LapsedError,
    MalformedInput,
    StorageError,
    UntrustedKey,
    UsageError,
    VerificationError,
    storage_error,
)
from keys.keyring import Keyring, TrustedKey, load_public_key_file, parse_key_argument
from keys.note import note_key_hash, parse_verifier_key, verifier_key_string
from keys.public import ALGO, PublicKey, b64decode_strict, b64encode
from keys.signer import Signer

__all__ = [
    "ALGO",
    "ExpiredError",
    "HeldoutError",
    "IncompleteError",
    "InvalidSignature",
    "KeyFileError",
    "Keyring",
    "LapsedError",
    "MalformedInput",
    "PublicKey",
    "Signer",
    "StorageError",
    "TrustedKey",
    "UntrustedKey",
    "UsageError",
    "VerificationError",
    "b64decode_strict",
    "b64encode",
    "load_public_key_file",
    "note_key_hash",
    "parse_key_argument",
    "parse_verifier_key",
    "storage_error",
    "verifier_key_string",
]
