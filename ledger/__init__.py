"""The transparency log: SQLite storage, RFC 6962 tree (pymerkle for roots), RFC 9162 proofs, C2SP checkpoints,
export and replay, and a checkpoint client that cannot be rolled back. Only this package touches the ledger
database."""

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
)
from ledger.export import LedgerExport, export_ledger, open_export
from ledger.ledger import Ledger
from ledger.proofs import ConsistencyProof, InclusionProof
from ledger.replay import ReplayReport
from ledger.verify import (
    root_from_inclusion_proof,
    verify_consistency,
    verify_entry_inclusion,
    verify_inclusion,
)

__all__ = [
    "ENTRY_TYPES",
    "MAX_ENTRY_BYTES",
    "AppendConflict",
    "BlobMissing",
    "BlobStore",
    "Checkpoint",
    "CheckpointClient",
    "CheckpointError",
    "ConsistencyProof",
    "EntryRejected",
    "ForkError",
    "InclusionProof",
    "Ledger",
    "LedgerError",
    "LedgerExport",
    "LedgerIntegrityError",
    "LedgerKeyError",
    "LedgerStorageError",
    "LedgerUsageError",
    "NoteFormatError",
    "ProofError",
    "ReplayReport",
    "RollbackError",
    "blob_references",
    "export_ledger",
    "ledger_id_of",
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
