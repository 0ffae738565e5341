"""``python audit.py <ledger-id>`` and ``heldout audit``: the whole-chain audit with progress and a summary."""

from __future__ import annotations

import errno
import os
import stat
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from heldout.audit import AuditReport, AuditSource, ExportSource, ReportRecord, operator_source, run_audit
from heldout.audit.rederive import default_jobs
from heldout.audit.report import REPORT_FORMAT
from heldout.cli.common import (
    HeldoutCommand,
    JsonFlag,
    StoreOption,
    as_heldout_error,
    console,
    err_console,
    fail,
    handle_errors,
    open_store,
    output_file,
    phase_progress,
    print_json,
    reference_time,
    refuse_output_in_source,
    table,
)
from heldout.passports import audit_report_path
from heldout.store import auditor_state_path, default_store_path
from keys import HeldoutError, StorageError, UsageError
from keys.files import write_atomic
from keys.safeio import DOCUMENT_LIMIT, path_kind, read_named
from ledger.entries import is_ledger_id
from ledger.policy import Policy, load_policy
from seals import parse_json_object


def audit_command(
    ledger_id: Annotated[str | None, typer.Argument(
        help="The ledger id (default: the store's; a unique prefix in operator mode; the full 20 hex with --from).",
        show_default=False)] = None,
    store: StoreOption = None,
    from_dir: Annotated[str | None, typer.Option(
        "--from", help="Audit a public export, or a tiles directory or its http(s) URL, as a third party.")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", help="Report file (missing folders are made), or a folder to put audit_report.json in "
        "(default: the store's audit/<id>/audit_report.json; with --from, audit/<id>/from-export/ in the default "
        "store).",
        show_default=False)] = None,
    at: Annotated[str | None, typer.Option(help="Reference time (ISO 8601); default: now.")] = None,
    policy_file: Annotated[Path | None, typer.Option(
        "--policy", help="Witness policy (C2SP tlog-policy): the latest checkpoint must satisfy its quorum; "
        "default: the store's in operator mode, none for an export.")] = None,
    jobs: Annotated[int | None, typer.Option(
        "--jobs", min=1, max=1024, help="Processes that re-derive bundles (default: every core). The report is "
        "the same bytes whatever it is.", show_default=False)] = None,
    since: Annotated[Path | None, typer.Option(
        "--since", help="An earlier clean audit report of this ledger that this auditor wrote (each clean report "
        "is recorded under ~/.local/state/heldout/audit-records/) to carry forward: after its checkpoint "
        "verifies and a consistency proof ties it to the current log, only the bundles appended since are "
        "re-derived; if it does not hold, a full audit with a finding.", show_default=False)] = None,
    as_json: JsonFlag = False,
) -> None:
    """Replay the ledger, check every signature, blob, seal and reveal, and re-derive every bundle.

    Example: heldout audit   (the store's ledger);  python audit.py LEDGER_ID --from ./public-export"""
    now = reference_time(at)
    out = output_file(out, "audit_report.json") if out is not None else None
    if out is not None:
        refuse_output_in_source(out, from_dir, "--out")
    policy = load_policy(policy_file) if policy_file is not None else None
    workers = jobs if jobs is not None else default_jobs()
    since_kind = path_kind(since) if since is not None else "a file"
    if since_kind is None:
        raise UsageError(f"no --since report file at {since}", path=str(since))
    if since_kind != "a file":
        raise UsageError(f"--since {since} is {since_kind}, not a report file", path=str(since))
    earlier = read_named(since, limit=DOCUMENT_LIMIT, what="--since report") if since is not None else None
    if from_dir is not None:
        if store is not None:
            raise UsageError("give either --store (operator) or --from (third party), not both")
        if ledger_id is None or not is_ledger_id(ledger_id):
            raise UsageError("a third-party audit pins the full 20-hex ledger id: python audit.py LEDGER_ID "
                             "--from DIR", found=ledger_id)
        source = ExportSource.open(from_dir, ledger_id)
        target = out or third_party_report_path(ledger_id)
        _require_replaceable(target)  # (now, not after an audit of minutes that could then not be written)
        record = ReportRecord.of(auditor_state_path(), ledger_id, "third-party")
        command = f"python audit.py {ledger_id} --from {_shown(from_dir)}"
        report = _run(source, now, command, quiet=as_json, policy=policy, jobs=workers, since=earlier, record=record)
    else:
        st = open_store(store)
        opened = operator_source(st, ledger_id)
        record = ReportRecord.of(auditor_state_path(), opened.ledger_id, "operator")
        try:
            target = out or audit_report_path(st, opened.ledger_id)
            _require_replaceable(target)
            command = f"python audit.py {opened.ledger_id}"
            report = _run(opened, now, command, quiet=as_json, policy=policy, jobs=workers, since=earlier,
                          record=record)
        finally:
            opened.ledger.close()
    if not as_json:
        show_report(report)
    try:
        written = _write_report(report, target, fallback=out is None, record=record)
    except (OSError, HeldoutError) as exc:
        mapped = as_heldout_error(exc)
        if not report.exit_code or mapped is None:
            raise
        # The verdict outranks the disk: a failed or incomplete audit keeps its code when its report cannot be
        # written (said on the line above it).
        fail(mapped, as_json=as_json)
        raise typer.Exit(report.exit_code) from None
    if as_json:
        print_json(report.to_json())
    else:
        console.print(f"report written to {written}")
    if report.exit_code:
        raise typer.Exit(report.exit_code)


def _shown(path: object) -> str:
    """A path as the report's text states it: a name that is not UTF-8 (its bytes carried as surrogate escapes)
    is written with backslash escapes; the report is JSON, and it must be written whatever the folder's name."""
    return str(path).encode("utf-8", "backslashreplace").decode("utf-8")


