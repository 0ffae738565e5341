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
from heldout.generations import ledger_signer, open_ledger
from heldout.passports import LedgerFacts, check_passport_on_ledger, check_passport_proofs, issue_passport
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
from keys.safeio import DOCUMENT_LIMIT, read_named
from ledger import Checkpoint, Ledger
from ledger.entries import origin_of
from ledger.policy import Policy, Witnessed, load_policy
from ledger.public import open_public_log
from seals import EXIT_CODE_FOR_STATE, Passport, parse_json_object, verify_passport

app = typer.Typer(help="Signed evidence records for one model.", no_args_is_help=True)

EXIT_FOR_STATE = EXIT_CODE_FOR_STATE


def read_document_file(path: Path, *, what: str) -> dict:
    if not path.is_file():
        raise UsageError(f"no {what} file at {path}", path=str(path))
    return parse_json_object(read_named(path, limit=DOCUMENT_LIMIT, what=what), what=f"{what} {path.name}")


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


UNCHECKED = "not checked against its ledger"


def _anchored_ledger_id(doc: dict) -> str | None:
    computed = doc.get("computed")
    heldout = computed.get("heldout") if isinstance(computed, dict) else None
    ledger_id = heldout.get("ledger_id") if isinstance(heldout, dict) else None
    return ledger_id if isinstance(ledger_id, str) else None


def _ledger_facts(doc: dict, store: Path | None, from_dir: str | None) -> LedgerFacts | None:
    """The ledger the passport is anchored to: the export given with --from (replayed and its manifest checked
    first), else that ledger in the store (--store, $HELDOUT_STORE, or the default store) when the store holds
    it; None when neither applies (the passport is then checked on its own, and said to be)."""
    ledger_id = _anchored_ledger_id(doc)
    if from_dir is not None:
        if ledger_id is None:
            raise VerificationError("the passport is not anchored to a ledger (computed.heldout is empty)",
                                    field="computed.heldout")
        export = open_public_log(from_dir)
        export.verify(expected_id=ledger_id, check_blobs=False)
        return LedgerFacts.of(export)
    if ledger_id is None:
        return None
    st = open_store(store)
    try:
        path = Ledger.locate(st.ledgers, ledger_id)
    except HeldoutError:
        return None
    with Ledger.open(path, read_only=True) as ledger:
        ledger.verify(expected_id=ledger_id)
        return LedgerFacts.of(ledger)


def _offline_proofs(passport: Passport, trusted: PublicKey | TrustedKey) -> Checkpoint | None:
    """Without a ledger, a passport anchored to one still proves its seal and bundles were logged (its C2SP
    tlog-proofs against the log key, which is the issuer's: the operator signs both)."""
    if not isinstance(passport.heldout, dict):
        return None
    if isinstance(trusted, TrustedKey):
        return check_passport_proofs(passport, log_name=trusted.name, log_key=trusted.public_key)
    return check_passport_proofs(passport, log_name=passport.issuer.name, log_key=trusted)


def _witnessed(passport: Passport, policy: Policy) -> Witnessed:
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


@app.command("verify")
@handle_errors
def verify(
    file: Annotated[Path, typer.Argument(help="The passport JSON file.")],
    key: Annotated[str | None, typer.Option(help="Trusted key: base64 raw 32-byte key, or a key file. With a "
                                            "ledger it must also be a key the ledger declares.")] = None,
    store: StoreOption = None,
    from_dir: Annotated[str | None, typer.Option(
        "--from", help="Check against a public ledger export, or a tiles directory or its http(s) URL.")] = None,
    at: Annotated[str | None, typer.Option(help="Reference time (ISO 8601); default: now.")] = None,
    policy_file: Annotated[Path | None, typer.Option(
        "--policy", help="Witness policy (C2SP tlog-policy): the passport's proofs must rest on a checkpoint of a "
        "log the policy lists, cosigned by its quorum (no network, no export needed).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Verify a passport: canonical form, Ed25519 signature, expiry, its offline proofs (with --policy: on a
    checkpoint the policy's witnesses cosigned); with its ledger (--from an export, else the
    store's copy of that ledger: --store, $HELDOUT_STORE or the default store): the issuer key declared by the
    ledger, the passport logged, its checkpoint, inclusion proofs, expiry within its generation's, and whether
    its generation was retired since (lapsed, exit 4). Without its ledger the verdict says it was not checked.

    Example: heldout passport verify model.passport.json --from ./public-export"""
    moment = reference_time(at)
    policy = load_policy(policy_file) if policy_file is not None else None
    doc = read_document_file(file, what="passport")
    facts = _ledger_facts(doc, store, from_dir)
    if facts is not None:
        verdict = check_passport_on_ledger(doc, facts, at=moment,
                                           pinned=parse_key_argument(key) if key is not None else None)
        proven = None
    else:
        trusted = trusted_key_for(doc, key, store)
        verdict = verify_passport(doc, trusted, at=moment)
        proven = _offline_proofs(verdict.passport, trusted)
    witnessed = _witnessed(verdict.passport, policy) if policy is not None else None
    checked = facts is not None
    offline = None if proven is None else (f"its seal and {len(verdict.passport.evaluations)} bundles proven "
                                           f"included offline at checkpoint size {proven.size}")
    if witnessed is not None:
        offline = (offline + "; " if offline else "") + (
            f"its checkpoint {witnessed.checkpoint.size} is cosigned by quorum {witnessed.quorum} "
            f"({', '.join(sorted(witnessed.cosignatures))})")
    if as_json:
        print_json({**verdict.to_json(), "ledger_checked": checked,
                    **({} if witnessed is None else {"witnessed": witnessed.to_json()}),
                    **({} if checked else {"qualification": UNCHECKED}),
                    **({} if proven is None else {"offline_proofs": {"checkpoint_size": proven.size,
                                                                     "verdict": offline}})})
    else:
        console.print(verdict.line + (f"; {offline}" if offline else "")
                      + ("" if checked else f"; {UNCHECKED} (give --store or --from)"))
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
    current; appends a passport entry and writes passports/<model>__<generation>.passport.json.

    Example: heldout audit && heldout passport issue cnn_small --generation gen2"""
    now = reference_time()
    st = open_store(store)
    opened = open_ledger(st, ledger)
    try:
        signer = ledger_signer(st, opened)
        issued = issue_passport(st, opened, signer, model_id, generation=generation, now=now)
    finally:
        opened.close()
    if as_json:
        print_json({"path": str(issued.path), "index": issued.index, "sha256": issued.sha256,
                    "expiry_utc": issued.document["expiry_utc"]})
        return
    console.print(f"passport for {model_id} on {issued.document['computed']['heldout']['generation']} issued at "
                  f"entry {issued.index}, valid until {issued.document['expiry_utc']}: {issued.path}")
