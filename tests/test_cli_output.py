"""Output people can read (issue 9, section 7): tables fold instead of cutting, ``--json`` wherever data is
printed, one spelling of roots (hex) across commands, no Python reprs, help with an example and no ``<bool>``,
``--version``, the store's default ledger taken everywhere, and the demo's closing lines run when pasted."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from heldout.cli import app
from tests.audit_support import AuditFixture, build_store, command_clock
from tests.cli_support import all_commands
from tests.conftest import REPO_ROOT
from tests.generations_support import openings

runner = CliRunner()
HEX64 = re.compile(r"\b[0-9a-f]{64}\b")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> AuditFixture:
    return build_store(tmp_path_factory.mktemp("output"), bundles_per_generation=1)


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    with command_clock("2026-09-02T00:00:00Z"):
        return runner.invoke(app, list(args), env=env)


def ok(*args: str, env: dict[str, str] | None = None) -> Result:
    result = invoke(*args, env=env)
    assert result.exit_code == 0, (args, result.output, result.exception)
    return result


COMMANDS = [path for path, _ in all_commands()]
#: Commands that print no data document: the demo prints a narrated run (each of its steps is a command that has
#: --json).
NO_DATA = {("demo",)}


# --- tables ----------------------------------------------------------------------------------------------------

def test_piped_status_keeps_every_cell_whole(built: AuditFixture) -> None:
    result = ok("status", "--store", str(built.store), env={"COLUMNS": ""})
    assert "…" not in result.stdout
    generations = json.loads(ok("status", "--store", str(built.store), "--json").stdout)["generations"]
    for g in generations:
        row = next(line for line in result.stdout.splitlines() if line.startswith(f"│ {g['generation']} "))
        assert g["set_hash"][:12] in row and g["state"] in row
    assert max(len(line) for line in result.stdout.splitlines()) > 80  # wider than rich's pipe default


@pytest.mark.parametrize("args", [["status"], ["ledger", "show"], ["pool", "list"], ["keys", "list"],
                                  ["audit", "--out", "{tmp}"]], ids=" ".join)
def test_narrow_output_folds_and_never_cuts(built: AuditFixture, tmp_path: Path, args: list[str]) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    wide = ok(*argv, "--store", str(built.store), env={"COLUMNS": "250"}).stdout
    narrow = ok(*argv, "--store", str(built.store), env={"COLUMNS": "50"}).stdout
    assert "…" not in narrow.replace("…", "", wide.count("…"))  # nothing cut beyond what the wide one shows
    table_lines = [line for line in narrow.splitlines() if line[:1] in "┏┃┡│└"]
    assert table_lines and max(len(line) for line in table_lines) <= 50
    # Every character of every cell survives: the narrow table holds the same text, only folded.
    def letters(text: str) -> str:
        return re.sub(r"[\s│┃┏┓┗┛┡┩└┘├┤┼┬┴━─╇╈╋┳┻╍]", "", text)
    assert sorted(letters(narrow)) == sorted(letters(wide))


@pytest.mark.parametrize("columns", ["12", "20", "30"])
@pytest.mark.parametrize("args", [["status"], ["ledger", "show"], ["pool", "list"], ["keys", "list"],
                                  ["spec", "list"]], ids=" ".join)
def test_a_terminal_narrower_than_a_table_keeps_every_cell(built: AuditFixture, args: list[str],
                                                           columns: str) -> None:
    """Below a few characters a column, rich gave columns no width and their cells vanished, exit 0
    (``COLUMNS=12 heldout status``: an empty frame; red-team round 19). A table is laid out at least a few
    characters a column wide (its lines then wrap in the terminal): every character is kept."""
    wide = ok(*args, "--store", str(built.store), env={"COLUMNS": "250"}).stdout
    narrow = ok(*args, "--store", str(built.store), env={"COLUMNS": columns}).stdout

    def letters(text: str) -> str:
        return re.sub(r"[\s│┃┏┓┗┛┡┩└┘├┤┼┬┴━─╇╈╋┳┻╍]", "", text)
    assert sorted(letters(narrow)) == sorted(letters(wide))


@pytest.mark.parametrize("columns", ["1", "12", "29"])
@pytest.mark.parametrize("args", [["ledger", "verify"], ["status"], ["passport", "verify"]], ids=" ".join)
def test_help_in_a_narrow_terminal_names_every_option(args: list[str], columns: str) -> None:
    """typer draws a command's help at the terminal's width: below about 30 columns its Options panel was an
    empty box, no option named, exit 0 (red-team round 20). Help is drawn at least 40 columns wide (its lines
    then wrap in the terminal): every option is named, as in a wide terminal."""
    from heldout.cli.common import HELP_MIN_WIDTH

    command = dict((tuple(p), c) for p, c in all_commands())[tuple(args)]
    options = {o for param in command.params for o in getattr(param, "opts", []) if o.startswith("--")}
    narrow = ok(*args, "--help", env={"COLUMNS": columns}).stdout
    assert options and all(option in narrow for option in options), (sorted(options), narrow)
    assert max(map(len, narrow.splitlines())) <= HELP_MIN_WIDTH
    script = subprocess.run([sys.executable, str(REPO_ROOT / "audit.py"), "--help"], capture_output=True,
                            text=True, timeout=60, env={**os.environ, "COLUMNS": columns,
                                                        "PYTHONPATH": str(REPO_ROOT)})
    assert script.returncode == 0 and "--from" in script.stdout and "--jobs" in script.stdout, script.stdout


@pytest.mark.parametrize("setting", ["COLUMNS=0", "COLUMNS=-5", "COLUMNS=abc", "COLUMNS=100000000",
                                     "TERMINAL_WIDTH=abc", "TERMINAL_WIDTH=1.5", "TERMINAL_WIDTH=0"])
def test_help_with_an_odd_width_setting_names_every_option(setting: str) -> None:
    """Widths that are no width (red-team round 21): a $TERMINAL_WIDTH that is no number was a traceback from
    typer's help module, a zero width an empty help, a huge $COLUMNS hundreds of megabytes of it. Each is
    help of every option, at most 400 columns wide."""
    from heldout.cli.common import HELP_MAX_WIDTH

    name, value = setting.split("=", 1)
    env = {key: val for key, val in os.environ.items() if key not in ("COLUMNS", "TERMINAL_WIDTH")}
    run = subprocess.run([sys.executable, "-m", "heldout", "ledger", "verify", "--help"], capture_output=True,
                         text=True, timeout=60, env={**env, name: value, "PYTHONPATH": str(REPO_ROOT)})
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr[-2000:]
    assert all(option in run.stdout for option in ("--store", "--from", "--jobs", "--policy")), run.stdout
    assert max(map(len, run.stdout.splitlines())) <= HELP_MAX_WIDTH


# --- --json, hashes, reprs ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", [p for p in COMMANDS if tuple(p) not in NO_DATA], ids=" ".join)
def test_every_command_that_prints_data_takes_json(path: list[str]) -> None:
    command = dict((tuple(p), c) for p, c in all_commands())[tuple(path)]
    options = {o for param in command.params for o in getattr(param, "opts", [])}
    assert "--json" in options, f"heldout {' '.join(path)} has no --json"


def test_prove_member_json_is_the_proof_document(built: AuditFixture, tmp_path: Path) -> None:
    first = openings(built.store, "gen1")[0]["case_id"]
    result = ok("prove-member", "gen1", first, "--json", "--store", str(built.store))
    body = json.loads(result.stdout)
    assert body["case"]["case_id"] == first and body["generation"] == "gen1"
    saved = tmp_path / "member.json"
    written = ok("prove-member", "gen1", first, "--json", "--out", str(saved), "--store", str(built.store))
    assert json.loads(written.stdout)["path"] == str(saved)
    assert json.loads(saved.read_text())["case"]["case_id"] == first
    assert ok("verify-member", str(saved), "--store", str(built.store)).exit_code == 0


def test_one_spelling_of_the_root_across_commands(built: AuditFixture, tmp_path: Path) -> None:
    status = json.loads(ok("status", "--json", "--store", str(built.store)).stdout)["head"]["root"]
    head = json.loads(ok("ledger", "head", "--json", "--store", str(built.store)).stdout)
    verified = json.loads(ok("ledger", "verify", "--json", "--store", str(built.store)).stdout)["root"]
    assert HEX64.fullmatch(status) and status == head["root"] == head["checkpoint_root"] == verified
    for args in (["status"], ["ledger", "head"], ["ledger", "verify"]):
        assert status in ok(*args, "--store", str(built.store)).stdout, args
    proof = ok("ledger", "prove", "--index", "0", "--store", str(built.store)).stdout
    assert status in proof and all(HEX64.search(line) for line in proof.splitlines()[1:])
    assert json.loads(ok("ledger", "checkpoint", "--json", "--store", str(built.store)).stdout)["root"] == status
    consistency = ok("ledger", "consistency", "--old", "1", "--store", str(built.store)).stdout
    assert status in consistency


def test_ledger_show_prints_json_values_never_python_reprs(built: AuditFixture) -> None:
    shown = ok("ledger", "show", "--store", str(built.store)).stdout
    entries = json.loads(ok("ledger", "show", "--json", "--store", str(built.store)).stdout)["entries"]
    nested = [(k, v) for e in entries for k, v in e["entry"].items() if isinstance(v, dict | list | bool)]
    assert nested  # seal and bundle entries hold objects: the summary must show them as JSON
    assert re.search(r'=\{"', shown) or re.search(r"=\[", shown)
    for repr_only in ("{'", "['", "=True", "=False", "=None"):
        assert repr_only not in shown


# --- help, version, default ledger -----------------------------------------------------------------------------

@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_help_has_an_example_marks_required_options_and_shows_no_bool(path: list[str]) -> None:
    result = ok(*path, "--help", env={"COLUMNS": "200"})
    assert "Example:" in result.stdout, path
    assert "<bool>" not in result.stdout
    command = dict((tuple(p), c) for p, c in all_commands())[tuple(path)]
    for param in command.params:
        if param.required and getattr(param, "opts", None) and param.opts[0].startswith("--"):
            line = next(line for line in result.stdout.splitlines()
                        if line.startswith("│") and re.search(rf"{param.opts[0]}\b", line))
            assert "*" in line or "required" in line, (path, line)


def test_version() -> None:
    result = ok("--version")
    assert re.fullmatch(r"heldout \S+\n", result.stdout)


@pytest.mark.parametrize("args", [
    ["audit", "--out", "{tmp}"], ["ledger", "verify"], ["ledger", "head"], ["ledger", "show"],
    ["ledger", "prove", "--index", "0"], ["ledger", "consistency", "--old", "1"], ["ledger", "pubkey"],
    ["ledger", "leaf", "--index", "0"], ["ledger", "checkpoint"], ["ledger", "export", "{tmp}/export"],
    ["status"],
], ids=lambda a: " ".join(a[:2]))
def test_commands_take_the_stores_default_ledger(built: AuditFixture, tmp_path: Path, args: list[str]) -> None:
    ok(*[a.replace("{tmp}", str(tmp_path)) for a in args], "--store", str(built.store))


# --- the demo ---------------------------------------------------------------------------------------------------

@pytest.mark.harness
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="the demo evaluates cnn_small (torch)")
def test_demo_stays_out_of_the_current_folder_and_its_try_lines_run_when_pasted(tmp_path: Path) -> None:
    cwd = tmp_path / "checkout"
    cwd.mkdir()
    xdg = tmp_path / "xdg"
    env = {**os.environ, "XDG_DATA_HOME": str(xdg), "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("HELDOUT_STORE", None)
    demo = subprocess.run([sys.executable, "-m", "heldout", "demo", "--fast"], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=600, check=False)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert list(cwd.iterdir()) == []
    store = xdg / "heldout-demo"
    assert (store / ".heldout-demo").is_file() and str(store) in demo.stdout
    tries = [line.removeprefix("Try: ") for line in demo.stdout.splitlines() if line.startswith("Try: ")]
    assert len(tries) >= 2
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for line in tries:
        pasted = subprocess.run(["bash", "-c", line], capture_output=True, text=True, cwd=elsewhere, env=env,
                                timeout=300, check=False)
        assert pasted.returncode == 0, (line, pasted.stdout[-2000:], pasted.stderr[-2000:])


# --- text from a ledger never drives the terminal ------------------------------------------------------------

HOSTILE = "ok\x1b[2K\r\x1b[32mclean\x1b[0m \u202eheldout\u202c zero\u200bwidth"


def test_attack_terminal_codes_in_logged_text_are_shown_not_obeyed(built: AuditFixture, tmp_path: Path) -> None:
    """A note (or a model id, a task name) holding ESC sequences, a carriage return and bidi overrides: printed
    as it is, it could erase a "failed" line and print "clean", or reverse text on screen. Every command's text
    and JSON output shows those characters as escapes."""
    import shutil

    store = tmp_path / "store"
    shutil.copytree(built.store, store)
    note = tmp_path / "note.json"
    note.write_text(json.dumps({"text": HOSTILE}), encoding="utf-8")
    ok("ledger", "append", "--type", "note", "--json-file", str(note), "--store", str(store))
    for args in (["ledger", "show"], ["ledger", "show", "--json"], ["ledger", "show", "--start", "12"]):
        shown = ok(*args, "--store", str(store)).stdout
        for raw in ("\x1b", "\r", "\u202e", "\u200b"):
            assert raw not in shown, (args, raw)
    shown = ok("ledger", "show", "--json", "--start", "12", "--store", str(store)).stdout
    assert "\\u001b[2K\\r\\u001b[32mclean" in shown and "\\u202eheldout" in shown
    assert json.loads(shown)["entries"][0]["entry"]["text"] == HOSTILE  # the same JSON value, escaped


def test_the_console_escapes_text_but_keeps_its_own_styles() -> None:
    import io

    from rich.table import Table
    from rich.text import Text

    from heldout.cli.common import CliConsole

    out = io.StringIO()
    console = CliConsole(file=out, force_terminal=True, color_system="standard", width=200)
    table = Table("name")
    table.add_row(HOSTILE)
    console.print(Text("failed", style="bold red"), table)
    text = out.getvalue()
    assert "\x1b[1;31mfailed" in text  # rich's own style: still a terminal code
    assert "\x1b[2K" not in text and "\r" not in text and "\u202e" not in text
    assert "\\u001b[2K\\u001b[32mclean" in text  # (rich drops the carriage return itself)
