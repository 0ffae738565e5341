"""Start-up stays light: the root group imports a command's module only when that command runs, so ``heldout
--help`` loads neither the audit, the ledger database layer (sqlite-utils), numpy, pandas nor torch, and the
commands that do open a ledger do not drag pandas in through sqlite-utils. Checked through ``sys.modules`` in a
fresh interpreter (a module-set check: timings on a shared machine prove nothing). The lazy table's summaries
must be what the real commands' help says, and no command may be missing from it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from heldout.cli import LAZY_COMMANDS, app, load_command
from tests.conftest import REPO_ROOT
from tests.generations_support import init_store

HEAVY_FOR_HELP = ("pandas", "torch", "numpy", "sqlite_utils", "heldout.audit.run", "heldout.generations",
                  "ledger.ledger")
#: What no command that only reads a ledger needs.
NEVER = ("pandas", "torch", "heldout.audit.run")

PROBE = """
import json, sys
from heldout.cli import main
try:
    main(json.loads(sys.argv[1]))
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""


def loaded_modules(args: list[str], env_extra: dict[str, str] | None = None) -> set[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "COLUMNS": "100", **(env_extra or {})}
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(args)], capture_output=True, text=True,
                          env=env, cwd=REPO_ROOT, timeout=120)
    last = done.stdout.strip().splitlines()[-1]
    return set(json.loads(last))


@pytest.mark.parametrize("args", [["--help"], [], ["--version"]])
def test_root_help_imports_no_heavy_module(args: list[str]) -> None:
    loaded = loaded_modules(args)
    assert "heldout.cli" in loaded
    assert not loaded & set(HEAVY_FOR_HELP), sorted(loaded & set(HEAVY_FOR_HELP))
    assert not any(name.startswith("heldout.cli.") and name != "heldout.cli.common" for name in loaded), \
        sorted(name for name in loaded if name.startswith("heldout.cli."))


@pytest.mark.parametrize("args", [["passport", "verify", "--help"], ["status", "--help"], ["ledger", "--help"]])
def test_a_command_loads_only_its_own_module(args: list[str]) -> None:
    loaded = loaded_modules(args)
    commands = {name for name in loaded if name.startswith("heldout.cli.") and name != "heldout.cli.common"}
    expected = {f"heldout.cli.{next(e.module for e in LAZY_COMMANDS if e.name == args[0])}"}
    assert commands == expected
    assert not loaded & set(NEVER), sorted(loaded & set(NEVER))


def test_status_on_a_store_does_not_import_pandas(tmp_path: Path) -> None:
    """sqlite-utils imports pandas whenever it is installed; the ledger opens it without."""
    store = tmp_path / "store"
    init_store(store)
    loaded = loaded_modules(["status", "--store", str(store)], {"HELDOUT_NOW": "2026-09-01T00:00:00Z"})
    assert "sqlite_utils" in loaded  # the ledger was really opened
    assert not loaded & set(NEVER), sorted(loaded & set(NEVER))


def test_pandas_still_imports_after_the_ledger_layer() -> None:
    """Blocking pandas while sqlite-utils loads must not block it for anyone else."""
    done = subprocess.run([sys.executable, "-c", "import ledger.db, pandas; print(pandas.DataFrame)"],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                          cwd=REPO_ROOT, timeout=120)
    if "No module named 'pandas'" in done.stderr:
        pytest.skip("pandas is not installed here")
    assert done.returncode == 0, done.stderr
    assert "DataFrame" in done.stdout


def register_eagerly(holder: typer.Typer) -> typer.Typer:
    """Every command registered the eager way, as the root did before commands were lazy."""
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

    for module, name in ((keys_cmd, "keys"), (passport_cmd, "passport"), (ledger_cmd, "ledger"),
                         (data_cmd, "data"), (spec_cmd, "spec"), (witness_cmd, "witness"), (site_cmd, "site")):
        holder.add_typer(module.app, name=name)
    for registering in (gen_cmd, eval_cmd, audit_cmd, demo_cmd):
        registering.register(holder)
    return holder


def test_lazy_table_lists_every_command_in_order_with_its_real_summary() -> None:
    eager = typer.main.get_group(register_eagerly(typer.Typer(add_completion=False)))
    assert [entry.name for entry in LAZY_COMMANDS] == list(eager.commands)
    for entry in LAZY_COMMANDS:
        real = load_command(entry)
        shown = (real.short_help or real.help or "").split("\n\n")[0]
        assert entry.summary == shown, entry.name
        assert entry.group == isinstance(real, typer.core.TyperGroup), entry.name


def test_root_help_is_the_same_lazy_or_eager() -> None:
    """The listing drawn from the table is the one an eagerly registered root prints."""
    eager_app = typer.Typer(name="heldout", help=app.info.help, no_args_is_help=True, add_completion=False)
    assert app.registered_callback is not None and app.registered_callback.callback is not None
    eager_app.callback()(app.registered_callback.callback)
    register_eagerly(eager_app)
    runner = CliRunner()
    lazy = runner.invoke(app, ["--help"], env={"COLUMNS": "120"})
    eager = runner.invoke(eager_app, ["--help"], env={"COLUMNS": "120"})
    assert lazy.exit_code == eager.exit_code == 0
    assert "Replay the ledger" in lazy.output
    assert lazy.output == eager.output


def test_only_the_command_asked_for_is_loaded() -> None:
    from heldout.cli import LazyCommands

    commands = LazyCommands(LAZY_COMMANDS)
    assert list(commands) == [entry.name for entry in LAZY_COMMANDS] and "audit" in commands
    assert len(commands.unloaded()) == len(LAZY_COMMANDS)
    assert commands["keys"].name == "keys"
    assert "keys" not in commands.unloaded() and len(commands.unloaded()) == len(LAZY_COMMANDS) - 1


def test_a_mistyped_command_still_gets_a_suggestion() -> None:
    result = CliRunner().invoke(app, ["stauts"])
    assert result.exit_code == 2
    assert "status" in result.output
