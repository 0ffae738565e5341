"""The ledger's errors: subclasses of the one hierarchy in ``keys.errors``, so the CLI maps them to the exit
codes of DESIGN.md without knowing the ledger.

Each class inherits ``LedgerError`` (so callers can catch everything the ledger raises on purpose) and the
``keys.errors`` class that gives its exit code; ``exit_code`` is restated on each so the method resolution
order cannot pick the wrong one.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from keys.errors import (
    HeldoutError,
    IncompleteError,
    MalformedInput,
    StorageError,
    UntrustedKey,
    UsageError,
    VerificationError,
)


class LedgerError(HeldoutError):
    """Anything the ledger refuses or finds wrong."""

    exit_code = 1


class LedgerIntegrityError(LedgerError, VerificationError):
    """Stored or exported ledger data does not verify: tampered bytes, a broken tree, a bad checkpoint (exit 1)."""

    exit_code = 1


class ProofError(LedgerIntegrityError):
    """An inclusion or consistency proof does not verify (raised by ``ledger.verify``)."""

    exit_code = 1


class CheckpointError(LedgerIntegrityError):
    """A checkpoint note is malformed, badly signed, or would contradict an earlier checkpoint."""

    exit_code = 1


class NoteFormatError(CheckpointError, MalformedInput):
    """A signed note is not in the C2SP signed-note / tlog-checkpoint format."""

    exit_code = 1


class LedgerKeyError(LedgerError, UntrustedKey):
    """A key that is not the ledger's key tried to sign, or signed what was presented (exit 1)."""

    exit_code = 1


class RollbackError(LedgerIntegrityError):
    """A client was shown a checkpoint older than one it already accepted."""

    exit_code = 1


class ForkError(LedgerIntegrityError):
    """Two signed checkpoints that cannot both be prefixes of one history (the evidence is kept)."""

    exit_code = 1


class EntryRejected(LedgerError, UsageError):
    """An entry offered for appending is not acceptable: malformed, unknown type, too large (exit 2; nothing
    is written)."""

    exit_code = 2


class LedgerUsageError(LedgerError, UsageError):
    """A request the ledger cannot serve as asked: no such ledger, index out of range, bad size (exit 2)."""

    exit_code = 2


class SourceUnavailable(LedgerUsageError):
    """A published source could not be read: unreachable, an HTTP error other than not found, a cut connection,
    an encoding the reader does not take (exit 2). It says nothing of the data: a verifier stops without a
    verdict (an audit writes no report) rather than call the log damaged."""


class AppendConflict(LedgerUsageError):
    """An append that named the size it expected found another (another writer came first); nothing written."""


class BlobMissing(LedgerError, IncompleteError):
    """A content-addressed blob is not there, so what references it cannot be checked (exit 5)."""

    exit_code = 5


class LedgerStorageError(LedgerUsageError, StorageError):
    """SQLite could not do its work because of the environment: disk full, read-only file or folder, I/O
    error, locked past the busy timeout, a file it cannot open (exit 2: the data are not at fault)."""

    exit_code = 2


#: SQLite's own words for failures of the environment rather than of the data (sqlite3 raises all of them as
#: OperationalError; other OperationalErrors are kept as integrity failures below).
_ENVIRONMENT_WORDS = ("disk is full", "disk i/o error", "readonly database", "read-only", "unable to open",
                      "database is locked", "locking protocol", "permission denied", "out of memory",
                      "no such file", "cannot open", "not a directory")


def database_error(exc: sqlite3.Error, path: Path | str | None = None) -> LedgerError:
    """The project's error for a ``sqlite3`` error on the ledger file at ``path``: an environment problem
    (exit 2) when SQLite says so, else an unreadable or inconsistent database (exit 1: its bytes are not what
    this program wrote)."""
    words = str(exc)
    where = f"{path}: " if path is not None else ""
    evidence = {"path": str(path)} if path is not None else {}
    if isinstance(exc, sqlite3.OperationalError) and any(w in words.lower() for w in _ENVIRONMENT_WORDS):
        return LedgerStorageError(f"{where}the ledger database cannot be used: {words}", **evidence)
    return LedgerIntegrityError(f"{where}not a readable ledger database ({words})", **evidence)
class TimeRegression(LedgerUsageError):
    """An append whose time is earlier than the ledger's last entry: the ledger's time only moves forward
    (exit 2; nothing is written)."""


class EntryAfterNow(LedgerUsageError):
    """An entry dated after the append's own reference time: since the ledger's time only moves forward, one
    entry dated in the far future would refuse every later append, for good (exit 2; nothing is written)."""


class EntryAfterClock(LedgerUsageError):
    """An entry dated ahead of the machine's clock (a reference time given with ``--at`` or ``$HELDOUT_NOW``
    that runs ahead): logged, it would refuse every append made on the real date until that date passes, on a
    log nobody can rewrite (exit 2; nothing is written). Rehearsals of a later day run on stores of their own
    (``$HELDOUT_REHEARSAL``)."""
