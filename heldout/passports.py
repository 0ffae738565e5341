"""Passports: issued only after a clean audit at the ledger head, only against a current generation; checked
later against the ledger (lapsed once the generation is retired).

A passport follows the reference deployment's format. ``computed.heldout`` anchors it to the ledger: the
generation and its set hash, the signed checkpoint at issue, and for every cited bundle its ledger index and
RFC 9162 inclusion proof, so anyone holding the ledger (or an export) can check each evaluation was logged.
"""

from __future__ import annotations

import contextlib
import os
from bisect import bisect_left
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from heldout.entries import BundleEntry, EntryRecord, PassportEntry, SealEntry, entry_record, records
from heldout.generations import GenerationState, load_generations, manifest_path
from heldout.generations.ledgers import generations_lock
from heldout.generations.release import cited_evaluation_matches, release_mode_of, withheld_view
from heldout.generations.state import BlobSource, Generations
from heldout.specs import load_supersessions, require_not_superseded
from heldout.staging import staged_operation
from heldout.store import Store
from keys import (
    HeldoutError,
    IncompleteError,
    MalformedInput,
    PublicKey,
    Signer,
    TrustedKey,
    UntrustedKey,
    UsageError,
    VerificationError,
    b64decode_strict,
    b64encode,
    verifier_key_string,
)
from keys.note import parse_verifier_key
from keys.safeio import DOCUMENT_LIMIT, read_in, require_in
from ledger import BlobStore, Ledger, verify_checkpoint, verify_inclusion
from ledger.checkpoint import Checkpoint, parse_checkpoint
from ledger.cosignature import cosignature_times
from ledger.entries import decode_entry, genesis_key, origin_of
from ledger.log import LogReader
from ledger.policy import Policy, Witnessed
from ledger.rfc6962 import leaf_hash
from ledger.tlogproof import TlogProof, parse_tlog_proof, verify_tlog_proof
from ledger.tree import HashTree, MemoryNodes
from seals import (
    CLOCK_TOLERANCE,
    Passport,
    PassportState,
    PassportVerdict,
    canonical_bytes,
    format_utc,
    parse_json_object,
    parse_utc,
    sha256_hex,
    shifted,
    sign_document,
    verify_passport,
)

if TYPE_CHECKING:  # (read where it is used: the tiles reader is not every command's import)
    from ledger.public import PublicLog

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
    """The audit report a passport would cite is not clean, or not the one the audit wrote (exit 1)."""


class AuditMissing(UsageError):
    """No audit covers the ledger as it stands, none yet or none at its head (exit 2: nothing failed; run
    ``python audit.py <ledger-id>`` first)."""


def audit_report_path(store: Store, ledger_id: str) -> Path:
    return store.audit / ledger_id / "audit_report.json"


def passport_path(store: Store, model_id: str, generation: str) -> Path:
    return store.passports / f"{model_id}__{generation}.passport.json"


def load_clean_audit(store: Store, ledger: Ledger, *,
                     clean_reports: Collection[str] | None = None) -> tuple[dict[str, Any], bytes]:
    """The operator's latest audit report, refused unless it is clean and at the current head; with
    ``clean_reports`` (the SHA-256s of the clean reports the auditor recorded as it wrote them,
    ``heldout.audit.report.ReportRecord``), unless it is byte for byte one of them: a report altered or damaged
    at rest since the audit wrote it would otherwise be cited by the passport as the audit's."""
    path = audit_report_path(store, ledger.ledger_id)
    data = read_in(store.root, str(path.relative_to(store.root)), limit=DOCUMENT_LIMIT, what="audit report")
    if data is None:
        raise AuditMissing(f"no audit of ledger {ledger.ledger_id} yet: run python audit.py {ledger.ledger_id}",
                            file=str(path))
    try:
        report: dict[str, Any] | None = parse_json_object(data, what=str(path))
    except MalformedInput:
        report = None  # damaged: refused below, as not a report the audit recorded when there is a record
    # What the report says of itself is read first, as a refusal: an honest failed audit is "not clean" (re-run
    # the audit once fixed), not "altered"; a report that claims a clean audit is then taken only if recorded.
    if report is not None:
        head = ledger.root().hex()
        if report.get("ledger_entries") != ledger.size or report.get("ledger_head") != head:
            covers = f"it covers {report.get('ledger_entries')} entries, the ledger has {ledger.size}" \
                if report.get("ledger_entries") != ledger.size else \
                f"its head is not the ledger's root at {ledger.size}"
            raise AuditMissing(f"the latest audit is not at the ledger head ({covers}): run python audit.py "
                               f"{ledger.ledger_id}", file=str(path), expected=head, found=report.get("ledger_head"))
        if report.get("mode") != "operator" or report.get("exit_code") != 0 \
                or report.get("ledger_intact") is not True or report.get("bundles") != report.get("rederived"):
            raise AuditRequired(
                f"the latest audit is not clean ({report.get('verdict')}: {report.get('rederived')} of "
                f"{report.get('bundles')} bundles re-derived, {len(report.get('findings') or [])} findings)",
                file=str(path), found=report.get("verdict"))
    if clean_reports is not None and sha256_hex(data) not in clean_reports:
        raise AuditRequired(f"{path} is not a clean report the audit recorded writing (altered or damaged since, "
                            f"or written by another auditor): run python audit.py {ledger.ledger_id}",
                            file=str(path), found=sha256_hex(data))
    if report is None:
        report = parse_json_object(data, what=str(path))  # raises: not a JSON object
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


def _tlog_proof(ledger: Ledger, index: int, checkpoint: Checkpoint) -> str:
    """The C2SP tlog-proof of entry ``index`` in ``checkpoint``, the entry's bytes as its extra data."""
    proof = ledger.inclusion_proof(index, checkpoint.size)
    return TlogProof(index=index, path=tuple(proof.path), checkpoint=checkpoint.note,
                     extra=ledger.entry_bytes(index)).text()


@dataclass(frozen=True)
class IssuedPassport:
    document: dict[str, Any]
    path: Path
    index: int
    sha256: str


def issue_passport(store: Store, ledger: Ledger, signer: Signer, model_id: str, *, generation: str | None,
                   now: datetime, clean_reports: Collection[str] | None = None) -> IssuedPassport:
    """Build, sign, log and write the passport of ``model_id``. Refuses (writing nothing) without a clean
    audit at the head (with ``clean_reports``, one the auditor recorded: :func:`load_clean_audit`), on a
    generation that is not current, or when a blob it draws on fails its hash. Takes the generations lock."""
    with generations_lock(ledger, store):
        return _issue_passport(store, ledger, signer, model_id, generation=generation, now=now,
                               clean_reports=clean_reports)


