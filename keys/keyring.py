"""A keyring of trusted public keys kept in the store's ``keys/`` folder, one JSON file per key."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from keys.errors import HeldoutError, KeyFileError, MalformedInput, UsageError
from keys.files import write_atomic
from keys.note import parse_verifier_key, verifier_key_string
from keys.public import ALGO, PUBLIC_KEY_SIZE, PublicKey, b64decode_strict
from keys.safeio import KEY_FILE_LIMIT, check_json_depth, path_kind, read_named
from keys.signer import check_key_id, check_key_name


@dataclass(frozen=True)
class TrustedKey:
    """A public key with the name and key id documents must be issued under."""

    key_id: str
    name: str
    public_key: PublicKey

    def __post_init__(self) -> None:
        check_key_id(self.key_id)
        check_key_name(self.name)

    def to_json(self) -> dict[str, Any]:
        return {
            "algo": ALGO,
            "key_id": self.key_id,
            "name": self.name,
            "public_key_b64": self.public_key.b64,
            "fingerprint": self.public_key.fingerprint,
            "note_verifier_key": verifier_key_string(self.name, self.public_key),
        }

    @classmethod
    def from_json(cls, body: Any, *, source: str = "key file") -> TrustedKey:
        if not isinstance(body, dict):
            raise MalformedInput(f"{source} is not a JSON object")
        if body.get("algo", ALGO) != ALGO:
            raise MalformedInput(f"{source}: unsupported algorithm", expected=ALGO, found=body.get("algo"))
        try:
            key = PublicKey.from_b64(body["public_key_b64"])
            return cls(key_id=body["key_id"], name=body["name"], public_key=key)
        except KeyError as exc:
            raise MalformedInput(f"{source} lacks the member {exc.args[0]!r}") from None


class Keyring:
    """The trusted public keys of a store (``<store>/keys/<key_id>.pub.json``)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path_for(self, key_id: str) -> Path:
        return self.folder / f"{check_key_id(key_id)}.pub.json"

    def add(self, key: TrustedKey) -> Path:
        """Add a key; re-adding the same key is a no-op, a different key under a used id is refused."""
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.path_for(key.key_id)
        if path.exists():
            existing = self.get(key.key_id)
            if existing.public_key != key.public_key or existing.name != key.name:
                raise UsageError(f"key id {key.key_id!r} is already in the keyring with another key",
                                 key_id=key.key_id)
            return path
        write_atomic(path, (json.dumps(key.to_json(), indent=1, sort_keys=True) + "\n").encode())
        return path

    def get(self, key_id: str) -> TrustedKey:
        path = self.path_for(key_id)
        if not path.is_file():
            raise UsageError(f"no key {key_id!r} in the keyring at {self.folder}", key_id=key_id)
        return load_public_key_file(path)

    def list(self) -> list[TrustedKey]:
        if not self.folder.is_dir():
            return []
        return [load_public_key_file(p) for p in sorted(self.folder.glob("*.pub.json"))]

    def find(self, public_key: PublicKey) -> TrustedKey | None:
        return next((k for k in self.list() if k.public_key == public_key), None)


def parse_public_key_file(data: bytes, *, source: str) -> TrustedKey:
    """A public key file's bytes (``<key_id>.pub.json``) as a trusted key; refuses anything else."""
    try:
        check_json_depth(data, what=source)
        body = json.loads(data.decode("utf-8"))  # (UTF-8 only: json.loads would take UTF-16 bytes too)
    except (ValueError, MalformedInput, RecursionError) as exc:
        raise MalformedInput(f"{source} is not a readable JSON key file", path=source) from exc
    return TrustedKey.from_json(body, source=source)


def load_public_key_file(path: Path) -> TrustedKey:
    return parse_public_key_file(read_named(path, limit=KEY_FILE_LIMIT, what="key file"), source=str(path))


def parse_key_argument(text: str) -> PublicKey:
    """Read a ``--key`` argument: base64 of the raw key, a note verifier key, or a file holding either
    (or a ``.pub.json`` key file). Any failure is a usage error naming what was expected."""
    candidate = Path(text)
    shown = text[:80]  # what an error may quote: the argument, never the content of a file it names
    kind = path_kind(candidate)
    is_file = kind == "a file"
    if kind not in (None, "a file"):  # a folder, a link to nothing, a FIFO, a device: never read its name as a
        # key (a folder's name may well decode as base64: "adir" is 3 bytes)
        raise UsageError(f"--key {shown} is {kind}, not a key or a key file", path=shown)
    if is_file:
        try:
            raw = read_named(candidate, limit=KEY_FILE_LIMIT, what="--key file")
        except MalformedInput as exc:
            raise UsageError(exc.message, path=text) from None
        if len(raw) == PUBLIC_KEY_SIZE:
            return PublicKey(raw)
        try:
            check_json_depth(raw, what="--key file")
            body = json.loads(raw.decode("utf-8"))  # (UTF-8 only, as the depth check reads it)
        except (ValueError, MalformedInput, RecursionError):
            body = None
        if isinstance(body, dict):
            if "seed_b64" in body:
                raise KeyFileError("--key takes a public key; that file holds a private key", path=text)
            try:
                return TrustedKey.from_json(body, source=text).public_key
            except HeldoutError as exc:  # its evidence may quote members of the file: name the file only
                raise UsageError(f"--key file {candidate} is not a public key file", path=text) from exc
        text = raw.decode("utf-8", "replace").strip()
        shown = f"the content of {candidate}"
    if "+" in text and text.count("+") >= 2 and not text.endswith("="):
        try:
            return parse_verifier_key(text)[2]
        except MalformedInput:
            pass
    try:
        raw = b64decode_strict(text.strip(), what="--key")
    except MalformedInput as exc:
        raise UsageError(
            "--key must be base64 of a raw 32-byte Ed25519 public key, a note verifier key, or a key file",
            found=shown,
        ) from exc
    if len(raw) != PUBLIC_KEY_SIZE:
        what = "--key" if is_file is False else f"--key file {candidate}"
        raise UsageError(
            f"{what} {'is empty' if not raw else f'decodes to {len(raw)} bytes'}; an Ed25519 public key is "
            f"{PUBLIC_KEY_SIZE} bytes", expected=PUBLIC_KEY_SIZE, found=len(raw),
        )
    return PublicKey(raw)
