"""Checking a reveal or a membership proof against the signed seal manifest, from a store or a folder.

Sources. *Store*: the manifest from ``seals/<gen>.seal.json``, the reveal from the blob the ``reveal`` entry
names, both bound to the ledger's entries. *Folder* (``--from DIR``): ``DIR/seals/<gen>.seal.json`` or
``DIR/<gen>.seal.json``, and ``DIR/seals/<gen>.reveal.json`` or ``DIR/<gen>.reveal.json`` (or, in a ledger
export, the blob its ``reveal`` entry names). When DIR is a ledger export (it has ``export.json``), the
manifest and the reveal are also checked against the export's ``seal`` and ``reveal`` entries; the export
itself (checkpoints, tree) is the audit's to verify.

Order: the manifest's signature under the trusted key first, then its binding to the seal entry, then the
reveal case by case (so a changed case is named), then the reveal's binding to its entry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from heldout.entries import IntentEntry, PoolEntry, RevealEntry, SealEntry, entry_record, records
from heldout.generations.budget import shown_member
from heldout.generations.cases import case_id, task_of
from heldout.generations.commitments import MemberProof
from heldout.generations.draw import DrawRecord, check_drawn_before_sealed, recompute_seed
from heldout.generations.reveal import verify_budget, verify_reveal
from heldout.generations.seal import generation_argument, manifest_path, seal_entry_of
from heldout.generations.state import BlobSource, GenerationState, load_generations
from heldout.store import Store
from keys import PublicKey, TrustedKey, UsageError, VerificationError
from keys.safeio import DOCUMENT_LIMIT, read_in
from ledger import BlobStore, Ledger, ReplayReport, verify_checkpoint
from ledger.policy import Policy
from ledger.public import PublicLog, is_public_log, open_public_log
from seals import format_utc, parse_json_object, sha256_hex
from seals.manifest import SealManifest


@dataclass(frozen=True)
class RevealVerdict:
    generation: str
    n_cases: int
    tasks: dict[str, int]
    set_hash: str
    manifest_sha256: str
    issuer_key_id: str
    images_checked: bool
    ledger_checked: bool
    seal_index: int | None
    reveal_index: int | None
    source: str

    def to_json(self) -> dict[str, Any]:
        return {"verified": True, **self.__dict__}

    @property
    def line(self) -> str:
        bound = (f"; bound to seal entry {self.seal_index} and reveal entry {self.reveal_index}"
                 if self.ledger_checked else "; no ledger entries checked")
        images = ", images re-hashed" if self.images_checked else ""
        return (f"reveal of {self.generation} verified: {self.n_cases} cases recompute set hash "
                f"{self.set_hash} of the manifest signed under {self.issuer_key_id}{images}{bound}")


def check_manifest_binding(manifest: SealManifest, digest: str, state: GenerationState, ledger_id: str,
                           entry: Mapping[str, Any] | None) -> None:
    """Raise unless a (signature-verified) manifest whose file hashes to ``digest`` is the one ``state``'s seal
    entry names: same hash, generation, set hash, ledger id, and the entry index it records; and the seal entry
    (``entry``, as logged) is exactly the one the manifest makes (``seal_entry_of``): its expiry, tasks,
    budget, statement and release are what the generation's state is read from, so an entry that says more
    or other than the signed manifest would change the rules the manifest promised; and the budget is what its
    rule gives from what the manifest states (``verify_budget``: the operator's own arithmetic is not taken on
    its word)."""
    if digest != state.manifest_sha256:
        raise VerificationError(f"the seal manifest of {state.name} is not the one its seal entry names",
                                index=state.seal_index, field="manifest_sha256", expected=state.manifest_sha256,
                                found=digest)
    for member, expected, found in (("generation", state.name, manifest.generation),
                                    ("set_hash", state.set_hash, manifest.set_hash),
                                    ("ledger_id", ledger_id, manifest.ledger_id),
                                    ("entry_index", state.seal_index, manifest.entry_index)):
        if expected != found:
            raise VerificationError(f"the seal manifest of {state.name} disagrees with its seal entry on {member}",
                                    index=state.seal_index, field=member, expected=expected, found=found)
    expected_entry = seal_entry_of(manifest, digest)
    logged = dict(entry) if entry is not None else {}
    for member in sorted(set(expected_entry) | set(logged)):
        if expected_entry.get(member) != logged.get(member):
            raise VerificationError(f"the seal entry of {state.name} says other than its signed manifest on "
                                    f"{member}", index=state.seal_index, field=member,
                                    expected=shown_member(expected_entry.get(member)),
                                    found=shown_member(logged.get(member)))
    verify_budget(manifest, index=state.seal_index)


def read_first_in(folder: Path, names: list[str], *, what: str) -> tuple[bytes, str] | None:
    """The bytes and name of the first of ``names`` that is a file inside ``folder``, or ``None``; read through
    ``keys.safeio`` (no links followed, regular files only, at most ``DOCUMENT_LIMIT`` bytes), so a crafted
    folder is refused (exit 1) rather than followed, waited on or read without a bound."""
    for name in names:
        data = read_in(folder, name, limit=DOCUMENT_LIMIT, what=what)
        if data is not None:
            return data, name
    return None


EntryAt = Callable[[int], Mapping[str, Any] | None]


def check_draw_binding(manifest: SealManifest, state: GenerationState, entry_at: EntryAt,
                       root_at: Callable[[int], bytes], ledger_key: TrustedKey, origin: str) -> None:
    """Raise unless a sealed manifest's draw is the one the log allows: its ``intent`` entry (before the seal,
    naming this generation with the manifest's task sizes, expiry, release and pool entries), each ``pool``
    entry (the root and size the draw records), and the seed's checkpoint, which must be the first containing
    the intent (size = intent index + 1), signed by the ledger key, with this ledger's root at that size."""
    if manifest.membership == "public":
        return
    if manifest.draw is None:
        raise VerificationError(f"the seal manifest of {state.name} records no draw (not commit-then-draw)",
                                index=state.seal_index, field="draw")
    draw = DrawRecord.from_json(manifest.draw)
    found = entry_at(draw.intent_index) if draw.intent_index < state.seal_index else None
    intent = entry_record(draw.intent_index, found) if found is not None else None
    if not isinstance(intent, IntentEntry) or intent.generation != state.name:
        raise VerificationError(f"the draw of {state.name} names entry {draw.intent_index}, which is not an intent "
                                f"of {state.name} before its seal", index=state.seal_index, field="draw.intent_index",
                                found=draw.intent_index)
    logged = intent.to_entry()
    for member, expected in (("tasks", manifest.task_counts), ("expiry_utc", format_utc(manifest.expiry)),
                             ("release", manifest.release.to_json()),
                             ("pools", {task: ref.index for task, ref in draw.pools.items()})):
        if logged.get(member) != expected:
            raise VerificationError(f"the seal manifest of {state.name} disagrees with its intent entry "
                                    f"{draw.intent_index} on {member}", index=draw.intent_index, field=member,
                                    expected=expected, found=logged.get(member))
    for task, ref in draw.pools.items():
        found = entry_at(ref.index) if ref.index < draw.intent_index else None
        pool = entry_record(ref.index, found) if found is not None else None
        if not isinstance(pool, PoolEntry) or pool.task != task or pool.pool_root != ref.pool_root or \
                pool.pool_size != ref.pool_size:
            raise VerificationError(f"the draw of {state.name} names pool entry {ref.index} for {task}, which does "
                                    "not commit to that root and size", index=ref.index, field=f"draw.pools.{task}")
    if draw.checkpoint_size != draw.intent_index + 1:
        raise VerificationError(f"the seed of {state.name} must come from the first checkpoint containing its "
                                f"intent (size {draw.intent_index + 1})", index=state.seal_index,
                                field="draw.checkpoint", expected=draw.intent_index + 1, found=draw.checkpoint_size)
    checkpoint = verify_checkpoint(draw.checkpoint_note, name=ledger_key.name, key=ledger_key.public_key,
                                   origin=origin)
    if checkpoint.size != draw.checkpoint_size or checkpoint.root != root_at(checkpoint.size):
        raise VerificationError(f"the seed checkpoint of {state.name} is not this ledger's at size "
                                f"{draw.checkpoint_size}", index=state.seal_index, field="draw.checkpoint")
    signatures = set(draw.checkpoint_note.split("\n\n", 1)[-1].splitlines())
    stray = [line for line in draw.cosignatures if line not in signatures]
    if stray:
        raise VerificationError(f"the draw of {state.name} names a cosignature its checkpoint note does not carry",
                                index=state.seal_index, field="draw.cosignatures", found=stray[0][:80])
    recompute_seed(draw, checkpoint.root)
    check_drawn_before_sealed(state.name, manifest.created, draw)