def _issue_passport(store: Store, ledger: Ledger, signer: Signer, model_id: str, *, generation: str | None,
                    now: datetime, clean_reports: Collection[str] | None) -> IssuedPassport:
    report, report_bytes = load_clean_audit(store, ledger, clean_reports=clean_reports)
    blobs = BlobStore(store.blobs)
    generations = load_generations(ledger, now, blobs=blobs)
    state = _choose_generation(generations, model_id, ledger, generation, now)
    latest: dict[str, tuple[int, dict[str, Any]]] = {}
    for bundle in records(ledger.entries(state.seal_index), BundleEntry):
        if bundle.generation == state.name and bundle.model_id == model_id:
            latest[bundle.task] = (bundle.index, bundle.to_entry())
    if not latest:
        raise UsageError(f"{model_id} has no bundles on {state.name}", found=model_id, field="generation")
    checkpoint = ledger.latest_checkpoint()
    if checkpoint.size != ledger.size:
        raise VerificationError("the ledger's latest checkpoint does not cover its head", expected=ledger.size,
                                found=checkpoint.size)
    evaluations, cited, sources = [], [], []
    for task in sorted(latest):
        index, entry = latest[task]
        withheld = "release" in entry and state.withholding
        if withheld:  # ladder / Thresholdout before retirement: only the released value is public
            evaluations.append(withheld_view(entry))
        else:
            evaluation_data = blobs.get(entry["evaluation_sha256"])  # re-hashed: a tampered blob is refused here
            blobs.get(entry["predictions_sha256"])
            evaluations.append(parse_json_object(evaluation_data, what=f"evaluation of entry {index}"))
        proof = ledger.inclusion_proof(index, checkpoint.size)
        cited.append({"index": index, "task": task, "leaf_hash_b64": b64encode(proof.leaf_hash),
                      "evaluation_sha256": entry["evaluation_sha256"],
                      "predictions_sha256": entry["predictions_sha256"],
                      "inclusion_proof": [b64encode(h) for h in proof.path]})
        for member in ("evaluation_sha256", "predictions_sha256"):
            if not withheld:
                sources.append({"path": str(blobs.path(entry[member]).relative_to(store.root)),
                                "sha256": entry[member]})
    witnessed = ledger.cosigned_checkpoint(checkpoint.size)  # the proofs carry the witnesses' cosignatures
    proofs = {"seal": _tlog_proof(ledger, state.seal_index, witnessed),
              "bundles": [_tlog_proof(ledger, ref["index"], witnessed) for ref in cited]}
    manifest_file = manifest_path(store, state.name)
    manifest_sha256 = sha256_hex(require_in(store.root, str(manifest_file.relative_to(store.root)),
                                            limit=DOCUMENT_LIMIT, what="seal manifest"))
    if manifest_sha256 != state.manifest_sha256:  # damaged or altered since it was sealed: a source the passport
        # names must be the document its ledger logs, as every blob it cites is
        raise VerificationError(f"{manifest_file} is not the seal manifest of {state.name} that seal entry "
                                f"{state.seal_index} logs", file=str(manifest_file), index=state.seal_index,
                                expected=state.manifest_sha256, found=manifest_sha256)
    sources = [
        {"path": str(audit_report_path(store, ledger.ledger_id).relative_to(store.root)),
         "sha256": sha256_hex(report_bytes)},
        {"path": str(manifest_file.relative_to(store.root)), "sha256": manifest_sha256},
        *sources,
    ]
    first = latest[sorted(latest)[0]][1]
    spec_version = str(first.get("spec_version", "MedEval-1 v0.1"))
    mixed = {task: entry.get("spec_version") for task, (_, entry) in sorted(latest.items())
             if entry.get("spec_version", spec_version) != spec_version}
    if mixed:  # a passport rests on evaluations of its own spec
        others = ", ".join(f"{version} for {task}" for task, version in mixed.items())
        raise UsageError(f"{model_id}'s latest bundles on {state.name} are under different spec versions "
                         f"({spec_version} for {sorted(latest)[0]}, {others}): evaluate every task under the "
                         "current spec first", field="spec_version",
                         found=sorted({spec_version, *map(str, mixed.values())}))
    subject = subject_of([cast(BundleEntry, BundleEntry.from_entry(latest[task][1], index=latest[task][0]))
                          for task in sorted(latest)])  # in the order the passport cites them
    supersessions = load_supersessions(ledger.entries())
    require_not_superseded(supersessions, spec_version, now)
    expiry, expiry_basis = expiry_of(state, supersessions.get(spec_version))
    key = ledger.key
    document = {
        "passport_version": PASSPORT_VERSION,
        "spec_version": spec_version,
        "subject": {**subject, "model_id": model_id},
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
                "proofs": proofs,
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
    path = passport_path(store, model_id, state.name)
    # Staged until the passport entry is logged, then published (heldout.staging): no passport file or blob
    # exists without its entry, and no entry stays without them once the next command has run.
    with staged_operation(store, ledger, "passport") as staged:
        digest = staged.blob(data, label="passport-blob")
        staged.public_file(path, data + b"\n", label="passport")
        logged = PassportEntry(model_id=model_id, generation=state.name, passport_sha256=digest,
                               created_utc=format_utc(now))
        index = staged.commit([logged.to_entry()], signer=signer, now=now)[0]
    return IssuedPassport(document=signed, path=path, index=index, sha256=digest)


@dataclass(frozen=True)
class LedgerFacts:
    """What checking a passport against its ledger reads, from a ledger, an export, or an audit's replay: the
    decoded entries by index, their bytes, and the root at any size. The caller has verified the ledger
    (replay or database) before; nothing here is taken from the passport."""

    ledger_id: str
    origin: str
    entries: Mapping[int, Mapping[str, Any]]
    entry_bytes: Callable[[int], bytes]
    root: Callable[[int], bytes]
    #: Where evaluation blobs are read (hash-checked) to charge a bundle entry that states no ``leakage_bits``
    #: (the audit names such an entry; the budget is still judged on what the evaluation releases)
    blobs: BlobSource | None = None

    @classmethod
    def of(cls, ledger: LogReader, blobs: BlobSource | None = None) -> LedgerFacts:
        """A copy held in memory (entries and their tree), so it outlives the ledger's database handle."""
        data = [raw for _, raw in ledger.entries_bytes()]
        nodes = MemoryNodes()
        for raw in data:
            nodes.append(leaf_hash(raw))
        tree = HashTree(nodes)
        return cls(ledger_id=ledger.ledger_id, origin=ledger.origin,
                   entries={i: decode_entry(raw, index=i) for i, raw in enumerate(data)},
                   entry_bytes=data.__getitem__, root=tree.root_at, blobs=blobs)

    _derived: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    def _once(self, key: Any, compute: Callable[[], Any]) -> Any:
        # The facts never change once built: what each passport check derives from them is derived once (a site
        # build checks every passport of a ledger against the same facts).
        if key not in self._derived:
            self._derived[key] = compute()
        return self._derived[key]

    def ordered(self) -> list[tuple[int, Mapping[str, Any]]]:
        """The entries in index order."""
        return self._once("ordered", lambda: sorted(self.entries.items()))

    def declared_keys(self, before: int | None = None) -> list[TrustedKey]:
        """The keys the ledger declares (in entries before index ``before``, when given): its genesis key (the
        checkpoint key) first, then each ``key`` entry's."""
        def first_of_each_id() -> list[tuple[int, TrustedKey]]:
            found: dict[str, tuple[int, TrustedKey]] = {}
            for index, entry in self.ordered():
                if entry.get("type") in ("genesis", "key"):
                    key = genesis_key(entry)
                    found.setdefault(key.key_id, (index, key))  # one id names one key: the first (the audit
                    # reports a later entry that names it for another key)
            return sorted(found.values(), key=lambda item: item[0])

        declared: list[tuple[int, TrustedKey]] = self._once("keys", first_of_each_id)
        return [key for index, key in declared if before is None or index < before]

    def passport_entries(self) -> dict[str, int]:
        """Each logged passport's SHA-256 and the index of the first entry that logs it."""
        def index() -> dict[str, int]:
            found: dict[str, int] = {}
            for passport in records(self.ordered(), PassportEntry):
                found.setdefault(passport.passport_sha256, passport.index)
            return found
        return self._once("passports", index)

    def bundle_indices(self) -> list[int]:
        """The indices of the bundle entries, ascending (how many lie below a size: one bisection)."""
        return self._once("bundle indices", lambda: [int(b.index or 0) for b in records(self.ordered(), BundleEntry)])

    def bundles_of(self, generation: Any, model_id: str) -> list[BundleEntry]:
        """The bundle entries of ``model_id`` on ``generation``, in index order (grouped once for every passport
        a site or an audit checks)."""
        def group() -> dict[tuple[str, str], list[BundleEntry]]:
            grouped: dict[tuple[str, str], list[BundleEntry]] = {}
            for bundle in records(self.ordered(), BundleEntry):
                grouped.setdefault((bundle.generation, bundle.model_id), []).append(bundle)
            return grouped

        return self._once("bundles by generation and model", group).get((generation, model_id), [])

    def release_mode(self, generation: Any) -> str:
        """The release mode the first seal entry of ``generation`` states (``full`` when there is none: nothing
        is withheld of a generation this ledger does not seal)."""
        def modes() -> dict[str, str]:
            found: dict[str, str] = {}
            for seal in records(self.ordered(), SealEntry):
                found.setdefault(seal.generation, release_mode_of(seal.get("release")))
            return found
        return str(self._once("release modes", modes).get(generation, "full"))

    def generations(self, at: datetime) -> Generations:
        return self._once(("generations", at), lambda: load_generations(self.ordered(), at, blobs=self.blobs))

    def supersessions(self) -> Any:
        return self._once("supersessions", lambda: load_supersessions(self.ordered()))


def _declared_issuer(doc: Mapping[str, Any], facts: LedgerFacts, pinned: PublicKey | TrustedKey | None,
                     before: int) -> TrustedKey:
    """The ledger-declared key the passport names as its issuer, declared before the passport's entry (``before``:
    a key declared later could not have verified the passport when it was logged); a pinned key (``--key``)
    must be that very key."""
    issuer = doc.get("issuer")
    issuer_b64 = issuer.get("public_key_b64") if isinstance(issuer, dict) else None
    declared = facts.declared_keys(before)
    if pinned is not None:
        pinned_b64 = pinned.public_key.b64 if isinstance(pinned, TrustedKey) else pinned.b64
        if all(key.public_key.b64 != pinned_b64 for key in declared):
            raise UntrustedKey(f"the key given is not declared by ledger {facts.ledger_id} (neither its genesis key "
                               "nor a key entry) before the passport: a key is trusted only when the ledger "
                               "declares it", field="issuer.public_key_b64", found=pinned_b64,
                               expected=[key.public_key.b64 for key in declared])
        if issuer_b64 != pinned_b64:
            raise UntrustedKey("the passport's issuer is not the key given: it is signed by another key",
                               field="issuer.public_key_b64", expected=pinned_b64, found=str(issuer_b64)[:60])
    named = (issuer.get("key_id"), issuer.get("name")) if isinstance(issuer, dict) else (None, None)
    for key in declared:  # the declared key by its whole identity (id, name, key), as every verifier reads it
        if key.public_key.b64 == issuer_b64 and (key.key_id, key.name) == named:
            return key
    alike = next((key for key in declared if key.public_key.b64 == issuer_b64), None)
    if alike is not None:
        raise UntrustedKey(f"the passport's issuer names key id {str(named[0])[:64]!r} and name {str(named[1])[:64]!r} "
                           f"for a key ledger {facts.ledger_id} declares as {alike.key_id!r}, {alike.name!r}",
                           field="issuer", expected=f"{alike.key_id} {alike.name}",
                           found=f"{str(named[0])[:64]} {str(named[1])[:64]}")
    raise UntrustedKey(f"the passport's issuer key is not declared by ledger {facts.ledger_id} (neither its genesis "
                       "key nor a key entry) before the passport's entry", field="issuer.public_key_b64",
                       found=str(issuer_b64)[:60])


def check_passport_on_ledger(doc: Any, facts: LedgerFacts, *, at: datetime,
                             pinned: PublicKey | TrustedKey | None = None,
                             logged_at: int | None = None) -> PassportVerdict:
    """The one passport-vs-log verifier (``passport verify`` with a ledger, and the audit). In order:

    1. the issuer key is the ledger's genesis key or a logged ``key`` entry (a pinned ``--key`` must be one of
       those too), and the signature verifies under it (then the shape, and expiry at ``at``);
    2. the passport was logged: a ``passport`` entry carries its SHA-256 (of its canonical bytes), for its model
       and generation; the first such entry, or with ``logged_at`` (the audit, which checks every passport
       entry) that entry: each entry is judged by its own members, index and date, so that a blob logged again
       later (under another model or generation, or after its generation was retired) is judged as logged there;
    3. its anchor: this ledger's id, a checkpoint signed by the ledger key with this ledger's root at its size,
       taken before the passport entry;
    4. each cited bundle: a ``bundle`` entry of the model and generation inside that checkpoint, its inclusion
       proof, and the evaluation it logged equal to the passport's;
    5. its audit: this ledger's head at an earlier size, intact;
    6. its generation: sealed here with the passport's set hash and expiry, and the passport's expiry no later
       than the generation's; no superseded spec version at its issue time;
    then the verdict at ``at``: lapsed (the generation retired, its spec superseded, or the model evaluated on
    the generation again, since: this wins over expired, as it names the cause), expired, or valid.
    """
    digest = sha256_hex(canonical_bytes(doc))
    first = facts.passport_entries().get(digest)
    if logged_at is not None:
        logged = facts.entries[logged_at] if 0 <= logged_at < len(facts.entries) else {}
        if logged.get("type") != "passport" or logged.get("passport_sha256") != digest:
            raise VerificationError(f"entry {logged_at} does not log this passport (its SHA-256, of its canonical "
                                    "bytes)", index=logged_at, field="passport_sha256", expected=digest,
                                    found=logged.get("passport_sha256"))
        first = logged_at
    trusted = _declared_issuer(doc, facts, pinned, before=first if first is not None else len(facts.entries))
    verdict = verify_passport(doc, trusted, at=at)
    passport = verdict.passport
    if first is None:
        _refute_another_history(doc, facts)
        raise VerificationError(f"the passport was never logged: no passport entry of ledger {facts.ledger_id} "
                                "carries its SHA-256", field="passport_sha256", found=digest)
    index = first
    entry = facts.entries[index]
    heldout = passport.heldout
    if not isinstance(heldout, dict):
        raise VerificationError("the passport has no computed.heldout to check against a ledger", index=index,
                                field="computed.heldout")
    for member, expected, found in (("subject.model_id", entry.get("model_id"), passport.model_id),
                                    ("computed.heldout.generation", entry.get("generation"), heldout.get("generation")),
                                    ("computed.heldout.ledger_id", facts.ledger_id, heldout.get("ledger_id"))):
        if expected != found:
            raise VerificationError(f"the passport disagrees with its ledger on {member}", index=index, field=member,
                                    expected=expected, found=found)
    size, root = _anchor(heldout, facts, index)
    _check_cited_bundles(passport, heldout, facts, size, root, index)
    _check_cited_latest(passport, heldout, facts, size, index)
    genesis = facts.declared_keys()[0]
    proven = check_passport_proofs(passport, log_name=genesis.name, log_key=genesis.public_key)
    if proven.size > index or facts.root(proven.size) != proven.root:
        raise VerificationError("the passport's offline proofs rest on a checkpoint this ledger does not have "
                                f"before entry {index} (another history?)", index=index,
                                field="computed.heldout.proofs", found=proven.size)
    _check_audit_claim(doc, facts, index, size)
    generations = facts.generations(at)
    state = generations.get(str(heldout.get("generation")))
    if state is None or state.seal_index > index:
        raise VerificationError(f"the ledger has no generation {heldout.get('generation')!r} sealed before the "
                                "passport", index=index, field="computed.heldout.generation")
    for ref in heldout["bundles"]:  # (each checked above to be a bundle of this generation)
        over_budget = state.budget_error(ref["index"])
        if over_budget is not None:
            raise VerificationError(f"the passport of entry {index} cites {over_budget.message}", index=index,
                                    field="computed.heldout.bundles", found=ref["index"])
    for member, expected in (("set_hash", state.set_hash), ("expiry_utc", format_utc(state.expiry))):
        if heldout.get(member) != expected:
            raise VerificationError(f"the passport's {member} is not its generation's", index=index,
                                    field=f"computed.heldout.{member}", expected=expected, found=heldout.get(member))
    if passport.expiry > state.expiry:
        raise VerificationError(f"the passport's expiry {format_utc(passport.expiry)} is after its generation's "
                                f"({state.name}, {format_utc(state.expiry)})", index=index, field="expiry_utc",
                                expected=f"<= {format_utc(state.expiry)}", found=format_utc(passport.expiry))
    supersessions = facts.supersessions()
    superseded = supersessions.get(passport.spec_version)
    if superseded is not None and superseded.index < index and superseded.in_force(passport.issued):
        raise VerificationError(f"the passport of entry {index} was issued under {superseded.words} (entry "
                                f"{superseded.index})", index=index, field="spec_version", found=passport.spec_version)
    counting = superseded if superseded is not None and superseded.index < index else None
    _check_passport_times(passport, facts, index, size, state, counting)
    _check_issuer_statements(doc, state, counting, index)
    if state.retire_index is not None:
        retired = format_utc(state.retired_at) if state.retired_at else f"at entry {state.retire_index}"
        return replace(verdict, state=PassportState.LAPSED,
                       reason=f"generation {state.name} retired ({state.retire_reason}) {retired}")
    if superseded is not None and superseded.in_force(at):
        return replace(verdict, state=PassportState.LAPSED, reason=superseded.words)
    later = [b for b in facts.bundles_of(state.name, passport.model_id) if int(b.index or 0) >= size]
    unjudged = next((b for b in later if b.created > shifted(at, CLOCK_TOLERANCE)), None)
    if unjudged is not None:
        # It is in the log, so it was logged by now: dated past the reference time, it either came after a time
        # asked about (--at before the log's end) or carries a false date (an operator keeping a worse run from
        # lapsing the passport). Which, nothing here tells: no verdict either way.
        raise IncompleteError(
            f"{passport.model_id} has a later bundle on {state.name} (entry {unjudged.index}) dated "
            f"{unjudged.created_utc}, after the reference time {format_utc(at)} by more than the clock tolerance: "
            "whether it lapses the passport cannot be judged at that time (a false date, or --at before the "
            "ledger's end); the audit names a date after its time as a finding", index=unjudged.index,
            field="created_utc", expected=f"<= {format_utc(shifted(at, CLOCK_TOLERANCE))}", found=unjudged.created_utc)
    newer = next((b for b in later if b.created <= at), None)
    if newer is not None:  # the passport no longer stands for the model's latest evaluation (FORMATS section 12)
        return replace(verdict, state=PassportState.LAPSED, reason=(
            f"{passport.model_id} was evaluated on {state.name} again after this passport's evidence (bundle "
            f"entry {newer.index}, {newer.created_utc}): a passport stands for the model's latest evaluations"))
    return verdict


def check_passport_proofs(passport: Passport, *, log_name: str, log_key: PublicKey) -> Checkpoint:
    """Offline (no ledger, no export): the passport's ``computed.heldout.proofs`` (C2SP tlog-proofs, each entry's
    bytes as extra data) must all rest on one checkpoint signed by the log key for the passport's ledger, include
    each cited bundle at its index (a bundle of the model on the generation logging the passport's evaluation) and
    the generation's seal (its set hash, manifest, and an expiry no earlier than the passport's). Returns the
    checkpoint, cosignature lines included (the caller judges its witnessing against a policy)."""
    heldout = passport.heldout
    proofs = heldout.get("proofs") if isinstance(heldout, dict) else None
    if not isinstance(heldout, dict) or not isinstance(proofs, dict) or not isinstance(proofs.get("seal"), str) or \
            not isinstance(proofs.get("bundles"), list):
        raise VerificationError("the passport carries no offline proofs (computed.heldout.proofs)",
                                field="computed.heldout.proofs")
    origin = origin_of(str(heldout.get("ledger_id")))
    texts = [proofs["seal"], *proofs["bundles"]]
    checkpoints = set()
    proven: list[EntryRecord | None] = []
    for position, text in enumerate(texts):
        where = "computed.heldout.proofs.seal" if position == 0 else f"computed.heldout.proofs.bundles[{position - 1}]"
        if not isinstance(text, str):
            raise VerificationError("a passport proof is not text", field=where)
        proof = parse_tlog_proof(text)
        checkpoints.add(proof.checkpoint)
        verify_tlog_proof(proof, name=log_name, key=log_key, origin=origin)
        proven.append(entry_record(proof.index, decode_entry(proof.extra or b"", index=proof.index)))
    if len(checkpoints) != 1:
        raise VerificationError("the passport's proofs rest on different checkpoints", field="computed.heldout.proofs")
    seal, bundles = proven[0], proven[1:]
    if not isinstance(seal, SealEntry) or seal.generation != heldout.get("generation") or \
            seal.set_hash != heldout.get("set_hash") or \
            seal.manifest_sha256 != heldout.get("manifest_sha256") or seal.index != heldout.get("seal_index"):
        raise VerificationError("the passport's seal proof is not of its generation's seal",
                                index=None if seal is None else seal.index, field="computed.heldout.proofs.seal")
    if passport.expiry > seal.expiry:
        raise VerificationError(f"the passport's expiry {format_utc(passport.expiry)} is after its generation's "
                                f"({seal.expiry_utc}, logged at entry {seal.index})", index=seal.index,
                                field="expiry_utc", expected=f"<= {seal.expiry_utc}",
                                found=format_utc(passport.expiry))
    cited = heldout.get("bundles")
    if not isinstance(cited, list) or len(bundles) != len(cited) or len(cited) != len(passport.evaluations):
        raise VerificationError("the passport's bundle proofs do not match its cited bundles",
                                field="computed.heldout.proofs.bundles")
    if not cited:  # (as with its ledger: a passport states evidence, and one that cites none proves nothing)
        raise VerificationError("the passport cites no bundle: it proves no evaluation",
                                field="computed.heldout.bundles")
    for position, (bundle, ref, evaluation) in enumerate(zip(bundles, cited, passport.evaluations, strict=True)):
        if not isinstance(bundle, BundleEntry) or not isinstance(ref, dict) or ref.get("index") != bundle.index or \
                bundle.model_id != passport.model_id or bundle.generation != heldout.get("generation") \
                or not cited_evaluation_matches(evaluation, bundle.to_entry(),
                                                lambda e: sha256_hex(canonical_bytes(e)),
                                                generation_mode=release_mode_of(seal.get("release"))):
            raise VerificationError(f"bundle proof {position} does not prove the passport's evaluation {position}",
                                    index=None if bundle is None else bundle.index,
                                    field=f"computed.heldout.proofs.bundles[{position}]")
    tasks = [bundle.task for bundle in bundles if isinstance(bundle, BundleEntry)]
    if tasks != sorted(set(tasks)):  # one bundle per task, in task order (FORMATS 12): no task counted twice
        raise VerificationError("the passport's cited bundles are not one per task in task order", found=tasks,
                                field="computed.heldout.bundles")
    check_subject_and_spec(passport, [b for b in bundles if isinstance(b, BundleEntry)])
    checkpoint = parse_checkpoint(next(iter(checkpoints)))
    _check_issued_after_evidence(passport, seal, [b for b in bundles if isinstance(b, BundleEntry)], checkpoint)
    return checkpoint


def _check_issued_after_evidence(passport: Passport, seal: SealEntry, bundles: Sequence[BundleEntry],
                                 checkpoint: Checkpoint) -> None:
    """What the passport carries dates it (FORMATS section 12): it is issued no earlier than every entry its
    proofs carry and than the witness cosignatures on its checkpoint (less the clock tolerance: a witness's
    clock is not the issuer's), and before its generation expires (a passport is issued only against a current
    generation). Checked offline, from the document alone: an issuer who sets its clock back contradicts
    itself here."""
    latest = max([seal, *bundles], key=lambda record: record.created)
    if passport.issued < latest.created:
        raise VerificationError(f"the passport states it was issued {format_utc(passport.issued)}, before entry "
                                f"{latest.index} it rests on was logged ({latest.created_utc})", index=latest.index,
                                field="issued_utc", expected=f">= {latest.created_utc}",
                                found=format_utc(passport.issued))
    witnessed = cosignature_times(checkpoint)
    own = passport.heldout.get("checkpoint") if isinstance(passport.heldout, dict) else None
    if isinstance(own, dict) and isinstance(own.get("note"), str):  # (its own note too: FORMATS rule 11)
        # (a note that does not parse is named by the checks of the checkpoint itself)
        with contextlib.suppress(HeldoutError):
            witnessed += cosignature_times(parse_checkpoint(own["note"]))
    if witnessed and passport.issued < shifted(max(witnessed), -CLOCK_TOLERANCE):
        raise VerificationError(f"the passport states it was issued {format_utc(passport.issued)}, more than the "
                                "clock tolerance (a day) before a witness cosigned the checkpoint it carries "
                                f"({format_utc(max(witnessed))})", field="issued_utc",
                                expected=f">= {format_utc(shifted(max(witnessed), -CLOCK_TOLERANCE))}",
                                found=format_utc(passport.issued))
    if passport.issued >= seal.expiry:
        raise VerificationError(f"the passport states it was issued {format_utc(passport.issued)}, when its "
                                f"generation {seal.generation} had expired ({seal.expiry_utc}): a passport is "
                                "issued only against a current generation", index=seal.index, field="issued_utc",
                                expected=f"< {seal.expiry_utc}", found=format_utc(passport.issued))


#: The members of a passport's ``subject`` that are its first cited bundle entry's (null where it has none),
#: beside ``model_id`` (the passport entry's) and the code fingerprints (below).
SUBJECT_MEMBERS = ("model_name", "family", "params", "behaviour_version")
#: Of those, the ones that name the model and so are the same in every cited entry (``params`` may differ by
#: task: a classifier's parameter count grows with its task's classes).
SUBJECT_IDENTITY = ("model_name", "family", "behaviour_version")


def subject_of(bundles: Sequence[BundleEntry]) -> dict[str, Any]:
    """The passport ``subject`` members that the cited bundle entries fix (FORMATS section 12): each of
    :data:`SUBJECT_MEMBERS` as the first cited entry states it (the entries of one model may differ by task:
    a classifier's parameter count grows with its task's classes), and the code fingerprints the entries name
    (sorted, distinct; ``code_fingerprint`` the last). Raises :class:`UsageError` for entries that name the
    model differently (:data:`SUBJECT_IDENTITY`)."""
    first = bundles[0] if bundles else None
    subject: dict[str, Any] = {member: None if first is None else first.get(member) for member in SUBJECT_MEMBERS}
    for member in SUBJECT_IDENTITY:
        values = {canonical_bytes(bundle.get(member)): bundle.get(member) for bundle in bundles}
        if len(values) > 1:  # one model id, described as two models
            raise UsageError(f"the bundles a passport would cite name the model differently ({member}: "
                             f"{', '.join(repr(v) for v in values.values())})", field=f"subject.{member}",
                             found=[bundle.get(member) for bundle in bundles])
    # (a record's code_fingerprint is text: the entry's member form, checked by its constructor)
    fingerprints = sorted({str(bundle.get("code_fingerprint")) for bundle in bundles if "code_fingerprint" in bundle})
    subject["code_fingerprints"] = fingerprints
    subject["code_fingerprint"] = fingerprints[-1] if fingerprints else None
    return subject


def check_subject_and_spec(passport: Passport, bundles: Sequence[BundleEntry]) -> None:
    """A passport says what its cited bundles say (FORMATS section 12): its ``spec_version`` is every cited
    entry's and every cited evaluation's, and its ``subject`` describes the model as the entries do (the
    members :func:`subject_of` fixes). The signature only shows the issuer wrote it: evidence of one model under
    another's name, or of a superseded spec under the current one's, is refused here."""
    for position, bundle in enumerate(bundles):
        specs = [("entry", bundle.get("spec_version"))] if "spec_version" in bundle else []
        if position < len(passport.evaluations) and "spec_version" in passport.evaluations[position]:
            specs.append(("evaluation", passport.evaluations[position].get("spec_version")))
        for what, spec in specs:
            if spec != passport.spec_version:
                raise VerificationError(f"the passport is issued under {passport.spec_version}, and its cited "
                                        f"bundle {bundle.index} ({bundle.task}) was evaluated under {spec!r} (its "
                                        f"{what}): a passport rests on evaluations of its own spec",
                                        index=bundle.index, field="spec_version", expected=spec,
                                        found=passport.spec_version)
    subject = passport.raw.get("subject")
    try:
        expected = subject_of(bundles)
    except UsageError as exc:
        raise VerificationError(f"the passport's cited bundles: {exc.message}", **exc.evidence) from None
    for member, value in expected.items():
        found = subject.get(member) if isinstance(subject, dict) else None
        if canonical_bytes(found) != canonical_bytes(value):
            raise VerificationError(f"the passport's subject.{member} is not what its cited bundles say",
                                    field=f"subject.{member}", expected=value, found=found)


def _anchor(heldout: Mapping[str, Any], facts: LedgerFacts, index: int) -> tuple[int, bytes]:
    """The passport's checkpoint: signed by the ledger key, taken before the passport entry, this ledger's root."""
    checkpoint = heldout.get("checkpoint")
    if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("note"), str):
        raise VerificationError("the passport carries no checkpoint note", index=index,
                                field="computed.heldout.checkpoint")
    key = facts.declared_keys()[0]
    verified = verify_checkpoint(checkpoint["note"], name=key.name, key=key.public_key, origin=facts.origin)
    if verified.size > index or facts.root(verified.size) != verified.root:
        raise VerificationError(f"the passport cites a checkpoint this ledger does not have before entry {index} "
                                "(another history?)", index=index, field="computed.heldout.checkpoint",
                                found=verified.size)
    return verified.size, verified.root


