"""Generation commands: ``heldout init``, ``pool add|list``, ``seal``, ``retire``, ``verify-reveal``,
``prove-member``, ``verify-member`` and ``status``.

Time: every command takes its reference time once, from ``$HELDOUT_NOW`` when set (an ISO 8601 time, for
tests and rehearsals: typer commands cannot take a clock object), else the system clock; ``status``,
``verify-reveal`` and ``verify-member`` also take ``--at``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from heldout.cli.common import (
    JsonFlag,
    StoreOption,
    console,
    err_console,
    handle_errors,
    open_store,
    output_file,
    print_json,
    progress_bars,
    read_document_file,
    reference_time,
    require_from_folder,
    table,
)
from heldout.generations import (
    RETIRE_REASONS,
    MemberProof,
    SealRequest,
    add_pool,
    load_generations,
    open_ledger,
    pool_case_ids,
    pool_tasks,
    prove_member,
    retire_generation,
    seal_generation,
    verify_member_proof,
)
from heldout.generations.access import pending_draw_path
from heldout.generations.budget import DEFAULT_DELTA, DEFAULT_EPS, DEFAULT_K
from heldout.generations.ledgers import DATABASE_ENV, DEFAULT_LEDGER_NAME, initialise_store, ledger_signer
from heldout.generations.seal import generations_and_pending
from heldout.generations.verify import read_first_in
from heldout.store import Store
from keys import (
    PublicKey,
    TrustedKey,
    UsageError,
    parse_key_argument,
)
from keys.files import write_atomic
from ledger.policy import load_policy
from seals import format_utc, parse_json_object, parse_utc

LedgerOption = Annotated[str | None, typer.Option(
    "--ledger", help="Ledger id or unique prefix (default: the store's, from heldout init).", show_default=False)]
AtOption = Annotated[str | None, typer.Option("--at", help="Reference time (ISO 8601); default: now.")]
KeyOption = Annotated[str | None, typer.Option(
    "--key", help="Trusted key: base64 raw 32-byte key, note verifier key, or key file (default: keyring).")]

pool_app = typer.Typer(help="Private pools of cases that sealed generations are drawn from.",
                       no_args_is_help=True)


command_now = reference_time


def _comma_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _trusted_key(doc: dict[str, Any], key: str | None, store: Store) -> PublicKey | TrustedKey:
    """``--key`` when given; otherwise the keyring entry named by the document's issuer key id."""
    return parse_key_argument(key) if key is not None else store.issuer_key(doc, what="seal manifest")


# --- init ---------------------------------------------------------------------------------------------------

@handle_errors
def init(
    store: StoreOption = None,
    name: Annotated[str, typer.Option("--name", help="The ledger's name (in its genesis entry).")] =
        DEFAULT_LEDGER_NAME,
    key_id: Annotated[str | None, typer.Option("--key-id", help="Operator key to use when the store has several.")]
        = None,
    database: Annotated[str | None, typer.Option(
        "--database", help="Keep the ledger in this PostgreSQL database (postgresql://..., no password in it: "
        "use ~/.pgpass, PGPASSFILE, a service file or PGPASSWORD); default $HELDOUT_DATABASE, else SQLite in "
        "the store.", show_default=False)] = None,
    as_json: JsonFlag = False,
) -> None:
    """Create the store, an operator key (when it has none) and a ledger with its genesis entry; the ledger
    becomes the store's default. Prints the ledger id.

    Example: heldout init --store ./lab-store --name lab"""
    database = database if database is not None else os.environ.get(DATABASE_ENV, "").strip() or None
    made = initialise_store(open_store(store), name=name, key_id=key_id, database=database, now=command_now())
    if as_json:
        print_json(made.to_json())
        return
    console.print(f"store {made.store}; operator key {made.key_id}" + (" (new)" if made.key_created else ""))
    console.print(f"ledger {made.ledger_id}" + (f" in {made.ledger_location}" if made.database else ""))


# --- pools ----------------------------------------------------------------------------------------------------

