"""The audit's rules in front of every verifier of a published claim.

A passport, a leaderboard or a reveal is only as good as the log it rests on. ``passport verify``, the site
builder and ``verify-reveal`` replayed the log and checked the claim against it, but the domain rules of
FORMATS section 15 (a draw retried until it suited, a better run logged again as the latest, a release record
no mechanism gives, a leakage charge that is not the evaluation's) and the re-derivation of the cited numbers
lived in the audit alone: a passport whose log the audit refuses was "valid" to them (red-team round 19). Each
of them now runs the audit on the same log first, re-deriving the bundles the claim cites and those their
release records rest on (every other bundle is checked in all but its re-derivation: a claim's verifier stays
fast on a large log), and refuses the claim when the log has a finding.

Round 20: the claim and its audit read one copy of a published log (a server answered the claim's check with a
log that holds it and the audit with an honest log before it), and a logged claim is judged by an audit of the
log as it stood at its entry, not by the current log's findings filtered by index (whatever was logged later
could move a finding past the claim, or cure it).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

from heldout.audit.report import AuditReport, Finding
from heldout.audit.run import run_audit
from heldout.audit.sources import AuditSource, ExportSource, operator_source
from heldout.generations.verify import RevealVerdict, check_reveal
from heldout.passports import PassportCheck, anchored_ledger_id, check_passport
from heldout.store import Store
from keys import PublicKey, TrustedKey, VerificationError
from ledger.log import LogReader
from ledger.policy import Policy
from ledger.public import PublicLog, is_public_log, open_public_log
from seals import canonical_bytes, sha256_hex


class LogFailsAudit(VerificationError):
    """The log a claim rests on has an audit finding: the claim is refused (exit 1), the finding named."""


def cited_bundles(doc: Mapping[str, Any]) -> list[int]:
    """The ledger indices of the bundles a passport cites (``computed.heldout.bundles[].index``); the passport's
    own checks refuse one whose citations are malformed, so what is not an index here is skipped."""
    computed = doc.get("computed")
    heldout = computed.get("heldout") if isinstance(computed, Mapping) else None
    bundles = heldout.get("bundles") if isinstance(heldout, Mapping) else None
    if not isinstance(bundles, list):
        return []
    return [ref["index"] for ref in bundles
            if isinstance(ref, Mapping) and type(ref.get("index")) is int]


def require_clean_log(source: AuditSource, *, now: datetime, rederive: Collection[int], claim: str,
                      through: int | None = None) -> AuditReport:
    """Audit ``source`` re-deriving only ``rederive`` (and the bundles their release records rest on); raise
    :class:`LogFailsAudit` naming the first finding (and how many there are) when it is not clean. ``claim``
    says what rests on it, for the message. Bundles that cannot be re-derived here (labels still sealed, for a
    third party) are no finding: the report lists them.

    ``through``: the entry the claim was logged by, when it was. A claim is judged on the log as it stood when
    it was logged: the audit's rules run on the entries up to it (``run_audit``'s ``through``), so that a
    passport issued on a clean log stays valid when the operator misbehaves later (its lapse rules judge what
    follows), and nothing logged later moves, hides or cures a fault it rests on; the log's integrity is
    judged whole."""
    report = run_audit(source, now=now, audit_command=f"heldout {claim}", rederive=rederive, through=through)
    refuse_on(report.findings, claim)
    return report


def refuse_on(findings: Sequence[Finding], claim: str) -> None:
    """Raise :class:`LogFailsAudit` naming the first of ``findings`` (and how many there are), if any."""
    if findings:
        first = findings[0]
        more = len(findings) - 1
        where = {k: v for k, v in (("index", first.index), ("file", first.file)) if v is not None}
        raise LogFailsAudit(
            f"the ledger {claim} rests on fails its audit ({first.check}: {first.message})"
            + (f", and {more} more finding{'s' if more > 1 else ''}" if more else "")
            + "; the audit of the ledger names each", check=first.check, **where,
            **{k: v for k, v in first.evidence.items() if k in ("expected", "found", "field")})


def verify_passport_claim(doc: dict[str, Any], *, store: Store, source: str | None, at: datetime,
                          pinned: PublicKey | TrustedKey | None = None,
                          policy: Policy | None = None) -> PassportCheck:
    """``heldout passport verify``: the passport checked against its ledger (``heldout.passports.check_passport``)
    and, when it was, the log it rests on audited (:func:`require_passport_log_clean`), both on one reading of a
    published log: two readings may be answered with two logs (red-team round 20: a server that showed the
    passport's check a log holding it, and the audit an honest log before it, had a passport on numbers that
    do not re-derive called valid)."""
    log = open_public_log(source) if source is not None and anchored_ledger_id(doc) is not None else None
    found = check_passport(doc, store=store, source=source, at=at, pinned=pinned, policy=policy, log=log)
    if found.ledger_checked:  # the log it rests on passes its audit, the passport's own bundles re-derived
        require_passport_log_clean(doc, store=store, source=log, at=at)
    return found


def verify_reveal_claim(store: Store, generation: str, *, source: str | None, ledger_id: str | None, at: datetime,
                        pinned: PublicKey | TrustedKey | None = None, policy: Policy | None = None) -> RevealVerdict:
    """``heldout verify-reveal``: the reveal checked (``heldout.generations.verify.check_reveal``) and the log it
    rests on audited, on one reading of a published log (as :func:`verify_passport_claim`): the reveal opens a
    draw the log must show was made once, as sealed (a retried draw is a finding). A plain folder of two files
    has no log to audit."""
    log = open_public_log(source) if source is not None and is_public_log(source) else None
    verdict = check_reveal(store, generation, source=source, ledger_id=ledger_id, now=at, pinned=pinned,
                           policy=policy, log=log)
    if source is None or log is not None:
        require_ledger_clean(store=store, source=log, ledger_id=ledger_id, at=at, rederive=(), claim="the reveal")
    return verdict


def require_passport_log_clean(doc: Mapping[str, Any], *, store: Store, source: str | PublicLog | None,
                               at: datetime) -> None:
    """``passport verify`` with its ledger (``source``: an export, tiles directory or URL, or the public log
    already read from one; else the store's copy): the log passes its audit as it stood when the passport was
    logged, the passport's own bundles re-derived (:func:`require_clean_log`)."""
    ledger_id = anchored_ledger_id(doc)
    if ledger_id is not None:  # (else checked on its own: the verdict says so)
        digest = sha256_hex(canonical_bytes(doc))
        require_ledger_clean(store=store, source=source, ledger_id=ledger_id, at=at, rederive=cited_bundles(doc),
                             claim="the passport", through=lambda log: logged_at(log, digest))


def logged_at(log: LogReader, passport_sha256: str) -> int | None:
    """The first entry that logs the passport of this SHA-256 (the one it is judged by), if any."""
    return next((index for index, entry in log.entries()
                 if entry.get("type") == "passport" and entry.get("passport_sha256") == passport_sha256), None)


def require_ledger_clean(*, store: Store, source: str | PublicLog | None, ledger_id: str | None, at: datetime,
                         rederive: Collection[int], claim: str,
                         through: Callable[[LogReader], int | None] = lambda log: None) -> None:
    """:func:`require_clean_log` on the published log at ``source`` (an export, tiles directory or URL, or one
    already opened: a claim and the audit that gates it must be judged on one reading of a log, as a server can
    answer two readings with two logs), else on the store's ledger ``ledger_id`` (default: the store's);
    ``through(log)``: the claim's entry in it."""
    audit_source: AuditSource
    if source is not None:
        log = source if not isinstance(source, str) else open_public_log(source)
        audit_source = ExportSource(log, ledger_id or log.ledger_id)
    else:
        audit_source = operator = operator_source(store, ledger_id)
    try:
        require_clean_log(audit_source, now=at, rederive=rederive, claim=claim, through=through(audit_source.log))
    finally:
        if source is None:
            operator.ledger.close()
