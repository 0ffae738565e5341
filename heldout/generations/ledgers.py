"""Which ledger a command works on, the key that signs it, and the lock that serializes generation changes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from heldout.staging import ledger_lock, lock_path, operation_lock, recover_if_staged, staging_pending
from heldout.store import Store
from keys import Signer
from ledger import Ledger
from ledger.errors import LedgerStorageError
from seals import system_clock


def resolve_ledger_id(store: Store, ledger_id: str | None) -> str:
    """``ledger_id`` (an id or unique prefix) when given, else the store's default (``ledgers/DEFAULT``)."""
    text = ledger_id if ledger_id is not None else store.default_ledger_id()
    return Ledger.locate(store.ledgers, text).name.removesuffix(".sqlite")


def open_ledger(store: Store, ledger_id: str | None = None, *, read_only: bool = False) -> Ledger:
    """Open a ledger of the store (``read_only`` for commands that only read), after finishing or discarding
    what a killed operation left on it. A reader of a writable store recovers first, through a writable
    connection, so that it never sees a half-done operation; a read-only copy is read as committed. Every
    checkpoint a writable ledger signs from now on (a recovery's too) goes to the store's witnesses
    (``heldout.witness.operator``)."""
    from heldout.witness.operator import attach

    path = Ledger.locate(store.ledgers, resolve_ledger_id(store, ledger_id))
    if read_only:
        if staging_pending(store, path.name.removesuffix(".sqlite")):
            try:
                with Ledger.open(path) as writable:
                    attach(store, writable, clock=system_clock)
                    recover_if_staged(store, writable)
            except (OSError, LedgerStorageError):
                pass  # an unwritable store: recover_if_staged leaves it as it is in any case
        return Ledger.open(path, read_only=True)
    ledger = Ledger.open(path)
    try:
        attach(store, ledger, clock=system_clock)
        recover_if_staged(store, ledger)
    except BaseException:
        ledger.close()
        raise
    return ledger


def ledger_signer(store: Store, ledger: Ledger) -> Signer:
    """The private key that signs ``ledger`` (the one its genesis entry names), from the store."""
    return store.load_signer(ledger.key.key_id)


def create_lock(ledger: Ledger) -> None:
    """Create the lock file (done by ``heldout init``, so that refusals never leave a new file behind)."""
    path = lock_path(ledger)
    if not path.exists():
        path.touch()


@contextmanager
def generations_lock(ledger: Ledger, store: Store | None = None) -> Iterator[None]:
    """The exclusive lock held while an operation checks the ledger and appends to it (seal, retire,
    evaluate, passport issue, spec supersede), so two operators cannot seal one name twice and a seal's
    predicted entry index holds against other seals. Re-entrant within a process. With ``store``, what a
    killed operation left is finished or discarded first, under the same lock (``heldout.staging``)."""
    if store is None:
        with ledger_lock(ledger):
            yield
    else:
        with operation_lock(store, ledger):
            yield
