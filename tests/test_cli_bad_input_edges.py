"""Bad input at the edges (red-team round 7): times at the ends of what a datetime holds, a malformed database
URL, a witness server's --max-seconds and --listen, and an output stream that cannot encode every character.
Each is a one-line usage error (exit 2) that names what was refused and writes nothing, never a traceback; the
output case degrades instead of failing (exit 0). Every case runs the real CLI."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner, Result

from heldout.cli import app
from heldout.cli.audit_cmd import audit_command
from heldout.cli.common import handle_errors
from seals import format_utc, parse_utc
from tests.audit_support import AuditFixture, build_store, command_clock
from tests.conftest import REPO_ROOT
from tests.generations_support import init_store

runner = CliRunner()


def store_and_export(root: Path) -> tuple[Path, Path, str]:
    """A small store under ``root`` and its public export: (store, export, ledger id)."""
    fixture = build_store(root, bundles_per_generation=1)
    export = root / "export"
    with command_clock(AT):
        result = runner.invoke(app, ["ledger", "export", fixture.ledger_id, str(export), "--store", str(fixture.store)])
    assert result.exit_code == 0, result.output
    return fixture.store, export, fixture.ledger_id
AT = "2026-09-02T00:00:00Z"
NOTE_TEXT = "caf\u00e9 \u2192 ok"  # what an ASCII-only stream cannot hold

# ``python audit.py``'s command, built as audit.py builds it.
audit_app = typer.Typer(add_completion=False, pretty_exceptions_show_locals=False)
audit_app.command()(handle_errors(audit_command))


@dataclass(frozen=True)
class Built:
    fixture: AuditFixture
    export: Path
    note: Path
    root: Path


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """A small store (public, gen1, gen2, one bundle each), a note with non-ASCII text, and its public export."""
    root = tmp_path_factory.mktemp("edges")
    fixture = build_store(root, bundles_per_generation=1)
    note = root / "note.json"
    note.write_text(json.dumps({"text": NOTE_TEXT}))
    export = root / "export"
    with command_clock(AT):
        for args in (["ledger", "append", "--type", "note", "--json-file", str(note)],
                     ["ledger", "export", fixture.ledger_id, str(export)]):
            result = runner.invoke(app, [*args, "--store", str(fixture.store)])
            assert result.exit_code == 0, result.output
    return Built(fixture=fixture, export=export, note=note, root=root)


def tree_state(root: Path) -> dict[str, str]:
    """Every file under ``root`` with its SHA-256, SQLite's transient -wal/-shm files aside."""
    return {str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(root.rglob("*")) if path.is_file() and not path.name.endswith(("-wal", "-shm"))}


def one_line_usage_error(result: Result) -> str:
    """Exit 2, no exception escaped, one line on stderr saying so; returns that line."""
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("heldout") and "error: " in lines[0], result.stderr
    return lines[0]


# --- 1. times outside what a datetime holds ------------------------------------------------------------------

#: In range as written, out of it in UTC: year 0 and year 10000.
OUT_OF_RANGE = ("0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00")
#: Each command with a time option (or $HELDOUT_NOW, None), {t} standing for the time; {store}, {note}, {root},
#: {export} and {ledger} for the fixture's paths.
DATED_COMMANDS = {
    "status --at": (["status", "--at", "{t}"], "--at"),
    "ledger append --at": (["ledger", "append", "--type", "note", "--json-file", "{note}", "--at", "{t}"], "--at"),
    "seal --expires": (["seal", "gen3", "--tasks", "bloodmnist", "--per-task", "5", "--expires", "{t}"],
                       "--expires"),
    "spec supersede --effective": (["spec", "supersede", "MedEval-1 v0.1", "--by", "MedEval-1 v0.2",
                                    "--effective", "{t}"], "--effective"),
    "passport verify --at": (["passport", "verify", "{root}/none.passport.json", "--at", "{t}"], "--at"),
    "verify-reveal --at": (["verify-reveal", "gen1", "--at", "{t}"], "--at"),
    "ledger init --at": (["ledger", "init", "--name", "x", "--at", "{t}"], "--at"),
    "ledger checkpoint --at": (["ledger", "checkpoint", "--sign", "--at", "{t}"], "--at"),
    "site build --at": (["site", "build", "{root}/site", "--at", "{t}"], "--at"),
    "audit --at": (["audit", "--at", "{t}", "--out", "{root}/report.json"], "--at"),
    "audit.py --from --at": (["{ledger}", "--from", "{export}", "--at", "{t}", "--out", "{root}/report.json"],
                             "--at"),
    "status $HELDOUT_NOW": (["status"], "$HELDOUT_NOW"),
    "retire $HELDOUT_NOW": (["retire", "gen2", "--reason", "expired"], "$HELDOUT_NOW"),
}


