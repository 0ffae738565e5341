"""C2SP ``tlog-proof`` (``c2sp.org/tlog-proof@v1``): an offline proof that an entry is in the log.

The text, lines separated by U+000A::

    c2sp.org/tlog-proof@v1
    extra <base64 of opaque data>          (only when there is extra data)
    index <zero-based entry index, decimal, no leading zeroes>
    <base64 SHA-256>                        (zero or more: the RFC 6962 inclusion path, leaf's sibling first)
    <empty line>
    <the checkpoint, verbatim (a signed note, with any witness cosignature lines)>

Base64 is RFC 4648 section 4 (standard alphabet, padded). We put the entry's own bytes (its canonical JSON) in
``extra``: the spec names "additional data necessary to reconstruct the record hash" as a use, and with it an
offline verifier recomputes the leaf hash (RFC 6962 ``SHA-256(0x00 || entry)``) and reads what was logged. The
extra data is not authenticated by itself: it is trusted only once the inclusion proof from its leaf hash to the
signed root verifies (:func:`verify_tlog_proof`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from keys import MalformedInput, PublicKey, b64decode_strict, b64encode
from ledger.checkpoint import Checkpoint, verify_checkpoint
from ledger.rfc6962 import HASH_SIZE, leaf_hash
from ledger.verify import verify_inclusion

TLOG_PROOF_HEADER = "c2sp.org/tlog-proof@v1"
_INDEX = re.compile(r"index (0|[1-9][0-9]*)")


@dataclass(frozen=True)
class TlogProof:
    index: int
    path: tuple[bytes, ...]
    checkpoint: str
    extra: bytes | None = None

    def text(self) -> str:
        lines = [TLOG_PROOF_HEADER]
        if self.extra is not None:
            lines.append(f"extra {b64encode(self.extra)}")
        lines.append(f"index {self.index}")
        lines.extend(b64encode(h) for h in self.path)
        return "\n".join(lines) + "\n\n" + self.checkpoint


def _bad(message: str, **evidence: object) -> MalformedInput:
    return MalformedInput(f"tlog-proof: {message}", **evidence)


def parse_tlog_proof(text: str) -> TlogProof:
    """Parse the text strictly (the checkpoint part is kept verbatim; :func:`verify_tlog_proof` checks it)."""
    if not isinstance(text, str):
        raise _bad("a proof is text", found=type(text).__name__)
    head, sep, checkpoint = text.partition("\n\n")
    if not sep or not checkpoint:
        raise _bad("an empty line separates the proof from its checkpoint")
    lines = head.split("\n")
    if lines[0] != TLOG_PROOF_HEADER:
        raise _bad(f"the first line must be {TLOG_PROOF_HEADER}", found=lines[0][:60])
    position = 1
    extra = None
    if position < len(lines) and lines[position].startswith("extra "):
        extra = b64decode_strict(lines[position][len("extra "):], what="tlog-proof extra")
        position += 1
    match = _INDEX.fullmatch(lines[position]) if position < len(lines) else None
    if match is None:
        raise _bad("an index line (index N, decimal without leading zeroes) must follow",
                   found=lines[position][:60] if position < len(lines) else None)
    path = []
    for line in lines[position + 1:]:
        digest = b64decode_strict(line, what="tlog-proof inclusion hash")
        if len(digest) != HASH_SIZE:
            raise _bad("each inclusion proof line is one base64 SHA-256 hash", found=line[:60])
        path.append(digest)
    return TlogProof(index=int(match.group(1)), path=tuple(path), checkpoint=checkpoint, extra=extra)


def verify_tlog_proof(proof: TlogProof, *, name: str, key: PublicKey, origin: str,
                      record: bytes | None = None) -> Checkpoint:
    """The checkpoint verifies under the log key, and the record (``record``, else the proof's extra data)
    is included at the proof's index in that checkpoint's tree. Returns the checkpoint."""
    data = record if record is not None else proof.extra
    if data is None:
        raise _bad("no record to prove: the proof carries no extra data and none was given")
    checkpoint = verify_checkpoint(proof.checkpoint, name=name, key=key, origin=origin)
    verify_inclusion(proof.index, checkpoint.size, leaf_hash(data), list(proof.path), checkpoint.root)
    return checkpoint
