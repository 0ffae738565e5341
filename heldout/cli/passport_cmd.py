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
    read_document_file,
    reference_time,
)
from heldout.generations import ledger_signer, open_ledger
from heldout.passports import issue_passport
from keys import (
    parse_key_argument,
)
from ledger.policy import load_policy
from seals import EXIT_CODE_FOR_STATE

app = typer.Typer(help="Signed evidence records for one model.", no_args_is_help=True)

EXIT_FOR_STATE = EXIT_CODE_FOR_STATE


UNCHECKED = "not checked against its ledger"


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
        "log the policy lists, cosigned by its quorum (no network, no export needed); with its ledger, the "
        "ledger's head must be cosigned by the quorum too.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Verify a passport: its members' forms, the Ed25519 signature over its canonical bytes (the file may be in
    any JSON form), expiry, its offline proofs (with --policy: on a
    checkpoint the policy's witnesses cosigned); with its ledger (--from an export, else the
    store's copy of that ledger: --store, $HELDOUT_STORE or the default store): the issuer key declared by the
    ledger, the passport logged, its checkpoint, inclusion proofs, expiry within its generation's, and whether
    its generation was retired since (lapsed, exit 4). Without its ledger the verdict says it was not checked.

    Example: heldout passport verify model.passport.json --from ./public-export"""
    moment = reference_time(at)
    policy = load_policy(policy_file) if policy_file is not None else None
    doc = read_document_file(file, what="passport")
    from heldout.audit.gate import verify_passport_claim

    found = verify_passport_claim(doc, store=open_store(store), source=from_dir, at=moment,
                                  pinned=parse_key_argument(key) if key is not None else None, policy=policy)
    verdict, proven, witnessed, checked = found.verdict, found.proven, found.witnessed, found.ledger_checked
    offline = None if proven is None else (f"its seal and {len(verdict.passport.evaluations)} bundles proven "
                                           f"included offline at checkpoint size {proven.size}")
    if witnessed is not None:
        offline = (offline + "; " if offline else "") + (
            f"its checkpoint {witnessed.checkpoint.size} is cosigned by quorum {witnessed.quorum} "
            f"({', '.join(sorted(witnessed.cosignatures))})")
    head = found.head_witnessed
    if head is not None:
        offline = (offline + "; " if offline else "") + (
            f"the ledger's head {head.checkpoint.size} is cosigned by quorum {head.quorum} "
            f"({', '.join(sorted(head.cosignatures))})")
    if as_json:
        print_json({**verdict.to_json(), "ledger_checked": checked,
                    **({} if witnessed is None else {"witnessed": witnessed.to_json()}),
                    **({} if head is None else {"head_witnessed": head.to_json()}),
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
        from heldout.audit.report import ReportRecord  # (here: only issue needs it)
        from heldout.store import auditor_state_path

        # the report must be one the audit recorded writing clean (the record --since trusts, the auditor's own)
        recorded = ReportRecord.of(auditor_state_path(), opened.ledger_id, "operator").digests()
        issued = issue_passport(st, opened, signer, model_id, generation=generation, now=now, clean_reports=recorded)
    finally:
        opened.close()
    if as_json:
        print_json({"path": str(issued.path), "index": issued.index, "sha256": issued.sha256,
                    "expiry_utc": issued.document["expiry_utc"]})
        return
    console.print(f"passport for {model_id} on {issued.document['computed']['heldout']['generation']} issued at "
                  f"entry {issued.index}, valid until {issued.document['expiry_utc']}: {issued.path}")
