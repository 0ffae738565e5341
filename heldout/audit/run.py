"""The audit: replay the ledger and re-derive every bundle before anything is certified.

Checks, in order (each failure is a :class:`Finding` naming the entry and/or file; the audit goes on so that
one run names everything it can):

1. **ledger**: the replay of ``ledger.replay`` (ledger id from entry 0, every entry canonical and valid, every
   checkpoint signature under the genesis key, each checkpoint's root recomputed from the entries, consistency
   between consecutive checkpoints, no unsigned tail); when it fails at a checkpoint, the damage is located:
   the entries between the last checkpoint whose root the entries still give and the first that they do not
   (evidence ``entries: "a..b"``), or else the checkpoint's own file;
2. **entries**: every entry decoded on its own, so a damaged one is named by index even when the root
   mismatch alone could only name a checkpoint;
3. **seals**: each seal manifest's signature (ledger key) and its binding to its ``seal`` entry, and (sealed
   generations) to its ``intent`` and ``pool`` entries and the checkpoint its draw's seed comes from; then
   **draws**: a generation whose intent was logged more than once (a retried draw), or an intent no seal
   draws from, is a finding naming the intents' entries;
4. **reveals**: each reveal blob recomputes its generation's set hash (and images, when revealed), and the
   draw: the revealed cases are exactly those the seed selects from the revealed, committed pool;
5. **bundles**: generation sealed before and current at the bundle's time, blobs present and hash-checked,
   the evaluation consistent with its entry, its leakage charge recomputed, the labels' hash, and the whole
   evaluation object re-derived from the stored predictions (``harness.metrics``): its canonical bytes must be
   the stored blob's, byte for byte;
6. **passports**: ``heldout.passports.check_passport_on_ledger``, the same verifier ``passport verify`` uses
   with a ledger (issuer key declared by the ledger, logged, anchored, bundles included, audit at its head,
   expiry within its generation's);
7. **blobs**: every blob an entry references and the source holds, hash-checked (those the checks above did
   not already read, such as the seal manifests' copies);
8. **export** (third party): export.json canonical, its ``entries``, ``keys``, ``seals``, ``blobs`` and
   ``missing_blobs`` members true of the files, every ``keys/`` file a key a ledger entry declares, no blob
   file that no entry references;
9. **time**: entries' ``created_utc`` never decrease along the ledger (an entry dated before its predecessor was
   backdated, e.g. in an export the operator forged);
10. **witnesses** (with a policy: ``--policy``, or in operator mode the store's): the latest checkpoint is cosigned
   by the policy's quorum (else a finding naming the missing quorum), and no bundle was logged after a
   witnessed time past its generation's expiry: a cosignature at time T on a checkpoint of size s says the log
   had no more than s entries at T, so a bundle at index >= s with T at or past its expiry is a late one,
   whatever date it claims.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, TypeVar

from harness.metrics import labels_bytes
from harness.metrics.dimensions import n_cases_for
from harness.metrics.registry import metrics_for
from heldout.audit.rederive import Pending, RederiveJob, Submit, WorkerDied, bundle_rederiver
from heldout.audit.report import REPORT_FORMAT, REPORT_VERSION, AuditReport, Finding, SinceLink, Unrederived
from heldout.audit.sources import AuditSource
from heldout.entries import BundleEntry, EntryRecord, IntentEntry, PassportEntry, entry_record, optional_dimensions
from heldout.generations import (
    WITHHOLDING_MODES,
    GenerationState,
    RevealDocument,
    answer_bits,
    charge_bits,
    check_draw_binding,
    check_manifest_binding,
    ladder_release,
    load_generations,
    released_score,
    revealed_labels,
    verify_reveal,
)
from heldout.generations.access import check_opening
from heldout.generations.draw import DrawRecord
from heldout.generations.release import ReleaseLog, on_release_grid, thresholdout_answer
from heldout.generations.reveal import verify_budget, verify_draw
from heldout.passports import LedgerFacts, check_passport_on_ledger
from heldout.specs import BundleRun, Supersession, bundle_run, load_supersessions, require_spec_in_force
from keys import HeldoutError, IncompleteError, TrustedKey, VerificationError
from ledger import SourceUnavailable, blob_references, verify_checkpoint
from ledger.checkpoint import parse_checkpoint
from ledger.entries import decode_entry, genesis_key, ledger_id_of, origin_of
from ledger.policy import CosignedTimes, Policy, WitnessedTimeError, WitnessedTimes
from ledger.replay import locate_damage
from ledger.verify import verify_consistency
from seals import CLOCK_TOLERANCE, format_utc, parse_json_object, sha256_hex, shifted
from seals.manifest import SealManifest

AuditProgress = Callable[[str, int, int], None]
R = TypeVar("R", bound=EntryRecord)


def _noop(phase: str, done: int, total: int) -> None:
    return None


class _Blobs:
    """The source's blobs behind the ``get`` protocol the generations package expects."""

    def __init__(self, source: AuditSource, verified: set[str]) -> None:
        self.source = source
        self.verified = verified

    def get(self, sha256_hex: str) -> bytes:
        data = self.source.blob(sha256_hex)  # hash-checked by the source
        self.verified.add(sha256_hex)
        return data


