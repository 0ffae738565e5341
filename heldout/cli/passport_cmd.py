"""``heldout passport``: verify signed passports (issuance arrives with the audit)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

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
from keys import MalformedInput, PublicKey, TrustedKey, UntrustedKey, UsageError, parse_key_argument
from seals import PassportState, parse_json_object, verify_passport

app = typer.Typer(help="Signed evidence records for one model.", no_args_is_help=True)

EXIT_FOR_STATE = {PassportState.VALID: 0, PassportState.EXPIRED: 3}


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


@app.command("verify")
@handle_errors
def verify(
    file: Annotated[Path, typer.Argument(help="The passport JSON file.")],
    key: Annotated[str | None, typer.Option(help="Trusted key: base64 raw 32-byte key, or a key file.")] = None,
    store: StoreOption = None,
    at: Annotated[str | None, typer.Option(help="Reference time (ISO 8601); default: now.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Verify a passport: canonical form, Ed25519 signature under a trusted key, issuer key, expiry."""
    moment = reference_time(at)
    doc = read_document_file(file, what="passport")
    verdict = verify_passport(doc, trusted_key_for(doc, key, store), at=moment)
    if as_json:
        print_json(verdict.to_json())
    else:
        console.print(verdict.line)
    code = EXIT_FOR_STATE[verdict.state]
    if code:
        raise typer.Exit(code)
