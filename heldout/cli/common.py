"""What every command shares: the store option, consoles, and the mapping of errors to exit codes.

Errors have one road out: the project's own errors (``keys.errors``) carry their exit code; file-system errors
(``OSError``) and database errors (``sqlite3.Error``) are turned into them by :func:`as_heldout_error`; click's
usage errors become one line. :func:`handle_errors` wraps each command, and :class:`HeldoutGroup` /
:class:`HeldoutCommand` catch whatever escapes a command (option parsing, callbacks) at the root.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import sqlite3
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import typer
import typer.core
from rich.console import Console, ConsoleDimensions
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from heldout.store import Store
from keys import HeldoutError, StorageError, UsageError, storage_error
from keys.names import ASCII_DIGITS, visible
from ledger.errors import database_error
from seals import parse_utc, system_clock

try:  # typer >= 0.20 carries its own copy of click; older ones use click itself
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover
    from click import exceptions as click_exceptions  # type: ignore[no-redef]


def _flag_shows_no_type(self: typer.core.TyperOption, ctx: Any) -> str | None:
    """Help shows no ``<bool>`` after a flag: a flag takes no value."""
    return None if self.is_flag else _typer_display_type_rich(self, ctx)


_typer_display_type_rich = typer.core.TyperOption.display_type_rich
typer.core.TyperOption.display_type_rich = _flag_shows_no_type  # type: ignore[method-assign]

#: Width of output that goes to a pipe or a file when $COLUMNS does not say: wide enough for every table the
#: commands print (status is the widest, about 160), so piped output is not folded needlessly; anything wider
#: is folded, never cut (see :func:`table`).
PIPE_WIDTH = 200


def encodable(text: str, encoding: str) -> str:
    """``text`` with each character ``encoding`` cannot hold replaced by ``?``: output to an ASCII-only stream
    (PYTHONIOENCODING=ascii, a C locale without UTF-8) degrades instead of failing the command with a
    UnicodeEncodeError after its work is done."""
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        return text.encode(encoding, errors="replace").decode(encoding, errors="replace")
    except LookupError:  # an encoding Python does not know: the stream's own write decides
        pass
    return text


def _stream_encoding(stream: Any) -> str:
    return getattr(stream, "encoding", None) or "utf-8"


class CliConsole(Console):
    """A console whose width is decided when it prints, not when it is made: $COLUMNS when set, the terminal's
    width on a terminal, else :data:`PIPE_WIDTH` (rich's default for pipes is 80, which cut tables). Every
    piece of text it prints goes through :func:`visible` (rich's own styling codes are not text: they are made
    after, from the styles)."""

    _floor = 0  # the width a table being printed needs at least (see print)

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        text = super()._render_buffer(segment if segment.control else Segment(visible(segment.text), segment.style)
                                      for segment in buffer)
        return encodable(text, self.encoding)

    @property
    def size(self) -> ConsoleDimensions:
        found = self._size()
        floor = self._floor  # (a table being printed: see print)
        return found if found.width >= floor else ConsoleDimensions(floor, found.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:  # rich's API; the width is decided per print here
        pass

    def _size(self) -> ConsoleDimensions:
        columns = os.environ.get("COLUMNS", "")
        height = 25
        if ASCII_DIGITS.fullmatch(columns) and int(columns) > 0:
            return ConsoleDimensions(int(columns), height)
        if self.is_terminal:
            return super().size
        return ConsoleDimensions(PIPE_WIDTH, height)

    def print(self, *objects: Any, **options: Any) -> None:
        """As rich prints, but a table is never laid out narrower than :func:`table_floor`: below it rich gives
        columns no width at all and their cells vanish (``COLUMNS=12 heldout status`` printed an empty frame,
        exit 0; red-team round 19). Wider than the terminal, its lines wrap there: every character is kept."""
        floor = max((table_floor(o) for o in objects if isinstance(o, Table)), default=0)
        self._floor, before = floor, self._floor
        try:
            super().print(*objects, **options)
        finally:
            self._floor = before

    def on_broken_pipe(self) -> None:
        # rich's default ends the process with exit 1, the code of a failed verification: raise instead, so the
        # command ends as every closed output does (exit 2, ``_OutputClosed``)
        raise BrokenPipeError(errno.EPIPE, "the output was closed by its reader")


def _drop_malformed_terminal_size() -> None:
    """A ``COLUMNS`` or ``LINES`` that is not an ASCII number is ignored, as an unset one is: rich (ours and
    typer's help) reads it with ``str.isdigit`` and ``int``, so "²" would end every command in a traceback."""
    for name in ("COLUMNS", "LINES"):
        value = os.environ.get(name)
        if value is not None and ASCII_DIGITS.fullmatch(value) is None:
            del os.environ[name]


_drop_malformed_terminal_size()
# No markup: what these consoles print holds text from ledgers, exports, file names and the user, in which "[/x]"
# ended a command in a MarkupError traceback (after its work was written) and "[red]" hid text; styling is given
# as rich Text and styles, never as markup in a string.
console = CliConsole(highlight=False, soft_wrap=True, markup=False)
err_console = CliConsole(stderr=True, highlight=False, soft_wrap=True, markup=False)


#: The narrowest a table column is laid out (its cells fold within it).
MIN_COLUMN_WIDTH = 2
#: The narrowest a command's ``--help`` is drawn: typer draws its option panels at the terminal's width, and
#: below about 30 columns they came out as empty boxes, no option named (red-team round 20). Narrower terminals
#: get lines folded by the terminal instead.
HELP_MIN_WIDTH = 40


#: The widest: a huge $COLUMNS drew help hundreds of megabytes wide (red-team round 21).
HELP_MAX_WIDTH = 400


def _width_setting(name: str) -> int | None:
    """$COLUMNS or $TERMINAL_WIDTH as a number when it is one (None when unset); -1 when it is set to
    something else (rich and typer read it as they can: typer's module fails to import on "abc")."""
    value = os.environ.get(name)
    if value is None or not value.strip():
        return None
    text = value.strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 9 else -1


@contextmanager
def help_width_floor() -> Iterator[None]:
    """While a command runs, typer's help is drawn between :data:`HELP_MIN_WIDTH` and :data:`HELP_MAX_WIDTH`
    columns: at the width $TERMINAL_WIDTH (typer's own setting), else $COLUMNS, else the terminal gives, brought
    within those bounds; a setting that is no number counts as unset. Costs nothing at ordinary widths (typer's
    help module is imported here only otherwise)."""
    import shutil

    terminal, columns = _width_setting("TERMINAL_WIDTH"), _width_setting("COLUMNS")
    width = terminal if terminal is not None and terminal > 0 else columns if columns is not None and columns > 0 \
        else shutil.get_terminal_size().columns
    bounded = min(max(width, HELP_MIN_WIDTH), HELP_MAX_WIDTH)
    if bounded == width and terminal not in (-1, 0) and columns not in (-1, 0):
        yield
        return
    saved_setting = os.environ.pop("TERMINAL_WIDTH", None) if terminal == -1 else None
    try:
        import typer.rich_utils  # (with a TERMINAL_WIDTH it can read: it reads it once, when imported)
    finally:
        if saved_setting is not None:
            os.environ["TERMINAL_WIDTH"] = saved_setting
    saved, typer.rich_utils.MAX_WIDTH = typer.rich_utils.MAX_WIDTH, bounded
    try:
        yield
    finally:
        typer.rich_utils.MAX_WIDTH = saved
def table_floor(made: Table) -> int:
    """The width below which ``made`` would lose cells: each column at :data:`MIN_COLUMN_WIDTH` plus its padding
    and the borders between and around them."""
    return len(made.columns) * (MIN_COLUMN_WIDTH + 3) + 1


def table(title: str, columns: Sequence[str], *, right: Sequence[str] = ()) -> Table:
    """A table whose cells fold when the output is narrower than the table: every character is kept."""
    made = Table(title=title)
    for column in columns:
        made.add_column(column, overflow="fold", justify="right" if column in right else "left")
    return made


StoreOption = Annotated[
    Path | None,
    typer.Option("--store", help="Store directory (default: $HELDOUT_STORE or ~/.local/share/heldout).",
                 show_default=False),
]
#: Seeds are recorded in signed JSON, whose integers stay exact up to 2^53 - 1; negative seeds are meaningless.
SEED_MAX = 2**53 - 1
#: Entry indexes and tree sizes fit SQLite's signed 64-bit integers.
INDEX_MAX = 2**63 - 1
JsonFlag = Annotated[bool, typer.Option("--json", help="Write a JSON document for machines instead.")]

P = ParamSpec("P")
R = TypeVar("R")


def output_file(path: Path, default_name: str) -> Path:
    """Where an ``--out`` PATH writes: PATH, or ``default_name`` inside it when PATH is a folder. Missing folders
    are created when written; a file standing where a folder must be is refused now, before any work."""
    if path.is_dir():
        return path / default_name
    for folder in path.parents:
        if folder.exists():
            if not folder.is_dir():
                raise StorageError(f"{folder} is a file, not a folder; {path} cannot be written", path=str(folder))
            break
    return path


def refuse_output_in_source(out: Path, source: str | Path | None, what: str) -> None:
    """Refuse (exit 2, before any work) an output inside the local public log a command reads (``--from``), or
    one that holds it: a file written there changes what that export or tiles folder publishes (every verifier
    then refuses it), and a site folder rebuilt around it would delete it."""
    if source is None or str(source).startswith(("http://", "https://")):
        return
    # (os.path.realpath: a link loop is left to the command that opens the path, which names it)
    folder, target = Path(os.path.realpath(source)), Path(os.path.realpath(out))
    if target == folder or folder in target.parents:
        raise UsageError(f"{what} {out} is inside {source}, the public log this command reads: writing there would "
                         "change what it publishes; write it elsewhere", path=str(out), found=str(source))
    if target in folder.parents:  # (a folder the command replaces would take the log it read with it)
        raise UsageError(f"{source}, the public log this command reads, is inside {what} {out}: writing there "
                         "would replace or change it; write it elsewhere", path=str(out), found=str(source))


def require_from_folder(source: str | Path | None) -> None:
    """Refuse (exit 2, before any work) a local ``--from`` that exists but is not a folder: a file, a FIFO, a
    device or a link to nothing is a wrong argument, not a public log that failed its check (exit 1). A URL, an
    absent path and a folder pass: the command that reads them names what it finds there."""
    from keys.safeio import path_kind

    if source is None or "://" in str(source):
        return
    kind = path_kind(source)
    if kind not in (None, "a folder"):
        raise UsageError(f"--from {str(source)[:200]} is {kind}, not a folder", path=str(source)[:200])


def open_store(store: Path | None) -> Store:
    return Store.open(store)


NOW_ENV = "HELDOUT_NOW"


def reference_time(at: str | None = None) -> datetime:
    """The one reference time of a command, read once: ``--at`` when given, else ``$HELDOUT_NOW`` (an ISO 8601
    time, for tests and rehearsals: typer commands cannot take a clock object), else the system clock."""
    if at is not None:  # an empty --at is refused by the parser, not taken as now
        return parse_utc(at, what="--at", usage=True)
    env = os.environ.get(NOW_ENV)
    if env:
        return parse_utc(env, what=f"${NOW_ENV}", usage=True)
    return system_clock()


def progress_bars(**options: Any) -> Progress:
    """Rich progress bars on stderr: a description (shown as text, never read as markup: it may name a task or a
    file from the input), a bar, done/total and the time taken. ``options`` go to :class:`rich.progress.Progress`."""
    return Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=err_console, **options)


@contextmanager
def phase_progress(*, disable: bool) -> Iterator[Callable[[str, int, int], None]]:
    """Rich progress bars on stderr, one per phase: yields ``tick(phase, done, total)``."""
    with progress_bars(transient=True, disable=disable) as bar:
        phases: dict[str, TaskID] = {}

        def tick(phase: str, done: int, total: int) -> None:
            if phase not in phases:
                phases[phase] = bar.add_task(phase, total=total)
            bar.update(phases[phase], completed=done, total=total)

        yield tick


def print_json(value: Any) -> None:
    # (JSON escapes control characters itself; bidi and zero-width ones, which may only occur inside strings,
    # are written as their escapes too: the same JSON, shown as it is)
    text = visible(json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False))
    if encodable(text, _stream_encoding(sys.stdout)) != text:  # an ASCII-only stdout: the same JSON, all escaped
        text = json.dumps(value, indent=1, sort_keys=True, ensure_ascii=True)
    sys.stdout.write(text + "\n")