@dataclass
class _Context:
    source: AuditSource
    report: AuditReport
    now: datetime
    keys: list[TrustedKey] = field(default_factory=list)
    key_indices: list[int] = field(default_factory=list)  # the entry declaring each of ``keys``
    entries: dict[int, dict[str, Any]] = field(default_factory=dict)
    entry_bytes: dict[int, bytes] = field(default_factory=dict)
    generations: dict[str, GenerationState] = field(default_factory=dict)
    supersessions: dict[str, Supersession] = field(default_factory=dict)
    manifests: dict[str, SealManifest] = field(default_factory=dict)
    reveals: dict[str, RevealDocument] = field(default_factory=dict)
    verified_blobs: set[str] = field(default_factory=set)
    labels: dict[tuple[str, str], tuple[Any, str]] = field(default_factory=dict)
    evaluation_specs: dict[int, Any] = field(default_factory=dict)  # a re-derived bundle's evaluation's spec
    #: Entries below this index were covered by the earlier clean report an incremental audit trusts.
    trusted_size: int = 0
    _records: dict[int, EntryRecord | None] = field(default_factory=dict)
    release_logs: dict[str, ReleaseLog] = field(default_factory=dict)
    facts: LedgerFacts | None = None
    _by_type: dict[type[EntryRecord], list[Any]] = field(default_factory=dict)
    _public_bundles: dict[tuple[str, str], list[int]] | None = None
    _model_bundles: dict[str, list[BundleEntry]] | None = None
    _first_runs: dict[BundleRun, int] | None = None
    #: Per model: (index, optional dimensions) of its first bundle on a generation that releases in full
    model_dimensions: dict[str, tuple[int, frozenset[str]] | None] = field(default_factory=dict)
    _openings: dict[str, RevealDocument] = field(default_factory=dict)
    #: The bundles to re-derive (None: every one), see run_audit
    rederive: set[int] | None = None
    #: With run_audit's ``through``: the entries after it, which only the export's own checks read
    later_entries: dict[int, dict[str, Any]] = field(default_factory=dict)

    def record(self, index: int) -> EntryRecord | None:
        """Entry ``index`` as its typed record (None for a generic entry or one the ledger lacks)."""
        if index not in self._records:
            entry = self.entries.get(index)
            try:
                self._records[index] = None if entry is None else entry_record(index, entry)
            except HeldoutError:
                self._records[index] = None  # not a valid entry of its type: the replay has reported it
        return self._records[index]

    def records(self, kind: type[R]) -> list[R]:
        """The entries of one domain type as typed records, in ledger order (derived once per type)."""
        if kind not in self._by_type:
            self._by_type[kind] = [r for i in sorted(self.entries) if self.entries[i].get("type") == kind.TYPE
                                   for r in [self.record(i)] if isinstance(r, kind)]
        return self._by_type[kind]

    def opening(self, state: GenerationState) -> RevealDocument:
        """A generation's private opening (operator audit), read once per audit (the draw check, the
        disjointness check and the labels all need it); raises as ``AuditSource.private_opening`` does."""
        if state.name not in self._openings:
            self._openings[state.name] = self.source.private_opening(state)
        return self._openings[state.name]

    def public_bundles(self, model_id: str, task: str) -> list[int]:
        """The indices of the ``public`` generation's bundles of ``model_id`` on ``task``, in ledger order (the
        candidates for a Thresholdout public estimate), derived once per audit."""
        if self._public_bundles is None:
            self._public_bundles = {}
            for bundle in self.records(BundleEntry):
                if bundle.generation == "public":
                    self._public_bundles.setdefault((bundle.model_id, bundle.task), []).append(int(bundle.index or 0))
        return self._public_bundles.get((model_id, task), [])

    def model_bundles(self, model_id: str) -> list[BundleEntry]:
        """The bundles of ``model_id``, on every generation, in ledger order (grouped once per audit)."""
        if self._model_bundles is None:
            self._model_bundles = {}
            for bundle in self.records(BundleEntry):
                self._model_bundles.setdefault(bundle.model_id, []).append(bundle)
        return self._model_bundles.get(model_id, [])

    def first_run(self, bundle: BundleEntry) -> int:
        """The index of the first bundle of ``bundle``'s run (:func:`bundle_run`), grouped once per audit."""
        if self._first_runs is None:
            self._first_runs = {}
            for earlier in self.records(BundleEntry):
                self._first_runs.setdefault(bundle_run(earlier, self.supersessions), int(earlier.index or 0))
        return self._first_runs.get(bundle_run(bundle, self.supersessions), int(bundle.index or 0))

    def find(self, check: str, error: HeldoutError, *, index: int | None = None, file: str | None = None) -> None:
        if isinstance(error, (SourceUnavailable, WorkerDied)):  # the source could not be read, or a worker died:
            raise error  # no finding, no verdict (exit 2)
        self.report.findings.append(Finding.from_error(check, error, index=index, file=file))

    def keep_entry(self, index: int, data: bytes, entry: dict[str, Any]) -> None:
        """Each entry as the replay decodes it (``ledger.replay``'s ``on_entry``)."""
        self.entry_bytes[index] = data
        self.entries[index] = entry

    def count(self, what: str, n: int = 1) -> None:
        self.report.counts[what] = self.report.counts.get(what, 0) + n

    def has_blob(self, digest: str) -> bool:
        """Whether the source holds the blob; something in its place that is no blob file (a FIFO, a link, a
        device) counts as held, so that reading it (:meth:`blob`) names the fault as a finding of its entry
        instead of ending the audit without a report."""
        try:
            return self.source.has_blob(digest)
        except SourceUnavailable:
            raise
        except HeldoutError:
            return True

    def blob(self, digest: Any, *, index: int, what: str) -> bytes:
        """A referenced blob, hash-checked by the source; raises naming the blob file."""
        if not isinstance(digest, str):
            raise VerificationError(f"entry {index} has no {what} hash", index=index, field=what)
        try:
            data = self.source.blob(digest)
        except SourceUnavailable:
            raise
        except HeldoutError as exc:
            raise VerificationError(f"{what} blob of entry {index}: {exc.message}", index=index,
                                    file=self.source.blob_file(digest), expected=digest) from None
        self.count("blobs")
        self.verified_blobs.add(digest)
        return data

    def blobs(self) -> _Blobs:
        return _Blobs(self.source, self.verified_blobs)

    def trusted_for(self, issuer_key_b64: Any, *, used_at: int) -> TrustedKey:
        """The declared key a document logged by entry ``used_at`` names as its issuer (else the ledger key, which
        the signature check then holds it to). A key declared only at or after ``used_at`` signed before the
        ledger trusted it: refused, as for passports (FORMATS section 15, rules 8 and 11)."""
        for index, key in zip(self.key_indices, self.keys, strict=True):
            if key.public_key.b64 == issuer_key_b64:
                if index >= used_at:
                    raise VerificationError(
                        f"the document of entry {used_at} is signed by key {key.key_id!r}, which the ledger declares "
                        f"only at entry {index}: a key signs for the ledger once an earlier entry declares it",
                        index=used_at, field="issuer", expected=f"a key declared before entry {used_at}",
                        found=f"{key.key_id} (entry {index})")
                return key
        if not self.keys:
            raise VerificationError("no ledger key is known (entry 0 is unreadable), so no document can be trusted")
        return self.keys[0]


def run_audit(source: AuditSource, *, now: datetime, audit_command: str,
              progress: AuditProgress | None = None, policy: Policy | None = None, jobs: int = 1,
              since: bytes | None = None, own_reports: Collection[str] = frozenset(),
              rederive: Collection[int] | None = None, through: int | None = None) -> AuditReport:
    """Audit ``source`` at the reference time ``now``; never raises for what it finds (it reports it).
    ``policy``: the witness policy the checkpoints must satisfy (default: the source's own, if any).
    ``jobs``: processes that re-derive bundles (the report is the same whatever it is). Above 1, workers start
    from a forkserver and import the caller's main module, as multiprocessing's do: a script that calls this
    must guard its entry (``if __name__ == "__main__":``), as ``audit.py`` and the ``heldout`` command do.
    ``since``: the bytes of an earlier report to carry forward (:func:`_trust_since`): when it holds, only the
    bundles appended after it are re-derived; when it does not, the audit is a full one with a finding.
    ``own_reports``: the SHA-256s of the clean reports this auditor wrote (``ReportRecord``); ``since`` must be
    one of them.
    ``rederive``: the bundles to re-derive (default: every one). Given, the audit checks a published claim (a
    passport: the bundles it cites; :func:`heldout.audit.gate.require_clean_log`): every other bundle is checked
    in all but its re-derivation, and the checks that judge the audit's own moment (entries dated after it,
    the witness policy) are left to the claim's verifier, which judges its own reference time and policy.
    The bundles a re-derived bundle's release rests on (:func:`_release_dependencies`) are re-derived too.
    ``through``: judge the log as it stood when entry ``through`` was logged (a claim's entry): the replay, and
    the export's own checks, cover the whole log, and every domain rule runs on entries 0 .. ``through`` alone,
    so that nothing logged later can move, hide or cure what was wrong by then (red-team round 20: one more seal
    intent after a passport moved the finding of a retried draw past it)."""
    report = AuditReport(ledger_id=source.ledger_id, mode=source.mode, audit_command=audit_command,
                         checked_utc=format_utc(now))
    ctx = _Context(source=source, report=report, now=now, rederive=None if rederive is None else set(rederive))
    tick = progress or _noop
    _replay(ctx, tick)
    _decode_entries(ctx, through)
    if since is not None:
        _trust_since(ctx, since, own_reports)
    _load_generations(ctx)
    if ctx.rederive is not None:
        ctx.rederive |= _release_dependencies(ctx, ctx.rederive)
    _check_seals(ctx)
    _check_intents(ctx)
    _check_reveals(ctx)
    _check_bundles(ctx, tick, jobs)
    _check_passports(ctx)
    _check_blob_files(ctx)
    _check_export(ctx)
    _check_times(ctx)
    if ctx.rederive is None:
        _check_witnessing(ctx, policy if policy is not None else source.witness_policy())
    report.generations = {name: _generation_summary(state) for name, state in ctx.generations.items()}
    return report


def _release_dependencies(ctx: _Context, indices: Collection[int]) -> set[int]:
    """The bundles whose numbers the claims on the bundles ``indices`` rest on, followed to the end (each one's own
    are added too): on a generation with a leakage budget or a withholding release, every earlier bundle of the
    generation (their charges admit or refuse this one, and a ladder or Thresholdout answer depends on the
    transcript before it); a Thresholdout answer's public bundle (its public estimate is that bundle's score);
    and the model's first bundle on a generation that releases in full (the reference for its optional
    dimensions). A claim that cites a bundle rests on them as much as on the bundle itself (red-team rounds 20
    and 21: a forged public estimate released by a valid passport; an evaluation that understated its charge
    admitted a cited bundle within the budget; a public bundle behind an earlier answer of the transcript)."""
    bundles = {int(bundle.index or 0): bundle for bundle in ctx.records(BundleEntry)}
    by_generation: dict[str, list[int]] = {}
    first_full: dict[str, int] = {}
    for index, bundle in sorted(bundles.items()):
        by_generation.setdefault(bundle.generation, []).append(index)
        state = ctx.generations.get(bundle.generation)
        if state is not None and state.release_mode not in WITHHOLDING_MODES:
            first_full.setdefault(bundle.model_id, index)
    needed: set[int] = set()
    todo = [index for index in indices if index in bundles]
    while todo:
        index = todo.pop()
        bundle = bundles[index]
        state = ctx.generations.get(bundle.generation)
        depends: list[int] = []
        if state is not None and (state.budget_bits is not None or state.release_mode in WITHHOLDING_MODES):
            depends += [earlier for earlier in by_generation[bundle.generation] if earlier < index]
        release = bundle.get("release")
        public = release.get("public_bundle") if isinstance(release, Mapping) else None
        if type(public) is int and public in bundles and public < index:
            depends.append(public)
        reference = first_full.get(bundle.model_id)
        if reference is not None and reference < index:
            depends.append(reference)
        for earlier in depends:
            if earlier not in needed:
                needed.add(earlier)
                todo.append(earlier)
    return needed - set(indices)


