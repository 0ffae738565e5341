"""Passports: issued only after a clean audit at the ledger head, only against a current generation; checked
later against the ledger (lapsed once the generation is retired).

A passport follows the reference deployment's format. ``computed.heldout`` anchors it to the ledger: the
generation and its set hash, the signed checkpoint at issue, and for every cited bundle its ledger index and
RFC 9162 inclusion proof, so anyone holding the ledger (or an export) can check each evaluation was logged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from heldout.generations import GenerationState, load_generations, manifest_path
from heldout.specs import load_supersessions, require_not_superseded
from heldout.store import Store
from keys import (
    PublicKey,
    Signer,
    TrustedKey,
    UsageError,
    VerificationError,
    b64decode_strict,
    b64encode,
    verifier_key_string,
)
from keys.files import write_atomic
from ledger import BlobStore, Ledger, verify_checkpoint, verify_consistency, verify_inclusion
from ledger.rfc6962 import leaf_hash
from seals import (
    PassportState,
    PassportVerdict,
    canonical_bytes,
    format_utc,
    parse_json_object,
    sha256_hex,
    sign_document,
    verify_passport,
)

PASSPORT_VERSION = "0.1"
CANONICALISATION = {
    "float_rounding": "every float is rounded once at emit to 6 decimal places (Python round(), banker's "
                      "rounding); integers are left exact",
    "form": "RFC 8785 (JCS)-compatible: UTF-8, object keys sorted by code point, no insignificant whitespace, "
            "ECMAScript number formatting",
    "signed_over": "the whole document with the `signature` member removed, canonicalised as above and encoded "
                   "UTF-8",
}
DECLARED_NOTE = ("No vendor declaration: this passport is issued by the evaluation operator from logged "
                 "evidence; a vendor's intended-use claims would be a separate, vendor-signed block.")
OBSERVED_NOTE = ("Not available: production history and drift require continuous monitoring, which this "
                 "operator does not run. The object is present and null on purpose.")


class AuditRequired(VerificationError):
    """No clean audit covers the ledger as it stands (exit 1): run ``python audit.py <ledger-id>`` first."""


def audit_report_path(store: Store, ledger_id: str) -> Path:
    return store.audit / ledger_id / "audit_report.json"


def passport_path(store: Store, model_id: str, generation: str) -> Path:
    return store.passports / f"{model_id}__{generation}.passport.json"


def load_clean_audit(store: Store, ledger: Ledger) -> tuple[dict[str, Any], bytes]:
    """The operator's latest audit report, refused unless it is clean and at the current head."""
    path = audit_report_path(store, ledger.ledger_id)
    if not path.is_file():
        raise AuditRequired(f"no audit of ledger {ledger.ledger_id} yet: run python audit.py {ledger.ledger_id}",
                            file=str(path))
    data = path.read_bytes()
    report = parse_json_object(data, what=str(path))
    head = ledger.root().hex()
    if report.get("ledger_entries") != ledger.size or report.get("ledger_head") != head:
        raise AuditRequired(
            f"the latest audit is not at the ledger head (it covers {report.get('ledger_entries')} entries, the "
            f"ledger has {ledger.size}): run python audit.py {ledger.ledger_id}", file=str(path),
            expected=head, found=report.get("ledger_head"))
    if report.get("mode") != "operator" or report.get("exit_code") != 0 or report.get("ledger_intact") is not True \
            or report.get("bundles") != report.get("rederived"):
        raise AuditRequired(
            f"the latest audit is not clean ({report.get('verdict')}: {report.get('rederived')} of "
            f"{report.get('bundles')} bundles re-derived, {len(report.get('findings') or [])} findings)",
            file=str(path), found=report.get("verdict"))
    return report, data


