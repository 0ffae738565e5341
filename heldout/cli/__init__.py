"""The ``heldout`` command line (typer + rich). Sub-apps are imported here; anything that needs torch is
imported inside the command that uses it, so ``heldout --help`` and verification never load it."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Annotated

import typer

from heldout.cli import (
    audit_cmd,
    data_cmd,
    demo_cmd,
    eval_cmd,
    gen_cmd,
    keys_cmd,
    ledger_cmd,
    passport_cmd,
    site_cmd,
    spec_cmd,
    witness_cmd,
)
from heldout.cli.common import HeldoutGroup

app = typer.Typer(
    name="heldout",
    cls=HeldoutGroup,
    help="Sealed held-out audit and transparency log for medical-AI benchmark evaluations.\n\n"
         "Example: heldout init && heldout status. Exit codes: 0 ok, 1 verification failed, 2 usage or "
         "environment (bad input, missing file, full or read-only disk), 3 expired, 4 lapsed, 5 incomplete.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,  # locals could hold key material
    add_completion=False,
)


def installed_version() -> str:
    try:
        return version("heldout")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"heldout {installed_version()}")
        raise typer.Exit(0)


@app.callback()
def _root(
    show_version: Annotated[bool, typer.Option("--version", help="Print the version and exit.",
                                               callback=_show_version, is_eager=True)] = False,
) -> None:
    """Sealed held-out audit and transparency log for medical-AI benchmark evaluations."""


app.add_typer(keys_cmd.app, name="keys")
app.add_typer(passport_cmd.app, name="passport")
app.add_typer(ledger_cmd.app, name="ledger")
app.add_typer(data_cmd.app, name="data")
app.add_typer(spec_cmd.app, name="spec")
app.add_typer(witness_cmd.app, name="witness")
app.add_typer(site_cmd.app, name="site")
gen_cmd.register(app)
eval_cmd.register(app)
audit_cmd.register(app)
demo_cmd.register(app)


def main() -> None:
    app()
