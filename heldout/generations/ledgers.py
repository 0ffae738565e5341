"""Which ledger a command works on, where it lives (SQLite files in the store, or a PostgreSQL database), the
key that signs it, and the lock that serializes generation changes. Every command opens and creates ledgers
through :func:`open_ledger` and :func:`create_ledger`, so all of them work on either backend."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from heldout.store import Store
from keys import Signer
from ledger import Ledger, LedgerBackend
from ledger.sqlite import lock_path as sqlite_lock_path
from seals import system_clock

#: A PostgreSQL URL (no password: ~/.pgpass, PGPASSFILE, a service file or PGPASSWORD supply it) that holds
#: the store's ledgers; it overrides the URL ``heldout init --database`` recorded in ``ledgers/DATABASE``.
DATABASE_ENV = "HELDOUT_DATABASE"


def store_database(store: Store) -> str | None:
    """The database URL of the store's ledgers: ``$HELDOUT_DATABASE``, else the one recorded at init, else
    ``None`` (SQLite files under ``ledgers/``)."""
    env = os.environ.get(DATABASE_ENV, "").strip()
    if env:
        return env
    return store.database_url()


def ledger_backend(store: Store) -> LedgerBackend:
    database = store_database(store)
    return LedgerBackend(database=database) if database else LedgerBackend(folder=store.ledgers)


def resolve_ledger_id(store: Store, ledger_id: str | None) -> str:
    """``ledger_id`` (an id or unique prefix) when given, else the store's default (``ledgers/DEFAULT``)."""
    text = ledger_id if ledger_id is not None else store.default_ledger_id()
    return ledger_backend(store).locate(text)


def create_ledger(store: Store, signer: Signer, *, name: str, now: datetime, database: str | None = None) -> Ledger:
    """A new ledger of the store, on its backend (``database`` when given, as ``heldout init --database``);
    the generations lock file is made with a SQLite ledger (so later refusals never leave a new file
    behind)."""
    backend = LedgerBackend(database=database) if database else ledger_backend(store)
    ledger = backend.create(signer, name=name, now=now)
    if ledger.path is not None:
        sqlite_lock_path(ledger.path).touch()
    return ledger


def open_ledger(store: Store, ledger_id: str | None = None) -> Ledger:
    """Open a ledger of the store; every checkpoint it signs from now on goes to the store's witnesses
    (``heldout.witness.operator``)."""
    from heldout.witness.operator import attach

    ledger = ledger_backend(store).open(resolve_ledger_id(store, ledger_id))
    try:
        attach(store, ledger, clock=system_clock)
    except BaseException:
        ledger.close()
        raise
    return ledger


def ledger_signer(store: Store, ledger: Ledger) -> Signer:
    """The private key that signs ``ledger`` (the one its genesis entry names), from the store."""
    return store.load_signer(ledger.key.key_id)


def lock_path(ledger: Ledger) -> Path | None:
    """The generations lock file of a SQLite ledger (``None`` in a database: the lock is the server's)."""
    return None if ledger.path is None else sqlite_lock_path(ledger.path)


@contextmanager
def generations_lock(ledger: Ledger) -> Iterator[None]:
    """An exclusive lock held while a seal or retire checks the ledger and appends to it, so two operators
    cannot seal one name twice and a seal's predicted entry index holds against other seals: a ``flock`` on
    the ledger file's lock file, or a PostgreSQL advisory lock (``Ledger.operation_lock``)."""
    with ledger.operation_lock():
        yield