def _choose_generation(generations: Mapping[str, GenerationState], model_id: str, ledger: Ledger,
                       generation: str | None, now: datetime) -> GenerationState:
    if generation is not None:
        state = generations.get(generation)
        if state is None:
            raise UsageError(f"no generation {generation!r} is sealed on this ledger", field="generation",
                             found=generation, expected=sorted(generations))
        state.require_current(now)
        return state
    candidates = [s for s in generations.values() if s.state_at(now) == "current"
                  and any(b.model_id == model_id for b in s.bundles)]
    if not candidates:
        raise UsageError(f"no current generation has bundles of {model_id}; name one with --generation",
                         found=model_id)
    return max(candidates, key=lambda s: s.seal_index)  # the most recently sealed current generation


@dataclass(frozen=True)
class IssuedPassport:
    document: dict[str, Any]
    path: Path
    index: int
    sha256: str


def issue_passport(store: Store, ledger: Ledger, signer: Signer, model_id: str, *, generation: str | None,
                   now: datetime) -> IssuedPassport:
    """Build, sign, log and write the passport of ``model_id``. Refuses (writing nothing) without a clean
    audit at the head, on a generation that is not current, or when a blob it draws on fails its hash."""
    report, report_bytes = load_clean_audit(store, ledger)
    blobs = BlobStore(store.blobs)
    generations = load_generations(ledger, now, blobs=blobs)
    state = _choose_generation(generations, model_id, ledger, generation, now)
    latest: dict[str, tuple[int, dict[str, Any]]] = {}
    for index, entry in ledger.entries(state.seal_index):
        if entry.get("type") == "bundle" and entry.get("generation") == state.name \
                and entry.get("model_id") == model_id:
            latest[str(entry["task"])] = (index, entry)
    if not latest:
        raise UsageError(f"{model_id} has no bundles on {state.name}", found=model_id, field="generation")
    checkpoint = ledger.latest_checkpoint()
    if checkpoint.size != ledger.size:
        raise VerificationError("the ledger's latest checkpoint does not cover its head", expected=ledger.size,
                                found=checkpoint.size)
    evaluations, cited, sources = [], [], []
    for task in sorted(latest):
        index, entry = latest[task]
        evaluation_data = blobs.get(entry["evaluation_sha256"])  # re-hashed: a tampered blob is refused here
        blobs.get(entry["predictions_sha256"])
        evaluations.append(parse_json_object(evaluation_data, what=f"evaluation of entry {index}"))
        proof = ledger.inclusion_proof(index, checkpoint.size)
        cited.append({"index": index, "task": task, "leaf_hash_b64": b64encode(proof.leaf_hash),
                      "evaluation_sha256": entry["evaluation_sha256"],
                      "predictions_sha256": entry["predictions_sha256"],
                      "inclusion_proof": [b64encode(h) for h in proof.path]})
        for member in ("evaluation_sha256", "predictions_sha256"):
            sources.append({"path": str(blobs.path(entry[member]).relative_to(store.root)), "sha256": entry[member]})
    manifest_file = manifest_path(store, state.name)
    sources = [
        {"path": str(audit_report_path(store, ledger.ledger_id).relative_to(store.root)),
         "sha256": sha256_hex(report_bytes)},
        {"path": str(manifest_file.relative_to(store.root)), "sha256": sha256_hex(manifest_file.read_bytes())},
        *sources,
    ]
    first = latest[sorted(latest)[0]][1]
    spec_version = str(first.get("spec_version", "MedEval-1 v0.1"))
    supersessions = load_supersessions(ledger.entries())
    require_not_superseded(supersessions, spec_version, now)
    expiry = state.expiry
    expiry_basis = (f"the sealed held-out generation this evidence is anchored to ({state.name}, set hash "
                    f"{state.set_hash[:16]}...) is published to expire {format_utc(state.expiry)}; the passport "
                    "lapses earlier if the generation is retired or its spec version superseded")
    superseded = supersessions.get(spec_version)
    if superseded is not None and superseded.effective < expiry:
        expiry = superseded.effective
        expiry_basis = (f"{superseded.words} (ledger entry {superseded.index}), before the expiry of the "
                        f"generation this evidence is anchored to ({state.name}, {format_utc(state.expiry)}); the "
                        "passport lapses earlier if the generation is retired")
    fingerprints = sorted({str(e["code_fingerprint"]) for _, e in latest.values()})
    key = ledger.key
    document = {
        "passport_version": PASSPORT_VERSION,
        "spec_version": spec_version,
        "subject": {
            "behaviour_version": first.get("behaviour_version"),
            "code_fingerprint": fingerprints[-1],
            "code_fingerprints": fingerprints,
            "family": first.get("family"),
            "model_id": model_id,
            "model_name": first.get("model_name"),
            "params": first.get("params"),
        },
        "computed": {
            "audit": {k: report[k] for k in ("audit_command", "bundles", "ledger_entries", "ledger_head",
                                             "ledger_intact", "rederived")},
            "cross_site": None,
            "evaluations": evaluations,
            "heldout": {
                "generation": state.name,
                "set_hash": state.set_hash,
                "manifest_sha256": state.manifest_sha256,
                "seal_index": state.seal_index,
                "expiry_utc": format_utc(state.expiry),
                "ledger_id": ledger.ledger_id,
                "note_verifier_key": verifier_key_string(key.name, key.public_key),
                "checkpoint": {"size": checkpoint.size, "root_b64": checkpoint.root_b64, "note": checkpoint.note},
                "bundles": cited,
            },
            "sources": sources,
        },
        "declared": None,
        "declared_note": DECLARED_NOTE,
        "observed": None,
        "observed_note": OBSERVED_NOTE,
        "issued_utc": format_utc(now),
        "expiry_utc": format_utc(expiry),
        "expiry_basis": expiry_basis,
        "canonicalisation": CANONICALISATION,
    }
    signed = sign_document(document, signer)
    data = canonical_bytes(signed)
    digest = blobs.put(data)
    index = ledger.append({"type": "passport", "v": 1, "model_id": model_id, "generation": state.name,
                           "passport_sha256": digest, "created_utc": format_utc(now)}, signer=signer, now=now)
    path = passport_path(store, model_id, state.name)
    write_atomic(path, data + b"\n")
    return IssuedPassport(document=signed, path=path, index=index, sha256=digest)