def error_line(message: str) -> None:
    """``heldout: error: MESSAGE``, one line on stderr (the message shown as text)."""
    err_console.print(Text("heldout: error: ", style="bold red") + Text(message))


def fail(error: HeldoutError, *, as_json: bool = False) -> typer.Exit:
    """Report ``error`` (one line, or JSON) and return the Exit to raise with its code."""
    if as_json:
        print_json(error.to_json())
    else:
        detail = ""
        interesting = {k: v for k, v in error.evidence.items() if k in ("index", "entry", "file", "field", "path",
                                                                         "expected", "found", "case_id")
                       and str(v) not in error.message}  # said once is enough
        if interesting:
            detail = " (" + ", ".join(f"{k}: {v}" for k, v in interesting.items()) + ")"
        line = " ".join(f"{error.message}{detail}".split())  # one line, whatever the message held
        error_line(line)
    return typer.Exit(error.exit_code)


def as_heldout_error(exc: BaseException) -> HeldoutError | None:
    """The project's error for ``exc``: itself, a file-system error as :class:`keys.StorageError` (exit 2), a
    database error through :func:`ledger.errors.database_error` (SQLite) or :func:`ledger.postgres.server_error`
    (PostgreSQL), a number too large for the database as a
    usage error, running out of memory as :class:`keys.StorageError`; None for anything else (a bug, which must
    show)."""
    if isinstance(exc, HeldoutError):
        return exc
    if isinstance(exc, BrokenPipeError) and stdout_reader_gone():
        return None  # the reader of our output left: not this command's verdict (``_OutputClosed``)
    if isinstance(exc, OSError):
        return storage_error(exc)
    if isinstance(exc, sqlite3.Error):
        return database_error(exc)
    if type(exc).__module__.startswith("psycopg"):  # a PostgreSQL ledger's server (psycopg imported only then)
        from ledger.postgres import server_error

        return server_error(exc)
    if isinstance(exc, OverflowError) and "SQLite INTEGER" in str(exc):
        return UsageError("a number is too large (at most 2^63-1)")
    if isinstance(exc, MemoryError):  # the machine's limit, not a verdict on the data: exit 2, as a full disk
        return StorageError("not enough memory to finish this command (the memory limit of this process or "
                            "machine was reached); nothing was judged")
    return None