def _check_times(ctx: _Context) -> None:
    """Entry times never run backwards along the ledger (the append refuses it; a forged export may not), and no
    entry is dated after the audit's reference time by more than the clock tolerance: an entry that is in the
    log now was logged by now, so a later date is false (an operator dating a worse run after the reference
    time kept it from lapsing a passport judged at that time). The first such entry is named (every later one
    is dated later still, or the time runs backwards)."""
    previous: tuple[int, str] | None = None
    latest_true = shifted(ctx.now, CLOCK_TOLERANCE)
    future_named = False
    for index, entry in sorted(ctx.entries.items()):
        stamp = entry.get("created_utc")
        if not isinstance(stamp, str):
            continue
        if not future_named and ctx.rederive is None and stamp > format_utc(latest_true):
            future_named = True
            ctx.find("time", VerificationError(
                f"entry {index} is dated {stamp}, after the time of this audit ({format_utc(ctx.now)}) by more "
                "than the clock tolerance: an entry in the log was logged by now, so its date is false (or the "
                "audit's --at is before the log's end)", index=index, field="created_utc",
                expected=f"<= {format_utc(latest_true)}", found=stamp), index=index, file=ctx.source.entries_file)
        if previous is not None and stamp < previous[1]:
            ctx.find("time", VerificationError(
                f"entry {index} is dated {stamp}, before entry {previous[0]} ({previous[1]}): the ledger's time ran "
                "backwards (backdated entry)", index=index, field="created_utc", expected=f">= {previous[1]}",
                found=stamp), index=index, file=ctx.source.entries_file)
        if previous is None or stamp >= previous[1]:
            previous = (index, stamp)


def _check_draw_witnesses(ctx: _Context, policy: Policy, witnessed_since: int | None) -> None:
    """A draw seeded by witness cosignatures may count only lines of witnesses the policy lists: a line of any
    other key (one the operator holds) can be re-made with another timestamp at will, so the seed, and the
    cases drawn, could be ground until they suit. And once the policy's witnesses cosign the log (from size
    ``witnessed_since`` on), a draw is seeded by them: one seeded by the checkpoint root after that (the
    operator's seal run with its witness configuration removed or damaged) has a seed the operator computes
    before it logs, and can grind."""
    for name, manifest in ctx.manifests.items():
        if manifest.draw is None:
            continue
        draw = DrawRecord.from_json(manifest.draw)
        state = ctx.generations[name]
        if draw.seed_source != "witness-cosignatures":
            drawn_at = draw.checkpoint_size
            if witnessed_since is not None and witnessed_since <= drawn_at:
                ctx.find("draw", VerificationError(
                    f"the draw of {name} is seeded by the root of checkpoint {drawn_at}, though the policy's "
                    f"witnesses cosigned the log from checkpoint {witnessed_since} on: a checkpoint-root seed is "
                    "known to the operator before it logs, so it could be ground (a seal run without its "
                    "witnesses)", index=state.seal_index, field="draw.seed_source", expected="witness-cosignatures",
                    found=draw.seed_source))
            continue
        try:
            listed = {c.line.rstrip("\n") for c in policy.cosignatures(
                parse_checkpoint(draw.checkpoint_note.encode())).values()}
        except HeldoutError as exc:
            ctx.find("draw", exc, index=state.seal_index)
            continue
        stray = [line for line in draw.cosignatures if line not in listed]
        if stray:
            ctx.find("draw", VerificationError(
                f"the draw of {name} seeds from {len(stray)} cosignature line(s) of keys the witness policy does "
                "not list (or that do not verify): a line of another key can be re-made at will, so the seed could "
                "be chosen", index=state.seal_index, field="draw.cosignatures", found=stray[0][:80]))


def _check_witnessing(ctx: _Context, policy: Policy | None) -> None:
    if policy is None or not ctx.report.ledger_intact:
        return
    try:
        checkpoints = sorted(ctx.source.checkpoints(), key=lambda c: c.size)
        latest = checkpoints[-1]
    except (HeldoutError, IndexError) as exc:
        ctx.find("witnesses", exc if isinstance(exc, HeldoutError) else VerificationError("no checkpoint"))
        return
    origin = ctx.source.origin
    try:
        policy.evaluate(latest, origin=origin)
        ctx.count("witnessed checkpoints")
    except HeldoutError as exc:
        ctx.find("witnesses", exc, file=ctx.source.checkpoint_file(latest.size))
    cosigned: list[CosignedTimes] = []  # per checkpoint, its witnesses' verified cosignature times
    failed: list[tuple[int, HeldoutError]] = []  # (named after the draws, as before: one verification each)
    for checkpoint in checkpoints:
        try:
            cosigned.append((checkpoint.size, policy.cosignature_times(checkpoint)))
        except HeldoutError as exc:
            failed.append((checkpoint.size, exc))
    _check_draw_witnesses(ctx, policy, next((size for size, times in cosigned if times), None))
    for size, error in failed:
        ctx.find("witnesses", error, file=ctx.source.checkpoint_file(size))
    window = WitnessedTimes(cosigned, policy.attests)
    _check_witnessed_dates(ctx, window)
    _rejudge_at_witnessed_times(ctx, window)


def _rejudge_at_witnessed_times(ctx: _Context, window: WitnessedTimes) -> None:
    """The rules judged at an entry's own date, judged again at the time the witnesses attest it was logged
    after: an operator who backdates an entry (its clock, its key) moves only its own date. A passport or a
    bundle past its generation's expiry, a bundle under a spec superseded by then."""
    for passport in ctx.records(PassportEntry):
        index = int(passport.index or 0)
        state = ctx.generations.get(passport.generation)
        found = window.logged_after(index)
        if state is not None and found is not None and found[1] >= state.expiry:
            ctx.find("witnessed-time", VerificationError(
                f"passport entry {index} was logged after the witnesses attested {format_utc(found[1])} (checkpoint "
                f"{found[0]} does not contain it), past the expiry of {state.name} ({format_utc(state.expiry)}): a "
                "passport is issued only against a current generation", index=index, field="generation",
                expected=f"logged before {format_utc(state.expiry)}",
                found=f"witnessed at {format_utc(found[1])} with size {found[0]}"), index=index)
    for bundle in ctx.records(BundleEntry):
        index = int(bundle.index or 0)
        state = ctx.generations.get(bundle.generation)
        found = window.logged_after(index)
        if state is None or found is None:
            continue
        size, at = found
        if at <= bundle.created:  # its own date is no earlier than what the witnesses attest
            continue
        attested = (f"logged after the witnesses attested {format_utc(at)} (checkpoint {size} does not contain "
                    "it)")
        if at >= state.expiry:
            ctx.find("witnessed-time", VerificationError(
                f"bundle entry {index} was {attested}, past the expiry of {state.name} ({format_utc(state.expiry)})",
                index=index, field="generation", expected=f"logged before {format_utc(state.expiry)}",
                found=f"witnessed at {format_utc(at)} with size {size}"), index=index)
        # the spec the bundle was evaluated under: its evaluation's (the entry's copy when the blob is withheld;
        # a copy that differs is a finding of its own)
        superseded = ctx.supersessions.get(str(ctx.evaluation_specs.get(index, bundle.get("spec_version"))))
        if superseded is not None and superseded.index < index and superseded.in_force(at):
            ctx.find("witnessed-time", VerificationError(
                f"bundle entry {index} was {attested}, when {superseded.words} (entry {superseded.index})",
                index=index, field="spec_version", expected=f"logged before {format_utc(superseded.effective)}",
                found=f"witnessed at {format_utc(at)} with size {size}"), index=index)