def _verify(manifest_data: bytes, reveal_data: bytes, trusted: PublicKey | TrustedKey, *,
            state: GenerationState | None, ledger: Ledger | PublicLog | None, blobs: BlobSource | None,
            source: str) -> RevealVerdict:
    doc = parse_json_object(manifest_data, what="seal manifest")
    manifest = SealManifest.verify(doc, trusted)
    digest = sha256_hex(manifest_data)
    if state is not None and ledger is not None:
        check_manifest_binding(manifest, digest, state, ledger.ledger_id, ledger.entry(state.seal_index))
        view = ledger
        check_draw_binding(manifest, state, lambda i: view.entry(i) if 0 <= i < view.size else None, view.root,
                           _ledger_key(view), view.origin)
    reveal = verify_reveal(parse_json_object(reveal_data, what="reveal"), manifest, image_blobs=blobs,
                           manifest_sha256=digest)
    if state is not None:
        found = sha256_hex(reveal_data)
        if found != state.reveal_sha256:
            raise VerificationError(f"the reveal of {state.name} is not the one its reveal entry names",
                                    index=state.reveal_index, field="reveal_sha256",
                                    expected=state.reveal_sha256, found=found)
    issuer = doc.get("issuer", {})
    return RevealVerdict(
        generation=manifest.generation, n_cases=len(reveal.openings), tasks=reveal.task_counts(),
        set_hash=manifest.set_hash, manifest_sha256=digest, issuer_key_id=str(issuer.get("key_id")),
        images_checked=reveal.images is not None, ledger_checked=state is not None,
        seal_index=None if state is None else state.seal_index,
        reveal_index=None if state is None else state.reveal_index, source=source)


