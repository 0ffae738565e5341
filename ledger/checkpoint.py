"""Checkpoints: C2SP ``tlog-checkpoint`` bodies in C2SP ``signed-note`` envelopes.

A checkpoint note is, byte for byte::

    <origin>\\n
    <size in decimal>\\n
    <base64 root hash>\\n
    \\n
    — <key name> <base64(4-byte key hash || 64-byte Ed25519 signature)>\\n

The signature covers the body (the first three lines, each with its newline). The key hash is the first 4
bytes of SHA-256(name || 0x0A || 0x01 || public key) (``keys.note``). Parsing accepts what the specs allow
(extension lines after the root, several signature lines); verification needs a signature by the given key
and refuses a note whose signature by that key does not verify. Go's ``golang.org/x/mod/sumdb/note`` accepts
these notes with the verifier key from ``keys.note.verifier_key_string`` (tests/go checks it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from keys import InvalidSignature, MalformedInput, PublicKey, Signer, b64decode_strict, b64encode, note_key_hash
from keys.names import NOTE_NAME
from ledger.errors import CheckpointError, LedgerKeyError, NoteFormatError
from ledger.rfc6962 import HASH_SIZE

EM_DASH = "\u2014"
MAX_NOTE_BYTES = 16 * 1024
#: Signature lines a note may carry (the ledger's own and cosignatures): Go's note package's limit.
MAX_SIGNATURES = 100
_SIZE = re.compile(r"(0|[1-9][0-9]{0,18})")
_NAME = NOTE_NAME
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")


@dataclass(frozen=True)
class NoteSignature:
    name: str
    key_hash: bytes
    signature: bytes


@dataclass(frozen=True)
class Checkpoint:
    """A signed tree head. ``note`` is the exact signed note; ``created_utc`` is when the ledger signed it
    (kept beside the note, not inside it)."""

    origin: str
    size: int
    root: bytes
    note: str
    signatures: tuple[NoteSignature, ...] = field(default=(), repr=False)
    extensions: tuple[str, ...] = ()
    created_utc: str | None = None

    @property
    def body(self) -> str:
        return checkpoint_body(self.origin, self.size, self.root, self.extensions)

    @property
    def root_b64(self) -> str:
        return b64encode(self.root)

    @property
    def note_bytes(self) -> bytes:
        return self.note.encode("utf-8")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"origin": self.origin, "size": self.size, "root": self.root_b64, "note": self.note}
        if self.created_utc:
            out["created_utc"] = self.created_utc
        return out

    def verify(self, name: str, key: PublicKey, *, origin: str | None = None) -> Checkpoint:
        """Check the signature by (name, key) and, when given, the origin; returns self."""
        verify_checkpoint(self.note, name=name, key=key, origin=origin)
        return self


def checkpoint_body(origin: str, size: int, root: bytes, extensions: tuple[str, ...] = ()) -> str:
    if not origin or "\n" in origin or _CONTROL.search(origin):
        raise NoteFormatError("a checkpoint origin is one non-empty line", found=origin[:80])
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise NoteFormatError("a checkpoint size is a non-negative integer", found=repr(size)[:40])
    if len(root) != HASH_SIZE:
        raise NoteFormatError(f"a checkpoint root is {HASH_SIZE} bytes", expected=HASH_SIZE, found=len(root))
    return "".join(f"{line}\n" for line in (origin, str(size), b64encode(root), *extensions))


def sign_checkpoint(origin: str, size: int, root: bytes, signer: Signer, *,
                    created_utc: str | None = None) -> Checkpoint:
    """Sign a checkpoint body with ``signer`` as a C2SP signed note."""
    body = checkpoint_body(origin, size, root)
    key_hash = note_key_hash(signer.name, signer.public_key)
    signature = signer.sign(body.encode("utf-8"))
    note = f"{body}\n{EM_DASH} {signer.name} {b64encode(key_hash + signature)}\n"
    return Checkpoint(origin, size, bytes(root), note, (NoteSignature(signer.name, key_hash, signature),),
                      (), created_utc)


def parse_checkpoint(note: str | bytes, *, created_utc: str | None = None) -> Checkpoint:
    """Parse a checkpoint note's structure; signatures are *not* checked here (see :func:`verify_checkpoint`)."""
    if isinstance(note, bytes):
        if len(note) > MAX_NOTE_BYTES:
            raise NoteFormatError("checkpoint note is too large", expected=MAX_NOTE_BYTES, found=len(note))
        try:
            note = note.decode("utf-8")
        except UnicodeDecodeError:
            raise NoteFormatError("checkpoint note is not UTF-8") from None
    if not isinstance(note, str):
        raise NoteFormatError("checkpoint note is not text", found=type(note).__name__)
    if len(note.encode("utf-8")) > MAX_NOTE_BYTES:
        raise NoteFormatError("checkpoint note is too large", expected=MAX_NOTE_BYTES)
    if _CONTROL.search(note):
        raise NoteFormatError("checkpoint note contains control characters other than newline")
    if not note.endswith("\n"):
        raise NoteFormatError("a signed note ends with a newline")
    split = note.rfind("\n\n")
    if split < 0:
        raise NoteFormatError("a signed note has a blank line between its text and its signatures")
    body, block = note[:split + 1], note[split + 2:]
    block_lines = block[:-1].split("\n")
    if len(block_lines) > MAX_SIGNATURES:
        # Go's golang.org/x/mod/sumdb/note refuses such a note ("malformed note"): a note it could not read would
        # give two verdicts on one log (the tiles are meant to be read by Go's tlog tools unchanged)
        raise NoteFormatError(f"a signed note has at most {MAX_SIGNATURES} signature lines",
                              expected=MAX_SIGNATURES, found=len(block_lines))
    signatures = tuple(_parse_signature_line(line) for line in block_lines)
    if not signatures:
        raise NoteFormatError("a signed note has at least one signature line")
    lines = body[:-1].split("\n")
    if len(lines) < 3:
        raise NoteFormatError("a checkpoint has an origin, a size and a root line", found=len(lines))
    origin, size_text, root_text, *extensions = lines
    if not origin:
        raise NoteFormatError("the checkpoint origin line is empty")
    if not _SIZE.fullmatch(size_text):
        raise NoteFormatError("the checkpoint size line is not a decimal number", found=size_text[:40])
    size = int(size_text)
    if size >= 1 << 63:
        raise NoteFormatError("the checkpoint size is out of range", found=size_text[:40])
    try:
        root = b64decode_strict(root_text, what="checkpoint root")
    except MalformedInput as exc:
        raise NoteFormatError(exc.message, field="root") from None
    if len(root) != HASH_SIZE:
        raise NoteFormatError(f"the checkpoint root is not a {HASH_SIZE}-byte hash", expected=HASH_SIZE,
                              found=len(root))
    if any(not line for line in extensions):
        raise NoteFormatError("a checkpoint extension line is empty")
    if b64encode(root) != root_text:
        raise NoteFormatError("the checkpoint root is not in canonical base64", found=root_text)
    return Checkpoint(origin, size, root, note, signatures, tuple(extensions), created_utc)