def handle_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn the project's errors, and file-system and database errors, into their exit codes with a one-line
    message; never a traceback."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except Exception as exc:  # mapped below, or re-raised: a bug must show
            mapped = as_heldout_error(exc)
            if mapped is None:
                raise
            raise fail(mapped, as_json=bool(kwargs.get("as_json"))) from None

    return wrapper


def _run_main(run: Callable[..., Any], args: Sequence[str] | None, prog_name: str | None, standalone_mode: bool,
              extra: dict[str, Any]) -> Any:
    """Run a click command so that every failure is one line with its exit code: usage errors (exit 2) as
    ``heldout CMD: error: ...``, the project's errors as :func:`fail` prints them."""
    argv = list(sys.argv[1:] if args is None else args)
    blank = next((position for position, arg in enumerate(argv) if _blank_value(arg)), None)
    if blank is not None:
        # No heldout value is blank; a blank path would be read as the current folder ("--store ''" made a
        # store, private key included, wherever the command ran).
        arg = argv[blank]
        what = (f"the value of {arg.split('=', 1)[0]}" if arg.startswith("--") else
                f"the value of {argv[blank - 1]}" if blank and argv[blank - 1].startswith("-") else
                f"argument {blank + 1}")
        error_line(f"{what} is empty or only whitespace: every value heldout takes is non-blank (see: heldout --help)")
        if standalone_mode:
            sys.exit(2)
        return 2
    if sys.stdout is None:
        # The process started with its standard output closed (``>&-``): Python has no stream there, and every
        # print would fail after the command's work. Refused first, nothing done.
        if sys.stderr is not None:
            error_line("standard output is closed; nothing was done (redirect it to a file or /dev/null instead)")
        if standalone_mode:
            sys.exit(StorageError.exit_code)
        return StorageError.exit_code
    stdout_was_devnull = _stdout_is_devnull()
    try:
        with help_width_floor():
            result = run(args=argv, prog_name=prog_name, standalone_mode=False, **extra)
        code = result if isinstance(result, int) and not isinstance(result, bool) else 0
    except _OutputClosed:
        code = _output_closed()
    except SystemExit as exc:
        # rich's consoles that are not ours (typer's help) end a closed output with exit 1 after pointing
        # standard output at /dev/null: that is a closed output too, not a failed verification
        if exc.code != 1 or stdout_was_devnull or not _stdout_is_devnull():
            raise
        code = _output_closed()
    except click_exceptions.NoArgsIsHelpError as exc:  # the help was printed already
        code = exc.exit_code
    except click_exceptions.ClickException as exc:
        usage = isinstance(exc, click_exceptions.UsageError)
        ctx = getattr(exc, "ctx", None)
        where = ctx.command_path if usage and ctx is not None else "heldout"
        hint = f" (see: {where} --help)" if usage else ""
        message = " ".join(exc.format_message().split())
        err_console.print(Text(f"{where}: error: ", style="bold red") + Text(message + hint))
        code = exc.exit_code
    except typer.Exit as exc:
        code = exc.exit_code
    except typer.Abort:
        err_console.print("heldout: aborted")
        code = 130
    except Exception as exc:  # mapped below, or re-raised: a bug must show
        mapped = as_heldout_error(exc)
        if mapped is None:
            raise
        code = fail(mapped).exit_code
    if standalone_mode:
        sys.exit(code)
    return code


