"""The ``heldout`` command line (typer + rich).

Commands are registered lazily: the root group knows each command's name, the module that defines it and the
one-line summary its help listing shows, and imports a command's module only when that command runs (or its own
help is asked for). ``heldout --help`` therefore loads neither the audit, the ledger, sqlite-utils nor numpy,
and ``heldout status`` loads only what status needs. ``tests/test_cli_startup.py`` checks that every summary here
is the first paragraph of the real command's help, and that no command is missing from the table.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import typer
import typer.core
import typer.main

from heldout.cli.common import HeldoutGroup

try:  # typer >= 0.20 carries its own copy of click; older ones use click itself
    from typer import _click as click_api
except ImportError:  # pragma: no cover
    import click as click_api  # type: ignore[no-redef]


@dataclass(frozen=True)
class LazyCommand:
    """Where a root command lives: ``module`` (under heldout.cli) defines it, either as a sub-app ``app``
    (``group=True``) or through its ``register(app)`` function; ``summary`` is what the help listing shows."""

    name: str
    module: str
    summary: str
    group: bool = False


#: Every root command, in the order the help lists them (typer lists commands before groups).
LAZY_COMMANDS: tuple[LazyCommand, ...] = (
    LazyCommand("init", "gen_cmd",
                "Create the store, an operator key (when it has none) and a ledger with its genesis entry; the "
                "ledger\nbecomes the store's default. Prints the ledger id."),
    LazyCommand("seal", "gen_cmd",
                "Seal a generation: commit each task's pool and the seal intent to the log, draw cases disjoint "
                "from every\nearlier one with a seed derived from the checkpoint after the intent, commit, sign "
                "the manifest, append."),
    LazyCommand("retire", "gen_cmd",
                "Retire a generation (a retire entry); with --reveal, publish its reveal (a blob and a reveal "
                "entry)."),
    LazyCommand("verify-reveal", "gen_cmd",
                "Recompute the set hash from a reveal and compare it with the signed manifest (exit 1 naming the "
                "first\ncase that does not match)."),
    LazyCommand("prove-member", "gen_cmd",
                "Prove one case's membership (its opening and inclusion path) without revealing the others. "
                "Without\n--out, the proof document is printed (it is JSON: --json prints the same)."),
    LazyCommand("verify-member", "gen_cmd", "Check a membership proof against the generation's signed seal manifest."),
    LazyCommand("status", "gen_cmd",
                "Every generation with its state, times, counts, set hash, leakage budget and bundles, and the "
                "ledger\nhead (root in hex): derived from the ledger each time."),
    LazyCommand("evaluate", "eval_cmd",
                "Evaluate MODEL on GENERATION, append one bundle per task (refused, exit 4, past the leakage "
                "budget)."),
    LazyCommand("audit", "audit_cmd",
                "Replay the ledger, check every signature, blob, seal and reveal, and re-derive every bundle."),
    LazyCommand("demo", "demo_cmd",
                "Run the whole product end to end on synthetic data: seal, evaluate, audit, passports, retire, "
                "replay."),
    LazyCommand("keys", "keys_cmd", "Signing keys and the keyring of trusted public keys.", group=True),
    LazyCommand("passport", "passport_cmd", "Signed evidence records for one model.", group=True),
    LazyCommand("ledger", "ledger_cmd",
                "The append-only ledger: entries, signed checkpoints, proofs, export and replay. LEDGER defaults "
                "to the store's ledger. Example: heldout ledger verify", group=True),
    LazyCommand("data", "data_cmd", "Task data: synthetic files in the official MedMNIST layout.", group=True),
    LazyCommand("spec", "spec_cmd", "Spec versions: supersession, after which passports on the old spec lapse.",
                group=True),
    LazyCommand("witness", "witness_cmd",
                "Witnesses (C2SP tlog-witness): run one, or have the ledger's checkpoints cosigned.", group=True),
    LazyCommand("site", "site_cmd", "The public transparency site, rendered from public data.", group=True),
    LazyCommand("pool", "gen_cmd", "Private pools of cases that sealed generations are drawn from.", group=True),
)


def load_command(entry: LazyCommand) -> click_api.Command:
    """The real click command for ``entry``, built exactly as an eagerly registered one would be: on a holder
    app with the root's defaults, from the module's sub-app or through its ``register`` function."""
    module = importlib.import_module(f"heldout.cli.{entry.module}")
    holder = typer.Typer(add_completion=False)
    register = getattr(module, "register", None)
    if register is not None:  # gen_cmd registers its pool group itself
        register(holder)
    else:
        holder.add_typer(module.app, name=entry.name)
    command = typer.main.get_group(holder).commands.get(entry.name)
    if command is None:  # the table above names a command its module does not define: a bug, which must show
        raise LookupError(f"heldout.cli.{entry.module} defines no command {entry.name!r}")
    return command


class LazyCommands(MutableMapping[str, click_api.Command]):
    """The root's commands by name: a command's module is imported when the command itself is asked for
    (``commands[name]``, ``.get``, ``.items()``); its name alone (iteration, ``in``, ``keys()``) imports nothing."""

    def __init__(self, entries: tuple[LazyCommand, ...]) -> None:
        self._held: dict[str, click_api.Command | LazyCommand] = {entry.name: entry for entry in entries}

    def __getitem__(self, name: str) -> click_api.Command:
        held = self._held[name]
        if isinstance(held, LazyCommand):
            held = self._held[name] = load_command(held)
        return held

    def __setitem__(self, name: str, command: click_api.Command) -> None:
        self._held[name] = command

    def __delitem__(self, name: str) -> None:
        del self._held[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._held)

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, name: object) -> bool:  # Mapping's own would load the command to answer
        return name in self._held

    def summary(self, name: str) -> click_api.Command | None:
        """What the help listing shows for ``name``, without importing it when it is not loaded yet."""
        held = self._held.get(name)
        if isinstance(held, LazyCommand):
            return typer.core.TyperCommand(held.name, help=held.summary)
        return held

    def unloaded(self) -> list[str]:
        return [name for name, held in self._held.items() if isinstance(held, LazyCommand)]


class LazyHeldoutGroup(HeldoutGroup):
    """The root group, over :class:`LazyCommands`. While the root's own help is formatted, the listing is drawn
    from the summaries in :data:`LAZY_COMMANDS` instead of the commands themselves."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        lazy = LazyCommands(LAZY_COMMANDS)
        for name, command in self.commands.items():  # anything registered eagerly stays as it is
            lazy[name] = command
        self.commands = lazy
        self._listing_only = False

    def get_command(self, ctx: click_api.Context, cmd_name: str) -> click_api.Command | None:
        if self._listing_only and isinstance(self.commands, LazyCommands):
            return self.commands.summary(cmd_name)
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click_api.Context) -> list[str]:
        return list(self.commands)  # names only: typer's own walks .items(), which would import every command

    def format_help(self, ctx: click_api.Context, formatter: click_api.HelpFormatter) -> None:
        self._listing_only = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing_only = False


app = typer.Typer(
    name="heldout",
    cls=LazyHeldoutGroup,
    help="Sealed held-out audit and transparency log for medical-AI benchmark evaluations.\n\n"
         "Example: heldout init && heldout status. Exit codes: 0 ok, 1 verification failed, 2 usage or "
         "environment (bad input, missing file, full or read-only disk), 3 expired, 4 lapsed, 5 incomplete.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,  # locals could hold key material
    add_completion=False,
)


def installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # ~40 ms: only --version needs it

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


def main(args: Sequence[str] | None = None) -> None:
    app(args=args)