def _ledger_key(view: Ledger | PublicLog) -> TrustedKey:
    return view.key if isinstance(view, Ledger) else view.ledger_key


def _revealed_state(generations: dict[str, GenerationState], generation: str) -> GenerationState:
    state = generations.get(generation)
    if state is None:
        raise UsageError(f"no generation {generation!r} is sealed on this ledger", field="generation",
                         found=generation, expected=sorted(generations))
    if not state.revealed:
        raise UsageError(f"{generation} has not been revealed (heldout retire {generation} --reveal)",
                         field="generation", found="not revealed")
    return state


def verify_store_reveal(store: Store, ledger: Ledger, generation: str, trusted: PublicKey | TrustedKey,
                        now: datetime) -> RevealVerdict:
    state = _revealed_state(load_generations(ledger, now), generation)
    blobs = BlobStore(store.blobs)
    published = read_first_in(store.root, [str(manifest_path(store, generation).relative_to(store.root))],
                              what="seal manifest")
    manifest_data = published[0] if published is not None else blobs.get(state.manifest_sha256)
    return _verify(manifest_data, blobs.get(str(state.reveal_sha256)), trusted, state=state,
                   ledger=ledger, blobs=blobs, source=str(store.root))


def source_manifest_bytes(source: str | Path, generation: str) -> bytes:
    """The signed seal manifest of ``generation`` from ``--from``: a published ledger's ``seals/`` (an export,
    or a tiles directory or URL), else ``DIR/seals/<gen>.seal.json`` or ``DIR/<gen>.seal.json``."""
    if is_public_log(source):
        return open_public_log(source).seal_bytes(f"{generation}.seal.json")
    folder = Path(source)
    found = read_first_in(folder, [f"seals/{generation}.seal.json", f"{generation}.seal.json"],
                          what="seal manifest")
    if found is None:
        raise UsageError(f"no {generation}.seal.json in {folder} or {folder}/seals", path=str(folder))
    return found[0]