def _check_witnessed_dates(ctx: _Context, window: WitnessedTimes) -> None:
    """Every entry's own date lies within the clock tolerance of the window the witnesses attest for it
    (``WitnessedTimes.check_date``): outside it the date is a false statement (a seal "made" before its draw
    was cosigned, a retirement dated after the witnesses saw it)."""
    for index, entry in sorted(ctx.entries.items()):
        try:
            window.check_entry(index, entry)
        except WitnessedTimeError as exc:
            ctx.find("witnessed-time", exc, index=index)


def _replay(ctx: _Context, tick: AuditProgress) -> None:
    report = ctx.report
    try:
        total = ctx.source.log.size
    except HeldoutError as exc:
        ctx.find("ledger", exc)
        return
    try:
        replayed = ctx.source.replay(lambda done, _total: tick("replay", done, total), ctx.keep_entry)
    except SourceUnavailable:
        raise
    except HeldoutError as exc:
        report.findings.append(_ledger_finding(ctx, exc))
        report.ledger_entries = total
        return
    report.ledger_intact = True
    report.ledger_entries = replayed.size
    report.ledger_head = replayed.root.hex()
    report.checkpoints = replayed.checkpoints
    ctx.count("checkpoints", replayed.checkpoints)
    try:
        report.checkpoint = next((c.note for c in ctx.source.checkpoints() if c.size == replayed.size), None)
    except HeldoutError as exc:  # pragma: no cover (the replay read the same checkpoints a moment ago)
        ctx.find("ledger", exc)


def _trust_since(ctx: _Context, data: bytes, own_reports: Collection[str]) -> None:
    """Carry an earlier report forward, or say why not (a ``since`` finding; the audit then covers everything).

    Trusted only when all of these hold: this auditor wrote it (its SHA-256 is in ``own_reports``: what it
    claims cannot be checked, and anyone can write a "clean" report around a real checkpoint); it is a
    version-2 report of this ledger in this mode; it is clean
    (intact, no finding, every bundle re-derived); its checkpoint note verifies under this ledger's genesis key
    and names the size and root the report states; this ledger replays intact now; a consistency proof from
    that checkpoint to the current one verifies (so the entries it covered are the ones here, unchanged); and
    the ledger holds as many bundles below that size as the report re-derived."""
    digest = sha256_hex(data)
    try:
        if digest not in own_reports:
            raise VerificationError("the --since report is not a clean report this auditor wrote (its SHA-256 is "
                                    "not in the auditor's record): a report is carried forward only from the "
                                    "auditor's own audits", found=digest)
        earlier = parse_json_object(data, what="the --since report")
        if earlier.get("format") != REPORT_FORMAT or earlier.get("version") != REPORT_VERSION:
            raise VerificationError(f"the --since report is not a version-{REPORT_VERSION} audit report (one that "
                                    "records its checkpoint)", expected=f"{REPORT_FORMAT} {REPORT_VERSION}",
                                    found=f"{earlier.get('format')} {earlier.get('version')}")
        if earlier.get("ledger_id") != ctx.source.ledger_id or earlier.get("mode") != ctx.report.mode:
            raise VerificationError("the --since report is of another ledger or another mode",
                                    expected=f"{ctx.source.ledger_id} ({ctx.report.mode})",
                                    found=f"{earlier.get('ledger_id')} ({earlier.get('mode')})")
        bundles = earlier.get("bundles")
        if earlier.get("verdict") != "clean" or earlier.get("exit_code") != 0 or earlier.get("findings") \
                or earlier.get("not_rederived") or earlier.get("ledger_intact") is not True \
                or not isinstance(bundles, int) or earlier.get("rederived") != bundles:
            raise VerificationError("the --since report is not clean: only a clean audit can be carried forward",
                                    found=str(earlier.get("verdict")))
        if not ctx.keys:
            raise VerificationError("no ledger key is known (entry 0 is unreadable) to verify its checkpoint")
        key = ctx.keys[0]
        checkpoint = verify_checkpoint(str(earlier.get("checkpoint")), name=key.name, key=key.public_key,
                                       origin=ctx.source.origin)
        if checkpoint.size != earlier.get("ledger_entries") or checkpoint.root.hex() != earlier.get("ledger_head"):
            raise VerificationError("the --since report's checkpoint is not the tree it says it audited",
                                    expected=f"{earlier.get('ledger_entries')} {earlier.get('ledger_head')}",
                                    found=f"{checkpoint.size} {checkpoint.root.hex()}")
        if not ctx.report.ledger_intact:
            raise VerificationError("the ledger does not replay now, so nothing can be carried forward from the "
                                    "--since report")
        size = ctx.report.ledger_entries
        if checkpoint.size > size:
            raise VerificationError(f"the --since report covers {checkpoint.size} entries; the ledger has {size}: "
                                    "it was rolled back", expected=f">= {checkpoint.size}", found=size)
        current = bytes.fromhex(ctx.report.ledger_head)
        try:
            proof = ctx.source.log.consistency_proof(checkpoint.size, size)
            verify_consistency(checkpoint.size, size, checkpoint.root, current, proof.path)
        except HeldoutError as exc:
            raise VerificationError(f"the ledger is not an extension of the tree the --since report audited "
                                    f"(consistency from {checkpoint.size} to {size}): {exc.message}",
                                    old_size=checkpoint.size, new_size=size, old_root=checkpoint.root.hex(),
                                    new_root=ctx.report.ledger_head) from None
        below = sum(1 for bundle in ctx.records(BundleEntry) if int(bundle.index or 0) < checkpoint.size)
        if below != bundles:
            raise VerificationError("the --since report's bundle count is not the ledger's below its size",
                                    expected=below, found=bundles)
    except HeldoutError as exc:
        ctx.find("since", VerificationError(f"{exc.message}; audited in full instead", report_sha256=digest,
                                            **{k: v for k, v in exc.evidence.items() if k != "index"}))
        return
    ctx.trusted_size = checkpoint.size
    ctx.report.since = SinceLink(report_sha256=digest, ledger_entries=checkpoint.size,
                                 ledger_head=checkpoint.root.hex(), bundles=bundles)


def _ledger_finding(ctx: _Context, exc: HeldoutError) -> Finding:
    """The replay's failure as a finding; one raised at a checkpoint is located to entries or to the note."""
    finding = Finding.from_error("ledger", exc)
    size = exc.evidence.get("checkpoint")
    if not isinstance(size, int) or isinstance(size, bool):
        return finding
    walked = _walk_checkpoints(ctx.source)
    if walked is None or size not in walked[0] or walked[1] is None:
        # the checkpoint named does not verify (or the entries give every signed root): the note is at fault
        return replace(finding, file=finding.file or ctx.source.checkpoint_file(size))
    first, last = walked[1]
    return replace(finding, index=first if first == last else None, file=ctx.source.entries_file,
                   evidence={**finding.evidence, "entries": f"{first}..{last}"})


def _walk_checkpoints(source: AuditSource) -> tuple[set[int], tuple[int, int] | None] | None:
    """``ledger.replay.locate_damage`` over the source (streamed): the checkpoint sizes that verify under the
    genesis key and the entries that break the signed history. None when the entries or the checkpoints cannot
    be read at all."""
    try:
        _, genesis = next(iter(source.log.entries_bytes()), (0, b""))
        key = genesis_key(decode_entry(genesis, index=0))
        checkpoints = sorted(source.checkpoints(), key=lambda c: c.size)
        return locate_damage((data for _, data in source.log.entries_bytes()), checkpoints, key,
                             origin_of(ledger_id_of(genesis)))
    except HeldoutError:
        return None


#: After a failed replay, how many entries that do not decode are named before the rest are left unjudged.
MAX_DAMAGED_ENTRIES = 100


