"""The command tree of ``heldout``, for tests that check something of every command."""

from __future__ import annotations

from collections.abc import Iterator

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
