"""Which ledger a command works on, the key that signs it, and the lock that serializes generation changes."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from heldout.store import Store
from keys import Signer
from ledger import Ledger


def resolve_ledger_id(store: Store, ledger_id: str | None) -> str:
    """``ledger_id`` (an id or unique prefix) when given, else the store's default (``ledgers/DEFAULT``)."""
    text = ledger_id if ledger_id is not None else store.default_ledger_id()
    return Ledger.locate(store.ledgers, text).name.removesuffix(".sqlite")


def open_ledger(store: Store, ledger_id: str | None = None, *, read_only: bool = False) -> Ledger:
    """The ledger ``ledger_id`` names (default: the store's); ``read_only`` for commands that only read."""
    return Ledger.open(Ledger.locate(store.ledgers, resolve_ledger_id(store, ledger_id)), read_only=read_only)


def ledger_signer(store: Store, ledger: Ledger) -> Signer:
    """The private key that signs ``ledger`` (the one its genesis entry names), from the store."""
    return store.load_signer(ledger.key.key_id)


def lock_path(ledger: Ledger) -> Path:
    return Path(ledger.path).with_name(f".{ledger.ledger_id}.generations.lock")


def create_lock(ledger: Ledger) -> None:
    """Create the lock file (done by ``heldout init``, so that refusals never leave a new file behind)."""
    path = lock_path(ledger)
    if not path.exists():
        path.touch()


@contextmanager
def generations_lock(ledger: Ledger) -> Iterator[None]:
    """An exclusive advisory lock held while a seal or retire checks the ledger and appends to it, so two
    operators cannot seal one name twice and a seal's predicted entry index holds against other seals.

    A separate lock file is used, never the SQLite file itself: closing any descriptor of that file would
    drop SQLite's own POSIX locks held by this process."""
    fd = os.open(lock_path(ledger), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the flock