def _decode_entries(ctx: _Context, through: int | None = None) -> None:
    """The entries as the intact replay decoded them (each entry is decoded once); after a failed replay, which
    stops at the first fault, every entry is read and decoded on its own so that each damaged one is named.
    With ``through``, the entries after it are set aside (``ctx.later_entries``) before anything reads them."""
    if not ctx.report.ledger_intact:
        ctx.entries.clear()
        ctx.entry_bytes.clear()
        damaged = 0
        try:
            for index, data in ctx.source.log.entries_bytes():
                ctx.entry_bytes[index] = data
                try:
                    ctx.entries[index] = decode_entry(data, index=index)
                except HeldoutError as exc:
                    ctx.find("entry", exc, index=index, file=ctx.source.entries_file)
                    damaged += 1
                    if damaged == MAX_DAMAGED_ENTRIES:  # a crafted file of bad lines: named up to here, no further
                        ctx.find("entry", VerificationError(
                            f"{MAX_DAMAGED_ENTRIES} entries do not decode, up to entry {index}: the entries after it "
                            "are not judged", index=index), file=ctx.source.entries_file)
                        break
        except HeldoutError as exc:
            ctx.find("entry", exc)
            return
    if through is not None:
        for index in [i for i in ctx.entries if i > through]:
            ctx.later_entries[index] = ctx.entries.pop(index)
            ctx.entry_bytes.pop(index, None)
    ctx.count("entries", len(ctx.entries))
    genesis = ctx.entries.get(0)
    if genesis is None or genesis.get("type") != "genesis":
        return
    try:
        ctx.keys, ctx.key_indices = [genesis_key(genesis)], [0]
        declared = {ctx.keys[0].key_id: (0, ctx.keys[0])}  # each key id's first declaration: (index, key)
        for index, entry in sorted(ctx.entries.items()):
            if entry.get("type") == "key":
                key = genesis_key(entry)
                if key.key_id in declared:
                    first, known = declared[key.key_id]
                    # One id is declared once (FORMATS rule 3), as the writer refuses: whoever names the id means
                    # the first. Another key, or the same key under another name, also makes every export refuse
                    # the log (its key file could match one declaration only); even the same declaration again
                    # is a write the operator's own commands refuse.
                    what = "another key than" if known.public_key.b64 != key.public_key.b64 else \
                        "the same key under another name than" if known.name != key.name else "the same key as"
                    ctx.find("keys", VerificationError(
                        f"entry {index} declares key id {key.key_id!r} again, for {what} entry {first}: one key id "
                        "names one key, declared once", index=index,
                        field="key.key_id", found=f"{key.name} {key.public_key.b64}",
                        expected=f"{known.name} {known.public_key.b64}"))
                    continue
                declared[key.key_id] = (index, key)
                ctx.keys.append(key)
                ctx.key_indices.append(index)
    except (HeldoutError, KeyError, TypeError) as exc:
        ctx.find("keys", exc if isinstance(exc, HeldoutError) else VerificationError(str(exc)), index=0)


def _load_generations(ctx: _Context) -> None:
    try:
        ctx.generations = load_generations([(i, ctx.record(i) or e) for i, e in sorted(ctx.entries.items())], ctx.now,
                                           blobs=ctx.blobs())  # (the records the audit builds once)
        for anomaly in ctx.generations.anomalies:  # reported, and the audit goes on with the first entries
            ctx.find("generations", anomaly, index=anomaly.evidence.get("index"))
    except HeldoutError as exc:
        ctx.find("generations", exc)
    try:
        ctx.supersessions = load_supersessions(sorted(ctx.entries.items()))
        for anomaly in ctx.supersessions.anomalies:
            ctx.find("spec", anomaly, index=anomaly.evidence.get("index"))
    except HeldoutError as exc:
        ctx.find("spec", exc)


def _check_seals(ctx: _Context) -> None:
    for name, state in ctx.generations.items():
        try:
            data, file = ctx.source.seal_manifest(name)
        except HeldoutError as exc:
            ctx.find("seal", exc, index=state.seal_index)
            continue
        try:
            doc = parse_json_object(data, what=f"seal manifest {file}")
            trusted = ctx.trusted_for((doc.get("issuer") or {}).get("public_key_b64")
                                      if isinstance(doc.get("issuer"), dict) else None, used_at=state.seal_index)
            manifest = SealManifest.verify(doc, trusted)
            check_manifest_binding(manifest, sha256_hex(data), state, ctx.source.ledger_id,
                                   ctx.entries.get(state.seal_index))
            if not ctx.keys:
                raise VerificationError("no ledger key is known to check the draw's checkpoint",
                                        index=state.seal_index)
            check_draw_binding(manifest, state, ctx.entries.get, ctx.source.log.root, ctx.keys[0], ctx.source.origin)
        except HeldoutError as exc:
            ctx.find("seal", exc, index=state.seal_index, file=file)
            continue
        ctx.manifests[name] = manifest
        ctx.count("seals")


def _check_intents(ctx: _Context) -> None:
    """Every seal intent is logged, so a retried draw shows: a generation whose intent was logged more than once,
    and an intent that no seal manifest draws from (abandoned, or a draw thrown away), are findings."""
    intents: dict[str, list[int]] = {}
    for intent in ctx.records(IntentEntry):
        intents.setdefault(intent.generation, []).append(int(intent.index or 0))
    used = {manifest.draw.get("intent_index") for manifest in ctx.manifests.values() if manifest.draw}
    # With run_audit's ``through``: a generation sealed after it was pending then, not abandoned (a seal that
    # draws from another intent logs that intent too, and the retry is a finding at it)
    sealed_later = {entry.get("generation") for entry in ctx.later_entries.values() if entry.get("type") == "seal"}
    for name, indices in intents.items():
        if len(indices) > 1:
            listed = ", ".join(str(i) for i in indices)
            # (placed at the second intent: where the retry shows, whatever is logged after it)
            ctx.find("draw", VerificationError(
                f"the seal intent of {name} was logged {len(indices)} times (entries {listed}): its draw was "
                "retried", generation=name, intents=indices), index=indices[1])
            continue
        sealed = ctx.generations.get(name)
        if sealed is not None and name not in ctx.manifests:
            continue  # sealed, but its manifest failed (a finding of its own): which intent it draws from is unknown
        if sealed is None and name in sealed_later:
            continue
        if indices[0] not in used:
            ctx.find("draw", VerificationError(
                f"the seal intent of {name} at entry {indices[0]} was never sealed: its draw is pending (a seal "
                "that stopped after logging it; running the same seal again resumes it) or was abandoned",
                generation=name, intents=indices), index=indices[0])


def _check_reveals(ctx: _Context) -> None:
    for name, state in ctx.generations.items():
        if state.reveal_index is None:
            continue
        index = state.reveal_index
        try:
            data = ctx.blob(state.reveal_sha256, index=index, what="reveal_sha256")
            manifest = ctx.manifests.get(name)
            if manifest is None:
                raise VerificationError(f"the reveal of {name} cannot be checked: its seal manifest failed",
                                        index=index)
            reveal = verify_reveal(parse_json_object(data, what=f"reveal of {name}"), manifest,
                                   image_blobs=ctx.blobs(), manifest_sha256=state.manifest_sha256)
        except HeldoutError as exc:
            file = exc.evidence.get("file") or (ctx.source.blob_file(state.reveal_sha256)
                                                if isinstance(state.reveal_sha256, str) else None)
            ctx.find("reveal", exc, index=index, file=file)
            continue
        ctx.reveals[name] = reveal
        ctx.count("reveals")
    _check_private_draws(ctx)
    _check_disjoint(ctx)
    _check_published_reveals(ctx)


def _check_private_draws(ctx: _Context) -> None:
    """The operator's own audit checks the draw of still-sealed generations too, from their private openings
    (which hold the committed pools), and their leakage budget from the labels; a third party checks both at
    reveal."""
    for name, state in ctx.generations.items():
        manifest = ctx.manifests.get(name)
        if state.reveal_index is not None or manifest is None or manifest.membership == "public":
            continue
        try:
            opening = ctx.opening(state)
            verify_draw(opening, manifest)
        except IncompleteError:
            continue  # a third party's export: the draw is checked when the generation is revealed
        except HeldoutError as exc:
            ctx.find("draw", exc, index=state.seal_index)
            continue
        try:
            verify_budget(manifest, opening, index=state.seal_index)  # exact, from the private labels
        except HeldoutError as exc:
            ctx.find("seal", exc, index=state.seal_index)