def _check_cited_bundles(passport: Passport, heldout: Mapping[str, Any], facts: LedgerFacts, size: int, root: bytes,
                         index: int) -> None:
    cited = heldout.get("bundles")
    if not isinstance(cited, list) or not cited or len(cited) != len(passport.evaluations):
        raise VerificationError("the passport's cited bundles do not match its evaluations", index=index,
                                field="computed.heldout.bundles")
    for position, (ref, evaluation) in enumerate(zip(cited, passport.evaluations, strict=True)):
        where = f"computed.heldout.bundles[{position}]"
        bundle_index = ref.get("index") if isinstance(ref, dict) else None
        if isinstance(bundle_index, bool) or not isinstance(bundle_index, int) or not 0 <= bundle_index < size:
            raise VerificationError("the passport cites a bundle outside its checkpoint", index=index, field=where,
                                    found=bundle_index)
        logged = facts.entries.get(bundle_index, {})
        bundle = entry_record(bundle_index, logged) if logged else None
        if not isinstance(bundle, BundleEntry) or bundle.model_id != passport.model_id or \
                bundle.generation != heldout.get("generation"):
            raise VerificationError(f"the passport cites entry {bundle_index}, not a bundle of {passport.model_id} on "
                                    f"{heldout.get('generation')}", index=index, field=where)
        # The citation must name this very bundle (task, blobs, leaf hash): otherwise a passport could carry
        # another bundle's numbers under this citation (FORMATS.md rule 11).
        for member in ("task", "evaluation_sha256", "predictions_sha256"):
            if member in ref and ref[member] != bundle.get(member):
                raise VerificationError(f"the passport's citation of bundle {bundle_index} disagrees with it on "
                                        f"{member}", index=index, field=f"{where}.{member}",
                                        expected=bundle.get(member), found=ref[member])
        data = facts.entry_bytes(bundle_index)
        if "leaf_hash_b64" in ref and ref["leaf_hash_b64"] != b64encode(leaf_hash(data)):
            raise VerificationError(f"the passport's citation of bundle {bundle_index}: leaf_hash_b64 is not the "
                                    "entry's leaf hash", index=index, field=f"{where}.leaf_hash_b64")
        proof = [b64decode_strict(h, what="inclusion proof") for h in ref.get("inclusion_proof") or []]
        verify_inclusion(bundle_index, size, leaf_hash(data), proof, root)
        if not cited_evaluation_matches(evaluation, logged, lambda e: sha256_hex(canonical_bytes(e)),
                                        generation_mode=facts.release_mode(heldout.get("generation"))):
            raise VerificationError(f"evaluation {position} of the passport is not the one bundle {bundle_index} "
                                    "logged", index=index, field=f"computed.evaluations[{position}]")


