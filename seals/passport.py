"""The passport: a signed evidence record for one model, in the reference deployment's format.

``Passport.from_json`` validates the shape of every member the verifier relies on; ``verify_passport`` checks
the signature against a trusted key first (so a changed value reports as a bad signature, the real cause),
then the shape, then the time.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from keys import MalformedInput, PublicKey, TrustedKey, VerificationError
from seals.signing import Issuer, VerifiedDocument, verify_document
from seals.timeutil import format_utc, parse_utc_text

PASSPORT_VERSION = "0.1"
TOP_LEVEL_MEMBERS = (
    "canonicalisation", "computed", "declared", "expiry_basis", "expiry_utc", "issued_utc", "issuer",
    "observed", "passport_version", "signature", "spec_version", "subject",
)
COMPUTED_MEMBERS = ("audit", "cross_site", "evaluations", "heldout", "sources")


def _require(body: dict[str, Any], member: str, kind: type | tuple[type, ...], where: str) -> Any:
    if member not in body:
        raise MalformedInput(f"passport lacks {where}{member}", field=f"{where}{member}")
    value = body[member]
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise MalformedInput(f"passport {where}{member} is not {names}", field=f"{where}{member}",
                             found=type(value).__name__)
    return value


# The forms of the members every verifier compares with the ledger (where present: which must be there is each
# verifier's check). One form each, exactly: ``true`` is not the index 1 (Python's ``True == 1`` made a passport
# whose ``seal_index`` was ``true`` valid on a ledger whose seal is entry 1; red-team round 16).
_COUNT, _TEXT, _FLAG, _TEXTS = "a non-negative integer", "a string", "true or false", "a list of strings"
_HELDOUT_FORMS = {"generation": _TEXT, "ledger_id": _TEXT, "set_hash": _TEXT, "manifest_sha256": _TEXT,
                  "note_verifier_key": _TEXT, "expiry_utc": _TEXT, "seal_index": _COUNT}
_CHECKPOINT_FORMS = {"size": _COUNT, "root_b64": _TEXT, "note": _TEXT}
_BUNDLE_FORMS = {"index": _COUNT, "task": _TEXT, "evaluation_sha256": _TEXT, "predictions_sha256": _TEXT,
                 "leaf_hash_b64": _TEXT, "inclusion_proof": _TEXTS}
_PROOFS_FORMS = {"seal": _TEXT, "bundles": _TEXTS}
_AUDIT_FORMS = {"bundles": _COUNT, "rederived": _COUNT, "ledger_entries": _COUNT, "ledger_head": _TEXT,
                "ledger_intact": _FLAG, "audit_command": _TEXT}


def _has_form(value: Any, form: str) -> bool:
    if form == _COUNT:
        return type(value) is int and value >= 0
    if form == _TEXT:
        return type(value) is str
    if form == _FLAG:
        return type(value) is bool
    return type(value) is list and all(type(item) is str for item in value)


def _check_forms(body: Any, forms: dict[str, str], where: str) -> None:
    """Each member of ``forms`` that ``body`` (an object, or null/absent: nothing to check) holds, in its form."""
    if body is None:
        return
    if not isinstance(body, dict):
        raise MalformedInput(f"passport {where} is not an object", field=where, found=type(body).__name__)
    for member, form in forms.items():
        if member in body and not _has_form(body[member], form):
            raise MalformedInput(f"passport {where}.{member} is not {form}", field=f"{where}.{member}",
                                 found=repr(body[member])[:80])


def _check_heldout_forms(heldout: dict[str, Any], audit: Any) -> None:
    _check_forms(heldout, _HELDOUT_FORMS, "computed.heldout")
    _check_forms(heldout.get("checkpoint"), _CHECKPOINT_FORMS, "computed.heldout.checkpoint")
    _check_forms(heldout.get("proofs"), _PROOFS_FORMS, "computed.heldout.proofs")
    bundles = heldout.get("bundles")
    if bundles is not None and type(bundles) is not list:
        raise MalformedInput("passport computed.heldout.bundles is not a list", field="computed.heldout.bundles")
    for k, ref in enumerate(bundles or []):
        _check_forms(ref, _BUNDLE_FORMS, f"computed.heldout.bundles[{k}]")
    _check_forms(audit, _AUDIT_FORMS, "computed.audit")


@dataclass(frozen=True)
class Passport:
    """A parsed passport. ``raw`` is the document exactly as read (signature included)."""

    raw: dict[str, Any]
    passport_version: str
    spec_version: str
    model_id: str
    issuer: Issuer
    issued: datetime
    expiry: datetime
    expiry_basis: str
    evaluations: tuple[dict[str, Any], ...]
    heldout: dict[str, Any] | None

    @classmethod
    def from_json(cls, doc: Any) -> Passport:
        if not isinstance(doc, dict):
            raise MalformedInput("passport is not a JSON object")
        for member in TOP_LEVEL_MEMBERS:
            if member not in doc:
                raise MalformedInput(f"passport lacks {member}", field=member)
        subject = _require(doc, "subject", dict, "")
        computed = _require(doc, "computed", dict, "")
        for member in COMPUTED_MEMBERS:
            if member not in computed:
                raise MalformedInput(f"passport lacks computed.{member}", field=f"computed.{member}")
        evaluations = _require(computed, "evaluations", list, "computed.")
        for i, evaluation in enumerate(evaluations):
            if not isinstance(evaluation, dict):
                raise MalformedInput(f"computed.evaluations[{i}] is not an object", field=f"computed.evaluations[{i}]")
        _require(computed, "sources", list, "computed.")
        heldout = _require(computed, "heldout", (dict, type(None)), "computed.")
        if heldout is not None:
            _check_heldout_forms(heldout, computed.get("audit"))
        return cls(
            raw=doc,
            passport_version=_require(doc, "passport_version", str, ""),
            spec_version=_require(doc, "spec_version", str, ""),
            model_id=_require(subject, "model_id", str, "subject."),
            issuer=Issuer.from_json(doc["issuer"]),
            issued=parse_utc_text(_require(doc, "issued_utc", str, ""), what="issued_utc"),
            expiry=parse_utc_text(_require(doc, "expiry_utc", str, ""), what="expiry_utc"),
            expiry_basis=_require(doc, "expiry_basis", str, ""),
            evaluations=tuple(evaluations),
            heldout=heldout,
        )


class PassportState(enum.Enum):
    VALID = "valid"
    EXPIRED = "expired"
    LAPSED = "lapsed"  # decided against a ledger: its generation was retired or its spec superseded


#: The exit code of each state (DESIGN.md's table): the CLI and the public site's verdicts use this one mapping.
EXIT_CODE_FOR_STATE = {PassportState.VALID: 0, PassportState.EXPIRED: 3, PassportState.LAPSED: 4}


@dataclass(frozen=True)
class PassportVerdict:
    """The outcome of a passport whose signature verified: its state at the reference time."""

    passport: Passport
    verified: VerifiedDocument
    at: datetime
    state: PassportState
    reason: str | None = None
    #: The trusted key's own name (a keyring's, a ledger's declaration), when the key has one: who signed, as the
    #: verifier knows the key; the document's ``issuer.name`` is only what it says of itself.
    trusted_name: str | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_CODE_FOR_STATE[self.state]

    @property
    def line(self) -> str:
        issuer = self.passport.issuer
        signer = issuer.name if self.trusted_name in (None, issuer.name) else \
            f"{self.trusted_name} (the passport names its issuer {issuer.name})"
        head = f"signature valid, issued by {signer} under key {issuer.key_id}"
        if self.state is PassportState.EXPIRED:
            return f"{head}, expired {format_utc(self.passport.expiry)}"
        if self.state is PassportState.LAPSED:
            return f"{head}, lapsed: {self.reason}"
        return f"{head}, valid until {format_utc(self.passport.expiry)}"

    def to_json(self) -> dict[str, Any]:
        p = self.passport
        return {
            "signature_valid": True,
            "state": self.state.value,
            "model_id": p.model_id,
            "issuer": p.issuer.to_json(),
            **({"trusted_key_name": self.trusted_name} if self.trusted_name is not None else {}),
            "issued_utc": format_utc(p.issued),
            "expiry_utc": format_utc(p.expiry),
            "expiry_basis": p.expiry_basis,
            "checked_at": format_utc(self.at),
            "verdict": self.line,
            **({"reason": self.reason} if self.reason else {}),
        }


def verify_passport(doc: Any, trusted: PublicKey | TrustedKey, *, at: datetime) -> PassportVerdict:
    """Verify a passport's signature under a trusted key, its shape, and its expiry at ``at``.

    Raises for a document that fails (signature, key, shape). An expired passport is not an exception at this
    level: the verdict says so, and the caller maps it to exit 3 while still reporting the signature valid.
    """
    verified = verify_document(doc, trusted, what="passport")
    passport = Passport.from_json(doc)
    if at < passport.issued:  # valid from its issue on: before it, no verdict is "valid" (nor "expired")
        raise VerificationError(f"the passport was issued {format_utc(passport.issued)}: at {format_utc(at)} it did "
                                "not exist yet, so it is not valid then (a passport dated ahead of the reference "
                                "time is not yet valid)", field="issued_utc", expected=f"<= {format_utc(at)}",
                                found=format_utc(passport.issued))
    state = PassportState.EXPIRED if at >= passport.expiry else PassportState.VALID
    return PassportVerdict(passport=passport, verified=verified, at=at, state=state,
                           trusted_name=trusted.name if isinstance(trusted, TrustedKey) else None)
