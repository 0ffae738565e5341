"""Witness cosignatures: C2SP ``tlog-cosignature`` ``cosignature/v1`` (Ed25519) on our checkpoints.

A cosignature is one more signed-note signature line on a checkpoint::

    — <witness name> base64(key id (4) || timestamp (8, big-endian) || Ed25519 signature (64))

* key id = SHA-256(name || 0x0A || 0x04 || 32-byte public key)[:4] (``keys.note`` with type byte 0x04);
* the signed message is ``"cosignature/v1\\n" + "time <timestamp>\\n"`` followed by the checkpoint's whole note
  body (every line before the blank line, each with its newline; extension lines included);
* the timestamp is POSIX seconds, at most 2^63 - 1, in decimal without leading zeroes in the message.

The statement a cosignature makes: as of ``timestamp``, the largest consistent tree the witness has seen for
the checkpoint's origin has this root. Its key id differs from the log's (type byte 0x04, not 0x01), so a
signed-note verifier that knows only the log key (Go's ``sumdb/note``) ignores the line and still verifies
the log's own signature.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from keys import InvalidSignature, MalformedInput, PublicKey, Signer, b64decode_strict, b64encode
from keys.note import COSIGNATURE_V1_TYPE, note_key_hash, parse_verifier_key, verifier_key_string
from ledger.checkpoint import EM_DASH, Checkpoint, NoteSignature, parse_checkpoint
from ledger.errors import CheckpointError, NoteFormatError

COSIGNATURE_HEADER = "cosignature/v1\n"
MAX_TIMESTAMP = (1 << 63) - 1
COSIGNATURE_BYTES = 4 + 8 + 64


def cosigner_key_id(name: str, key: PublicKey) -> bytes:
    """SHA-256(name || 0x0A || 0x04 || public key)[:4]."""
    return note_key_hash(name, key, COSIGNATURE_V1_TYPE)


def note_body(note: str) -> str:
    """The signed text of a note: everything up to and including the newline before the blank line."""
    split = note.rfind("\n\n")
    if split < 0:
        raise NoteFormatError("a signed note has a blank line between its text and its signatures")
    return note[: split + 1]


def cosigned_message(body: str, timestamp: int) -> bytes:
    """The bytes a ``cosignature/v1`` signs: the header line, the time line, then the checkpoint body."""
    _check_timestamp(timestamp)
    if not body.endswith("\n"):
        raise NoteFormatError("a checkpoint body ends with a newline")
    return (COSIGNATURE_HEADER + f"time {timestamp}\n" + body).encode("utf-8")


#: The last second a time of this tool can hold (9999-12-31T23:59:59Z). C2SP allows timestamps up to 2^63 - 1;
#: one past this is refused as a malformed cosignature (no witness's clock reads year 10000), instead of failing
#: wherever its time is read.
MAX_TIME_TIMESTAMP = 253402300799


def _check_timestamp(timestamp: int) -> int:
    if isinstance(timestamp, bool) or not isinstance(timestamp, int) or not 0 <= timestamp <= MAX_TIMESTAMP:
        raise NoteFormatError("a cosignature timestamp is an integer in 0..2^63-1", found=repr(timestamp)[:40])
    if timestamp > MAX_TIME_TIMESTAMP:
        raise NoteFormatError("a cosignature timestamp is after 9999-12-31T23:59:59Z, beyond the times this tool "
                              "can hold", found=repr(timestamp)[:40])
    return timestamp


def timestamp_of(moment: datetime) -> int:
    """POSIX seconds of an aware datetime (the sub-second part is dropped)."""
    if moment.tzinfo is None:
        raise MalformedInput("a cosignature time must carry its time zone", found=moment.isoformat())
    return int(moment.timestamp())


def time_of(timestamp: int) -> datetime:
    return datetime.fromtimestamp(_check_timestamp(timestamp), tz=UTC)


@dataclass(frozen=True)
class Cosigner:
    """A witness as a verifier knows it: its name and Ed25519 public key (vkey type 0x04)."""

    name: str
    key: PublicKey

    @property
    def key_id(self) -> bytes:
        return cosigner_key_id(self.name, self.key)

    @property
    def vkey(self) -> str:
        return verifier_key_string(self.name, self.key, COSIGNATURE_V1_TYPE)

    @classmethod
    def from_vkey(cls, text: str) -> Cosigner:
        name, _, key = parse_verifier_key(text, COSIGNATURE_V1_TYPE)
        return cls(name, key)

    @classmethod
    def of(cls, signer: Signer) -> Cosigner:
        return cls(signer.name, signer.public_key)


@dataclass(frozen=True)
class Cosignature:
    """One verified (or to-be-verified) ``cosignature/v1`` line."""

    name: str
    key_id: bytes
    timestamp: int
    signature: bytes

    @property
    def line(self) -> str:
        blob = self.key_id + struct.pack(">Q", self.timestamp) + self.signature
        return f"{EM_DASH} {self.name} {b64encode(blob)}\n"

    @property
    def time(self) -> datetime:
        return time_of(self.timestamp)

    @classmethod
    def from_note_signature(cls, signature: NoteSignature) -> Cosignature:
        """Read the timestamp and signature from a parsed note signature line (4-byte key id already split)."""
        rest = signature.signature
        if len(rest) != 8 + 64:
            raise NoteFormatError("a cosignature/v1 line holds a key id, an 8-byte timestamp and a 64-byte "
                                  "signature", expected=COSIGNATURE_BYTES, found=len(rest) + 4)
        (timestamp,) = struct.unpack(">Q", rest[:8])
        return cls(signature.name, signature.key_hash, _check_timestamp(timestamp), rest[8:])

    @classmethod
    def parse_line(cls, line: str) -> Cosignature:
        """Parse one signature line (with or without its final newline)."""
        text = line[:-1] if line.endswith("\n") else line
        prefix = EM_DASH + " "
        parts = text[len(prefix):].split(" ") if text.startswith(prefix) else []
        if len(parts) != 2 or not parts[0]:
            raise NoteFormatError("a cosignature line is '— <name> <base64>'", found=text[:80])
        try:
            blob = b64decode_strict(parts[1], what="cosignature")
        except MalformedInput as exc:
            raise NoteFormatError(exc.message, found=text[:80]) from None
        if len(blob) != COSIGNATURE_BYTES:
            raise NoteFormatError("a cosignature/v1 line holds 76 bytes", expected=COSIGNATURE_BYTES,
                                  found=len(blob))
        return cls.from_note_signature(NoteSignature(parts[0], blob[:4], blob[4:]))

    def verify(self, checkpoint: Checkpoint, cosigner: Cosigner) -> None:
        """Raise :class:`CheckpointError` unless this is ``cosigner``'s valid cosignature on ``checkpoint``."""
        if self.name != cosigner.name or self.key_id != cosigner.key_id:
            raise CheckpointError("cosignature is by another witness", expected=cosigner.vkey,
                                  found=f"{self.name}+{self.key_id.hex()}", size=checkpoint.size)
        try:
            cosigner.key.verify(cosigned_message(note_body(checkpoint.note), self.timestamp), self.signature)
        except InvalidSignature:
            raise CheckpointError(f"cosignature by witness {cosigner.name} does not verify", size=checkpoint.size,
                                  witness=cosigner.name, timestamp=self.timestamp) from None