def _check_cited_latest(passport: Passport, heldout: Mapping[str, Any], facts: LedgerFacts, size: int,
                        index: int) -> None:
    """A passport states the model as its checkpoint logged it: for every task the model has bundles of on the
    generation inside the checkpoint, it cites the latest one (so an operator cannot pick an older, better run,
    or leave out a task it did badly on)."""
    generation = heldout.get("generation")
    latest: dict[str, int] = {}
    for bundle in facts.bundles_of(generation, passport.model_id):
        if int(bundle.index or 0) >= size:
            break
        latest[bundle.task] = int(bundle.index or 0)
    tasks = [str(facts.entries[ref["index"]].get("task")) for ref in heldout["bundles"]]
    cited = {task: ref["index"] for task, ref in zip(tasks, heldout["bundles"], strict=True)}
    if len(cited) != len(tasks):  # a task cited twice (an older run beside the latest, one run counted twice)
        raise VerificationError(f"the passport of entry {index} cites more than one bundle of a task: one per task, "
                                "the latest", index=index, field="computed.heldout.bundles", found=tasks)
    if cited != latest:
        raise VerificationError(f"the passport of entry {index} does not cite the model's latest bundle of every task "
                                f"on {generation} inside its checkpoint", index=index,
                                field="computed.heldout.bundles", expected=sorted(latest.values()),
                                found=sorted(ref["index"] for ref in heldout["bundles"]))


