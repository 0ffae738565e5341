"""``python audit.py <ledger-id>`` and ``heldout audit``: the whole-chain audit with progress and a summary."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from heldout.audit import AuditReport, AuditSource, ExportSource, operator_source, run_audit
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
from heldout.passports import audit_report_path
from keys import UsageError
from ledger.entries import is_ledger_id
from ledger.policy import Policy, load_policy


def audit_command(
    ledger_id: Annotated[str, typer.Argument(help="The ledger id (20 hex; a unique prefix in operator mode).")],
    store: StoreOption = None,
    from_dir: Annotated[str | None, typer.Option(
        "--from", help="Audit a public export, or a tiles directory or its http(s) URL, as a third party.")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Where to write audit_report.json.")] = None,
    at: Annotated[str | None, typer.Option(help="Reference time (ISO 8601); default: now.")] = None,
    policy_file: Annotated[Path | None, typer.Option(
        "--policy", help="Witness policy (C2SP tlog-policy): the latest checkpoint must satisfy its quorum; "
        "default: the store's in operator mode, none for an export.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Replay the ledger, check every signature, blob, seal and reveal, and re-derive every bundle."""
    now = reference_time(at)
    policy = load_policy(policy_file) if policy_file is not None else None
    if from_dir is not None:
        if store is not None:
            raise UsageError("give either --store (operator) or --from (third party), not both")
        if not is_ledger_id(ledger_id):
            raise UsageError("a third-party audit pins the full 20-hex ledger id", found=ledger_id)
        source = ExportSource.open(from_dir, ledger_id)
        target = out or Path("audit_report.json")
        command = f"python audit.py {ledger_id} --from {from_dir}"
        report = _run(source, now, command, quiet=as_json, policy=policy)
    else:
        st = open_store(store)
        opened = operator_source(st, ledger_id)
        try:
            command = f"python audit.py {opened.ledger_id}"
            report = _run(opened, now, command, quiet=as_json, policy=policy)
        finally:
            opened.ledger.close()
        target = out or audit_report_path(st, opened.ledger_id)
    report.write(target)
    if as_json:
        print_json(report.to_json())
    else:
        show_report(report, target)
    if report.exit_code:
        raise typer.Exit(report.exit_code)


def _run(source: AuditSource, now: datetime, command: str, *, quiet: bool, policy: Policy | None) -> AuditReport:
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console, transient=True, disable=quiet) as bar:
        tasks: dict[str, TaskID] = {}

        def tick(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total)
            bar.update(tasks[phase], completed=done, total=total)

        return run_audit(source, now=now, audit_command=command, progress=tick, policy=policy)


def show_report(report: AuditReport, target: Path) -> None:
    """The people's view: what was checked, per generation, each finding, and what could not be re-derived."""
    colour = {"clean": "green", "failed": "red", "incomplete": "yellow"}[report.verdict]
    console.print(f"[bold]audit of ledger {report.ledger_id}[/] ({report.mode}): [bold {colour}]{report.verdict}"
                  f"[/] - {report.ledger_entries} entries, {report.checkpoints} checkpoints, ledger "
                  f"{'intact' if report.ledger_intact else 'NOT intact'}, {report.rederived} of {report.bundles} "
                  "bundles re-derived")
    if report.generations:
        table = Table(title="generations")
        for column in ("generation", "state", "bundles", "revealed", "set hash"):
            table.add_column(column)
        for name, g in report.generations.items():
            table.add_row(name, g["state"], str(g["bundles"]), "yes" if g["revealed"] else "", g["set_hash"][:16])
        console.print(table)
    if report.findings:
        table = Table(title="findings", show_lines=False)
        for column in ("check", "where", "what"):
            table.add_column(column, overflow="fold")
        for f in report.findings:
            table.add_row(f.check, f.where, f.message)
        console.print(table)
    if report.not_rederived:
        table = Table(title="not re-derived")
        for column in ("entry", "generation", "task", "model", "why"):
            table.add_column(column, overflow="fold")
        for u in report.not_rederived:
            table.add_row(str(u.index), u.generation, u.task, u.model_id, u.reason)
        console.print(table)
    console.print(f"report written to {target}")


def register(main_app: typer.Typer) -> None:
    main_app.command(name="audit")(handle_errors(audit_command))


def main() -> None:
    """Entry of ``python audit.py``: the same command as ``heldout audit``."""
    single = typer.Typer(add_completion=False, pretty_exceptions_show_locals=False)
    single.command()(handle_errors(audit_command))
    single()
