"""``heldout witness``: run a C2SP tlog-witness, and configure the witnesses a store's ledger uses.

Witness side (``--store`` is the witness's own folder): ``init``, ``trust-log``, ``serve``.
Operator side (``--store`` is the heldout store): ``add``, ``list``, ``policy``, ``sync``, ``status``.
"""

from __future__ import annotations

import json
import math
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from heldout.cli.common import (
    JsonFlag,
    StoreOption,
    console,
    err_console,
    handle_errors,
    open_store,
    print_json,
    reference_time,
)
from heldout.generations.ledgers import open_ledger
from heldout.store import Store
from heldout.witness.operator import (
    POLICY_FILE,
    Witnessing,
    add_endpoint,
    default_policy_text,
    load_endpoints,
    set_policy,
    store_policy,
    witness_file,
    witness_folder,
    witnessed_head,
)
from heldout.witness.server import (
    MAX_CONNECTIONS,
    MAX_CONNECTIONS_PER_ADDRESS,
    WitnessServer,
    folder_lock,
    init_witness,
    load_witness,
    parse_listen,
)
from keys import MalformedInput, UsageError
from keys.safeio import not_a_file
from ledger import Ledger
from ledger.cosignature import Cosigner
from ledger.policy import Policy, QuorumError, parse_policy, read_policy_file
from ledger.witness import WitnessedLog, trust_log

app = typer.Typer(help="Witnesses (C2SP tlog-witness): run one, or have the ledger's checkpoints cosigned.",
                  no_args_is_help=True)

WitnessStore = Annotated[Path, typer.Option("--store", help="The witness's own folder (key, logs, state).")]
LedgerOpt = Annotated[str | None, typer.Argument(help="Ledger id or prefix (default: the store's default).")]


def _witness_folder(store: Path) -> Path:
    """The witness's folder, opened the way every ``--store`` is (a file there is refused, ``~`` expanded), so
    that its file-system errors take the same one road out as the store's."""
    return open_store(store).root


@app.command("init")
@handle_errors
def init(store: WitnessStore,
         name: Annotated[str, typer.Option("--name", help="The witness's key name (e.g. witness.example/w1).")],
         as_json: JsonFlag = False) -> None:
    """Create a witness folder with a new Ed25519 key; prints its cosignature verifier key (vkey, type 0x04).

    Example: heldout witness init --store ./witness --name witness.example/w1"""
    folder = _witness_folder(store)
    cosigner = init_witness(folder, name=name)
    if as_json:
        print_json({"name": cosigner.name, "vkey": cosigner.vkey, "store": str(folder)})
    else:
        console.print(cosigner.vkey)


@app.command("trust-log")
@handle_errors
def trust(origin: Annotated[str, typer.Argument(help="The log's origin line (heldout/ledger/<id>).")],
          vkey: Annotated[str, typer.Argument(help="The log's checkpoint verifier key (heldout ledger pubkey).")],
          store: WitnessStore, as_json: JsonFlag = False) -> None:
    """Follow a log: cosign its checkpoints signed by VKEY.

    Example: heldout witness trust-log heldout/ledger/LEDGER_ID "$(heldout ledger pubkey)" --store ./witness"""
    folder = _witness_folder(store)
    try:
        log = WitnessedLog.from_vkey(origin, vkey)
    except MalformedInput as exc:
        raise UsageError(exc.message, **exc.evidence) from None
    trust_log(folder, log)
    if as_json:
        print_json({"origin": log.origin, "vkey": log.vkey, "store": str(folder)})
    else:
        console.print(f"witnessing {log.origin} ({log.vkey})")


def _cannot_listen(listen: str, exc: BaseException) -> UsageError:
    reason = (exc.strerror if isinstance(exc, OSError) else None) or "not a valid host name"
    return UsageError(f"cannot listen on {listen}: {reason[:1].lower()}{reason[1:]}", found=listen)