def _check_disjoint(ctx: _Context) -> None:
    """No two generations share a case (the seal draws each one's cases from the pool less every case an earlier
    generation holds, and never from the public split): a generation that holds a case an earlier one holds
    was drawn with that rule skipped, and whatever that case's label told is not held out. Cases compare by
    content (image and label: ``content_sha256``, so the same image added again under a new id is the same
    case) and by case id. The operator's audit compares every generation (their private openings); a third
    party the revealed ones."""
    seen: dict[tuple[str, str], str] = {}
    for name, state in ctx.generations.items():  # in seal order: the later generation is the one at fault
        opening = ctx.reveals.get(name)
        if opening is None:
            try:
                opening = ctx.opening(state)
            except HeldoutError:
                continue  # still sealed to a third party; a damaged opening is reported by the draw check
        shared: dict[str, list[str]] = {}
        for case in opening.openings:
            earlier = seen.get((case.task, case.content_sha256)) or seen.get((case.task, case.case_id))
            if earlier is not None:
                shared.setdefault(earlier, []).append(f"{case.task}/{case.case_id}")
        for earlier, cases in shared.items():
            ctx.find("draw", VerificationError(
                f"{name} holds {len(cases)} case{'s' if len(cases) > 1 else ''} that {earlier} held before it "
                f"(first: {cases[0]}): generations are disjoint", index=state.seal_index, field="cases",
                generation=name, earlier=earlier, found=len(cases)))
        for case in opening.openings:
            seen.setdefault((case.task, case.content_sha256), name)
            seen.setdefault((case.task, case.case_id), name)


def _check_published_reveals(ctx: _Context) -> None:
    """A published reveal file beside the seal manifests must be the very blob its reveal entry logged (with
    run_audit's ``through``: a reveal logged after it is that entry's, judged with the log it belongs to)."""
    revealed_later = {entry.get("generation") for entry in ctx.later_entries.values() if entry.get("type") == "reveal"}
    for name, state in ctx.generations.items():
        if state.reveal_index is None and name in revealed_later:
            continue
        try:
            published = ctx.source.published_reveal(name)
        except HeldoutError as exc:
            ctx.find("reveal", exc, index=state.reveal_index)
            continue
        if published is None:
            continue
        data, file = published
        found = sha256_hex(data)
        if state.reveal_index is None:
            ctx.find("reveal", VerificationError(f"a reveal of {name} is published but no entry reveals it",
                                                 found=found), index=state.seal_index, file=file)
        elif found != state.reveal_sha256:
            ctx.find("reveal", VerificationError(f"the published reveal of {name} is not the one entry "
                                                 f"{state.reveal_index} logged", expected=state.reveal_sha256,
                                                 found=found), index=state.reveal_index, file=file)


def _labels_for(ctx: _Context, state: GenerationState, task: str) -> tuple[Any, str]:
    """The labels a bundle on ``state``/``task`` was scored against, in evaluation order, and their hash
    (``labels_hash``); worked out once per generation and task, not once per bundle."""
    known = ctx.labels.get((state.name, task))
    if known is None:
        labels = _checked_labels(ctx, state, task)
        known = ctx.labels[(state.name, task)] = (labels, sha256_hex(labels_bytes(labels)))
    return known


def _checked_labels(ctx: _Context, state: GenerationState, task: str) -> Any:
    reveal = ctx.reveals.get(state.name)
    if reveal is None:
        if state.reveal_index is not None:
            # the reveal's own finding names the fault (at its entry); its bundles are not re-derived on labels
            # that failed their checks, and are no fault of theirs (a bundle logged before a forged reveal was
            # sound when it was logged: a claim on it is judged on the log as it stood then)
            raise IncompleteError(f"the reveal of {state.name} (entry {state.reveal_index}) failed its checks: its "
                                  "labels cannot be trusted, so its bundles are not re-derived",
                                  field="reveal", found=state.reveal_index)
        reveal = check_opening(ctx.opening(state), state)
        ctx.reveals[state.name] = reveal
    case_ids, labels = revealed_labels(reveal, task)
    if not case_ids:
        raise VerificationError(f"generation {state.name} has no cases of task {task}", field="task", found=task)
    return labels


@dataclass(frozen=True)
class _Started:
    """A bundle whose checks before the re-derivation passed, with its re-derivation under way (``pending``;
    None: not re-derived by this audit, see run_audit's ``rederive``)."""

    entry: BundleEntry
    state: GenerationState
    evaluation: dict[str, Any]
    pending: Pending | None


def _check_bundles(ctx: _Context, tick: AuditProgress, jobs: int) -> None:
    """Each bundle is checked in three steps: what needs the audit's state (this process), its re-derivation
    (in a worker when ``jobs`` > 1), then what follows from the re-derived evaluation, in ledger order, so
    the findings and the report are the same whatever ``jobs`` is."""
    bundles = [(int(b.index or 0), b) for b in ctx.records(BundleEntry)]
    ctx.report.bundles = len(bundles)
    started: deque[tuple[int, BundleEntry, _Started | HeldoutError]] = deque()
    done = 0

    def finish_one() -> None:
        nonlocal done
        index, entry, begun = started.popleft()
        try:
            if isinstance(begun, HeldoutError):
                raise begun
            _finish_bundle(ctx, index, begun)
        except IncompleteError as exc:
            ctx.report.not_rederived.append(Unrederived(
                index=index, generation=entry.generation, task=entry.task, model_id=entry.model_id,
                reason=exc.message,
                evidence={k: v for k, v in exc.evidence.items() if k != "index" and isinstance(v, (str, int))}))
        except HeldoutError as exc:
            ctx.find("bundle", exc, index=index)
        done += 1
        tick("bundles", done, ctx.report.bundles)

    trusted = [index for index, _ in bundles if index < ctx.trusted_size]
    ctx.report.rederived += len(trusted)  # re-derived by the audits the trusted report chains to
    done = len(trusted)
    bundles = bundles[len(trusted):]
    with bundle_rederiver(jobs, len(bundles)) as (submit, in_flight):
        for index, entry in bundles:
            try:
                begun: _Started | HeldoutError = _start_bundle(ctx, index, entry, submit)
            except HeldoutError as exc:
                begun = exc
            started.append((index, entry, begun))
            while len(started) > in_flight:
                finish_one()
        while started:
            finish_one()
    if ctx.report.since is not None:
        ctx.report.since = replace(ctx.report.since, rederived_now=ctx.report.rederived - len(trusted))


def _expect(index: int, member: str, expected: Any, found: Any) -> None:
    if expected != found:
        raise VerificationError(f"bundle entry {index}: {member} of the evaluation is not the entry's",
                                index=index, field=member, expected=expected, found=found)