def verify_folder_reveal(source: str | Path, generation: str, trusted: PublicKey | TrustedKey,
                         now: datetime) -> RevealVerdict:
    """A reveal from ``--from``: a published ledger (export, tiles directory or URL), replayed (every checkpoint
    signature, root and consistency proof) and then bound to its entries; else a plain folder holding the
    manifest and the reveal (checked against each other only)."""
    if is_public_log(source):
        log = open_public_log(source)
        verify_public_log(log)  # nothing in a published log is trusted before its replay (every rule, blobs too)
        return verify_published_reveal(log, generation, trusted, now, source=str(source))
    folder = Path(source)
    if not folder.is_dir():
        raise UsageError(f"--from {folder} is not a folder", path=str(folder))
    manifest_data = source_manifest_bytes(folder, generation)
    blobs: BlobSource | None = BlobStore(folder / "blobs" / "sha256") if (folder / "blobs").is_dir() else None
    reveal_file = read_first_in(folder, [f"seals/{generation}.reveal.json", f"{generation}.reveal.json"],
                                what="reveal")
    if reveal_file is None:
        raise UsageError(f"no {generation}.reveal.json in {folder} or {folder}/seals", path=str(folder))
    return _verify(manifest_data, reveal_file[0], trusted, state=None, ledger=None, blobs=blobs,
                   source=str(folder))


def verify_published_reveal(log: PublicLog, generation: str, trusted: PublicKey | TrustedKey, now: datetime, *,
                            source: str) -> RevealVerdict:
    """A reveal in a published ledger (export or tiles): the manifest from its ``seals/``, the reveal from
    ``seals/<gen>.reveal.json`` or the blob its ``reveal`` entry names, both bound to its entries."""
    state = _revealed_state(load_generations(log, now, blobs=log.blobs), generation)
    name = f"{generation}.reveal.json"
    reveal_data = log.seal_bytes(name) if log.has_seal(name) else log.blob(str(state.reveal_sha256))
    return _verify(log.seal_bytes(f"{generation}.seal.json"), reveal_data, trusted, state=state, ledger=log,
                   blobs=log.blobs, source=source)

def check_reveal(store: Store, generation: str, *, source: str | None, pinned: PublicKey | TrustedKey | None,
                 ledger_id: str | None, now: datetime, policy: Policy | None = None,
                 log: PublicLog | None = None) -> RevealVerdict:
    """``heldout verify-reveal``: recompute ``generation``'s set hash from its reveal and check it against the
    signed manifest (under ``pinned``, else the keyring's issuer key, else, for the store's own ledger without a
    published manifest, that ledger's key), bound to the ledger's entries when there is a ledger: ``source``
    (a published ledger, replayed first, or a plain folder), else ``store``'s ledger ``ledger_id``. With
    ``policy``, ``source`` must be a published ledger whose latest checkpoint the policy's quorum cosigned.
    ``log``: the published ledger at ``source`` already opened (whoever judges more than the reveal on it reads
    it once: a server may answer two readings with two logs)."""
    from heldout.generations.ledgers import open_ledger

    generation = generation_argument(generation)  # (it names files: "../x" is bad input, not a tampered seal)

    def trusted_for(manifest_data: bytes) -> PublicKey | TrustedKey:
        if pinned is not None:
            return pinned
        return store.issuer_key(parse_json_object(manifest_data, what="seal manifest"), what="seal manifest")

    if policy is not None and (source is None or not is_public_log(source)):
        raise UsageError("--policy checks a published ledger: give --from EXPORT_DIR or a tiles directory or URL",
                         field="--from")
    if source is not None and is_public_log(source):
        # Opened and replayed once: the entries the reveal is judged by, and with a policy its quorum.
        log = open_public_log(source) if log is None else log
        if policy is not None:
            report = verify_public_log(log, expected_id=ledger_id or log.ledger_id)
            policy.evaluate(log.latest_checkpoint(), origin=report.origin)
        else:
            verify_public_log(log)
        manifest = log.seal_bytes(f"{generation}.seal.json")
        return verify_published_reveal(log, generation, trusted_for(manifest), now, source=str(source))
    if source is not None:
        return verify_folder_reveal(source, generation, trusted_for(source_manifest_bytes(source, generation)), now)
    published = read_first_in(store.seals, [f"{generation}.seal.json"], what="seal manifest")
    with open_ledger(store, ledger_id, read_only=True) as opened:
        # Without the published file the manifest comes from its blob; the operator's own ledger key (named by
        # the genesis entry of the ledger the store holds) is then the trusted one.
        trusted = trusted_for(published[0]) if published is not None else (pinned or opened.key)
        return verify_store_reveal(store, opened, generation, trusted, now)