def _check_host(listen: str, host: str, port: int) -> None:
    """The host of ``--listen`` resolves as the server will bind it (an unknown name is a usage error, not a
    file-system one; a name IDNA cannot encode is one too, not a TypeError from bind)."""
    try:
        socket.getaddrinfo(host, port, WitnessServer.address_family, socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise _cannot_listen(listen, exc) from None


@app.command("serve")
@handle_errors
def serve(store: WitnessStore,
          listen: Annotated[str, typer.Option("--listen", help="HOST:PORT (port 0: any free port).")] =
          "127.0.0.1:8700",
          max_seconds: Annotated[float | None, typer.Option("--max-seconds",
                                                            help="Stop after this long (tests).")] = None,
          verbose: Annotated[bool, typer.Option("--verbose", help="Log every request to stderr.")] = False,
          max_per_address: Annotated[int, typer.Option(
              "--max-per-address", min=1, max=MAX_CONNECTIONS,
              help="Connections one client address may hold at once (behind a reverse proxy, every client has "
                   "its address: raise it there).")] = MAX_CONNECTIONS_PER_ADDRESS,
          as_json: Annotated[bool, typer.Option(
              "--json", help="Announce the server as one line of JSON (url, name, vkey) instead.")] = False) -> None:
    """Serve POST /add-checkpoint until interrupted. Prints 'listening on URL' once ready.

    Example: heldout witness serve --store ./witness --listen 127.0.0.1:8700"""
    if max_seconds is not None and not (math.isfinite(max_seconds) and max_seconds > 0):
        raise UsageError("--max-seconds is a number of seconds above 0", field="--max-seconds",
                         found=repr(max_seconds))  # (inf overflows the wait; nan and -1 would stop at once)
    address = parse_listen(listen)
    _check_host(listen, *address)  # before the witness folder is touched (the lock file, the state database)
    folder = _witness_folder(store)
    with folder_lock(folder):
        witness = load_witness(folder, clock=reference_time)
        try:
            server = WitnessServer(address, witness, verbose=verbose, max_per_address=max_per_address)
        except (OSError, UnicodeError) as exc:  # a port in use or not ours to take: not the file system's fault
            witness.close()
            raise _cannot_listen(listen, exc) from None
        stop = threading.Event()

        def finish(*_: object) -> None:
            stop.set()

        signal.signal(signal.SIGTERM, finish)
        signal.signal(signal.SIGINT, finish)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        thread.start()
        if as_json:  # one line: the server keeps running, so a reader takes the announcement line by line
            sys.stdout.write(json.dumps({"url": server.url, "name": witness.signer.name,
                                         "vkey": Cosigner.of(witness.signer).vkey}, sort_keys=True) + "\n")
            sys.stdout.flush()
        else:
            console.print(f"listening on {server.url} as {witness.signer.name}", highlight=False)
            console.file.flush()
        # (threading's waits take at most TIMEOUT_MAX seconds, some 292 years: a longer limit is that)
        stop.wait(timeout=None if max_seconds is None else min(max_seconds, threading.TIMEOUT_MAX))
        server.shutdown()
        server.server_close()
        witness.close()


@app.command("add")
@handle_errors
def add(url: Annotated[str, typer.Argument(help="The witness's submission prefix (http://HOST:PORT).")],
        key: Annotated[str, typer.Option("--key", help="The witness's verifier key (vkey, type 0x04).")],
        store: StoreOption = None, as_json: JsonFlag = False) -> None:
    """Have every checkpoint of this store's ledgers cosigned by the witness at URL.

    Example: heldout witness add http://127.0.0.1:8700 --key "$VKEY"   (the vkey heldout witness init printed)"""
    st = open_store(store)
    endpoint = add_endpoint(st, url, key)
    configured = len(load_endpoints(st))
    if as_json:
        print_json({"name": endpoint.cosigner.name, **endpoint.to_json(), "configured": configured})
    else:
        console.print(f"witness {endpoint.cosigner.name} at {endpoint.url} added ({configured} configured)")


@app.command("list")
@handle_errors
def list_witnesses(store: StoreOption = None, as_json: JsonFlag = False) -> None:
    """The configured witnesses.

    Example: heldout witness list --json"""
    endpoints = load_endpoints(open_store(store))
    if as_json:
        print_json({"witnesses": [e.to_json() for e in endpoints]})
        return
    table = Table(title="witnesses")
    table.add_column("name")
    table.add_column("url")
    table.add_column("vkey")
    for e in endpoints:
        table.add_row(e.cosigner.name, e.url, e.cosigner.vkey)
    console.print(table)


@app.command("policy")
@handle_errors
def policy(file: Annotated[Path | None, typer.Argument(help="A C2SP tlog-policy file.", show_default=False)] = None,
           store: StoreOption = None, as_json: JsonFlag = False) -> None:
    """Set the store's witness policy from FILE (C2SP tlog-policy), or print the one in force (without a policy
    file: a majority of the configured witnesses).

    Example: heldout witness policy ./policy.txt"""
    st = open_store(store)
    path = witness_folder(st) / POLICY_FILE
    if file is None:
        data = witness_file(path, "witness policy")
        text = data.decode("utf-8", "replace") if data is not None else default_policy_text(load_endpoints(st))
        parsed = parse_policy(text)  # (printed or not: a damaged policy is said, never shown as if in force)
        if as_json:
            print_json({**_policy_json(parsed, text), "path": str(path) if data is not None else None})
        else:
            console.print(text, end="", highlight=False)
        return
    if not file.is_file():
        raise UsageError(not_a_file(file, "policy file"), path=str(file))
    data = read_policy_file(file)
    parsed = set_policy(st, data)
    if as_json:
        print_json({**_policy_json(parsed, data.decode()), "path": str(path)})
    else:
        console.print(f"policy set: quorum {parsed.quorum or 'none'} over {len(parsed.witnesses)} witnesses")


def _policy_json(parsed: Policy, text: str) -> dict[str, object]:
    return {"quorum": parsed.quorum, "text": text,
            "witnesses": [{"name": name, "vkey": w.cosigner.vkey, "url": w.url}
                          for name, w in sorted(parsed.witnesses.items())]}


def _outcome_table(rows: list[dict[str, object]]) -> Table:
    table = Table(title="witnesses")
    for column in ("witness", "url", "ok", "size", "detail"):
        table.add_column(column)
    for row in rows:
        table.add_row(*(str(row[c]) for c in ("witness", "url", "ok", "size", "detail")))
    return table


@app.command("sync")
@handle_errors
def sync(ledger: LedgerOpt = None, store: StoreOption = None, as_json: JsonFlag = False) -> None:
    """Send the ledger's latest checkpoint to every witness again; exit 1 when the policy's quorum is still
    not met (naming it).

    Example: heldout witness sync --json"""
    st = open_store(store)
    with open_ledger(st, ledger) as opened:
        witnessing = opened.after_checkpoint
        if not isinstance(witnessing, Witnessing):
            raise UsageError("no witnesses configured; run: heldout witness add URL --key VKEY")
        outcomes = [o.to_json() for o in witnessing.witness(opened, wait_all=True)]
        witnessing.close()
        _report_quorum(st, opened, outcomes, as_json)


def _report_quorum(st: Store, opened: Ledger, outcomes: list[dict[str, object]], as_json: bool) -> None:
    error: QuorumError | None = None
    head = None
    try:
        head = witnessed_head(opened, store_policy(st))
    except QuorumError as exc:
        error = exc
    if as_json:
        print_json({"ledger_id": opened.ledger_id, "size": opened.latest_checkpoint().size, "outcomes": outcomes,
                    "witnessed": head.to_json() if head else None,
                    "error": error.to_json() if error else None})
    else:
        if outcomes:
            console.print(_outcome_table(outcomes))
        if head is not None:
            console.print(f"checkpoint {head.checkpoint.size} witnessed: quorum {head.quorum} met by "
                          f"{', '.join(sorted(head.cosignatures)) or 'no witness needed'}")
    if error is not None:
        if not as_json:
            err_console.print(f"error: {error.message}")
        raise typer.Exit(error.exit_code)


@app.command("status")
@handle_errors
def status(ledger: LedgerOpt = None, store: StoreOption = None, as_json: JsonFlag = False) -> None:
    """Whether the ledger's latest checkpoint satisfies the store's witness policy (exit 1 naming the missing
    quorum when it does not), and who cosigned it.

    Example: heldout witness status"""
    st = open_store(store)
    with open_ledger(st, ledger) as opened:
        if isinstance(opened.after_checkpoint, Witnessing):
            opened.after_checkpoint.close()
        _report_quorum(st, opened, [], as_json)
