"""The audit report: the reference passport's ``computed.audit`` fields, plus what was checked and a finding
per failing entry or file. It is a document for machines (``audit_report.json``) and the source of the CLI's
summary and exit code."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from keys import HeldoutError
from keys.files import fsync_dir, write_atomic
from keys.names import SHA256_HEX
from keys.safeio import read_named
from seals import canonical_bytes, sha256_hex

REPORT_FORMAT = "heldout-audit-report"
#: 2: ``checkpoint`` (the signed note the audit ended at) and ``since`` (the earlier report it carried forward).
REPORT_VERSION = 2

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INCOMPLETE = 5


@dataclass(frozen=True)
class Finding:
    """One thing that failed: which check, where (entry index and/or file), and the evidence."""

    check: str
    message: str
    index: int | None = None
    file: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_error(cls, check: str, error: HeldoutError, *, index: int | None = None,
                   file: str | None = None) -> Finding:
        evidence = {k: v for k, v in error.evidence.items() if k not in ("index", "file")}
        found_index = error.evidence.get("index") if index is None else index
        found_file = error.evidence.get("file") if file is None else file
        return cls(check=check, message=error.message,
                   index=found_index if isinstance(found_index, int) else None,
                   file=str(found_file) if found_file is not None else None,
                   evidence={k: v if isinstance(v, (str, int, float, bool, type(None))) else str(v)
                             for k, v in evidence.items()})

    @property
    def where(self) -> str:
        parts = []
        if self.index is not None:
            parts.append(f"entry {self.index}")
        elif isinstance(self.evidence.get("entries"), str):
            parts.append(f"entries {self.evidence['entries']}")
        if self.file is not None:
            parts.append(self.file)
        return ", ".join(parts) or "ledger"

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "message": self.message, "index": self.index, "file": self.file,
                "evidence": self.evidence}


@dataclass(frozen=True)
class Unrederived:
    """A bundle the audit could not re-derive, and why (in third-party mode: labels still sealed)."""

    index: int
    generation: str
    task: str
    model_id: str
    reason: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out = {"index": self.index, "generation": self.generation, "task": self.task, "model_id": self.model_id,
               "reason": self.reason}
        if self.evidence:
            out["evidence"] = self.evidence
        return out


@dataclass(frozen=True)
class SinceLink:
    """The earlier clean report an incremental audit trusted: its SHA-256 (the chain), the tree it covered
    (size and root, from its re-verified checkpoint), the bundles it had re-derived, and how many bundles this
    audit re-derived itself (those appended since)."""

    report_sha256: str
    ledger_entries: int
    ledger_head: str
    bundles: int
    rederived_now: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"report_sha256": self.report_sha256, "ledger_entries": self.ledger_entries,
                "ledger_head": self.ledger_head, "bundles": self.bundles, "rederived_now": self.rederived_now}


@dataclass
class AuditReport:
    ledger_id: str
    mode: str
    audit_command: str
    checked_utc: str
    ledger_entries: int = 0
    ledger_head: str = ""
    ledger_intact: bool = False
    checkpoints: int = 0
    bundles: int = 0
    rederived: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    not_rederived: list[Unrederived] = field(default_factory=list)
    generations: dict[str, Any] = field(default_factory=dict)
    #: The signed checkpoint note at ``ledger_entries`` (None when the replay failed): what a later
    #: ``--since`` audit re-verifies before it trusts this report.
    checkpoint: str | None = None
    #: An incremental audit's link to the earlier report it trusted (see :class:`SinceLink`), else None.
    since: SinceLink | None = None

    @property
    def exit_code(self) -> int:
        if self.findings or not self.ledger_intact:
            return EXIT_FAILED
        if self.not_rederived:
            return EXIT_INCOMPLETE
        return EXIT_OK

    @property
    def verdict(self) -> str:
        return {EXIT_OK: "clean", EXIT_FAILED: "failed", EXIT_INCOMPLETE: "incomplete"}[self.exit_code]

    @property
    def clean(self) -> bool:
        return self.exit_code == EXIT_OK and self.bundles == self.rederived

    def computed_audit(self) -> dict[str, Any]:
        """Exactly the reference passport's ``computed.audit`` members."""
        return {
            "audit_command": self.audit_command,
            "bundles": self.bundles,
            "ledger_entries": self.ledger_entries,
            "ledger_head": self.ledger_head,
            "ledger_intact": self.ledger_intact,
            "rederived": self.rederived,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "format": REPORT_FORMAT,
            "version": REPORT_VERSION,
            **self.computed_audit(),
            "ledger_id": self.ledger_id,
            "mode": self.mode,
            "checked_utc": self.checked_utc,
            "checkpoints": self.checkpoints,
            "checked": dict(sorted(self.counts.items())),
            "generations": self.generations,
            "findings": [f.to_json() for f in self.findings],
            "not_rederived": [u.to_json() for u in self.not_rederived],
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "checkpoint": self.checkpoint,
            "since": self.since.to_json() if self.since is not None else None,
        }

    def to_bytes(self) -> bytes:
        """The report as it is written: canonical JSON and a newline."""
        return canonical_bytes(self.to_json()) + b"\n"

    def write(self, path: Path) -> bytes:
        """Write the report as canonical JSON, atomically (never a partial report). Returns the bytes."""
        data = self.to_bytes()
        write_atomic(path, data)
        return data