def _start_bundle(ctx: _Context, index: int, entry: BundleEntry, submit: Submit) -> _Started:
    """The checks that need the audit's state, then the re-derivation submitted."""
    name = entry.generation
    state = ctx.generations.get(name)
    if state is None or state.seal_index > index:
        raise VerificationError(f"bundle entry {index} is on {name}, which no earlier entry seals", index=index,
                                field="generation", found=name)
    if state.retire_index is not None and state.retire_index < index:
        raise VerificationError(f"bundle entry {index} was appended after {name} was retired (entry "
                                f"{state.retire_index})", index=index, field="generation")
    created = entry.created
    if not state.created <= created < state.expiry:
        raise VerificationError(f"bundle entry {index} was evaluated while {name} was not current",
                                index=index, field="created_utc", expected=f"{format_utc(state.created)} .. "
                                f"{format_utc(state.expiry)}", found=format_utc(created))
    if entry.task not in state.tasks:  # read from the seal entry: no labels needed, so a third party checks it too
        raise VerificationError(f"bundle entry {index} is on task {entry.task!r}, which {name} does not have",
                                index=index, field="task", expected=sorted(state.tasks), found=entry.task)
    if state.budget_bits is not None and "leakage_bits" not in entry:  # a finding of its own; the bundle is
        # still checked and re-derived, and charged from its evaluation so the budget judges the bundles after it
        ctx.find("bundle", VerificationError(
            f"bundle entry {index} states no leakage_bits: a bundle on a generation with a leakage budget states its "
            "charge (FORMATS section 5)", index=index, field="leakage_bits", expected="a number", found=None),
            index=index)
    over_budget = state.budget_error(index)
    if over_budget is not None:
        raise over_budget
    again = ctx.first_run(entry)
    if again < index:  # the latest bundle is what a passport cites: an earlier run logged again would be it
        # (a finding of its own: the bundle's other checks still run)
        ctx.find("bundle", VerificationError(
            f"bundle entry {index} logs the stored predictions of entry {again} again (model {entry.model_id}, "
            f"{name}/{entry.task}, under the same spec version): a run is logged once (under a new spec version, "
            "it is evaluated anew)", index=index, field="predictions_sha256",
            expected=f"not the predictions of entry {again}", found=entry.predictions_sha256), index=index)
    withholding = state.release_mode in WITHHOLDING_MODES
    if withholding:
        if "spec_version" in entry:  # (the evaluation may be withheld: its spec is known from the entry's copy)
            require_spec_in_force(ctx.supersessions, "bundle", index, entry.get("spec_version"), created)
        _check_entry_seed(ctx, index, entry)
        _check_release_record(ctx, index, entry, state)
        for member, digest in (("evaluation_sha256", entry.evaluation_sha256),
                               ("predictions_sha256", entry.predictions_sha256)):
            if not ctx.has_blob(digest):
                if state.retire_index is not None:  # published at retirement, as the seal promised: a missing
                    # one hides what the release record committed to (a released value that was not the answer)
                    raise VerificationError(
                        f"bundle entry {index}: {name} is retired but its withheld {member.removesuffix('_sha256')} "
                        "blob is not published, so its released value cannot be checked", index=index,
                        field=member, found=digest)
                raise IncompleteError(
                    f"bundle entry {index}: its evaluation and predictions are withheld under {state.release_mode} "
                    f"release until {name} is retired", index=index, field=member)
    elif "release" in entry:
        raise VerificationError(f"bundle entry {index} carries a release record on a full-release generation",
                                index=index, field="release")
    evaluation_data = ctx.blob(entry.evaluation_sha256, index=index, what="evaluation_sha256")
    evaluation = parse_json_object(evaluation_data, what=f"evaluation of entry {index}")
    ctx.evaluation_specs[index] = evaluation.get("spec_version")
    require_spec_in_force(ctx.supersessions, "bundle", index, evaluation.get("spec_version"), created)
    disagreement = entry.evaluation_disagreement(evaluation, cases_for=n_cases_for, sealed=state.created)
    if disagreement is not None:
        raise VerificationError(f"bundle entry {index}: {disagreement.reason}", index=index,
                                field=disagreement.member, expected=disagreement.expected, found=disagreement.found)
    _expect(index, "split_origin", state.split_origin(entry.task), evaluation.get("split_origin"))
    _check_model_dimensions(ctx, index, entry, evaluation)
    if "leakage_bits" in entry:
        _check_charge(index, entry, evaluation, state)
    if ctx.rederive is not None and index not in ctx.rederive:  # (checked in all but its re-derivation)
        return _Started(entry=entry, state=state, evaluation=evaluation, pending=None)
    predictions_data = ctx.blob(entry.predictions_sha256, index=index, what="predictions_sha256")
    labels, labels_hash = _labels_for(ctx, state, entry.task)
    if "labels_hash" in entry and labels_hash != entry["labels_hash"]:
        raise VerificationError(f"bundle entry {index}: the labels of {name}/{entry.task} are not the ones "
                                "the bundle was scored against", index=index, field="labels_hash",
                                expected=entry["labels_hash"], found=labels_hash)
    # The bundle is re-derived under the spec version its evaluation names (unknown: incomplete, exit 5).
    metrics_for(evaluation.get("spec_version"))
    job = RederiveJob(index=index, evaluation=evaluation_data, predictions=predictions_data, labels=labels)
    return _Started(entry=entry, state=state, evaluation=evaluation, pending=submit(job))


def _check_entry_seed(ctx: _Context, index: int, entry: BundleEntry) -> None:
    """The entry's copy of its evaluation's seed, where the spec of its run fixes the seed (MedEval-1 v0.2's
    amendment A1): judged from the entry, so that a withheld evaluation (no blob for a third party) is judged
    alike by every verifier."""
    spec = bundle_run(entry, ctx.supersessions)[-1]
    fixed = BundleEntry.SPEC_SEEDS.get(spec)
    if fixed is not None and "seed" not in entry:  # (else a withheld evaluation's seed waits for the reveal)
        raise VerificationError(
            f"bundle entry {index} states no seed: under {spec} an entry states its evaluation's seed, the one "
            f"seed {fixed} (a withheld evaluation is otherwise judged only once its generation is retired)",
            index=index, field="seed", expected=fixed, found=None)
    if fixed is not None and entry["seed"] != fixed:
        raise VerificationError(
            f"bundle entry {index} states seed {entry['seed']!r}: under {spec} every evaluation uses the one seed "
            f"{fixed} (a seed chosen per evaluation could be ground for a better interval)", index=index,
            field="seed", expected=fixed, found=entry["seed"])


def _check_model_dimensions(ctx: _Context, index: int, entry: BundleEntry, evaluation: Mapping[str, Any]) -> None:
    """A model trains or not, takes a text prompt or not, in every evaluation: its optional dimensions
    (``limited_data``, ``spec_sensitivity``) are those of its first bundle on a generation that releases in full
    (FORMATS rule 10). Otherwise the operator leaves a dimension out of the bundles it would lower. (A
    withholding generation's evaluations are published only at its retirement: were one the reference, the
    operator, who holds it, and a third party, who does not yet, would judge by two references, and the
    reference would change at the reveal.)"""
    found = optional_dimensions(evaluation)
    if entry.model_id not in ctx.model_dimensions:
        ctx.model_dimensions[entry.model_id] = None
        for earlier in ctx.model_bundles(entry.model_id):
            at = int(earlier.index or 0)
            state = ctx.generations.get(earlier.generation)
            if state is None or state.release_mode in WITHHOLDING_MODES:
                continue
            if at == index:
                first: Mapping[str, Any] = evaluation
            elif ctx.has_blob(earlier.evaluation_sha256):
                try:  # (an incremental audit, or a bundle whose own checks failed: read here, once per model)
                    first = parse_json_object(ctx.source.blob(earlier.evaluation_sha256), what="evaluation")
                except HeldoutError:
                    continue  # (that bundle's own check names it)
            else:
                continue
            dimensions = optional_dimensions(first)
            if dimensions is not None:
                ctx.model_dimensions[entry.model_id] = (at, dimensions)
                break
    reference = ctx.model_dimensions[entry.model_id]
    if reference is not None and found is not None and found != reference[1]:
        def named(names: frozenset[str]) -> str:
            return " and ".join(sorted(names)) or "neither"
        raise VerificationError(
            f"bundle entry {index}: its evaluation has {named(found)} of the optional dimensions, and model "
            f"{entry.model_id}'s first bundle (entry {reference[0]}) has {named(reference[1])}: a model trains or "
            "not, takes a prompt or not, in every evaluation (a dimension left out raises the composite index)",
            index=index, field="dimensions", expected=sorted(reference[1]), found=sorted(found))


def _finish_bundle(ctx: _Context, index: int, begun: _Started) -> None:
    if begun.pending is not None:
        begun.pending.result().raise_problem(lambda: ctx.source.blob_file(begun.entry.evaluation_sha256))
    if begun.state.release_mode in WITHHOLDING_MODES:
        _check_release_value(ctx, index, begun.entry, begun.state, begun.evaluation)
    if begun.pending is not None:
        ctx.report.rederived += 1


def _release_log(ctx: _Context, state: GenerationState) -> ReleaseLog:
    """The public answers on ``state``'s generation, read once per audit (each bundle asks for the transcript
    before it)."""
    if state.name not in ctx.release_logs:
        ctx.release_logs[state.name] = ReleaseLog.of(
            (b for b in ctx.records(BundleEntry) if int(b.index or 0) > state.seal_index), state.name)
    return ctx.release_logs[state.name]