def _refute_another_history(doc: Mapping[str, Any], facts: LedgerFacts) -> None:
    """A passport this ledger never logged may still carry a checkpoint its ledger key signed: when that
    checkpoint's root is not this ledger's at its size, the key signed two histories (the log was rewritten
    under the same id, or this copy is another one), which the passport proves; when it is beyond this copy's
    size, this copy is older than what the passport saw. Said as such instead of "never logged"."""
    heldout = doc.get("computed", {}).get("heldout") if isinstance(doc.get("computed"), dict) else None
    stated = heldout.get("checkpoint") if isinstance(heldout, dict) else None
    note = stated.get("note") if isinstance(stated, dict) else None
    if not isinstance(note, str) or not facts.entries:
        return
    genesis = facts.declared_keys()[0]
    try:
        checkpoint = verify_checkpoint(note, name=genesis.name, key=genesis.public_key,
                                       origin=origin_of(facts.ledger_id))
    except HeldoutError:
        return  # not a checkpoint of this ledger's key: nothing it proves
    if checkpoint.size > len(facts.entries):
        raise VerificationError(f"the passport was never logged in this copy of ledger {facts.ledger_id}, which "
                                f"has {len(facts.entries)} entries; it rests on a checkpoint of size {checkpoint.size} "
                                "signed by the ledger key (this copy is older than what the passport saw: rolled "
                                "back?)",
                                field="computed.heldout.checkpoint", expected=len(facts.entries), found=checkpoint.size)
    if checkpoint.size > 0 and facts.root(checkpoint.size) != checkpoint.root:
        raise VerificationError(f"the passport rests on another history of ledger {facts.ledger_id}: its checkpoint "
                                f"of size {checkpoint.size}, signed by the ledger key, has another root than this "
                                "ledger at that size (the key signed two histories; the passport is the evidence)",
                                field="computed.heldout.checkpoint", expected=facts.root(checkpoint.size).hex(),
                                found=checkpoint.root.hex())