def _blank_value(arg: str) -> bool:
    """An argument that is blank, or a ``--option=`` whose value is."""
    if arg.startswith("--") and "=" in arg:
        arg = arg.split("=", 1)[1]
    return not arg.strip()


class _OutputClosed(Exception):
    """Standard output was closed by its reader before the command had written it all (``heldout status | head``).
    Raised in place of :class:`BrokenPipeError`, which click would otherwise end as exit 1, the code of a failed
    verification."""


def _output_closed() -> int:
    """Exit 2 (an I/O error of the output; the command's own verdict was not delivered), with one line on stderr
    when stderr is still open; standard output is pointed at /dev/null, so that the interpreter's last flush of
    what it still buffers does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
    with suppress(OSError):
        error_line("the output was closed by its reader before it was all written (broken pipe)")
    return StorageError.exit_code


def _stdout_is_devnull() -> bool:
    try:
        return os.path.samestat(os.fstat(sys.stdout.fileno()), os.stat(os.devnull))
    except (OSError, ValueError, AttributeError):  # no real file behind sys.stdout (a test runner's buffer)
        return False


def _reporting_closed_output(step: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``step`` (parsing, where --help and --version print, or the command itself) with a closed output raised as
    :class:`_OutputClosed`."""
    try:
        return step(*args, **kwargs)
    except BrokenPipeError:
        if not stdout_reader_gone():
            raise  # another pipe (a socket): an I/O error like any other (as_heldout_error)
        raise _OutputClosed() from None