def _parse_signature_line(line: str) -> NoteSignature:
    prefix = EM_DASH + " "
    if not line.startswith(prefix):
        raise NoteFormatError("a signature line starts with an em dash and a space", found=line[:80])
    parts = line[len(prefix):].split(" ")
    if len(parts) != 2 or not _NAME.fullmatch(parts[0]):
        raise NoteFormatError("a signature line is '— <name> <base64>'", found=line[:80])
    name, b64 = parts
    try:
        blob = b64decode_strict(b64, what="note signature")
    except MalformedInput as exc:
        raise NoteFormatError(exc.message, found=line[:80]) from None
    if len(blob) < 5:
        raise NoteFormatError("a note signature holds a 4-byte key hash and a signature", found=len(blob))
    return NoteSignature(name, blob[:4], blob[4:])


def verify_checkpoint(note: str | bytes, *, name: str, key: PublicKey, origin: str | None = None) -> Checkpoint:
    """Parse a checkpoint note and check its signature by the key ``(name, key)``.

    Signatures by other keys are ignored (a note may carry witnesses' signatures); a signature that claims
    to be by this key (same name and key hash) and does not verify is refused, as is a note without one.
    """
    checkpoint = parse_checkpoint(note)
    if origin is not None and checkpoint.origin != origin:
        raise CheckpointError("checkpoint is for another log (origin differs)", expected=origin,
                              found=checkpoint.origin, size=checkpoint.size)
    key_hash = note_key_hash(name, key)
    mine = [s for s in checkpoint.signatures if s.name == name and s.key_hash == key_hash]
    if not mine:
        raise LedgerKeyError(
            "checkpoint is not signed by the ledger key", expected=f"{name}+{key_hash.hex()}",
            found=[f"{s.name}+{s.key_hash.hex()}" for s in checkpoint.signatures], size=checkpoint.size)
    body = checkpoint.note[: checkpoint.note.rfind("\n\n") + 1].encode("utf-8")
    for signature in mine:
        try:
            key.verify(body, signature.signature)
        except InvalidSignature:
            raise CheckpointError("checkpoint signature does not verify under the ledger key",
                                  size=checkpoint.size, key=f"{name}+{key_hash.hex()}") from None
    return checkpoint