@pool_app.command("add")
@handle_errors
def pool_add(
    task: Annotated[str, typer.Argument(help="Task name, e.g. bloodmnist or bloodmnist_224.")],
    file: Annotated[Path, typer.Argument(help="An npz file in the MedMNIST layout.")],
    split: Annotated[str, typer.Option("--split", help="Which split of the file: test, val or train.")] = "test",
    store: StoreOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Register the cases of FILE's split as private cases of TASK (nothing goes to the ledger).

    Example: heldout pool add bloodmnist incoming/bloodmnist.npz --split test"""
    st = open_store(store)
    with progress_bars(transient=True, disable=not err_console.is_terminal) as bar:
        job = bar.add_task(f"hashing {file.name} ({split})", total=None)
        result = add_pool(st, task, file, split, progress=lambda done, total: bar.update(job, completed=done,
                                                                                          total=total))
    if as_json:
        print_json(result.to_json())
        return
    console.print(f"{task}: {result.added} new cases from {file.name} ({split}, {result.read} read; "
                  f"{result.already_in_pool} already in the pool, {result.repeated_in_file} repeated in the "
                  f"file); pool size {result.pool_size}")


@pool_app.command("list")
@handle_errors
def pool_list(store: StoreOption = None, ledger: LedgerOption = None, as_json: JsonFlag = False) -> None:
    """Each task's pool: its size and how many cases no generation has used.

    Example: heldout pool list --json"""
    from heldout.generations.access import used_case_ids

    st = open_store(store)
    with open_ledger(st, ledger, read_only=True) as opened:
        used = used_case_ids(st, opened.ledger_id, load_generations(opened, command_now()))
    rows = []
    for task in pool_tasks(st):
        ids = pool_case_ids(st, task)
        rows.append({"task": task, "pool": len(ids), "unused": len(set(ids) - used)})
    if as_json:
        print_json(rows)
        return
    shown = table(f"pools in {st.root}", ("task", "cases", "unused"), right=("cases", "unused"))
    for row in rows:
        shown.add_row(str(row["task"]), str(row["pool"]), str(row["unused"]))
    console.print(shown)


# --- seal -----------------------------------------------------------------------------------------------------

@handle_errors
def seal(
    generation: Annotated[str, typer.Argument(help="genN (gen1, gen2, ...) or public.")],
    tasks: Annotated[str, typer.Option("--tasks", help="Comma-separated tasks, e.g. bloodmnist,breastmnist.")],
    expires: Annotated[str, typer.Option("--expires", help="Expiry (ISO 8601 date or time, UTC).")],
    per_task: Annotated[int | None, typer.Option("--per-task", help="Cases drawn per task (not for public).")]
        = None,
    budget_bits: Annotated[float | None, typer.Option(
        "--budget-bits", help="Explicit leakage budget in bits (default: from n, k, delta, eps).")] = None,
    seed: Annotated[int | None, typer.Option(
        "--seed", help="Refused for genN: the draw's seed comes from the log after the seal intent.")] = None,
    expected_models: Annotated[int, typer.Option("--expected-models", help="k in the default budget.")] =
        DEFAULT_K,
    delta: Annotated[float, typer.Option("--delta", help="Failure probability in the default budget.")] =
        DEFAULT_DELTA,
    eps: Annotated[float, typer.Option("--eps", help="Target error in the default budget.")] = DEFAULT_EPS,
    ladder_step: Annotated[float | None, typer.Option(
        "--ladder-step", help="Ladder release: publish a score only when it beats the best by this step.")] = None,
    thresholdout: Annotated[bool, typer.Option(
        "--thresholdout", help="Thresholdout release (Dwork et al. 2015): a public estimate unless the held-out "
                               "score differs by more than --threshold plus noise.")] = False,
    threshold: Annotated[float | None, typer.Option(
        "--threshold", help="Thresholdout's T on the 0-100 score scale.")] = None,
    sigma: Annotated[float | None, typer.Option(
        "--sigma", help="Thresholdout's Laplace scale sigma on the 0-100 score scale.")] = None,
    step: Annotated[float, typer.Option(
        "--step", help="Thresholdout: released values are rounded to this step.")] = 1.0,
    data_root: Annotated[Path | None, typer.Option(
        "--data-root", help="public only: folder of the official <task>.npz files.")] = None,
    retry_draw: Annotated[bool, typer.Option(
        "--retry-draw", help="When an intent of this generation is logged, unsealed and cannot be resumed (its "
                             "pending draw is lost): log a new intent anyway; the audit then reports the draw as "
                             "retried, for good.")] = False,
    store: StoreOption = None,
    ledger: LedgerOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Seal a generation: commit each task's pool and the seal intent to the log, draw cases disjoint from every
    earlier one with a seed derived from the checkpoint after the intent, commit, sign the manifest, append.

    A seal killed or refused after logging its intent is finished by running the same seal again: it resumes
    that intent (same pools, same seed) instead of logging a second one.

    Example: heldout seal gen3 --tasks bloodmnist --per-task 200 --expires 2027-03-01 --budget-bits 5000"""
    st = open_store(store)
    now = command_now()
    request = SealRequest(
        generation=generation, tasks=tuple(_comma_list(tasks)),
        expiry=parse_utc(expires, what="--expires", usage=True), per_task=per_task, seed=seed,
        budget_bits=budget_bits, k=expected_models, delta=delta, eps=eps, ladder_step=ladder_step,
        data_root=data_root, thresholdout=thresholdout, threshold=threshold, sigma=sigma, thresholdout_step=step,
        retry_draw=retry_draw)
    with open_ledger(st, ledger) as opened:
        signer = ledger_signer(st, opened)
        with console.status(f"sealing {generation}"):
            result = seal_generation(st, opened, signer, request, now)
    if as_json:
        print_json(result.to_json())
        return
    m = result.manifest
    counts = ", ".join(f"{t} {n}" for t, n in m.task_counts.items())
    budget = "no budget (public)" if m.leakage_budget.bits is None else \
        f"budget {m.leakage_budget.bits:.3f} bits ({m.leakage_budget.basis})"
    if result.resumed_intent is not None:
        console.print(f"resumed the seal intent of {m.generation} logged at entry {result.resumed_intent} "
                      "(a seal killed or refused after logging it): no new intent was logged")
    console.print(f"sealed {m.generation} at entry {result.seal_index}: {m.n_cases} cases ({counts})")
    console.print(f"set hash {m.set_hash}; expires {format_utc(m.expiry)}; {budget}; release {m.release.mode}")
    console.print(f"manifest {result.manifest_path} (sha256 {result.manifest_sha256})")
    for family in m.leakage_budget.families:
        eps_text = "not covered" if family.get("eps") is None else f"eps {family['eps']}"
        console.print(f"  {family['family']}: n = {family['n']}, {eps_text} at the whole budget "
                      f"({family['statistics']} statistics)")


# --- retire ---------------------------------------------------------------------------------------------------

@handle_errors
def retire(
    generation: Annotated[str, typer.Argument(help="The generation to retire.")],
    reason: Annotated[str | None, typer.Option("--reason", help=" | ".join(RETIRE_REASONS))] = None,
    reveal: Annotated[bool, typer.Option("--reveal", help="Also publish the reveal (ids, hashes, labels, salts).")]
        = False,
    with_images: Annotated[bool, typer.Option("--with-images", help="Reveal the images too.")] = False,
    store: StoreOption = None,
    ledger: LedgerOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Retire a generation (a retire entry); with --reveal, publish its reveal (a blob and a reveal entry).

    Example: heldout retire gen1 --reason expired --reveal"""
    st = open_store(store)
    now = command_now()
    with open_ledger(st, ledger) as opened:
        signer = ledger_signer(st, opened)
        result = retire_generation(st, opened, signer, generation, reason, now, reveal=reveal,
                                   with_images=with_images)
    if as_json:
        print_json(result.to_json())
        return
    if result.retire_index is not None:
        console.print(f"retired {generation} ({reason}) at entry {result.retire_index}")
    if result.reveal_index is not None:
        console.print(f"revealed {generation} at entry {result.reveal_index} (blob {result.reveal_sha256})")
    if result.note:
        console.print(result.note)
    if result.missing_withheld:
        err_console.print(f"warning: {len(result.missing_withheld)} withheld blob(s) this retirement should publish "
                          "are missing from the store: every audit will report their bundles as failed "
                          f"(first: {result.missing_withheld[0]})")


# --- verify-reveal, prove-member, verify-member -----------------------------------------------------------

@handle_errors
def verify_reveal_cmd(
    generation: Annotated[str, typer.Argument(help="The revealed generation.")],
    from_dir: Annotated[str | None, typer.Option(
        "--from", help="A folder holding <gen>.seal.json and <gen>.reveal.json, a ledger export, or a tiles "
        "directory or its http(s) URL.")] = None,
    key: KeyOption = None,
    store: StoreOption = None,
    ledger: LedgerOption = None,
    at: AtOption = None,
    policy_file: Annotated[Path | None, typer.Option(
        "--policy", help="Witness policy (C2SP tlog-policy): --from must be a ledger export whose replay holds and "
        "whose latest checkpoint the policy's quorum cosigned.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Recompute the set hash from a reveal and compare it with the signed manifest (exit 1 naming the first
    case that does not match).

    Example: heldout verify-reveal gen1 --from ./public-export --key KEY_B64"""
    require_from_folder(from_dir)
    from heldout.audit.gate import verify_reveal_claim

    verdict = verify_reveal_claim(open_store(store), generation, source=from_dir, ledger_id=ledger,
                                  at=command_now(at), pinned=parse_key_argument(key) if key is not None else None,
                                  policy=load_policy(policy_file) if policy_file is not None else None)
    if as_json:
        print_json(verdict.to_json())
    else:
        console.print(verdict.line)


@handle_errors
def prove_member_cmd(
    generation: Annotated[str, typer.Argument(help="The generation.")],
    case_id: Annotated[str, typer.Argument(help="The case id, e.g. bloodmnist-0123456789abcdef.")],
    out: Annotated[Path | None, typer.Option(
        "--out", help="Write the proof document to this new file (or into this folder).")] = None,
    store: StoreOption = None,
    ledger: LedgerOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Prove one case's membership (its opening and inclusion path) without revealing the others. Without
    --out, the proof document is printed (it is JSON: --json prints the same).

    Example: heldout prove-member gen1 bloodmnist-0123456789abcdef --out member.json"""
    import json

    st = open_store(store)
    if out is not None:
        out = output_file(out, f"{generation}.{case_id}.member.json")
        if out.exists():
            raise UsageError(f"refusing to overwrite {out}", path=str(out))
    with open_ledger(st, ledger, read_only=True) as opened:
        proof = prove_member(st, opened, generation, case_id)
    if out is None:
        print_json(proof.to_json())
        return
    write_atomic(out, (json.dumps(proof.to_json(), indent=1, sort_keys=True) + "\n").encode())
    if as_json:
        print_json({"path": str(out), **proof.to_json()})
    else:
        console.print(f"wrote the membership proof of {case_id} in {generation} to {out}")


@handle_errors
def verify_member_cmd(
    proof_file: Annotated[Path, typer.Argument(help="A proof written by heldout prove-member.")],
    from_dir: Annotated[Path | None, typer.Option(
        "--from", help="A folder holding <gen>.seal.json (or seals/<gen>.seal.json).")] = None,
    key: KeyOption = None,
    store: StoreOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Check a membership proof against the generation's signed seal manifest.

    Example: heldout verify-member member.json --from ./public-export --key KEY_B64"""
    require_from_folder(from_dir)
    st = open_store(store)
    proof_doc = read_document_file(proof_file, what="member proof")
    # (parsed before any file is looked up: its generation names the manifest to read)
    generation = MemberProof.from_json(proof_doc).generation
    folder = from_dir if from_dir is not None else st.seals
    found = read_first_in(folder, [f"seals/{generation}.seal.json", f"{generation}.seal.json"],
                          what="seal manifest")
    if found is None:
        raise UsageError(f"no seal manifest for {generation!r} in {folder}", path=str(folder))
    data = found[0]
    proof = verify_member_proof(proof_doc, data, _trusted_key(parse_json_object(data), key, st))
    line = (f"case {proof.case_id} ({proof.task}, label {proof.label}) is a member of {proof.generation}: "
            f"leaf {proof.leaf_index} of {proof.tree_size} leads to set hash {proof.set_hash}")
    if as_json:
        print_json({"verified": True, **proof.to_json()})
    else:
        console.print(line)


# --- status ---------------------------------------------------------------------------------------------------

@handle_errors
def status(
    store: StoreOption = None,
    ledger: LedgerOption = None,
    at: AtOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Every generation with its state, times, counts, set hash, leakage budget and bundles, and the ledger
    head (root in hex): derived from the ledger each time.

    Example: heldout status --at 2027-01-01 --json"""
    from ledger import BlobStore

    st = open_store(store)
    now = command_now(at)
    with open_ledger(st, ledger, read_only=True) as opened:
        generations, intents = generations_and_pending(opened, now, blobs=BlobStore(st.blobs))
        head = {"size": opened.size, "root": opened.root().hex()}
        ledger_id = opened.ledger_id
    anomalies = [{"message": a.message, **a.evidence} for a in generations.anomalies]
    pending = [{"generation": i.generation, "intent_index": i.index, "tasks": dict(i.tasks),
                "expiry_utc": i.expiry_utc, "created_utc": i.created_utc,
                "resumable_here": pending_draw_path(st, ledger_id, i.generation).is_file()} for i in intents]
    if as_json:
        print_json({"ledger_id": ledger_id, "at": format_utc(now), "head": head,
                    "generations": [g.to_json() for g in generations.values()], "anomalies": anomalies,
                    "pending_intents": pending})
        return
    for anomaly in generations.anomalies:  # the log cannot be repaired: say so, and show the first entries
        err_console.print(f"warning: the ledger contradicts itself: {anomaly.message}")
    shown = table(f"generations on ledger {ledger_id} at {format_utc(now)}",
                  ("generation", "state", "sealed → expires", "cases", "set hash", "bits used / budget", "bundles",
                   "note"), right=("bundles",))
    styles = {"current": "green", "expired": "yellow", "retired": "red", "sealed": "cyan"}
    for g in generations.values():
        notes = []
        if g.retire_reason:
            notes.append(f"retired: {g.retire_reason}")
        elif g.due_for_retirement:
            notes.append("due for retirement")
        if g.revealed:
            notes.append(f"revealed (entry {g.reveal_index})")
        if g.release_mode in ("ladder", "thresholdout"):
            notes.append(f"{g.release_mode} step {g.ladder_step}" + (" (withholding)" if g.withholding else ""))
        budget = "public" if g.budget_bits is None else f"{g.bits_used:.1f} / {g.budget_bits:.1f}"
        covered = [f for f in g.current_guarantee() if f["eps"] is not None]
        if covered:  # the weakest guarantee in force now, on the scale its statistic is published on
            worst = min(covered, key=lambda f: f["n"])
            notes.append(f"eps now {worst['eps']} ({worst['family']}, n = {worst['n']})")
        shown.add_row(
            g.name, Text(g.state, style=styles[g.state]), f"{format_utc(g.created)[:10]} → {format_utc(g.expiry)[:10]}",
            "\n".join(f"{t} {n}" for t, n in g.tasks.items()), g.set_hash[:12], budget, str(len(g.bundles)),
            "; ".join(notes))
    console.print(shown)
    for item in pending:  # a seal killed or refused after logging its intent
        how = ("run the same seal again to finish it (it resumes this intent)" if item["resumable_here"] else
               "its pending draw is not in this store: only a seal with --retry-draw, which the audit reports as a "
               "retried draw, seals it")
        console.print(f"pending: the seal intent of {item['generation']} at entry {item['intent_index']} is logged "
                      f"and not sealed; {how}")
    console.print(f"ledger head: size {head['size']}, root {head['root']}")


def register(app: typer.Typer) -> None:
    """Add the generation commands to the main ``heldout`` app."""
    app.command("init")(init)
    app.add_typer(pool_app, name="pool")
    app.command("seal")(seal)
    app.command("retire")(retire)
    app.command("verify-reveal")(verify_reveal_cmd)
    app.command("prove-member")(prove_member_cmd)
    app.command("verify-member")(verify_member_cmd)
    app.command("status")(status)
