"""The command tree of ``heldout``, for tests that check something of every command."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator

import typer

from heldout.cli import app


def all_commands() -> Iterator[tuple[list[str], typer.core.TyperCommand]]:
    """Every leaf command with its path (``["ledger", "verify"]``)."""
    def walk(command: object, path: list[str]) -> Iterator[tuple[list[str], typer.core.TyperCommand]]:
        children = getattr(command, "commands", None)
        if children is None:
            yield path, command  # type: ignore[misc]
            return
        for name, child in children.items():
            yield from walk(child, [*path, name])

    return walk(typer.main.get_command(app), [])


def in_forked_child(run: Callable[[], int]) -> int | None:
    """Run ``run`` in a forked child of this process (no interpreter start: a killed command costs little):
    None when the child was killed by SIGKILL (anything else killing it fails the test), else its exit code."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 70
        try:
            code = run()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        assert os.WTERMSIG(status) == signal.SIGKILL, status
        return None
    return os.waitstatus_to_exitcode(status)
