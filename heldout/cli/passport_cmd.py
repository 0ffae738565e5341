"""``heldout passport``: verify signed passports (issuance arrives with the audit)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from heldout.cli.common import (
    JsonFlag,
    StoreOption,
    console,
    handle_errors,
    open_store,
    print_json,
    reference_time,
)
from heldout.generations import ledger_signer, open_ledger
from heldout.generations.ledgers import generations_lock
from heldout.passports import LedgerView, issue_passport, verify_passport_on_ledger
from keys import (
    HeldoutError,
    MalformedInput,
    PublicKey,
    TrustedKey,
    UntrustedKey,
    UsageError,
    VerificationError,
    parse_key_argument,
)
from ledger import Ledger, open_export
from seals import EXIT_CODE_FOR_STATE, parse_json_object, verify_passport

app = typer.Typer(help="Signed evidence records for one model.", no_args_is_help=True)

EXIT_FOR_STATE = EXIT_CODE_FOR_STATE


def read_document_file(path: Path, *, what: str) -> dict:
    if not path.is_file():
        raise UsageError(f"no {what} file at {path}", path=str(path))
    return parse_json_object(path.read_bytes(), what=f"{what} {path.name}")


def trusted_key_for(doc: dict, key: str | None, store: Path | None) -> PublicKey | TrustedKey:
    """``--key`` when given; otherwise the keyring entry named by the document's issuer key id."""
    if key is not None:
        return parse_key_argument(key)
    issuer = doc.get("issuer")
    if not isinstance(issuer, dict) or not isinstance(issuer.get("key_id"), str):
        raise MalformedInput("document has no issuer.key_id to look up in the keyring", field="issuer.key_id")
    keyring = open_store(store).keyring
    try:
        return keyring.get(issuer["key_id"])
    except UsageError:
        raise UntrustedKey(
            f"issuer key {issuer['key_id']!r} is not in the keyring at {keyring.folder}; pass --key to trust one",
            field="issuer.key_id", found=issuer["key_id"],
        ) from None


def _ledger_view(doc: dict, store: Path | None, from_dir: Path | None) -> tuple[LedgerView, TrustedKey, Any] | None:
    """The ledger the passport is anchored to: the export given with --from, else the store's ledger of that id
    when the store has it; None when neither applies (the passport is then checked on its own)."""
    heldout = (doc.get("computed") or {}).get("heldout") if isinstance(doc.get("computed"), dict) else None
    ledger_id = heldout.get("ledger_id") if isinstance(heldout, dict) else None
    if from_dir is not None:
        if not isinstance(ledger_id, str):
            raise VerificationError("the passport is not anchored to a ledger (computed.heldout is empty)",
                                    field="computed.heldout")
        export = open_export(from_dir)
        export.verify(expected_id=ledger_id, check_blobs=False)
        return LedgerView(export), export.ledger_key, None
    if store is None or not isinstance(ledger_id, str):
        return None
    st = open_store(store)
    try:
        path = Ledger.locate(st.ledgers, ledger_id)
    except HeldoutError:
        return None
    ledger = Ledger.open(path)
    return LedgerView(ledger), ledger.key, ledger


@app.command("verify")
@handle_errors
def verify(
    file: Annotated[Path, typer.Argument(help="The passport JSON file.")],
    key: Annotated[str | None, typer.Option(help="Trusted key: base64 raw 32-byte key, or a key file.")] = None,
    store: StoreOption = None,
    from_dir: Annotated[Path | None, typer.Option("--from", help="Check against a public ledger export.")] = None,
    at: Annotated[str | None, typer.Option(help="Reference time (ISO 8601); default: now.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Verify a passport: canonical form, Ed25519 signature under a trusted key, issuer key, expiry; with a
    ledger (--store holding it, or --from an export): its checkpoint, inclusion proofs, and whether its
    generation was retired since (lapsed, exit 4)."""
    moment = reference_time(at)
    doc = read_document_file(file, what="passport")
    trusted = trusted_key_for(doc, key, store)
    anchored = _ledger_view(doc, store, from_dir)
    if anchored is None:
        verdict = verify_passport(doc, trusted, at=moment)
        ledger_checked = False
    else:
        view, ledger_key, closable = anchored
        try:
            verdict = verify_passport_on_ledger(doc, trusted, view, ledger_key, at=moment)
        finally:
            if closable is not None:
                closable.close()
        ledger_checked = True
    if as_json:
        print_json({**verdict.to_json(), "ledger_checked": ledger_checked})
    else:
        heldout = verdict.passport.heldout
        unchecked = isinstance(heldout, dict) and not ledger_checked
        console.print(verdict.line + ("; not checked against its ledger (give --store or --from)" if unchecked
                                      else ""))
    code = EXIT_FOR_STATE[verdict.state]
    if code:
        raise typer.Exit(code)


@app.command("issue")
@handle_errors
def issue(
    model_id: Annotated[str, typer.Argument(help="The model whose bundles the passport certifies.")],
    generation: Annotated[str | None, typer.Option("--generation", help="Default: the most recent current "
                                                   "generation with bundles of the model.")] = None,
    ledger: Annotated[str | None, typer.Option("--ledger", help="Ledger id (default: the store's).")] = None,
    store: StoreOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Issue a signed passport: refused without a clean audit at the ledger head or on a generation that is not
    current; appends a passport entry and writes passports/<model>__<generation>.passport.json."""
    now = reference_time()
    st = open_store(store)
    opened = open_ledger(st, ledger)
    try:
        signer = ledger_signer(st, opened)
        with generations_lock(opened):
            issued = issue_passport(st, opened, signer, model_id, generation=generation, now=now)
    finally:
        opened.close()
    if as_json:
        print_json({"path": str(issued.path), "index": issued.index, "sha256": issued.sha256,
                    "expiry_utc": issued.document["expiry_utc"]})
        return
    console.print(f"passport for {model_id} on {issued.document['computed']['heldout']['generation']} issued at "
                  f"entry {issued.index}, valid until {issued.document['expiry_utc']}: {issued.path}")