@pytest.mark.parametrize("moment", OUT_OF_RANGE)
@pytest.mark.parametrize("name", DATED_COMMANDS)
def test_a_time_outside_the_datetime_range_is_a_usage_error_in_every_command(built: Built, name: str,
                                                                              moment: str) -> None:
    template, option = DATED_COMMANDS[name]
    fx = built.fixture
    args = [part.format(t=moment, note=built.note, root=built.root, export=built.export, ledger=fx.ledger_id)
            for part in template]
    before, exported = tree_state(fx.store), tree_state(built.export)
    with command_clock(moment if option == "$HELDOUT_NOW" else AT):
        if name.startswith("audit.py"):
            result = runner.invoke(audit_app, args)
        else:
            result = runner.invoke(app, [*args, "--store", str(fx.store)])
    line = one_line_usage_error(result)
    assert f"{option} '{moment}'" in line and "outside the times" in line, line
    assert tree_state(fx.store) == before and tree_state(built.export) == exported
    assert not (built.root / "site").exists() and not (built.root / "report.json").exists()


def test_times_at_the_very_edge_parse_format_and_append_without_overflow(tmp_path: Path) -> None:
    """The last hour of year 9999 is a time like any other: the append's one-day allowance ahead is bounded by
    the last time a datetime holds (it overflowed), and year 1 is written with its four digits."""
    assert format_utc(parse_utc("0001-01-01")) == "0001-01-01T00:00:00Z"
    assert format_utc(parse_utc("9999-12-31T23:59:59Z")) == "9999-12-31T23:59:59Z"
    with command_clock("2026-09-01T00:00:00Z"):
        init_store(tmp_path / "store")
    note = tmp_path / "note.json"
    note.write_text(json.dumps({"text": "x"}))
    store = str(tmp_path / "store")
    for at in ("9999-12-31T23:00:00Z", "9999-12-31T23:59:59Z"):
        with command_clock(at):
            result = runner.invoke(app, ["ledger", "append", "--type", "note", "--json-file", str(note),
                                         "--store", store])
        assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    with command_clock("9999-12-31T23:59:59Z"):
        shown = runner.invoke(app, ["ledger", "show", "--json", "--store", store])
    assert shown.exit_code == 0, shown.output
    times = [row["entry"]["created_utc"] for row in json.loads(shown.stdout)["entries"]]
    assert times[-2:] == ["9999-12-31T23:00:00Z", "9999-12-31T23:59:59Z"]


# --- 2. a malformed database URL -----------------------------------------------------------------------------

MALFORMED_URLS = ("postgresql://app:hunter2@[::1/heldout", "postgresql://app:hunter2@[nothost]/heldout")


@pytest.mark.parametrize("url", MALFORMED_URLS)
@pytest.mark.parametrize("args", [["status"], ["ledger", "append", "--type", "note", "--json-file", "{note}"]],
                         ids=["status", "ledger-append"])
