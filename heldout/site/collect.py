"""What the public site shows, read from a public export and verified before anything is rendered.

The build fails closed: the export is replayed (``LedgerExport.verify``, every blob re-hashed), and every
passport the ledger logged is verified against it with the same code as ``heldout passport verify --from``
(``heldout.passports.check_passport_on_ledger``). Anything that does not verify raises, naming the file, and
nothing is written. The operator store is read through the same export view (an export made into a temporary
folder), so a store build and an export build see the same bytes.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from heldout.entries import PassportEntry, records
from heldout.generations import GenerationState, load_generations, open_ledger
from heldout.generations.verify import logged_seal_files, published_seal_problems, verify_published_reveal
from heldout.passports import LedgerFacts, check_passport_on_ledger, require_implemented_spec
from heldout.site.paths import copied_seal_path, passport_page
from heldout.specs import Supersession, load_supersessions
from heldout.store import Store
from keys import HeldoutError, TrustedKey, UsageError, VerificationError, b64encode
from ledger import BlobStore, SourceUnavailable, export_ledger, open_export
from ledger.checkpoint import Checkpoint
from ledger.entries import genesis_key
from ledger.public import PublicLog, open_public_log
from seals import PassportVerdict, parse_json_object, parse_utc

if TYPE_CHECKING:  # (the audit is imported where the build runs it)
    from heldout.audit.report import Finding


class SiteBuildRefused(VerificationError):
    """Something the site would publish does not verify (exit 1): the build stops and names the file."""


@dataclass(frozen=True)
class PassportRecord:
    """One logged passport, verified at the reference time."""

    entry_index: int
    sha256: str
    data: bytes  # the blob, byte for byte (what was signed and logged)
    doc: dict[str, Any]
    verdict: PassportVerdict
    exit_code: int
    superseded_by: int | None = None  # a later passport entry for the same model and generation

    @property
    def model_id(self) -> str:
        return self.verdict.passport.model_id

    @property
    def generation(self) -> str:
        return str((self.verdict.passport.heldout or {}).get("generation"))

    @property
    def page(self) -> str:
        """Its page: the entry index and a short ASCII part of the model id and generation
        (:func:`heldout.site.paths.passport_page`, bounded whatever was logged)."""
        return passport_page(self.entry_index, self.model_id, self.generation)


@dataclass(frozen=True)
class LaterFinding:
    """An audit finding at an entry after the site's last passport: its check, entry and message."""

    check: str
    index: int
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "index": self.index, "message": self.message}


@dataclass
class SiteData:
    export: PublicLog
    at: datetime
    at_basis: str
    release_tag: str | None
    ledger_id: str
    origin: str
    size: int
    keys: list[tuple[int, TrustedKey]]  # (declaring entry, key): the keys the site's Verify buttons trust
    checkpoints: list[Checkpoint]
    generations: dict[str, GenerationState]
    supersessions: dict[str, Supersession]
    passports: list[PassportRecord]
    entry_types: dict[int, str] = field(default_factory=dict)
    #: The export's seal files the site publishes, by site path (``seals/<name>``), with their SHA-256: those
    #: whose name is a plain ASCII name (:func:`heldout.site.paths.copied_seal_path`).
    seal_files: dict[str, str] = field(default_factory=dict)
    #: Audit findings at entries after the last passport's (which the passports do not rest on), in the
    #: audit's order: the site is built, and says what they are.
    later_findings: tuple[LaterFinding, ...] = ()
    _head_proofs: dict[int, list[str]] = field(default_factory=dict)

    @property
    def head(self) -> Checkpoint:
        return self.checkpoints[-1]

    def head_proof(self, index: int) -> list[str]:
        """The inclusion proof of entry ``index`` in the head checkpoint (base64 hashes), computed once."""
        if index not in self._head_proofs:
            path = self.export.inclusion_proof(index, self.head.size).path
            self._head_proofs[index] = [b64encode(h) for h in path]
        return self._head_proofs[index]