def _check_release_record(ctx: _Context, index: int, entry: BundleEntry, state: GenerationState) -> None:
    """What anyone can check of a withheld bundle from public data: its release record is one the mechanism
    could have produced after the transcript before it, and its charge is that answer's description length."""
    release = entry.get("release")
    task = entry.task
    step = state.release_step
    if not isinstance(release, dict) or release.get("mode") != state.release_mode or step is None:
        raise VerificationError(f"bundle entry {index} on {state.name} lacks its {state.release_mode} release record",
                                index=index, field="release")
    transcript = _release_log(ctx, state).before(task, index)
    dependent = release.get("label_dependent")
    value = release.get("value")
    if not isinstance(dependent, bool):
        raise VerificationError(f"bundle entry {index}: release.label_dependent is not a boolean", index=index,
                                field="release.label_dependent")
    if dependent and not on_release_grid(value, step):  # (else a value carries more bits than it is charged)
        raise VerificationError(f"bundle entry {index}: its released value {value!r} is not a multiple of the step "
                                f"{step} in [0, 100], what {state.release_mode} releases", index=index,
                                field="release.value", found=value)
    if state.release_mode == "ladder":
        best = transcript.best()
        if dependent != (value is not None) or (value is not None and best is not None and value < best + step - 1e-9):
            raise VerificationError(f"bundle entry {index}: {value!r} is not a ladder answer after best {best}",
                                    index=index, field="release.value", found=value)
    else:
        estimate = release.get("public_estimate")
        public_index = release.get("public_bundle")
        public_entry = ctx.record(public_index) if isinstance(public_index, int) else None
        if not isinstance(public_entry, BundleEntry) or not isinstance(public_index, int) \
                or public_entry.generation != "public" \
                or public_entry.model_id != entry.model_id or public_entry.task != task \
                or public_index >= index:
            raise VerificationError(f"bundle entry {index}: its public estimate cites no earlier public bundle of "
                                    "the same model and task", index=index, field="release.public_bundle")
        earlier = ctx.public_bundles(entry.model_id, task)
        latest = earlier[bisect_left(earlier, index) - 1]  # (public_index, below index, is among them)
        if public_index != latest:  # the estimate is the latest public run's, not one picked after the fact
            raise VerificationError(f"bundle entry {index}: its public estimate cites public bundle {public_index}, "
                                    f"not the model's latest before it ({latest})", index=index,
                                    field="release.public_bundle", expected=latest, found=public_index)
        other_run = entry.run_difference(public_entry)
        if other_run is not None:  # another seed or configuration under the same model id is another model
            member, own, cited = other_run
            raise VerificationError(f"bundle entry {index}: its public estimate is of another run of the model "
                                    f"(public bundle {public_index} has {member} {cited!r}, this bundle {own!r})",
                                    index=index, field=f"release.public_bundle.{member}", expected=own, found=cited)
        public_eval = parse_json_object(ctx.blob(public_entry.evaluation_sha256, index=public_index,
                                                 what="evaluation_sha256"), what=f"evaluation of entry {public_index}")
        score = released_score(public_eval)
        if score is None or estimate != round(score, 6) or (not dependent and value != estimate):
            raise VerificationError(f"bundle entry {index}: the public estimate is not the public bundle's score",
                                    index=index, field="release.public_estimate", expected=score, found=estimate)
    try:
        bits = answer_bits(state.release_mode, transcript, dependent, step)
    except HeldoutError as exc:
        raise VerificationError(f"bundle entry {index}: {exc.message}", index=index, field="release") from None
    if release.get("bits") != bits or entry.get("leakage_bits") != bits:
        raise VerificationError(f"bundle entry {index}: its charge is not the description length of its answer",
                                index=index, field="leakage_bits", expected=bits, found=entry.get("leakage_bits"))


def _check_release_value(ctx: _Context, index: int, entry: BundleEntry, state: GenerationState,
                         evaluation: Mapping[str, Any]) -> None:
    """With the withheld evaluation at hand (operator, or after retirement): the released value is the
    mechanism's answer for the score the evaluation holds."""
    release = entry["release"]
    task = entry.task
    step = state.release_step
    assert step is not None
    log = _release_log(ctx, state)
    transcript = log.before(task, index)
    score = released_score(evaluation)
    if state.release_mode == "ladder":
        expected = None if score is None else ladder_release(score, transcript.best(), step)
    else:
        secret = ctx.source.noise_secret(state)
        answer = thresholdout_answer(score if score is not None else float("nan"), float(release["public_estimate"]),
                                     secret=secret, threshold=float(state.release["threshold"]),
                                     sigma=float(state.release["sigma"]), step=step, task=task,
                                     answer=log.place(task, index),
                                     last_over_threshold=log.last_over_threshold(task, index))
        expected = answer.value
        if answer.over_threshold != release.get("label_dependent"):
            raise VerificationError(f"bundle entry {index}: the Thresholdout branch is not the one its noise gives",
                                    index=index, field="release.label_dependent",
                                    expected=answer.over_threshold, found=release.get("label_dependent"))
    if expected != release.get("value"):
        raise VerificationError(f"bundle entry {index}: the released value is not the {state.release_mode} answer "
                                "for the evaluation's score", index=index, field="release.value", expected=expected,
                                found=release.get("value"))


def _check_charge(index: int, entry: BundleEntry, evaluation: dict[str, Any], state: GenerationState) -> None:
    found = entry["leakage_bits"]
    if state.release_mode in WITHHOLDING_MODES:
        return  # checked against the transcript by _check_release_record
    expected = round(charge_bits(evaluation), 6)
    if found != expected:
        raise VerificationError(f"bundle entry {index}: leakage_bits does not match its evaluation", index=index,
                                field="leakage_bits", expected=expected, found=found)


def _check_passports(ctx: _Context) -> None:
    for passport in ctx.records(PassportEntry):
        index, digest = int(passport.index or 0), passport.passport_sha256
        try:
            data = ctx.blob(digest, index=index, what="passport_sha256")
            check_passport_document(ctx, index, parse_json_object(data, what=f"passport of entry {index}"))
        except HeldoutError as exc:
            ctx.find("passport", exc, index=index,
                     file=exc.evidence.get("file") or (ctx.source.blob_file(digest) if isinstance(digest, str)
                                                       else None))
            continue
        ctx.count("passports")


def _check_blob_files(ctx: _Context) -> None:
    """Every referenced blob the source holds, hash-checked once (the checks above read most of them).

    An incremental audit re-derives only the bundles appended since its trusted report, but still hash-checks
    every blob of the entries before it (red-team round 15: a blob damaged at rest after a clean audit passed
    every later ``--since`` audit): hashing is a small part of re-deriving. A bundle's blob missing from the
    operator's store is a finding of the full audit (it cannot re-derive the bundle), so of an incremental one
    too (an export's missing blobs are its manifest's to declare: the export check names any it does not)."""
    for index, entry in sorted(ctx.entries.items()):
        for digest in blob_references(entry):
            if digest in ctx.verified_blobs:
                continue
            if not ctx.has_blob(digest):
                if index < ctx.trusted_size and ctx.source.mode == "operator" and entry.get("type") == "bundle":
                    ctx.find("blob", VerificationError(
                        f"blob {digest} of entry {index} is gone from the store since the trusted audit report",
                        index=index, expected=digest), index=index, file=ctx.source.blob_file(digest))
                continue
            try:
                ctx.blob(digest, index=index, what="referenced")
            except HeldoutError as exc:
                ctx.find("blob", exc, index=index)


def _check_export(ctx: _Context) -> None:
    """A third party's export: every manifest member against the files, each key file against the ledger's
    declared keys, no unreferenced blob file (``ledger.LedgerExport.manifest_problems``)."""
    if not ctx.report.ledger_intact:
        return  # the entries do not replay: the manifest cannot be judged against them
    try:
        for problem in ctx.source.export_problems():
            ctx.find("export", problem, file=problem.evidence.get("file"))
        # (a seal file is published for a seal logged after ``through`` too: the export is judged whole)
        for problem in ctx.source.stray_seal_files(sorted({**ctx.entries, **ctx.later_entries}.items())):
            ctx.find("export", problem, file=problem.evidence.get("file"))
    except HeldoutError as exc:
        ctx.find("export", exc)


def check_passport_document(ctx: _Context, index: int, doc: dict[str, Any]) -> None:
    """The passport logged at ``index`` against this ledger, by the one passport-vs-log verifier
    (``heldout.passports.check_passport_on_ledger``) that ``passport verify`` uses too."""
    if ctx.facts is None:  # one set of facts for every passport: what each check derives is derived once
        ctx.facts = LedgerFacts(ledger_id=ctx.source.ledger_id, origin=ctx.source.origin, entries=ctx.entries,
                                entry_bytes=ctx.entry_bytes.__getitem__, root=ctx.source.log.root)
    check_passport_on_ledger(doc, ctx.facts, at=ctx.now, logged_at=index)


def _generation_summary(state: GenerationState) -> dict[str, Any]:
    return {"state": state.state, "set_hash": state.set_hash, "seal_index": state.seal_index,
            "expiry_utc": format_utc(state.expiry), "bundles": len(state.bundles),
            "revealed": state.reveal_index is not None, "retired": state.retire_index is not None}