class LedgerView:
    """What ledger-aware verification needs from a ledger or an export: entries, roots, checkpoints."""

    def __init__(self, ledger: Any) -> None:
        self.ledger = ledger

    @property
    def ledger_id(self) -> str:
        return str(self.ledger.ledger_id)

    @property
    def origin(self) -> str:
        return str(self.ledger.origin)

    @property
    def size(self) -> int:
        return int(self.ledger.size)

    def entry_bytes(self, index: int) -> bytes:
        return bytes(self.ledger.entry_bytes(index))

    def root(self, size: int) -> bytes:
        return bytes(self.ledger.root(size))

    def consistency_path(self, old: int, new: int) -> list[bytes]:
        return list(self.ledger.consistency_proof(old, new).path)

    def latest_checkpoint(self) -> Any:
        return self.ledger.latest_checkpoint()

    def entries(self) -> Any:
        return self.ledger.entries()


def verify_passport_on_ledger(doc: Any, trusted: PublicKey | TrustedKey, view: LedgerView, ledger_key: TrustedKey,
                              *, at: datetime) -> PassportVerdict:
    """The signature and expiry checks of :func:`seals.verify_passport`, then the ledger's word: the passport's
    checkpoint is signed by the ledger key and is a prefix of the ledger as it stands (consistency proof),
    each cited bundle is included at its index, and its generation has not been retired since (lapsed)."""
    verdict = verify_passport(doc, trusted, at=at)
    heldout = verdict.passport.heldout
    if not isinstance(heldout, dict):
        raise VerificationError("the passport has no computed.heldout to check against a ledger",
                                field="computed.heldout")
    if heldout.get("ledger_id") != view.ledger_id:
        raise VerificationError("the passport is anchored to another ledger", field="computed.heldout.ledger_id",
                                expected=view.ledger_id, found=heldout.get("ledger_id"))
    note = (heldout.get("checkpoint") or {}).get("note")
    if not isinstance(note, str):
        raise VerificationError("the passport carries no checkpoint note", field="computed.heldout.checkpoint")
    checkpoint = verify_checkpoint(note, name=ledger_key.name, key=ledger_key.public_key, origin=view.origin)
    head = view.latest_checkpoint()
    verify_checkpoint(head.note, name=ledger_key.name, key=ledger_key.public_key, origin=view.origin)
    if checkpoint.size > head.size:
        raise VerificationError("the passport's checkpoint is ahead of the ledger (rolled back?)",
                                field="computed.heldout.checkpoint", expected=f"<= {head.size}", found=checkpoint.size)
    verify_consistency(checkpoint.size, head.size, checkpoint.root, head.root,
                       view.consistency_path(checkpoint.size, head.size))
    for position, ref in enumerate(heldout.get("bundles") or []):
        if not isinstance(ref, dict) or not isinstance(ref.get("index"), int):
            raise VerificationError("a cited bundle has no index", field=f"computed.heldout.bundles[{position}]")
        index = ref["index"]
        if not 0 <= index < checkpoint.size:
            raise VerificationError("a cited bundle lies outside the passport's checkpoint",
                                    field=f"computed.heldout.bundles[{position}]", found=index)
        data = view.entry_bytes(index)
        proof = [b64decode_strict(h, what="inclusion proof") for h in ref.get("inclusion_proof") or []]
        verify_inclusion(index, checkpoint.size, leaf_hash(data), proof, checkpoint.root)
        entry = parse_json_object(data, what=f"entry {index}")
        # The cited entry must be this model's bundle on this generation (FORMATS.md rule 11): otherwise a
        # passport could carry another model's logged evaluation under its own name.
        expected = {"type": "bundle", "model_id": verdict.passport.model_id, "generation": heldout.get("generation"),
                    "task": ref.get("task"), "evaluation_sha256": ref.get("evaluation_sha256"),
                    "predictions_sha256": ref.get("predictions_sha256")}
        for member, value in expected.items():
            if entry.get(member) != value:
                raise VerificationError(f"cited entry {index} is not the passport's bundle ({member} differs)",
                                        index=index, field=f"computed.heldout.bundles[{position}]",
                                        expected=value, found=entry.get(member))
        if ref.get("leaf_hash_b64") != b64encode(leaf_hash(data)):
            raise VerificationError(f"cited bundle {index}: leaf_hash_b64 is not the entry's leaf hash", index=index,
                                    field=f"computed.heldout.bundles[{position}].leaf_hash_b64")
        evaluation = verdict.passport.evaluations[position]
        if sha256_hex(canonical_bytes(evaluation)) != entry.get("evaluation_sha256"):
            raise VerificationError(f"evaluation {position} of the passport is not the one bundle {index} logged",
                                    index=index, field=f"computed.evaluations[{position}]")
    cited = len(heldout.get("bundles") or [])
    if len(verdict.passport.evaluations) != cited:
        # An evaluation no cited bundle logged would be signed content the ledger never saw.
        raise VerificationError("the passport carries evaluations that no cited bundle logged",
                                field="computed.evaluations", expected=cited,
                                found=len(verdict.passport.evaluations))
    generations = load_generations(view.entries(), at)
    name = heldout.get("generation")
    state = generations.get(str(name))
    if state is None:
        raise VerificationError(f"the ledger has no generation {name!r}", field="computed.heldout.generation")
    if state.set_hash != heldout.get("set_hash"):
        raise VerificationError("the passport's set hash is not its generation's", field="computed.heldout.set_hash",
                                expected=state.set_hash, found=heldout.get("set_hash"))
    if state.retire_index is not None:
        retired = format_utc(state.retired_at) if state.retired_at else f"at entry {state.retire_index}"
        return PassportVerdict(passport=verdict.passport, verified=verdict.verified, at=at,
                               state=PassportState.LAPSED,
                               reason=f"generation {state.name} retired ({state.retire_reason}) {retired}")
    superseded = load_supersessions(view.entries()).get(verdict.passport.spec_version)
    if superseded is not None and superseded.in_force(at):
        return PassportVerdict(passport=verdict.passport, verified=verdict.verified, at=at,
                               state=PassportState.LAPSED, reason=superseded.words)
    return verdict