@contextmanager
def export_view(*, store: Path | None, from_dir: str | Path | None) -> Iterator[PublicLog]:
    """The public copy to build from: ``from_dir`` as given (an export, or a tiles directory or URL), or the
    store's default ledger exported into a temporary folder exactly as ``heldout ledger export`` would
    (nothing under ``private/`` is read)."""
    if (store is None) == (from_dir is None):
        raise UsageError("give exactly one of --store DIR or --from EXPORT", field="source")
    if from_dir is not None:
        yield open_public_log(from_dir)
        return
    assert store is not None
    st = Store.open(store)
    if not st.root.is_dir():
        raise UsageError(f"no store at {st.root}", path=str(st.root))
    ledger = open_ledger(st, read_only=True)  # the store's default ledger, on whichever backend holds it
    with tempfile.TemporaryDirectory(prefix="heldout-site-") as tmp:
        try:
            export_ledger(ledger, Path(tmp) / "export", blobs=BlobStore(st.blobs), seals=st.seals,
                          seal_files=logged_seal_files(ledger.entries()))
        finally:
            ledger.close()
        yield open_export(Path(tmp) / "export")


def default_reference_time(export: PublicLog) -> datetime:
    """Without --at or $HELDOUT_NOW the site is built as of its ledger's last entry: a time taken from the
    data, so that rebuilding the same export gives the same bytes."""
    last = export.entry(export.size - 1)
    return parse_utc(str(last.get("created_utc")), what=f"entry {export.size - 1} created_utc")


def _ledger_keys(export: PublicLog) -> list[tuple[int, TrustedKey]]:
    keys: list[tuple[int, TrustedKey]] = []
    for index, entry in export.entries():
        if entry.get("type") in ("genesis", "key"):
            keys.append((index, genesis_key(entry)))
    return keys


def _refuse(what: str, path: Path | str, exc: HeldoutError) -> SiteBuildRefused:
    return SiteBuildRefused(f"{what} does not verify, nothing was published: {exc.message}", file=str(path),
                            **{k: v for k, v in exc.evidence.items() if k not in ("file", "path")})


SiteProgress = Callable[[str, int, int], None]


def _quiet(phase: str, done: int, total: int) -> None:
    return None


def collect(export: PublicLog, *, at: datetime | None, release_tag: str | None,
            progress: SiteProgress = _quiet) -> SiteData:
    """Replay and verify ``export``, then verify every logged passport at the reference time."""
    try:
        report = export.verify(check_blobs=True, progress=lambda done, total: progress("replaying the export",
                                                                                     done, total))
    except SourceUnavailable:  # not the export's fault: exit 2, as the other verifiers
        raise
    except HeldoutError as exc:
        raise SiteBuildRefused(f"the export does not verify, nothing was published: {exc.message}",
                               **exc.evidence) from None
    at_basis = "given with --at or $HELDOUT_NOW"
    if at is None:
        at = default_reference_time(export)
        at_basis = f"the time of the ledger's last entry ({export.size - 1}); give --at to build as of another time"
    keys = _ledger_keys(export)
    entries = list(export.entries())
    facts = LedgerFacts.of(export, export.blobs)  # read once: the export does not change during a build
    generations = load_generations(entries, at, blobs=export.blobs)
    supersessions = load_supersessions(entries)
    entry_types = {index: str(entry.get("type")) for index, entry in entries}
    _check_seal_files(export, entries)
    _check_reveals(export, generations, [key for _, key in keys], at)
    seal_files = _published_seals(export, entries)
    passports: list[PassportRecord] = []
    latest: dict[tuple[str, str], int] = {}
    passport_entries = records(entries, PassportEntry)
    for done, entry in enumerate(passport_entries, start=1):
        progress("verifying passports", done, len(passport_entries))
        index, digest = int(entry.index or 0), entry.passport_sha256
        path = export.location(export.blob_file(digest))
        if not export.has_blob(digest):
            raise SiteBuildRefused(f"passport entry {index} names a blob the export does not hold", index=index,
                                   file=str(path))
        try:
            data = export.blob(digest)
            doc = parse_json_object(data, what=f"passport {digest}")
            # judged as logged by this entry (its model, generation, index and date), as the audit judges each
            # entry; the issuer key must be one the ledger declares
            verdict = check_passport_on_ledger(doc, facts, at=at, logged_at=index)
            require_implemented_spec(verdict)  # a "valid" on numbers nobody here can re-derive is not published
        except HeldoutError as exc:
            raise _refuse(f"passport of entry {index}", path, exc) from None
        record = PassportRecord(entry_index=index, sha256=digest, data=data, doc=doc, verdict=verdict,
                                exit_code=verdict.exit_code)
        key = (record.model_id, record.generation)
        if key in latest:
            earlier = latest[key]
            passports[earlier] = _superseded(passports[earlier], index)
        latest[key] = len(passports)
        passports.append(record)
    later = _require_clean_log(export, passports, report.ledger_id, at)  # (after the checks above: they name files)
    return SiteData(export=export, at=at, at_basis=at_basis, release_tag=release_tag, ledger_id=report.ledger_id,
                    origin=report.origin, size=report.size, keys=keys, checkpoints=export.checkpoints(),
                    generations=generations, supersessions=supersessions, passports=passports,
                    entry_types=entry_types, seal_files=seal_files, later_findings=later)


