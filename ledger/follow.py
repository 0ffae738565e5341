"""Following a ledger from its public export (a directory, or the same layout served over HTTP): the
rollback-proof client (``ledger.client``) fed with the export's latest checkpoint and a consistency proof
computed from the export's own entries.

One step of :func:`follow`:

1. read the export's latest checkpoint note (with its cosignatures) and its entries;
2. check that the entries give the checkpoint's root (otherwise the export is damaged, which is not a fork);
3. with a policy, the checkpoint must satisfy its quorum (:class:`ledger.policy.QuorumError` otherwise; the
   state is not touched);
4. offer it to the client with the consistency proof from the accepted size: the client accepts it, or keeps
   both signed notes as fork/rollback evidence and raises.

Over HTTP the export's ``export.json``, ``entries.jsonl`` and the one checkpoint note are fetched into a
temporary folder (``ledger.tiles.http_get``: a timeout per socket operation, an overall deadline per request,
size caps; any failure to fetch, a malformed answer included, is a usage error, exit 2), then read exactly like
a local export. A tiles directory (``ledger tiles``), local or served (a URL whose ``checkpoint`` exists), is
read through ``ledger.tiles``.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from keys import MalformedInput, PublicKey, parse_verifier_key
from ledger.checkpoint import Checkpoint
from ledger.client import CheckpointClient, read_client_state
from ledger.entries import ledger_id_of, origin_of
from ledger.errors import LedgerIntegrityError, LedgerUsageError
from ledger.export import CHECKPOINTS, ENTRIES, MANIFEST, LedgerExport, open_export
from ledger.policy import Policy, Witnessed
from ledger.public import PublicLog, is_tiles_source
from ledger.tiles import CHECKPOINT, HttpFiles, http_get, is_url, open_tiles
from seals import parse_json_object

FETCH_TIMEOUT_S = 30.0  # per socket operation
FETCH_DEADLINE_S: float | None = None  # per request; None: ledger.tiles.FETCH_DEADLINE_S
MAX_FETCH_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True)
class FollowResult:
    previous: Checkpoint | None
    accepted: Checkpoint
    witnessed: Witnessed | None

    def to_json(self) -> dict[str, object]:
        return {"previous_size": self.previous.size if self.previous else None, "size": self.accepted.size,
                "root": self.accepted.root_b64, "witnessed": self.witnessed.to_json() if self.witnessed else None}


def _fetch(url: str, dest: Path) -> None:
    data = http_get(url, MAX_FETCH_BYTES, timeout=FETCH_TIMEOUT_S, deadline=FETCH_DEADLINE_S,
                    over_limit=LedgerUsageError)
    if data is None:
        raise LedgerUsageError(f"cannot fetch {url}: not found (HTTP 404 or 410)", path=url)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(data)


def mirror_export(url: str, folder: Path) -> LedgerExport:
    """Fetch what following needs from an export served at ``url`` into ``folder``; open it."""
    base = url.rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise LedgerUsageError("--from is an export directory or an http(s) URL of one", found=url[:200])
    _fetch(f"{base}/{MANIFEST}", folder / MANIFEST)
    manifest = parse_json_object((folder / MANIFEST).read_bytes(), what=f"{base}/{MANIFEST}")
    sizes = manifest.get("checkpoints")
    if not isinstance(sizes, list) or not sizes or not all(
            isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in sizes):
        raise LedgerIntegrityError("the export manifest lists no checkpoints (positive integer sizes)",
                                   file=MANIFEST, field="checkpoints")
    latest = max(sizes)
    _fetch(f"{base}/{CHECKPOINTS}/{latest}.note", folder / CHECKPOINTS / f"{latest}.note")
    _fetch(f"{base}/{ENTRIES}", folder / ENTRIES)
    return open_export(folder)


def follow(source: str, *, ledger_id: str, state: Path, key: str | None = None, policy: Policy | None = None,
           evidence_dir: Path | None = None) -> FollowResult:
    """One follow step (see the module docstring). ``key``: the ledger's checkpoint verifier key; default: the
    one pinned in the state, or on first use the one entry 0 of the export declares (whose hash must be
    ``ledger_id``)."""
    if (is_url(source) and HttpFiles(source).exists(CHECKPOINT)) or (not is_url(source) and is_tiles_source(source)):
        return _follow(open_tiles(source), ledger_id=ledger_id, state=state, key=key, policy=policy,
                       evidence_dir=evidence_dir)
    if source.startswith(("http://", "https://")):
        with tempfile.TemporaryDirectory(prefix="heldout-follow-") as tmp:
            return _follow(mirror_export(source, Path(tmp)), ledger_id=ledger_id, state=state, key=key,
                           policy=policy, evidence_dir=evidence_dir)
    folder = Path(source)
    if not folder.is_dir():
        raise LedgerUsageError(f"no export directory at {folder}", path=str(folder))
    return _follow(open_export(folder), ledger_id=ledger_id, state=state, key=key, policy=policy,
                   evidence_dir=evidence_dir)


def _pinned_key(state: Path, key: str | None, export: PublicLog, ledger_id: str) -> tuple[str, PublicKey]:
    if key is not None:
        try:
            name, _, public = parse_verifier_key(key)
        except MalformedInput as exc:
            raise LedgerUsageError(f"--key: {exc.message}", found=key[:120]) from None
        return name, public
    pinned = read_client_state(state)
    if pinned is not None:
        try:
            return pinned.key_name, PublicKey.from_b64(pinned.public_key_b64)
        except MalformedInput as exc:
            raise LedgerIntegrityError(f"client state has no usable key: {exc.message}", file=str(state)) from None
    genesis = export.entry_bytes(0)
    if ledger_id_of(genesis) != ledger_id:
        raise LedgerIntegrityError("the export's entry 0 does not hash to the ledger id asked for", index=0,
                                   expected=ledger_id, found=ledger_id_of(genesis))
    trusted = export.ledger_key
    return trusted.name, trusted.public_key


def _follow(export: PublicLog, *, ledger_id: str, state: Path, key: str | None, policy: Policy | None,
            evidence_dir: Path | None) -> FollowResult:
    origin = origin_of(ledger_id)
    if export.size < 1:  # (every ledger starts with its genesis entry; every other reader says so too, exit 1)
        raise LedgerIntegrityError("the public log holds no entry, not even its genesis entry", found=export.size)
    name, public = _pinned_key(state, key, export, ledger_id)
    client = CheckpointClient(state, origin=origin, name=name, key=public, evidence_dir=evidence_dir)
    previous = client.accepted()
    presented = export.latest_checkpoint()
    if presented.size > export.size or export.root(presented.size) != presented.root:
        raise LedgerIntegrityError("the export's entries do not give its latest checkpoint's root (a damaged "
                                   "export, not evidence of a fork)", checkpoint=presented.size,
                                   expected=presented.root_b64)
    witnessed = policy.evaluate(presented, origin=origin) if policy is not None else None
    proof = None
    if previous is not None and 1 <= previous.size < presented.size:
        proof = list(export.consistency_proof(previous.size, presented.size).path)
    accepted = client.update(presented.note, proof)
    return FollowResult(previous, accepted, witnessed)