def expiry_of(state: GenerationState, superseded: Any) -> tuple[datetime, str]:
    """A passport's ``expiry_utc`` and ``expiry_basis`` (FORMATS section 12): its generation's expiry, or the
    time the supersession of its spec that counts (``superseded``, logged before it; None when none) takes
    effect when that is earlier, and the sentence saying which, and whether the evidence is held out."""
    anchor = ("the public generation (its cases and labels are published: this evidence is not held out)"
              if state.membership == "public" else "the sealed held-out generation")
    if superseded is not None and superseded.effective < state.expiry:
        return superseded.effective, (
            f"{superseded.words} (ledger entry {superseded.index}), before the expiry of the generation this "
            f"evidence is anchored to ({state.name}, {format_utc(state.expiry)}); the passport lapses earlier if "
            "the generation is retired")
    return state.expiry, (f"{anchor} this evidence is anchored to ({state.name}, set hash {state.set_hash[:16]}...) "
                          f"is published to expire {format_utc(state.expiry)}; the passport lapses earlier if the "
                          "generation is retired or its spec version superseded")


def _check_issuer_statements(doc: Mapping[str, Any], state: GenerationState, superseded: Any, index: int) -> None:
    """What a passport says beside its numbers is what the issue command writes (FORMATS section 12), not the
    issuer's free text: no vendor declaration, no production history and no cross-site result (this operator
    has none to give: a "cleared by a regulator" block or a cross-site AUC was signed and shown as if it were
    evidence), and the expiry basis its ledger gives (the only place a passport on the public generation says
    its evidence is not held out)."""
    found_computed = doc.get("computed")
    computed: Mapping[str, Any] = found_computed if isinstance(found_computed, dict) else {}
    fixed = {"declared": (doc.get("declared"), None), "declared_note": (doc.get("declared_note"), DECLARED_NOTE),
             "observed": (doc.get("observed"), None), "observed_note": (doc.get("observed_note"), OBSERVED_NOTE),
             "computed.cross_site": (computed.get("cross_site"), None),
             "expiry_basis": (doc.get("expiry_basis"), expiry_of(state, superseded)[1])}
    for member, (found, expected) in fixed.items():
        if found != expected:
            raise VerificationError(f"the passport of entry {index}: its {member} is not what its issue writes "
                                    "(a statement its ledger does not bear out)", index=index, field=member,
                                    expected=expected, found=str(found)[:200])


