"""What every command shares: the store option, consoles, and the mapping of errors to exit codes."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.text import Text

from heldout.store import Store
from keys import HeldoutError
from seals import parse_utc, system_clock

console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)

StoreOption = Annotated[
    Path | None,
    typer.Option("--store", help="Store directory (default: $HELDOUT_STORE or ~/.local/share/heldout).",
                 show_default=False),
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Write a JSON document for machines instead.")]

P = ParamSpec("P")
R = TypeVar("R")


def open_store(store: Path | None) -> Store:
    return Store.open(store)


NOW_ENV = "HELDOUT_NOW"


def reference_time(at: str | None = None) -> datetime:
    """The one reference time of a command, read once: ``--at`` when given, else ``$HELDOUT_NOW`` (an ISO 8601
    time, for tests and rehearsals: typer commands cannot take a clock object), else the system clock."""
    if at:
        return parse_utc(at, what="--at", usage=True)
    env = os.environ.get(NOW_ENV)
    if env:
        return parse_utc(env, what=f"${NOW_ENV}", usage=True)
    return system_clock()


@contextmanager
def phase_progress(*, disable: bool) -> Iterator[Callable[[str, int, int], None]]:
    """Rich progress bars on stderr, one per phase: yields ``tick(phase, done, total)``."""
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console, transient=True, disable=disable) as bar:
        phases: dict[str, TaskID] = {}

        def tick(phase: str, done: int, total: int) -> None:
            if phase not in phases:
                phases[phase] = bar.add_task(phase, total=total)
            bar.update(phases[phase], completed=done, total=total)

        yield tick


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False) + "\n")


def fail(error: HeldoutError, *, as_json: bool = False) -> typer.Exit:
    """Report ``error`` (one line, or JSON) and return the Exit to raise with its code."""
    if as_json:
        print_json(error.to_json())
    else:
        detail = ""
        interesting = {k: v for k, v in error.evidence.items() if k in ("index", "entry", "file", "field", "path",
                                                                         "expected", "found", "case_id")}
        if interesting:
            detail = " (" + ", ".join(f"{k}: {v}" for k, v in interesting.items()) + ")"
        err_console.print(Text("error: ", style="bold red") + Text(f"{error.message}{detail}"))
    return typer.Exit(error.exit_code)


def handle_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn the project's errors into their exit codes with a one-line message; never a traceback."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except HeldoutError as exc:
            raise fail(exc, as_json=bool(kwargs.get("as_json"))) from None

    return wrapper