#: The record of the clean reports the auditor wrote, per ledger and mode, in the auditor's own state folder
#: (``heldout.store.auditor_state_path``; see :class:`ReportRecord`).
RECORD_FOLDER = "audit-records"
#: The record keeps the latest reports within this many bytes (about 16,000): older ones drop out, so a
#: --since report that old is audited in full.
RECORD_LIMIT = 1024 * 1024


@dataclass(frozen=True)
class ReportRecord:
    """The SHA-256 of every clean report this auditor wrote for one ledger and mode, one per line.

    ``--since`` carries a report forward only when its SHA-256 is recorded here: everything else a report says
    (clean, its counts, even its signed checkpoint) can be written by anyone from public data, so without the
    record a stranger's "clean" report would spare a forged bundle its re-derivation. The record is the auditor's
    own file, kept outside every store (an audit only reads a store); it proves nothing to anyone else (a
    passport's audit claim is checked against the log instead)."""

    path: Path

    @classmethod
    def of(cls, state: Path, ledger_id: str, mode: str) -> ReportRecord:
        """The record of ``ledger_id``'s audits in ``mode`` under the auditor's ``state`` folder."""
        return cls(state / RECORD_FOLDER / f"{ledger_id}.{mode}.sha256")

    def digests(self) -> frozenset[str]:
        """The recorded SHA-256s (none when there is no record yet); a line that is not one is ignored (a write
        cut short by a crash), so the worst a damaged record does is make the next audit a full one."""
        try:
            text = read_named(self.path, limit=2 * RECORD_LIMIT, what="the audit's record of its reports")
        except (HeldoutError, OSError):  # none yet, or not a readable file: nothing is carried forward
            return frozenset()
        return frozenset(line for line in text.decode("ascii", "replace").splitlines() if SHA256_HEX.fullmatch(line))

    def add(self, report: bytes) -> str:
        """Record ``report`` (the bytes written), durably, once; returns its SHA-256. Past
        :data:`RECORD_LIMIT` the oldest half of the record is dropped first (rewritten atomically)."""
        digest = sha256_hex(report)
        if digest in self.digests():
            return digest
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.is_file() and self.path.stat().st_size >= RECORD_LIMIT:
            lines = self.path.read_bytes()[-RECORD_LIMIT // 2:].split(b"\n")[1:]  # whole lines only
            write_atomic(self.path, b"".join(line + b"\n" for line in lines if line))
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            # a line cut short by a crash is closed first, so it costs only itself
            size = os.fstat(fd).st_size
            ends_clean = size == 0 or os.pread(fd, 1, size - 1) == b"\n"
            os.write(fd, (b"" if ends_clean else b"\n") + digest.encode("ascii") + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(self.path.parent)
        return digest