def _check_passport_times(passport: Passport, facts: LedgerFacts, index: int, size: int, state: GenerationState,
                          superseded: Any) -> None:
    """The two times a passport states are the log's, not the issuer's choice: ``expiry_utc`` is its
    generation's expiry, or the time a supersession of its spec version logged before it takes effect when that
    is earlier (what the issue command writes: the holder of the key cannot date a passport past what its own
    log says); ``issued_utc`` lies between its checkpoint's last entry and its own entry (it cannot be issued
    before the evidence it cites, nor logged before it was issued)."""
    expected = expiry_of(state, superseded)[0]
    if passport.expiry != expected:
        raise VerificationError(
            f"the passport of entry {index} expires {format_utc(passport.expiry)}, but its ledger gives "
            f"{format_utc(expected)} ({'its spec superseded' if expected != state.expiry else 'its generation'}"
            " expires then)", index=index, field="expiry_utc", expected=format_utc(expected),
            found=format_utc(passport.expiry))
    if state.retire_index is not None and state.retire_index < index:
        raise VerificationError(f"the passport of entry {index} was logged after {state.name} was retired (entry "
                                f"{state.retire_index}): a passport is issued only against a current generation",
                                index=index, field="computed.heldout.generation", found=state.name)
    earliest = _entry_time(facts, size - 1)
    logged = _entry_time(facts, index)
    if logged is not None and logged >= state.expiry:
        raise VerificationError(f"the passport of entry {index} was logged {format_utc(logged)}, when "
                                f"{state.name} had expired ({format_utc(state.expiry)}): a passport is issued only "
                                "against a current generation", index=index, field="created_utc",
                                expected=f"< {format_utc(state.expiry)}", found=format_utc(logged))
    if (earliest is not None and passport.issued < earliest) or (logged is not None and passport.issued > logged):
        raise VerificationError(
            f"the passport of entry {index} states it was issued {format_utc(passport.issued)}, outside the "
            f"times its ledger allows (after its checkpoint's last entry {size - 1}, before its own entry)",
            index=index, field="issued_utc", found=format_utc(passport.issued),
            expected=f"{format_utc(earliest) if earliest else '?'} .. {format_utc(logged) if logged else '?'}")


def _entry_time(facts: LedgerFacts, index: int) -> datetime | None:
    created = facts.entries[index].get("created_utc") if 0 <= index < len(facts.entries) else None
    try:
        return parse_utc(created) if isinstance(created, str) else None
    except HeldoutError:
        return None


def _check_audit_claim(doc: Mapping[str, Any], facts: LedgerFacts, index: int, size: int) -> None:
    """The audit a passport claims: clean, of this ledger's head at the passport's checkpoint (``size``), every
    bundle below it re-derived. (Whether the operator ran it cannot be checked here; that it claims to cover
    what the passport rests on, with counts this ledger bears out, can.)"""
    computed = doc.get("computed")
    found = computed.get("audit") if isinstance(computed, dict) else None
    audit: Mapping[str, Any] = found if isinstance(found, dict) else {}
    entries_then = audit.get("ledger_entries")
    if not isinstance(entries_then, int) or isinstance(entries_then, bool) or not 0 < entries_then <= index or \
            facts.root(entries_then).hex() != audit.get("ledger_head") or audit.get("ledger_intact") is not True:
        raise VerificationError(f"the passport of entry {index}: its audit is not of this ledger's head at the time",
                                index=index, field="computed.audit", found=audit.get("ledger_head"))
    if entries_then != size:
        raise VerificationError(f"the passport of entry {index}: its audit covers {entries_then} entries, not the "
                                f"{size} of the checkpoint it rests on", index=index,
                                field="computed.audit.ledger_entries", expected=size, found=entries_then)
    bundles = bisect_left(facts.bundle_indices(), entries_then)
    if audit.get("bundles") != bundles or audit.get("rederived") != bundles:
        raise VerificationError(f"the passport of entry {index}: its audit does not claim every bundle below its size "
                                "re-derived", index=index, field="computed.audit",
                                expected=f"bundles = rederived = {bundles}",
                                found=f"bundles {audit.get('bundles')!r}, rederived {audit.get('rederived')!r}")


@dataclass(frozen=True)
class PassportCheck:
    """What ``heldout passport verify`` found: the verdict, whether the passport was checked against its ledger
    (``ledger_checked``), and, without a ledger, the checkpoint its offline proofs rest on (``proven``); with a
    witness policy, the quorum that cosigned that checkpoint (``witnessed``) and, with a ledger, the quorum
    that cosigned the ledger's head (``head_witnessed``)."""

    verdict: PassportVerdict
    ledger_checked: bool
    proven: Checkpoint | None = None
    witnessed: Witnessed | None = None
    head_witnessed: Witnessed | None = None


def anchored_ledger_id(doc: Mapping[str, Any]) -> str | None:
    computed = doc.get("computed")
    heldout = computed.get("heldout") if isinstance(computed, Mapping) else None
    ledger_id = heldout.get("ledger_id") if isinstance(heldout, Mapping) else None
    return ledger_id if isinstance(ledger_id, str) else None


@dataclass(frozen=True)
class AnchoredLedger:
    """The ledger a passport is checked against: its facts and its latest checkpoint with the cosignatures
    held for it (what a witness policy is asked about)."""

    facts: LedgerFacts
    head: Checkpoint


