"""The ``heldout`` command line (typer + rich). Sub-apps are imported here; anything that needs torch is
imported inside the command that uses it, so ``heldout --help`` and verification never load it."""

from __future__ import annotations

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
)

app = typer.Typer(
    name="heldout",
    help="Sealed held-out audit and transparency log for medical-AI benchmark evaluations.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,  # locals could hold key material
    add_completion=False,
)
app.add_typer(keys_cmd.app, name="keys")
app.add_typer(passport_cmd.app, name="passport")
app.add_typer(ledger_cmd.app, name="ledger")
app.add_typer(data_cmd.app, name="data")
app.add_typer(spec_cmd.app, name="spec")
app.add_typer(site_cmd.app, name="site")
gen_cmd.register(app)
eval_cmd.register(app)
audit_cmd.register(app)
demo_cmd.register(app)


def main() -> None:
    app()
