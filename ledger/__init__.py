"""The transparency log: SQLite or PostgreSQL storage, RFC 6962 tree (O(log n) roots from stored subtrees), RFC
9162 proofs, C2SP checkpoints, export and replay, and a checkpoint client that cannot be rolled back. Only this
package touches the ledger database.

``Ledger``, the backends (``LedgerBackend``, ``backend_at``, ``migrate``) and the export (``LedgerExport``,
``export_ledger``, ``open_export``) are imported on first use (PEP 562): they pull in sqlite-utils, which commands
that only check signatures or print help never need.
"""

from typing import TYPE_CHECKING, Any

from ledger.blobs import BlobStore
from ledger.checkpoint import Checkpoint, parse_checkpoint, sign_checkpoint, verify_checkpoint
from ledger.client import CheckpointClient
from ledger.entries import ENTRY_TYPES, MAX_ENTRY_BYTES, blob_references, ledger_id_of, origin_of
from ledger.errors import (
    AppendConflict,
    BlobMissing,
    CheckpointError,
    EntryRejected,
    ForkError,
    LedgerError,
    LedgerIntegrityError,
    LedgerKeyError,
    LedgerStorageError,
    LedgerUsageError,
    NoteFormatError,
    ProofError,
    RollbackError,
    SourceUnavailable,
)
from ledger.log import BlobReader, LogReader, LogWriter
from ledger.proofs import ConsistencyProof, InclusionProof
from ledger.replay import ReplayReport
from ledger.verify import (
    root_from_inclusion_proof,
    verify_consistency,
    verify_entry_inclusion,
    verify_inclusion,
)

if TYPE_CHECKING:
    from ledger.backend import LedgerBackend, MigrationReport, backend_at, migrate
    from ledger.export import LedgerExport, export_ledger, open_export
    from ledger.ledger import Ledger

#: Names imported on first use, and the module that defines each.
_LAZY = {"Ledger": "ledger.ledger", "LedgerExport": "ledger.export", "export_ledger": "ledger.export",
         "open_export": "ledger.export", "LedgerBackend": "ledger.backend", "MigrationReport": "ledger.backend",
         "backend_at": "ledger.backend", "migrate": "ledger.backend"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'ledger' has no attribute {name!r}")


__all__ = [
    "ENTRY_TYPES",
    "MAX_ENTRY_BYTES",
    "AppendConflict",
    "BlobMissing",
    "BlobReader",
    "BlobStore",
    "Checkpoint",
    "CheckpointClient",
    "CheckpointError",
    "ConsistencyProof",
    "EntryRejected",
    "ForkError",
    "InclusionProof",
    "Ledger",
    "LedgerBackend",
    "LedgerError",
    "LedgerExport",
    "LedgerIntegrityError",
    "LedgerKeyError",
    "LedgerStorageError",
    "LedgerUsageError",
    "LogReader",
    "LogWriter",
    "MigrationReport",
    "NoteFormatError",
    "ProofError",
    "ReplayReport",
    "RollbackError",
    "SourceUnavailable",
    "backend_at",
    "blob_references",
    "export_ledger",
    "ledger_id_of",
    "migrate",
    "open_export",
    "origin_of",
    "parse_checkpoint",
    "root_from_inclusion_proof",
    "sign_checkpoint",
    "verify_checkpoint",
    "verify_consistency",
    "verify_entry_inclusion",
    "verify_inclusion",
]