def stdout_reader_gone() -> bool:
    """Whether standard output is a pipe whose reader has closed it (the kernel reports an error condition on
    its write end), as opposed to a broken pipe elsewhere, a socket to a server, say."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no real file behind sys.stdout
        return False


class HeldoutGroup(typer.core.TyperGroup):
    """The ``heldout`` group: failures end as one line and an exit code, whoever raised them."""

    def invoke(self, ctx: Any) -> Any:
        return _reporting_closed_output(super().invoke, ctx)

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        return _reporting_closed_output(super().make_context, info_name, args, parent, **extra)

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,  # type: ignore[override]
             standalone_mode: bool = True, **extra: Any) -> Any:
        return _run_main(super().main, args, prog_name, standalone_mode, extra)


class HeldoutCommand(typer.core.TyperCommand):
    """A single-command app (``python audit.py``) with the same one-line failures as :class:`HeldoutGroup`."""

    def invoke(self, ctx: Any) -> Any:
        return _reporting_closed_output(super().invoke, ctx)

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        return _reporting_closed_output(super().make_context, info_name, args, parent, **extra)

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,  # type: ignore[override]
             standalone_mode: bool = True, **extra: Any) -> Any:
        return _run_main(super().main, args, prog_name, standalone_mode, extra)


def read_document_file(path: Path, *, what: str) -> dict[str, Any]:
    """A JSON document the user names (a passport, a membership proof): no such regular file is bad input
    (exit 2); its content is then for the verifier to judge."""
    from keys.safeio import DOCUMENT_LIMIT, not_a_file, read_named
    from seals import parse_json_object

    if not path.is_file():
        raise UsageError(not_a_file(path, f"{what} file"), path=str(path))
    return parse_json_object(read_named(path, limit=DOCUMENT_LIMIT, what=what), what=f"{what} {path.name}")