def test_a_malformed_database_url_is_a_usage_error_naming_its_source(built: Built, args: list[str], url: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    store = built.fixture.store
    before = tree_state(store)
    monkeypatch.setenv("HELDOUT_DATABASE", url)
    with command_clock(AT):
        result = runner.invoke(app, [*(a.format(note=built.note) for a in args), "--store", str(store)])
    line = one_line_usage_error(result)
    assert "$HELDOUT_DATABASE is a malformed URL" in line, line
    assert "hunter2" not in result.output  # never the password
    assert tree_state(store) == before


@pytest.mark.parametrize("url", MALFORMED_URLS)
def test_init_with_a_malformed_database_url_creates_nothing(tmp_path: Path, url: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HELDOUT_DATABASE", raising=False)
    with command_clock(AT):
        result = runner.invoke(app, ["init", "--store", str(tmp_path / "new"), "--database", url])
    line = one_line_usage_error(result)
    assert "--database is a malformed URL" in line and "hunter2" not in result.output, line
    assert list(tmp_path.iterdir()) == []


def test_a_database_url_that_is_not_utf8_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A URL from a non-UTF-8 environment (a byte that decodes to a surrogate escape) reached libpq and was a
    UnicodeEncodeError traceback."""
    monkeypatch.delenv("HELDOUT_DATABASE", raising=False)
    with command_clock(AT):
        result = runner.invoke(app, ["init", "--store", str(tmp_path / "new"), "--database",
                                     "postgresql://h/\udcff"])
    assert "is not UTF-8 text" in one_line_usage_error(result)
    assert list(tmp_path.iterdir()) == []


def test_a_store_path_that_is_a_symbolic_link_loop_is_a_usage_error(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    for how in ("option", "environment"):
        if how == "environment":
            monkeypatch.setenv("HELDOUT_STORE", str(loop))
        result = runner.invoke(app, ["status", *(["--store", str(loop)] if how == "option" else [])])
        assert "cannot be resolved" in one_line_usage_error(result), how
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loop"]


# --- 3. witness serve: --max-seconds and --listen ------------------------------------------------------------

@pytest.fixture(scope="module")
def witness_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("witness") / "w"
    result = runner.invoke(app, ["witness", "init", "--store", str(folder), "--name", "w.example/w1"])
    assert result.exit_code == 0, result.output
    return folder


@pytest.mark.parametrize(("option", "value", "named"), [
    ("--max-seconds", "inf", "--max-seconds"), ("--max-seconds", "nan", "--max-seconds"),
    ("--max-seconds", "-1", "--max-seconds"), ("--max-seconds", "0", "--max-seconds"),
    ("--listen", "nohost.invalid:80", "cannot listen on nohost.invalid:80: name or service not known"),
    ("--listen", "\u00fc..x:0", "cannot listen on \u00fc..x:0: not a valid host name"),
])
def test_witness_serve_refuses_a_time_limit_or_host_it_cannot_honour(witness_folder: Path, option: str,
                                                                     value: str, named: str) -> None:
    """inf overflowed the wait (a traceback), nan and -1 stopped the server at once with exit 0, an unknown host
    was "a file system error" and a host IDNA cannot encode a TypeError: each is a usage error before the
    witness folder is touched."""
    limits = {"--listen": "127.0.0.1:0", "--max-seconds": "0.1", option: value}
    before = tree_state(witness_folder)
    with command_clock(AT):
        result = runner.invoke(app, ["witness", "serve", "--store", str(witness_folder),
                                     *(part for pair in limits.items() for part in pair)])
    line = one_line_usage_error(result)
    assert named in line and (option != "--max-seconds" or value in line), line
    assert tree_state(witness_folder) == before


# --- 4. an output stream that cannot encode every character --------------------------------------------------

ASCII_STREAMS = {"PYTHONIOENCODING=ascii": {"PYTHONIOENCODING": "ascii"},
                 "C locale": {"LC_ALL": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}}


def run_heldout(args: list[str], streams: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONIOENCODING", "PYTHONUTF8", "PYTHONCOERCECLOCALE", "LANG", "LANGUAGE")
           and not k.startswith("LC_")}
    env.update({"PYTHONPATH": str(REPO_ROOT), "HELDOUT_NOW": AT, **streams})
    return subprocess.run([sys.executable, "-m", "heldout", *args], capture_output=True, env=env, timeout=120,
                          check=False)


@pytest.fixture
def unchanged(built: Built) -> Iterator[Path]:
    before = tree_state(built.fixture.store)
    yield built.fixture.store
    assert tree_state(built.fixture.store) == before


@pytest.mark.parametrize(("stream", "args"), [
    ("PYTHONIOENCODING=ascii", ["status"]), ("PYTHONIOENCODING=ascii", ["ledger", "show", "--json"]),
    ("C locale", ["ledger", "show"]), ("C locale", ["ledger", "show", "--json"]),
])
def test_output_to_an_ascii_only_stream_degrades_and_json_stays_exact(unchanged: Path, stream: str,
                                                                     args: list[str]) -> None:
    """rich raised UnicodeEncodeError on '\u2192' (exit 1, after the work was done): text output now shows '?' for
    what the stream cannot hold; JSON is the same document with those characters as \\u escapes."""
    done = run_heldout([*args, "--store", str(unchanged)], ASCII_STREAMS[stream])
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert b"Traceback" not in done.stderr and done.stderr.strip() == b""
    out = done.stdout.decode("ascii")  # every byte ASCII
    if "--json" in args:
        document = json.loads(out)
        if args[0] == "ledger":
            assert any(row["entry"].get("text") == NOTE_TEXT for row in document["entries"])
    elif args[0] == "ledger":
        assert "caf? ? ok" in out
    else:
        assert "?" in out and "ledger head" in out