def cosign(checkpoint: Checkpoint, signer: Signer, timestamp: int) -> Cosignature:
    """A witness's ``cosignature/v1`` on ``checkpoint`` at ``timestamp`` (POSIX seconds)."""
    message = cosigned_message(note_body(checkpoint.note), timestamp)
    return Cosignature(signer.name, cosigner_key_id(signer.name, signer.public_key), timestamp,
                       signer.sign(message))


def _verified(checkpoint: Checkpoint, cosigners: list[Cosigner] | tuple[Cosigner, ...]
              ) -> Iterator[tuple[Cosigner, Cosignature]]:
    """Each cosignature line on ``checkpoint`` by one of the given witnesses, verified (a line claiming to be by
    one, same name and key id, that does not verify is refused); lines by other keys are skipped."""
    by_id = {(c.name, c.key_id): c for c in cosigners}
    for signature in checkpoint.signatures:
        cosigner = by_id.get((signature.name, signature.key_hash))
        if cosigner is None:
            continue
        cosignature = Cosignature.from_note_signature(signature)
        cosignature.verify(checkpoint, cosigner)
        yield cosigner, cosignature


def verified_cosignatures(checkpoint: Checkpoint, cosigners: list[Cosigner] | tuple[Cosigner, ...]
                          ) -> dict[str, Cosignature]:
    """The cosignatures on ``checkpoint`` by the given witnesses, by witness name, each verified.

    Lines by other keys (the log's own, unknown witnesses) are ignored; a line that claims to be by a known
    witness (same name and key id) and does not verify is refused, as the signed-note rules require. When a
    witness signed twice, its latest timestamp is kept."""
    found: dict[str, Cosignature] = {}
    for cosigner, cosignature in _verified(checkpoint, cosigners):
        known = found.get(cosigner.name)
        if known is None or cosignature.timestamp > known.timestamp:
            found[cosigner.name] = cosignature
    return found


def verified_times(checkpoint: Checkpoint, cosigners: list[Cosigner] | tuple[Cosigner, ...]
                   ) -> dict[tuple[str, bytes], tuple[int, int]]:
    """The (earliest, latest) timestamp each given witness cosigned ``checkpoint`` at, by witness (name, key id):
    two keys under one name are two witnesses. Every line is verified as :func:`verified_cosignatures` verifies
    them. A witness that cosigned twice attests both times: the log held the checkpoint by the earliest, and had
    not grown past it before the latest."""
    found: dict[tuple[str, bytes], tuple[int, int]] = {}
    for cosigner, cosignature in _verified(checkpoint, cosigners):
        stamp, who = cosignature.timestamp, (cosigner.name, cosigner.key_id)
        earliest, latest = found.get(who, (stamp, stamp))
        found[who] = (min(earliest, stamp), max(latest, stamp))
    return found


def with_cosignatures(checkpoint: Checkpoint, lines: list[str] | tuple[str, ...]) -> Checkpoint:
    """The checkpoint's note with the given signature lines appended (lines already present are not repeated),
    re-parsed."""
    note = checkpoint.note
    present = set(note[len(note_body(note)) + 1:].splitlines(keepends=True))
    extra = "".join(line for line in dict.fromkeys(lines) if line not in present)
    for line in extra.splitlines(keepends=True):
        Cosignature.parse_line(line)  # each must be a well-formed cosignature line
    return parse_checkpoint(note + extra, created_utc=checkpoint.created_utc)


def cosignature_times(checkpoint: Checkpoint) -> list[datetime]:
    """The timestamps of the checkpoint note's cosignature/v1 lines (the 76-byte signature lines; the log's own
    and any other kind are skipped), verified or not: what the note says of when witnesses saw it."""
    return [Cosignature.from_note_signature(s).time for s in checkpoint.signatures
            if len(s.signature) == COSIGNATURE_BYTES - 4]