def third_party_report_path(ledger_id: str) -> Path:
    """Where ``--from`` writes its report by default: the default store's ``audit/<id>/from-export/``, never
    the current folder (which may be a source checkout) nor the export (which is someone else's)."""
    return default_store_path() / "audit" / ledger_id / "from-export" / "audit_report.json"


def _write_report(report: AuditReport, target: Path, *, fallback: bool, record: ReportRecord) -> Path:
    """Write the report; a default location that cannot be written (a read-only copy of a store) falls back to
    the auditor's own state folder (``$XDG_STATE_HOME/heldout/audit-reports/<id>/``), and says so. An explicit
    ``--out`` that fails is an error, and so is one naming an existing file that is not an audit report (a
    typo must not replace a key or a seal manifest). A clean report is added to the auditor's ``record`` (what
    ``--since`` will trust) first, then written: a run killed between the two leaves a recorded digest with no
    report (harmless), never a clean report the next ``--since`` refuses as not the auditor's own. When the
    record cannot be written, the report is not trusted later, and that is said."""
    _require_replaceable(target)
    data = report.to_bytes()  # (canonicalised once: a 10,000-bundle report is megabytes)
    unrecorded: OSError | None = None
    if report.clean:
        try:
            record.add(data)
        except OSError as exc:  # said once the report is written (a failing disk fails that too: one error)
            unrecorded = exc
    try:
        write_atomic(target, data)
        written = target
    except (OSError, StorageError) as exc:
        code = exc.errno if isinstance(exc, OSError) else None
        if not fallback or code not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
        # The auditor's own state folder, never a shared temporary one: there, a folder or a temporary name
        # that another user made first would take the report (or let them swap it afterwards).
        written = auditor_state_path() / "audit-reports" / report.ledger_id / "audit_report.json"
        write_atomic(written, data)
        err_console.print(f"note: {target.parent} cannot be written (read-only store?); the report went to "
                          f"{written}")
    if unrecorded is not None:
        err_console.print(f"note: the record of clean reports ({record.path}) cannot be written "
                          f"({unrecorded.strerror}): a later --since will not carry this report forward")
    return written


#: The largest earlier report ``--out`` reads to check that it replaces a report (a 10,000-bundle report with a
#: finding per bundle is a few MB).
REPORT_LIMIT = 256 * 1024 * 1024


def _require_replaceable(target: Path) -> None:
    """``target`` may be written: it does not exist, or it is a regular file holding an audit report."""
    try:
        found = os.lstat(target)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UsageError(f"{target} cannot be checked: {exc.strerror}", path=str(target)) from None
    previous: dict[str, Any] | None = None
    if stat.S_ISREG(found.st_mode) and found.st_size <= REPORT_LIMIT:
        try:
            previous = parse_json_object(target.read_bytes(), what=str(target))
        except (OSError, HeldoutError):
            previous = None
    if previous is None or previous.get("format") != REPORT_FORMAT:
        raise UsageError(f"{target} exists and is not an audit report: the audit replaces only an earlier report; "
                         "choose another --out", path=str(target))


def _run(source: AuditSource, now: datetime, command: str, *, quiet: bool, policy: Policy | None,
         jobs: int, since: bytes | None, record: ReportRecord) -> AuditReport:
    own_reports = record.digests() if since is not None else frozenset()  # (read only when it is needed)
    with phase_progress(disable=quiet) as tick:
        return run_audit(source, now=now, audit_command=command, progress=tick, policy=policy, jobs=jobs,
                         since=since, own_reports=own_reports)


def show_report(report: AuditReport) -> None:
    """The people's view: what was checked, per generation, each finding, and what could not be re-derived."""
    colour = {"clean": "green", "failed": "red", "incomplete": "yellow"}[report.verdict]
    console.print(Text.assemble(
        (f"audit of ledger {report.ledger_id}", "bold"), f" ({report.mode}): ", (report.verdict, f"bold {colour}"),
        f" - {report.ledger_entries} entries, {report.checkpoints} checkpoints, ledger "
        f"{'intact' if report.ledger_intact else 'NOT intact'}, {report.rederived} of {report.bundles} "
        "bundles re-derived"))
    if report.since is not None:
        console.print(f"incremental: the clean report {report.since.report_sha256[:16]}... covered the first "
                      f"{report.since.ledger_entries} entries ({report.since.bundles} bundles; consistency proven); "
                      f"{report.since.rederived_now} bundles appended since were re-derived now")
    if report.generations:
        shown = table("generations", ("generation", "state", "bundles", "revealed", "set hash"), right=("bundles",))
        for name, g in report.generations.items():
            shown.add_row(name, g["state"], str(g["bundles"]), "yes" if g["revealed"] else "", g["set_hash"][:12])
        console.print(shown)
    if report.findings:
        shown = table("findings", ("check", "where", "what"))
        for f in report.findings:
            shown.add_row(f.check, f.where, f.message)
        console.print(shown)
    if report.not_rederived:
        shown = table("not re-derived", ("entry", "generation", "task", "model", "why"))
        for u in report.not_rederived:
            shown.add_row(str(u.index), u.generation, u.task, u.model_id, u.reason)
        console.print(shown)


def register(main_app: typer.Typer) -> None:
    main_app.command(name="audit")(handle_errors(audit_command))


def main() -> None:
    """Entry of ``python audit.py``: the same command as ``heldout audit``."""
    single = typer.Typer(add_completion=False, pretty_exceptions_show_locals=False)
    single.command(cls=HeldoutCommand)(handle_errors(audit_command))
    single()
