"""The log interface: what a reader of a transparency log may ask (:class:`LogReader`) and what a writer may
do (:class:`LogWriter`), independent of where the log is kept.

:class:`ledger.ledger.Ledger` implements both, on either backend (SQLite file or PostgreSQL schema);
:class:`ledger.export.LedgerExport` (a public export directory) is a reader. Blobs are not part of the log:
they are read through a :class:`BlobReader` (the store's ``BlobStore``, an export's ``blobs/``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from keys import Signer
from ledger.checkpoint import Checkpoint
from ledger.proofs import ConsistencyProof, InclusionProof


@runtime_checkable
class LogReader(Protocol):
    """Read access to a log: its entries' bytes, Merkle roots and RFC 9162 proofs, its signed checkpoints."""

    ledger_id: str
    origin: str

    @property
    def size(self) -> int: ...

    def entry_bytes(self, index: int) -> bytes: ...

    def entries_bytes(self) -> Iterator[tuple[int, bytes]]: ...

    def entries(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
        """``(index, entry)`` decoded (each checked canonical and of a registered type), in index order."""
        ...

    def leaf_hash(self, index: int) -> bytes: ...

    def root(self, size: int | None = None) -> bytes: ...

    def inclusion_proof(self, index: int, size: int | None = None) -> InclusionProof: ...

    def consistency_proof(self, old_size: int, new_size: int | None = None) -> ConsistencyProof: ...

    def checkpoints(self) -> list[Checkpoint]: ...

    def latest_checkpoint(self) -> Checkpoint: ...


@runtime_checkable
class LogWriter(Protocol):
    """Appending to a log: compare-and-swap batch appends, one signed checkpoint per batch, acknowledged only
    once durable."""

    def append_batch(self, entries: Sequence[Mapping[str, Any]], *, signer: Signer, now: datetime,
                     expected_size: int | None = None) -> list[int]: ...

    def checkpoint(self, *, signer: Signer, now: datetime) -> Checkpoint: ...


@runtime_checkable
class BlobReader(Protocol):
    """Content-addressed files the log's entries refer to by SHA-256 (hex)."""

    def get(self, sha256_hex: str) -> bytes: ...

    def has(self, sha256_hex: str) -> bool: ...