def passport_ledger_facts(doc: Mapping[str, Any], store: Store, source: str | None,
                          log: PublicLog | None = None) -> AnchoredLedger | None:
    """The ledger a passport is anchored to: the public log at ``source`` (an export or tiles directory, or a
    tiles URL; ``log`` when it is already opened; replayed and its ledger id checked first), else that ledger in
    ``store`` when the store holds it (verified first); None when neither applies (the passport is then checked
    on its own, and said to be)."""
    from heldout.generations import open_ledger
    from heldout.generations.ledgers import resolve_ledger_id
    from heldout.generations.verify import verify_public_log
    from ledger.public import open_public_log

    ledger_id = anchored_ledger_id(doc)
    if source is not None:
        if ledger_id is None:
            raise VerificationError("the passport is not anchored to a ledger (computed.heldout is empty)",
                                    field="computed.heldout")
        public = open_public_log(source) if log is None else log
        verify_public_log(public, expected_id=ledger_id)  # every rule of a public log, its blobs' included
        return AnchoredLedger(LedgerFacts.of(public, public.blobs), public.latest_checkpoint())
    if ledger_id is None:
        return None
    try:
        found = resolve_ledger_id(store, ledger_id)
    except HeldoutError:
        if _store_knows(store, ledger_id):  # its ledger lost or damaged: no verdict (exit 2), never the offline
            raise  # check's, which would pass a passport its ledger lapses
        return None
    with open_ledger(store, found, read_only=True) as ledger:
        ledger.verify(expected_id=ledger_id)
        return AnchoredLedger(LedgerFacts.of(ledger, BlobStore(store.blobs)), ledger.cosigned_checkpoint())


def _store_knows(store: Store, ledger_id: str) -> bool:
    """Whether ``store`` has held the ledger ``ledger_id``: it is the store's default, or the store has audited
    it. A damaged default setting is no answer: its error (exit 2) is raised."""
    default = store.default_ledger_id() if os.path.lexists(store.default_ledger_file) else None
    return default == ledger_id or (store.audit / ledger_id).is_dir()


def witnessed_head(anchored: AnchoredLedger, policy: Policy) -> Witnessed:
    """With a witness policy, a passport checked against a log rests on what the witnesses saw: the log's
    latest checkpoint must be cosigned by the quorum (as ``ledger verify --policy`` requires), so that the
    passport's own entry and every entry its standing is read from (a retire, a supersession) are in a
    history the witnesses vouch for. A fork shown to this auditor alone (same ledger id and key, a passport
    or a missing retire the witnesses never saw) fails here."""
    facts, head = anchored.facts, anchored.head
    witnessed = policy.evaluate(head, origin=origin_of(facts.ledger_id))
    if head.size != len(facts.entries):
        raise VerificationError(f"the log holds {len(facts.entries)} entries but its latest checkpoint, the one "
                                f"the witnesses cosigned, covers {head.size}", field="--policy",
                                expected=len(facts.entries), found=head.size)
    return witnessed


def _offline_proofs(passport: Passport, trusted: PublicKey | TrustedKey) -> Checkpoint | None:
    """Without a ledger, a passport anchored to one still proves its seal and bundles were logged: its C2SP
    tlog-proofs, checked against the log key its signed ``computed.heldout.note_verifier_key`` names (the
    trusted issuer vouches for it: the genesis key, or a further key the ledger declares, which never signs
    checkpoints itself)."""
    if not isinstance(passport.heldout, dict):
        return None
    trusted_key = trusted.public_key if isinstance(trusted, TrustedKey) else trusted
    named = passport.heldout.get("note_verifier_key")
    try:
        log_name, _, log_key = parse_verifier_key(named) if isinstance(named, str) else ("", b"", None)
    except MalformedInput as exc:
        raise VerificationError(f"the passport's note_verifier_key is not a verifier key: {exc.message}",
                                field="computed.heldout.note_verifier_key", found=str(named)[:120]) from None
    if log_key is None:
        raise VerificationError("the passport names no log key (computed.heldout.note_verifier_key)",
                                field="computed.heldout.note_verifier_key")
    if log_key == trusted_key and isinstance(trusted, TrustedKey):
        log_name = trusted.name
    return check_passport_proofs(passport, log_name=log_name, log_key=log_key)


def witnessed_passport(passport: Passport, policy: Policy) -> Witnessed:
    """The passport's proofs checked under a log key the policy lists, and their checkpoint's cosignatures
    against the policy's quorum (raises naming the missing quorum: a passport anchored on a checkpoint the
    witnesses never cosigned, such as one of a history rebuilt under the same ledger id, fails here)."""
    if not isinstance(passport.heldout, dict):
        raise VerificationError("the passport is not anchored to a ledger: no proofs to witness",
                                field="computed.heldout")
    problems: list[str] = []
    for log in policy.logs:
        try:
            checkpoint = check_passport_proofs(passport, log_name=log.name, log_key=log.key)
        except VerificationError as exc:
            problems.append(f"{log.name}: {exc.message}")
            continue
        return policy.evaluate(checkpoint, origin=origin_of(str(passport.heldout.get("ledger_id"))))
    raise UntrustedKey("the passport's proofs are not signed by a log the policy lists", field="--policy",
                       found=problems)


def check_passport(doc: dict[str, Any], *, store: Store, source: str | None, at: datetime,
                   pinned: PublicKey | TrustedKey | None = None, policy: Policy | None = None,
                   log: PublicLog | None = None) -> PassportCheck:
    """Verify a passport document as ``heldout passport verify`` does: against its ledger when one is at hand
    (``source``, else ``store``'s copy: :func:`check_passport_on_ledger`; with ``source``, the issuer key is
    ``pinned`` or else the keyring's, and the ledger must declare it), else on its own (signature, expiry,
    and its offline proofs under ``pinned`` or the keyring's issuer key); with ``policy``, its proofs must rest
    on a checkpoint the policy's quorum cosigned, and the ledger's head too (:func:`witnessed_head`). Raises for
    a failed check; an expired or lapsed passport is a verdict, not an error. ``log``: the public log at
    ``source`` already opened (whoever judges more than the passport on it reads it once)."""
    anchored = passport_ledger_facts(doc, store, source, log)
    facts = anchored.facts if anchored is not None else None
    proven = None
    head_witnessed = witnessed_head(anchored, policy) if anchored is not None and policy is not None else None
    if facts is not None:
        if source is not None and pinned is None:
            # A public log proves what it holds, not whose it is: anyone can publish a ledger whose entry 0
            # declares their own key, and the passport names its ledger itself. The trust comes from the
            # auditor's keyring (or --key), and the ledger must declare that key.
            pinned = store.issuer_key(doc, what="passport")
        verdict = check_passport_on_ledger(doc, facts, at=at, pinned=pinned)
    else:
        trusted = pinned if pinned is not None else store.issuer_key(doc, what="passport")
        verdict = verify_passport(doc, trusted, at=at)
        proven = _offline_proofs(verdict.passport, trusted)
    witnessed = witnessed_passport(verdict.passport, policy) if policy is not None else None
    require_implemented_spec(verdict)
    return PassportCheck(verdict=verdict, ledger_checked=facts is not None, proven=proven, witnessed=witnessed,
                         head_witnessed=head_witnessed)


def require_implemented_spec(verdict: PassportVerdict) -> None:
    """A passport that would be valid under a spec version this verifier does not implement gets no verdict
    (exit 5), as its bundles get none from the audit: its numbers cannot be re-derived here, and a version no
    verifier implements (an operator may log a supersession to one) would otherwise carry numbers nobody can
    check behind a "valid"."""
    from harness.metrics.registry import METRICS

    version = verdict.passport.spec_version
    if verdict.state is PassportState.VALID and version not in METRICS:
        raise IncompleteError(f"the passport is under {str(version)[:60]!r}, which this verifier does not implement "
                              f"(implemented: {', '.join(METRICS)}): its numbers cannot be re-derived here",
                              field="spec_version", found=str(version)[:60], expected=list(METRICS))