def verify_member_proof(proof_doc: Any, manifest_data: bytes, trusted: PublicKey | TrustedKey) -> MemberProof:
    """Check a membership proof against the signed manifest of its generation; returns the parsed proof."""
    manifest = SealManifest.verify(parse_json_object(manifest_data, what="seal manifest"), trusted)
    proof = MemberProof.from_json(proof_doc)
    if proof.generation != manifest.generation or proof.set_hash != manifest.set_hash:
        raise VerificationError("the proof is for another generation or set hash than the manifest",
                                field="set_hash", expected=manifest.set_hash, found=proof.set_hash)
    if proof.tree_size != manifest.n_cases:
        # a path through the left subtree leads to the same root under many sizes: the verdict would state a
        # size the set does not have
        raise VerificationError(f"the proof's tree_size is not the number of cases {manifest.generation} holds",
                                field="tree_size", expected=manifest.n_cases, found=proof.tree_size)
    proof.verify(manifest.set_hash)
    # What the verdict states beside the commitment: the task is the one its case id names (the commitment
    # binds the case id), one the generation has, and the case id names the content's hash (the id's rule).
    if task_of(proof.case_id) != proof.task or proof.task not in manifest.task_counts \
            or proof.case_id != case_id(proof.task, proof.content_sha256):
        raise VerificationError(f"the proof's case {proof.case_id} is not a case of task {proof.task!r} with its "
                                f"content hash on {manifest.generation}", field="case.task", found=proof.task,
                                expected=sorted(manifest.task_counts))
    return proof


def logged_seal_files(entries: Iterable[tuple[int, Mapping[str, Any]]]) -> dict[str, str]:
    """The files ``seals/`` publishes, by name, with the SHA-256 the log gives each: ``<gen>.seal.json`` the
    ``manifest_sha256`` of ``gen``'s seal entry, ``<gen>.reveal.json`` the ``reveal_sha256`` of its reveal entry
    (the first entry counts, as for every reader)."""
    logged: dict[str, str] = {}
    for record in records(entries, SealEntry, RevealEntry):
        if isinstance(record, SealEntry):
            logged.setdefault(f"{record.generation}.seal.json", record.manifest_sha256)
        else:
            logged.setdefault(f"{record.generation}.reveal.json", record.reveal_sha256)
    return logged


def verify_public_log(log: PublicLog, *, expected_id: str | None = None, check_blobs: bool = True,
                      **options: Any) -> ReplayReport:
    """Replay a public log (an export or tiles) and check what heldout publishes beside its entries (its
    ``seals/`` files, :func:`published_seal_problems`): what every verifier of a public log runs first, so that
    one published log has one verdict (FORMATS section 15: the first rule that fails rejects it, whichever
    verifier reads it). ``options`` go to the replay (progress, jobs)."""
    report = log.verify(expected_id=expected_id, check_blobs=check_blobs, **options)
    for problem in published_seal_problems(log, log.entries()):
        raise problem
    return report


def published_seal_problems(log: PublicLog, entries: Iterable[tuple[int, Mapping[str, Any]]], *,
                            named_too: bool = True) -> Iterator[VerificationError]:
    """Each file of a public log's ``seals/`` that is not what its name says: every one must be
    ``<gen>.seal.json`` with the bytes the seal entry of ``gen`` logs (``manifest_sha256``) or ``<gen>.reveal.json``
    with those of its reveal entry (``reveal_sha256``); the first entry counts, as for every reader. A file
    that merely hashes to some logged document (gen1's manifest under gen2's name) is refused: whoever reads
    ``seals/gen2.seal.json`` takes it for gen2's. ``named_too`` False: only the files under a name no entry logs
    (the audit's seal and reveal checks judge the others)."""
    logged = logged_seal_files(entries)
    for name in log.seal_names():
        expected = logged.get(name)
        if expected is None:
            yield VerificationError(f"seals/{name} is neither the seal manifest nor the reveal of a generation the "
                                    "ledger seals or reveals", file=f"seals/{name}", found=name)
            continue
        if not named_too:
            continue
        found = sha256_hex(log.seal_bytes(name))
        if found != expected:
            yield VerificationError(f"seals/{name} is not the document the ledger logs under that name",
                                    file=f"seals/{name}", expected=expected, found=found)
