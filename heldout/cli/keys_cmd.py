"""``heldout keys``: the operator's signing keys and the keyring of trusted public keys."""

from __future__ import annotations

from typing import Annotated

import typer

from heldout.cli.common import (
    JsonFlag,
    StoreOption,
    console,
    err_console,
    handle_errors,
    open_store,
    print_json,
    table,
)
from heldout.store import Store
from keys import Signer, TrustedKey, UsageError, verifier_key_string
from keys.signer import check_key_id, check_key_name

app = typer.Typer(help="Signing keys and the keyring of trusted public keys.", no_args_is_help=True)

DEFAULT_NAME = "heldout-operator"


@app.command("init")
@handle_errors
def init(
    store: StoreOption = None,
    name: Annotated[str, typer.Option(help="Signer name (appears in documents and checkpoint notes).")] = DEFAULT_NAME,
    key_id: Annotated[
        str | None, typer.Option("--key-id", help="Key id (default: <name>-<fingerprint prefix>).")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Generate an Ed25519 signing key in the store's private folder and trust its public key.

    Example: heldout keys init --name lab-operator"""
    check_key_name(name)  # before anything is created: a refused init leaves nothing
    if key_id is not None:
        check_key_id(key_id)
    st = open_store(store)
    if key_id is not None:
        _refuse_case_twin(st, key_id)
    st.create()
    signer = Signer.generate(name=name, key_id=key_id if key_id is not None else "pending")
    if key_id is None:
        signer = _rename(signer, f"{name}-{signer.public_key.fingerprint[:8]}")
    path = st.private_key_path(signer.key_id)
    completed = False
    if path.exists():
        if key_id is None or st.keyring.path_for(key_id).exists():
            raise UsageError(f"a private key {signer.key_id!r} already exists in {st.private_keys}",
                             key_id=signer.key_id)
        # an init of this key id killed after it saved the private key and before it trusted it: trusted now
        signer, completed = st.load_signer(key_id), True
    trusted = TrustedKey(key_id=signer.key_id, name=signer.name, public_key=signer.public_key)
    if not completed:
        signer.save(path)
    st.keyring.add(trusted)
    if completed:
        err_console.print(f"note: key {signer.key_id} was saved by an earlier init that stopped before trusting "
                          "it; it is trusted now (no new key was made)")
    if as_json:
        print_json(trusted.to_json())
    else:
        console.print(f"created key {signer.key_id} ({signer.name}) in {st.root}")
        console.print(f"public key {signer.public_key.b64}")


def _refuse_case_twin(st: Store, key_id: str) -> None:
    """A key id that differs from one the store has only in letter case names another file on a case-blind file
    system (a copy of the store, an export's ``keys/``): refused."""
    for folder, suffix in ((st.keyring.folder, ".pub.json"), (st.private_keys, ".key")):
        names = [path.name.removesuffix(suffix) for path in folder.glob(f"*{suffix}")] if folder.is_dir() else []
        twin = next((name for name in names if name != key_id and name.lower() == key_id.lower()), None)
        if twin is not None:
            raise UsageError(f"key id {key_id!r} differs from the store's key {twin!r} only in letter case",
                             field="key_id", found=key_id, expected=f"not {twin!r}")


def _rename(signer: Signer, key_id: str) -> Signer:
    # The default key id depends on the public key, which exists only once generated.
    return Signer.with_key_id(signer, key_id)


@app.command("list")
@handle_errors
def list_keys(store: StoreOption = None, as_json: JsonFlag = False) -> None:
    """List the trusted public keys of the store.

    Example: heldout keys list --json"""
    st = open_store(store)
    keys = st.keyring.list()
    private = {p.stem for p in st.private_keys.glob("*.key")} if st.private_keys.is_dir() else set()
    if as_json:
        print_json([{**k.to_json(), "has_private_key": k.key_id in private} for k in keys])
        return
    shown = table(f"keys in {st.root}", ("key id", "name", "public key (base64)", "private"))
    for k in keys:
        shown.add_row(k.key_id, k.name, k.public_key.b64, "yes" if k.key_id in private else "")
    console.print(shown)


@app.command("show")
@handle_errors
def show(
    key_id: Annotated[str, typer.Argument(help="The key id (see heldout keys list).")],
    store: StoreOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Show one trusted key: id, name, base64, fingerprint and note verifier key.

    Example: heldout keys show heldout-operator-1a2b3c4d"""
    k = open_store(store).keyring.get(key_id)
    if as_json:
        print_json(k.to_json())
        return
    for field, value in k.to_json().items():
        console.print(f"{field}: {value}")


@app.command("export-public")
@handle_errors
def export_public(
    key_id: Annotated[str, typer.Argument(help="The key id (see heldout keys list).")],
    store: StoreOption = None,
    fmt: Annotated[str, typer.Option("--format", help="json | b64 | note")] = "json",
    as_json: JsonFlag = False,
) -> None:
    """Print a public key for others to trust: the key file (json), base64 (b64) or the note verifier key.

    Example: heldout keys export-public heldout-operator-1a2b3c4d --format b64"""
    k = open_store(store).keyring.get(key_id)
    if as_json or fmt == "json":
        print_json(k.to_json())
    elif fmt == "b64":
        typer.echo(k.public_key.b64)
    elif fmt == "note":
        typer.echo(verifier_key_string(k.name, k.public_key))
    else:
        raise UsageError("--format is one of json, b64, note", found=fmt)