def _require_clean_log(export: PublicLog, passports: list[PassportRecord], ledger_id: str,
                       at: datetime) -> tuple[LaterFinding, ...]:
    """No passport is published from a log that fails its audit as it stood when the passport was logged: the
    audit runs on the export as it stood at the last passport's entry (``heldout.audit.gate``; every passport
    before it is in that log), re-deriving every bundle a logged passport cites (the leaderboard shows those
    numbers). What the log holds after it stops no passport, but is not vouched for: the audit of the whole log
    (nothing re-derived) names its findings, which every page that shows the log's state (the leaderboard, the
    generations) lists."""
    from heldout.audit.gate import cited_bundles, refuse_on, require_clean_log
    from heldout.audit.run import run_audit
    from heldout.audit.sources import ExportSource

    cited = {index for record in passports for index in cited_bundles(record.doc)}  # (every one verified above)
    last = max((record.entry_index for record in passports), default=None)
    source = ExportSource(export, ledger_id)
    later: list[Finding] = []
    try:
        if last is not None:
            require_clean_log(source, now=at, rederive=cited, claim="the site", through=last)
        if last is None or last < export.size - 1:
            whole = run_audit(source, now=at, audit_command="heldout site build", rederive=())
            refuse_on([f for f in whole.findings if f.index is None], "the site")  # (the log's own, no entry's)
            later = whole.findings
    except SourceUnavailable:
        raise
    except HeldoutError as exc:
        raise SiteBuildRefused(f"nothing was published: {exc.message}", **exc.evidence) from None
    return tuple(LaterFinding(check=f.check, index=int(f.index or 0), message=f.message) for f in later)


def _check_seal_files(export: PublicLog, entries: list[tuple[int, dict[str, Any]]]) -> None:
    """The export's ``seals/`` folder is published as is, so each file must be what its name says
    (``heldout.generations.verify.published_seal_problems``)."""
    for problem in published_seal_problems(export, entries):
        raise SiteBuildRefused(f"{problem.message} (altered?), nothing was published",
                               file=export.location(str(problem.evidence["file"])),
                               **{k: v for k, v in problem.evidence.items() if k != "file"})


def _check_reveals(export: PublicLog, generations: dict[str, GenerationState], keys: list[TrustedKey],
                   at: datetime) -> None:
    """Every reveal the site links (its blob, or the published ``seals/<gen>.reveal.json``) verified as
    ``verify-reveal --from`` verifies it (section 11 of FORMATS: against the signed manifest, the draw included):
    the site linked a logged "reveal" blob holding HTML as the generation's reveal (red-team round 16)."""
    for name, state in generations.items():
        if not state.revealed or not (export.has_seal(f"{name}.reveal.json")
                                      or export.has_blob(str(state.reveal_sha256))):
            continue  # withheld: nothing is linked
        try:
            issuer = parse_json_object(export.seal_bytes(f"{name}.seal.json"), what="seal manifest").get("issuer")
            signer = next((key for key in keys if isinstance(issuer, dict)
                           and key.public_key.b64 == issuer.get("public_key_b64")), keys[0])
            verify_published_reveal(export, name, signer, at, source=export.location("."))
        except SourceUnavailable:
            raise
        except HeldoutError as exc:
            raise SiteBuildRefused(f"the reveal of {name} does not verify, nothing was published: {exc.message}",
                                   **{k: v for k, v in exc.evidence.items() if k != "path"}) from None


def _published_seals(export: PublicLog, entries: list[tuple[int, dict[str, Any]]]) -> dict[str, str]:
    """The seal files the site copies (checked above to be what their names say), by site path, with the SHA-256
    the ledger logs for each: the copy is compared with the log when it is written, not with a read of its own
    (a source over HTTP may answer each read differently: one checked, another copied). A file whose name is
    not a plain ASCII name stays in the export only."""
    logged = logged_seal_files(entries)
    published: dict[str, str] = {}
    for name in export.seal_names():
        path = copied_seal_path(name)
        if path is not None and name in logged:  # (every name is logged: checked above)
            published[path] = logged[name]
    return published


def _superseded(record: PassportRecord, by: int) -> PassportRecord:
    return replace(record, superseded_by=by)

