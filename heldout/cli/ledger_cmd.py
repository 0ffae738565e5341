"""``heldout ledger``: create, append to, inspect, prove, export and verify ledgers.

LEDGER is a ledger id (or a unique prefix of one) in the store's ``ledgers/`` folder, by default the store's own
(``ledgers/DEFAULT``, written by ``heldout init``); with ``verify --from DIR`` it names the ledger the export must
be (its genesis entry must hash to that id). Roots and hashes are printed in hex; base64 only inside the formats
that mandate it (checkpoint notes, proof documents).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from heldout.annotations import append_generic, check_generic_type, parse_jsonl
from heldout.cli.common import (
    INDEX_MAX,
    JsonFlag,
    StoreOption,
    console,
    err_console,
    handle_errors,
    open_store,
    phase_progress,
    print_json,
    progress_bars,
    reference_time,
    refuse_output_in_source,
    table,
)
from heldout.generations.ledgers import create_ledger, open_ledger
from heldout.store import Store
from keys import MalformedInput, verifier_key_string
from keys.safeio import ENTRIES_FILE_LIMIT, not_a_file, path_kind, read_named
from ledger import (
    BlobStore,
    EntryRejected,
    Ledger,
    LedgerUsageError,
    ReplayReport,
    backend_at,
    export_ledger,
)
from ledger import migrate as migrate_ledger
from ledger.entries import (
    MAX_ENTRY_BYTES,
    is_ledger_id,
    is_ledger_prefix,
)
from ledger.follow import follow as follow_export
from ledger.policy import WitnessedTimes, load_policy
from ledger.public import open_public_log
from ledger.tiles import write_tiles
from seals import canonical_bytes, parse_json_object

if TYPE_CHECKING:
    from ledger.replay import EntryFn

app = typer.Typer(help="The append-only ledger: entries, signed checkpoints, proofs, export and replay. "
                       "LEDGER defaults to the store's ledger. Example: heldout ledger verify",
                  no_args_is_help=True)

LedgerArg = Annotated[str | None, typer.Argument(
    help="Ledger id or a unique prefix of it (default: the store's, from heldout init).", show_default=False)]
IndexOption = Annotated[int, typer.Option("--index", help="Entry index.", min=0, max=INDEX_MAX)]
KeyIdOption = Annotated[str | None, typer.Option("--key-id", help="Signing key id (default: the store's only key).")]
AtOption = Annotated[str | None, typer.Option("--at", help="Reference time (ISO 8601); default: now.")]


@contextmanager
def _open(store: Path | None, ledger: str | None, *, read_only: bool = True) -> Iterator[Ledger]:
    """The ledger LEDGER names (default: the store's); read-only unless the command writes."""
    st = open_store(store)
    with open_ledger(st, ledger, read_only=read_only) as opened:
        yield opened


def _write_stdout_bytes(data: bytes) -> None:
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


@contextmanager
def _progress(label: str, enabled: bool) -> Iterator[Any]:
    """A rich progress bar on stderr for long replays; the callback takes (done, total)."""
    if not enabled:
        yield None
        return
    with progress_bars(transient=True) as progress:
        task = progress.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        yield update


@app.command("init")
@handle_errors
def init(
    name: Annotated[str, typer.Option("--name", help="The ledger's name (recorded in its genesis entry).")],
    store: StoreOption = None,
    key_id: KeyIdOption = None,
    at: AtOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Create a ledger signed by the store's operator key: genesis entry and first checkpoint (heldout init
    does this for the store's default ledger).

    Example: heldout ledger init --name second-lab"""
    st = open_store(store)
    signer = st.load_signer(key_id)
    st.create()
    with create_ledger(st, signer, name=name, now=reference_time(at)) as ledger:
        info = {"ledger_id": ledger.ledger_id, "origin": ledger.origin, "path": ledger.location,
                "note_verifier_key": ledger.verifier_key, "size": ledger.size}
    if as_json:
        print_json(info)
    else:
        console.print(f"created ledger {info['ledger_id']} ({name}) in {info['path']}")
        console.print(f"checkpoint key {info['note_verifier_key']}")


def _read_input(path: Path, *, limit: int, what: str) -> bytes:
    """An input file's bytes ('-': stdin), bounded; a FIFO or a device is refused, never waited on."""
    if str(path) == "-":
        if sys.stdin is None:  # (Python's stdin when the process started with it closed)
            raise LedgerUsageError(f"the {what} is to be read from standard input, which is closed", path="-")
        data = sys.stdin.buffer.read(limit + 1)
    elif path_kind(path) in (None, "a dangling symbolic link", "a symbolic link loop"):
        raise LedgerUsageError(not_a_file(path, what), path=str(path))
    else:
        try:
            data = read_named(path, limit=limit, what=what)
        except MalformedInput as exc:
            raise EntryRejected(exc.message, **exc.evidence) from None
    if len(data) > limit:
        raise EntryRejected(f"{what} is over {limit} bytes", expected=limit, found=len(data))
    return data


def _read_entry_file(path: Path) -> dict[str, Any]:
    data = _read_input(path, limit=4 * MAX_ENTRY_BYTES, what="entry file")
    try:
        return parse_json_object(data, what=f"entry file {path}")
    except MalformedInput as exc:  # the operator's input is unusable: a usage error, nothing is written
        raise EntryRejected(exc.message, **exc.evidence) from None


@app.command("append")
@handle_errors
def append(
    entry_type: Annotated[str, typer.Option(
        "--type", help="Entry type: note or key (domain entries are written by their own commands).")],
    json_file: Annotated[Path | None, typer.Option(
        "--json-file", help="JSON object of one entry ('-' for stdin).", show_default=False)] = None,
    jsonl_file: Annotated[Path | None, typer.Option(
        "--jsonl-file", help="JSON Lines, one entry per line ('-' for stdin): appended as one batch under one "
        "checkpoint, all or none.", show_default=False)] = None,
    ledger: LedgerArg = None,
    store: StoreOption = None,
    key_id: KeyIdOption = None,
    at: AtOption = None,
    expected_size: Annotated[int | None, typer.Option(
        "--expected-size", min=0, max=INDEX_MAX, help="Append only onto a ledger of exactly this many entries "
        "(else exit 2, nothing written): a batch re-run after its first run was killed is never logged twice.",
        show_default=False)] = None,
    as_json: JsonFlag = False,
) -> None:
    """Append generic entries (note, key) and sign one checkpoint for them. ``type`` is set from --type (a
    different ``type`` in the input is refused); ``v`` defaults to 1 and ``created_utc`` to the reference time.

    Example: echo '{"text": "hello"}' | heldout ledger append --type note --json-file - --expected-size 42"""
    if (json_file is None) == (jsonl_file is None):
        raise LedgerUsageError("give exactly one of --json-file or --jsonl-file", field="json_file")
    check_generic_type(entry_type)
    moment = reference_time(at)
    if json_file is not None:
        objects = [_read_entry_file(json_file)]
    else:
        assert jsonl_file is not None
        objects = parse_jsonl(_read_input(jsonl_file, limit=ENTRIES_FILE_LIMIT, what="entries file"),
                              what=f"entries file {jsonl_file}")
    done = append_generic(open_store(store), ledger, entry_type, objects, now=moment, key_id=key_id,
                          expected_size=expected_size)
    if as_json:
        print_json(done.to_json())
    elif len(done.indices) == 1:
        console.print(f"appended {entry_type} entry {done.indices[0]}; checkpoint size {done.size} root "
                      f"{done.root_hex}")
    else:
        console.print(f"appended {len(done.indices)} {entry_type} entries {done.indices[0]}..{done.indices[-1]} "
                      f"in one batch; checkpoint size {done.size} root {done.root_hex}")


def _summary(entry: dict[str, Any]) -> str:
    """``key=value`` for each field but the common ones; values in JSON (never Python's repr), long ones cut
    to 16 characters and marked with an ellipsis (``ledger show --json`` and ``ledger leaf`` give all)."""
    skip = {"type", "v", "created_utc"}
    parts = []
    for key, value in entry.items():
        if key in skip:
            continue
        text = value if isinstance(value, str) else canonical_bytes(value).decode("utf-8")
        parts.append(f"{key}={text[:16] + '…' if len(text) > 17 else text}")
    return " ".join(parts)


@app.command("show")
@handle_errors
def show(
    ledger: LedgerArg = None,
    start: Annotated[int, typer.Option("--start", help="First index to show.", min=0, max=INDEX_MAX)] = 0,
    limit: Annotated[int, typer.Option("--limit", help="At most this many entries.", min=1, max=INDEX_MAX)] = 50,
    store: StoreOption = None,
    as_json: JsonFlag = False,
) -> None:
    """List entries: index, type, time and a short summary (--json: the entries in full).

    Example: heldout ledger show --start 10 --limit 5"""
    with _open(store, ledger) as opened:
        first = min(start, opened.size)
        rows = [(index, entry, opened.entry_time(index))
                for index, entry in opened.entries(first, min(opened.size, first + limit))]
        size = opened.size
        ledger_id = opened.ledger_id
    if as_json:
        print_json({"ledger_id": ledger_id, "size": size,
                    "entries": [{"index": i, "appended_utc": t, "entry": e} for i, e, t in rows]})
        return
    shown = table(f"ledger {ledger_id} ({size} entries)", ("index", "type", "appended", "summary"), right=("index",))
    for index, entry, appended in rows:
        shown.add_row(str(index), str(entry.get("type")), appended, _summary(entry))
    console.print(shown)


@app.command("head")
@handle_errors
def head(ledger: LedgerArg = None, store: StoreOption = None, as_json: JsonFlag = False) -> None:
    """The current head: size, root (hex), latest checkpoint and the checkpoint key.

    Example: heldout ledger head --json"""
    with _open(store, ledger) as opened:
        checkpoint = opened.latest_checkpoint()
        info = {"ledger_id": opened.ledger_id, "name": opened.genesis.get("name"), "origin": opened.origin,
                "size": opened.size, "root": opened.root().hex(), "checkpoint_size": checkpoint.size,
                "checkpoint_root": checkpoint.root.hex(), "checkpoint_utc": checkpoint.created_utc,
                "key_id": opened.key.key_id, "note_verifier_key": opened.verifier_key}
    if as_json:
        print_json(info)
        return
    for field, value in info.items():
        console.print(f"{field}: {value}")


@app.command("checkpoint")
@handle_errors
def checkpoint(
    ledger: LedgerArg = None,
    sign: Annotated[bool, typer.Option("--sign", help="Sign the current head first (needs the key).")] = False,
    store: StoreOption = None,
    key_id: KeyIdOption = None,
    at: AtOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Print the latest signed checkpoint note, byte for byte (C2SP tlog-checkpoint: its root is base64, as the
    format mandates; --json adds the root in hex).

    Example: heldout ledger checkpoint > head.note"""
    with _open(store, ledger, read_only=not sign) as opened:
        if sign:
            signed = opened.checkpoint(signer=open_store(store).load_signer(key_id), now=reference_time(at))
        else:
            signed = opened.latest_checkpoint()
        ledger_id = opened.ledger_id
    if as_json:
        print_json({"ledger_id": ledger_id, "size": signed.size, "root": signed.root.hex(),
                    "created_utc": signed.created_utc, "note": signed.note})
        return
    _write_stdout_bytes(signed.note.encode("utf-8"))


@app.command("pubkey")
@handle_errors
def pubkey(ledger: LedgerArg = None, store: StoreOption = None, as_json: JsonFlag = False) -> None:
    """Print the note verifier key of the ledger's checkpoints (name+hash+base64, the C2SP format).

    Example: heldout ledger pubkey > ledger.vkey"""
    with _open(store, ledger) as opened:
        key = opened.key
        ledger_id = opened.ledger_id
    verifier = verifier_key_string(key.name, key.public_key)
    if as_json:
        print_json({"ledger_id": ledger_id, "note_verifier_key": verifier, "key_id": key.key_id, "name": key.name,
                    "public_key_b64": key.public_key.b64})
        return
    _write_stdout_bytes((verifier + "\n").encode())


@app.command("leaf")
@handle_errors
def leaf(
    index: IndexOption,
    ledger: LedgerArg = None,
    store: StoreOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Write the raw bytes of one entry to stdout (--json: the entry, its leaf hash in hex and its time).

    Example: heldout ledger leaf --index 0 | sha256sum"""
    with _open(store, ledger) as opened:
        data = opened.entry_bytes(index)
        appended = opened.entry_time(index)
    if as_json:
        from ledger.rfc6962 import leaf_hash

        print_json({"index": index, "leaf_hash": leaf_hash(data).hex(), "appended_utc": appended,
                    "entry": parse_json_object(data, what=f"entry {index}")})
        return
    _write_stdout_bytes(data)


@app.command("prove")
@handle_errors
def prove(
    index: IndexOption,
    ledger: LedgerArg = None,
    size: Annotated[int | None, typer.Option("--size", help="Tree size (default: current).", min=0,
                                             max=INDEX_MAX)] = None,
    store: StoreOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Inclusion proof (RFC 9162 audit path) of entry INDEX in the tree of SIZE entries; hashes in hex
    (--json: the proof document, base64 as its format mandates).

    Example: heldout ledger prove --index 3 --json > proof.json"""
    with _open(store, ledger) as opened:
        proof = opened.inclusion_proof(index, size)
    if as_json:
        print_json(proof.to_json())
        return
    console.print(f"entry {proof.index} in tree of size {proof.size}, root {proof.root.hex()}")
    for position, item in enumerate(proof.path):
        console.print(f"  {position}: {item.hex()}")


@app.command("consistency")
@handle_errors
def consistency(
    old: Annotated[int, typer.Option("--old", help="Old tree size (>= 1).", min=1, max=INDEX_MAX)],
    ledger: LedgerArg = None,
    new: Annotated[int | None, typer.Option("--new", help="New tree size (default: current).", min=1,
                                            max=INDEX_MAX)] = None,
    store: StoreOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Consistency proof (RFC 9162) that the tree of OLD entries is a prefix of the tree of NEW entries; hashes
    in hex (--json: the proof document, base64 as its format mandates).

    Example: heldout ledger consistency --old 5 --json"""
    with _open(store, ledger) as opened:
        proof = opened.consistency_proof(old, new)
    if as_json:
        print_json(proof.to_json())
        return
    console.print(f"size {proof.old_size} ({proof.old_root.hex()}) -> size {proof.new_size} "
                  f"({proof.new_root.hex()})")
    for position, item in enumerate(proof.path):
        console.print(f"  {position}: {item.hex()}")


def _report_lines(report: ReplayReport, source: str) -> None:
    console.print(f"ledger {report.ledger_id} verified from {source}: {report.size} entries, "
                  f"{report.checkpoints} checkpoints, root {report.root.hex()}")
    console.print("entries by type: " + ", ".join(f"{k} {v}" for k, v in sorted(report.entry_types.items())))


PolicyOption = Annotated[Path | None, typer.Option(
    "--policy", help="Witness policy (C2SP tlog-policy): the checkpoint must be cosigned by its quorum.")]


def _dated_within(window: WitnessedTimes | None) -> EntryFn | None:
    """The replay's per-entry hook that judges each entry's date against the witnessed window, if any."""
    if window is None:
        return None
    return lambda index, _data, entry: window.check_entry(index, entry)


@app.command("verify")
@handle_errors
def verify(
    ledger: LedgerArg = None,
    source: Annotated[str | None, typer.Option(
        "--from", help="Verify this export directory, or tiles directory or http(s) URL, instead (LEDGER is then "
        "required: the id it must be).")] = None,
    store: StoreOption = None,
    policy_file: PolicyOption = None,
    jobs: Annotated[int | None, typer.Option(
        "--jobs", min=1, max=1024, help="Decode and hash the entries (read by the workers themselves from a "
        "SQLite ledger), and check checkpoint signatures ahead, in N worker processes while the replay builds "
        "the tree and checks each checkpoint; 1: in the replay's own process (default: one worker per core for a "
        "log of 65,536 entries or more). The result is the same whatever N is.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Replay the ledger: entries, tree, every checkpoint signature and their mutual consistency; with
    --policy, the latest checkpoint must also satisfy the policy's witness quorum, and every entry must be dated
    within a day of the window its witnesses' cosignatures attest (exit 1 naming either).

    Example: heldout ledger verify   (the store's ledger);  heldout ledger verify LEDGER_ID --from EXPORT_DIR"""
    policy = load_policy(policy_file) if policy_file is not None else None
    show_progress = not as_json and err_console.is_terminal
    if source is not None:
        if ledger is None:
            raise LedgerUsageError("verifying an export pins the ledger id it must be: heldout ledger verify "
                                   "LEDGER_ID --from DIR")
        if not is_ledger_prefix(ledger.strip()):
            raise LedgerUsageError("LEDGER is a ledger id or a prefix of one (lowercase hex)", found=ledger[:80])
        from heldout.generations.verify import verify_public_log

        exported = open_public_log(source)
        # with a policy, every published cosignature of its witnesses verifies (not only the latest's), and each
        # entry's date lies in the window they attest (FORMATS rule 14), judged as the replay streams entries
        window = WitnessedTimes.of(policy, exported.checkpoints()) if policy is not None else None
        with _progress("replaying export", show_progress) as progress:
            report = verify_public_log(exported, expected_id=ledger.strip(), progress=progress, jobs=jobs,
                                       on_entry=_dated_within(window))
        latest = exported.latest_checkpoint()
        body = {**report.to_json(), "source": str(source), "missing_blobs": exported.manifest.get("missing_blobs")}
    else:
        with _open(store, ledger) as opened, _progress("replaying ledger", show_progress) as progress:
            window = WitnessedTimes.of(policy, opened.cosigned_checkpoints()) if policy is not None else None
            report = opened.verify(progress=progress, jobs=jobs, on_entry=_dated_within(window))
            latest = opened.cosigned_checkpoint()
            body = {**report.to_json(), "source": opened.location}
    witnessed = policy.evaluate(latest, origin=report.origin) if policy is not None else None
    if witnessed is not None:
        body["witnessed"] = witnessed.to_json()
    if as_json:
        print_json({"ok": True, **body, "root": report.root.hex()})
    else:
        _report_lines(report, body["source"])
        if witnessed is not None:
            console.print(f"checkpoint {latest.size} witnessed: quorum {witnessed.quorum} met by "
                          f"{', '.join(sorted(witnessed.cosignatures)) or 'no witness needed'}")


@app.command("follow")
@handle_errors
def follow(
    ledger: Annotated[str, typer.Argument(help="The ledger id (all 20 hex characters).", show_default=False)],
    source: Annotated[str, typer.Option(
        "--from", help="An export or tiles directory, or the http(s) URL of one.")],
    state: Annotated[Path | None, typer.Option(
        "--state", help="Where the last accepted checkpoint is kept (default: ./<ledger id>.follow.json).")] = None,
    key: Annotated[str | None, typer.Option(
        "--key", help="The ledger's checkpoint verifier key (default: pinned in the state, else entry 0's).")] = None,
    policy_file: PolicyOption = None,
    evidence: Annotated[Path | None, typer.Option(
        "--evidence", help="Folder for fork evidence (default: STATE.evidence).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Accept the export's latest checkpoint only if it extends the last one accepted (consistency proof from
    the export's entries) and, with --policy, is cosigned by the quorum. A smaller size, another root at the
    same size or an unproven larger one exits 1 and keeps both signed checkpoints as fork evidence. The source
    may be an export or a tiles directory (ledger tiles), local or served over http(s).

    Example: heldout ledger follow LEDGER_ID --from https://lab.example/export --policy ./policy.txt"""
    if not is_ledger_id(ledger.strip()):
        raise LedgerUsageError("follow pins the full ledger id (20 lowercase hex characters)", found=ledger[:80])
    policy = load_policy(policy_file) if policy_file is not None else None
    state_path = state or Path(f"{ledger.strip()}.follow.json")
    refuse_output_in_source(state_path, source, "--state")
    if evidence is not None:
        refuse_output_in_source(evidence, source, "--evidence")
    result = follow_export(source, ledger_id=ledger.strip(), state=state_path, key=key, policy=policy,
                           evidence_dir=evidence)
    if as_json:
        print_json({"ok": True, "state": str(state_path), **result.to_json()})
        return
    before = f"size {result.previous.size}" if result.previous else "nothing (first use: key pinned)"
    console.print(f"accepted checkpoint size {result.accepted.size} root {result.accepted.root_b64} "
                  f"(previously {before}); state {state_path}")


@app.command("export")
@handle_errors
def export(
    first: Annotated[str, typer.Argument(
        metavar="LEDGER_OR_DEST", help="DEST alone (the store's ledger), or LEDGER (id or prefix) then DEST.",
        show_default=False)],
    second: Annotated[str | None, typer.Argument(
        metavar="DEST", help="DEST when LEDGER is given: a new (or empty) directory for the public export.",
        show_default=False)] = None,
    store: StoreOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Write a self-contained public replay directory: entries, checkpoints, referenced blobs, public keys and
    seal manifests. Nothing from the store's private/ folder.

    Example: heldout ledger export ./public-export"""
    ledger, dest = (None, Path(first)) if second is None else (first, Path(second))
    st: Store = open_store(store)
    with _open(store, ledger) as opened:
        from heldout.generations.verify import logged_seal_files

        manifest = export_ledger(opened, dest, blobs=BlobStore(st.blobs), seals=st.seals,
                                 seal_files=logged_seal_files(opened.entries()))
    if as_json:
        print_json({"path": str(dest), **manifest})
        return
    console.print(f"exported ledger {manifest['ledger_id']} ({manifest['size']} entries, "
                  f"{len(manifest['checkpoints'])} checkpoints, {len(manifest['blobs'])} blobs) to {dest}")
    if manifest["missing_blobs"]:
        err_console.print(f"note: {len(manifest['missing_blobs'])} referenced blobs are not in the store "
                          "(listed in export.json as missing_blobs)")


@app.command("tiles")
@handle_errors
def tiles(
    first: Annotated[str, typer.Argument(
        metavar="LEDGER_OR_OUT", help="OUT alone (the store's ledger), or LEDGER (id or prefix) then OUT.",
        show_default=False)],
    second: Annotated[str | None, typer.Argument(
        metavar="OUT", help="OUT when LEDGER is given: the tiles directory to create, or an earlier run's to "
        "extend.", show_default=False)] = None,
    store: StoreOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Write or extend the C2SP tlog-tiles layout (checkpoint, tile/<L>/<N>, tile/entries/<N>) with the public
    blobs, keys, seals and checkpoints beside it, for static hosting. Full tiles are never rewritten; the
    checkpoint is written last. Nothing from the store's private/ folder.

    Example: heldout ledger tiles ./public-tiles   (again after appends: only what is new is written)"""
    ledger, dest = (None, Path(first)) if second is None else (first, Path(second))
    st: Store = open_store(store)
    with _open(store, ledger) as opened:
        from heldout.generations.verify import logged_seal_files

        result = write_tiles(opened, dest, blobs=BlobStore(st.blobs), seals=st.seals,
                             seal_files=logged_seal_files(opened.entries()))
    if as_json:
        print_json({"path": str(dest), **result.to_json()})
        return
    body = result.to_json()
    console.print(f"tiles of ledger {result.ledger_id} at size {result.size} (was {result.previous_size}) in {dest}: "
                  f"{body['written']} files written ({body['full_tiles_written']} full tiles), "
                  f"{body['unchanged']} unchanged, {body['removed_partials']} superseded partial tiles removed")
    if result.missing_blobs:
        err_console.print(f"note: {result.missing_blobs} referenced blobs are not in the store (listed in "
                          "heldout-tiles.json as missing_blobs)")


@app.command("migrate")
@handle_errors
def migrate(
    source: Annotated[str, typer.Argument(
        help="Where the ledger is: a postgresql:// URL, a folder of SQLite ledgers (a store's ledgers/) or one "
             ".sqlite file.", show_default=False)],
    destination: Annotated[str, typer.Argument(
        help="Where to copy it: a postgresql:// URL or a folder; must not hold this ledger yet.",
        show_default=False)],
    ledger: Annotated[str | None, typer.Option(
        "--ledger", help="Ledger id or unique prefix in SOURCE (default: its only ledger).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Copy a ledger between backends (SQLite <-> PostgreSQL) row for row (nothing is re-signed) and prove the
    copy identical: it replays clean, holds the same entry bytes, checkpoints and cosignatures, and has the same
    root at every checkpoint size. The copy appears only once proven.

    Example: heldout ledger migrate ~/.local/share/heldout/ledgers postgresql://lab@db.example/heldout"""
    with open_migration_source(source, ledger) as opened, \
            phase_progress(disable=as_json or not err_console.is_terminal) as tick:
        report = migrate_ledger(opened, backend_at(destination), progress=tick)
    if as_json:
        print_json(report.to_json())
        return
    console.print(f"copied ledger {report.ledger_id} ({report.size} entries, {report.checkpoints} checkpoints, "
                  f"{report.cosignatures} cosignatures) to {report.destination}")
    console.print("identical: same entries, checkpoints and cosignatures; same root at every checkpoint size")


def open_migration_source(source: str, ledger: str | None) -> Ledger:
    path = Path(source)
    if not source.startswith(("postgresql:", "postgres:")) and path.suffix == ".sqlite":
        if not path.is_file():
            raise LedgerUsageError(f"no ledger file at {source}", path=source)
        return Ledger.open(path, read_only=True)
    backend = backend_at(source)
    if ledger is None:
        found = backend.list_ids()
        if len(found) != 1:
            raise LedgerUsageError(f"{backend.description} holds {len(found)} ledgers; name one with --ledger",
                                   found=found)
        ledger = found[0]
    return backend.open(ledger, read_only=True)
