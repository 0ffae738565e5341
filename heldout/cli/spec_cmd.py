"""``heldout spec``: announce on the ledger that a spec version is superseded (its passports lapse then)."""

from __future__ import annotations

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
    table,
)
from heldout.generations import open_ledger
from heldout.specs import load_supersessions, supersede_spec
from seals import format_utc, parse_utc

app = typer.Typer(help="Spec versions: supersession, after which passports on the old spec lapse.",
                  no_args_is_help=True)


@app.command("supersede")
@handle_errors
def supersede(
    spec_version: Annotated[str, typer.Argument(help='The superseded version, e.g. "MedEval-1 v0.1".')],
    by: Annotated[str, typer.Option("--by", help="The version that replaces it.")],
    effective: Annotated[str, typer.Option("--effective", help="From when (ISO 8601; now or later).")],
    ledger: Annotated[str | None, typer.Option("--ledger", help="Ledger id (default: the store's).")] = None,
    store: StoreOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Append a spec entry: from EFFECTIVE on, nothing is evaluated under SPEC_VERSION and its passports lapse.

    Example: heldout spec supersede "MedEval-1 v0.1" --by "MedEval-1 v0.2" --effective 2027-01-01"""
    now = reference_time()
    when = parse_utc(effective, what="--effective", usage=True)
    st = open_store(store)
    with open_ledger(st, ledger) as opened:
        index = supersede_spec(st, opened, spec_version, superseded_by=by, effective=when, now=now)
    if as_json:
        print_json({"index": index, "spec_version": spec_version, "superseded_by": by,
                    "effective_utc": format_utc(when)})
    else:
        console.print(f"{spec_version} superseded by {by} from {format_utc(when)} (entry {index})")


@app.command("list")
@handle_errors
def list_specs(
    ledger: Annotated[str | None, typer.Option("--ledger", help="Ledger id (default: the store's).")] = None,
    store: StoreOption = None,
    as_json: JsonFlag = False,
) -> None:
    """The supersessions recorded on the ledger.

    Example: heldout spec list --json"""
    with open_ledger(open_store(store), ledger, read_only=True) as opened:
        found = load_supersessions(opened.entries())
    if as_json:
        print_json([s.to_json() for s in found.values()])
        return
    shown = table("spec supersessions", ("spec version", "superseded by", "effective", "entry"), right=("entry",))
    for s in found.values():
        shown.add_row(s.spec_version, s.superseded_by, format_utc(s.effective), str(s.index))
    console.print(shown)
