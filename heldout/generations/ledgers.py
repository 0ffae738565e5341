"""Which ledger a command works on, where it lives (SQLite files in the store, or a PostgreSQL database), the
key that signs it, and the lock that serializes generation changes. Every command opens and creates ledgers
through :func:`open_ledger` and :func:`create_ledger`, so all of them work on either backend."""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from heldout.staging import (
    UnpublishedOperation,
    ledger_lock,
    lock_path,
    logged_but_unpublished,
    operation_lock,
    recover_if_staged,
    staging_pending,
)
from heldout.store import Store
from keys import Signer, TrustedKey, UsageError
from keys.files import folder_held
from keys.signer import check_key_id
from ledger import Ledger, LedgerBackend
from ledger.errors import LedgerStorageError
from ledger.ledger import MAX_AHEAD
from seals import format_utc, shifted, system_clock

#: A PostgreSQL URL (no password: ~/.pgpass, PGPASSFILE, a service file or PGPASSWORD supply it) that holds
#: the store's ledgers; it overrides the URL ``heldout init --database`` recorded in ``ledgers/DATABASE``.
DATABASE_ENV = "HELDOUT_DATABASE"

#: Set to 1 for a rehearsal: a store whose commands run at reference times ahead of the machine's clock (the
#: demo's later days, tests of next year's expiries). Otherwise a writing command refuses to date an entry more
#: than the clock tolerance after the machine's clock: the ledger's time only moves forward, so one such entry
#: (a mistyped ``--at``) would refuse every append made on the real date, on a log nobody can rewrite.
REHEARSAL_ENV = "HELDOUT_REHEARSAL"

DEFAULT_KEY_NAME = "heldout-operator"
DEFAULT_LEDGER_NAME = "heldout"


def store_database(store: Store) -> str | None:
    """The database URL of the store's ledgers: ``$HELDOUT_DATABASE``, else the one recorded at init, else
    ``None`` (SQLite files under ``ledgers/``)."""
    from ledger.postgres import database_url

    env = os.environ.get(DATABASE_ENV, "").strip()
    if env:
        return database_url(env, what=f"${DATABASE_ENV}")  # (a malformed one: exit 2 naming the variable)
    recorded = store.database_url()
    return database_url(recorded, what=f"the database URL in {store.database_file}") if recorded else None


def ledger_backend(store: Store) -> LedgerBackend:
    database = store_database(store)
    return LedgerBackend(database=database) if database else LedgerBackend(folder=store.ledgers)


def rehearsal() -> bool:
    """Whether ``$HELDOUT_REHEARSAL`` says this is a rehearsal (``1``; unset or empty: not one)."""
    value = os.environ.get(REHEARSAL_ENV, "")
    if value not in ("", "1"):
        raise UsageError(f"${REHEARSAL_ENV} is 1 (a rehearsal) or unset", field=REHEARSAL_ENV, found=ascii(value)[:40])
    return value == "1"


def bound_to_clock(ledger: Ledger) -> Ledger:
    """``ledger`` with the machine's clock as the bound of what its appends may date (none in a rehearsal)."""
    ledger.wall_clock = None if rehearsal() else system_clock
    return ledger


def resolve_ledger_id(store: Store, ledger_id: str | None) -> str:
    """``ledger_id`` (an id or unique prefix) when given, else the store's default (``ledgers/DEFAULT``)."""
    text = ledger_id if ledger_id is not None else store.default_ledger_id()
    return ledger_backend(store).locate(text)


def create_ledger(store: Store, signer: Signer, *, name: str, now: datetime, database: str | None = None) -> Ledger:
    """A new ledger of the store, on its backend (``database`` when given, as ``heldout init --database``);
    the generations lock file is made with a SQLite ledger (so later refusals never leave a new file
    behind)."""
    if not name.strip() or len(name) > 128 or not all(char.isprintable() for char in name):
        # (its genesis entry records it for good, and every page and terminal shows it)
        raise UsageError("a ledger's name is at most 128 printable characters (no newline or control character)",
                         field="name", found=ascii(name)[:80])
    if not rehearsal() and now > shifted(clock := system_clock(), MAX_AHEAD):
        raise Ledger.after_clock(format_utc(now), clock)  # (the genesis is dated ``now``: every entry follows it)
    backend = LedgerBackend(database=database) if database else ledger_backend(store)
    ledger = bound_to_clock(backend.create(signer, name=name, now=now))
    create_lock(ledger)
    return ledger


def open_ledger(store: Store, ledger_id: str | None = None, *, read_only: bool = False) -> Ledger:
    """Open a ledger of the store (``read_only`` for commands that only read), after finishing or discarding
    what a killed operation left on it. A reader of a writable store recovers first, through a writable
    connection, so that it never sees a half-done operation; a read-only copy is read as committed. Every
    checkpoint a writable ledger signs from now on (a recovery's too) goes to the store's witnesses
    (``heldout.witness.operator``)."""
    from heldout.witness.operator import attach

    backend = ledger_backend(store)
    found = resolve_ledger_id(store, ledger_id)
    if read_only:
        if staging_pending(store, found):
            # A logged operation whose files are not published yet: publish them first, or judge nothing (the
            # store would lack files its ledger names: every verdict would call a full disk tampering).
            try:
                with backend.open(found) as writable:
                    attach(store, writable, clock=system_clock)
                    recover_if_staged(store, writable, read_only_is_done=False)
            except (OSError, LedgerStorageError) as exc:
                if not staging_pending(store, found):
                    raise  # (published after all, or failed for another reason: said as it is)
                opened = backend.open(found, read_only=True)
                if not logged_but_unpublished(store, opened):
                    return opened  # killed before its commit: nothing was logged, nothing waits to be published
                opened.close()
                raise UnpublishedOperation(store, found, exc if isinstance(exc, OSError) else None) from None
        return backend.open(found, read_only=True)
    ledger = backend.open(found)
    try:
        bound_to_clock(ledger)
        attach(store, ledger, clock=system_clock)
        recover_if_staged(store, ledger)
    except OSError as exc:  # (a full disk while publishing: say what waits, not only "no space left")
        ledger.close()
        if not staging_pending(store, found):
            raise
        raise UnpublishedOperation(store, found, exc) from None
    except BaseException:
        ledger.close()
        raise
    return ledger


def ledger_signer(store: Store, ledger: Ledger) -> Signer:
    """The private key that signs ``ledger`` (the one its genesis entry names), from the store."""
    return store.load_signer(ledger.key.key_id)


def create_lock(ledger: Ledger) -> None:
    """Create the lock file of a SQLite ledger (done when it is created, so that refusals never leave a new
    file behind); a ledger in PostgreSQL locks on the server and has none."""
    path = lock_path(ledger)
    if path is not None and not path.exists():
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


@dataclass(frozen=True)
class StoreInitialised:
    """What :func:`initialise_store` made: the ledger, where it lives, and the key that signs it."""

    ledger_id: str
    store: str
    key_id: str
    key_created: bool
    note_verifier_key: str
    ledger_location: str
    database: bool

    def to_json(self) -> dict[str, Any]:
        return {"ledger_id": self.ledger_id, "store": self.store, "key_id": self.key_id,
                "key_created": self.key_created, "note_verifier_key": self.note_verifier_key,
                "ledger_location": self.ledger_location}


def initialise_store(store: Store, *, name: str = DEFAULT_LEDGER_NAME, key_id: str | None = None,
                     database: str | None = None, now: datetime) -> StoreInitialised:
    """Create the store, an operator key (when it has none and ``key_id`` names none) and a ledger with its
    genesis entry, which becomes the store's default ledger; with ``database`` (a PostgreSQL URL with no
    password in it) the ledger lives there. Everything the arguments decide is checked before the first file
    is made, and a store this call creates is removed again if anything after that fails, so a refused init
    leaves nothing behind (exit 2)."""
    from ledger.postgres import database_url

    if store.default_ledger_file.is_file():
        raise UsageError(f"the store at {store.root} is already initialised (ledger {store.default_ledger_id()})",
                         path=str(store.default_ledger_file))
    if database is not None:
        # refused before anything is written when it is malformed or holds a password
        database = database_url(database, what="--database")
    if not name.strip() or len(name) > 256 or not name.isprintable() or unicodedata.normalize("NFC", name) != name:
        raise UsageError("--name is 1-256 printable characters (NFC)", field="name", found=repr(name)[:80])
    if key_id is not None:
        check_key_id(key_id)
    # Held for the whole init (red-team round 20: two inits at once on a new store both reported success, each
    # with a ledger and a key of its own, and one of them was not the store's): the second waits, then finds
    # the store initialised, and leaves it be.
    with folder_held(store.root) as held:
        if store.default_ledger_file.is_file():
            raise UsageError(f"the store at {store.root} is already initialised (ledger {store.default_ledger_id()})",
                             path=str(store.default_ledger_file))
        if database is None and store_database(store) is None:
            resumed = _resume_init(store)
            if resumed is not None:
                return resumed
        with held.removed_on_failure():  # a store folder this call made is removed again if anything fails
            return _initialise(store, name=name, key_id=key_id, database=database, now=now)


def _initialise(store: Store, *, name: str, key_id: str | None, database: str | None,
                now: datetime) -> StoreInitialised:
    """The store's layout, an operator key when it needs one, and its first ledger, made the default."""
    store.create()
    created_key = False
    if any(store.private_keys.glob("*.key")) or key_id is not None:
        signer = store.load_signer(key_id)
    else:
        fresh = Signer.generate(name=DEFAULT_KEY_NAME, key_id="pending")
        signer = Signer.with_key_id(fresh, f"{DEFAULT_KEY_NAME}-{fresh.public_key.fingerprint[:8]}")
        signer.save(store.private_key_path(signer.key_id))
        created_key = True
    # Trusted in both cases (idempotent): an init killed between saving its key and trusting it left the key
    # untrusted, and this re-run uses that key.
    store.keyring.add(TrustedKey(key_id=signer.key_id, name=signer.name, public_key=signer.public_key))
    with create_ledger(store, signer, name=name, now=now, database=database) as ledger:
        if database is not None:
            store.set_database_url(database)
        store.set_default_ledger_id(ledger.ledger_id)
        return StoreInitialised(ledger_id=ledger.ledger_id, store=str(store.root), key_id=signer.key_id,
                                key_created=created_key, note_verifier_key=ledger.verifier_key,
                                ledger_location=ledger.location, database=database is not None)


def _resume_init(store: Store) -> StoreInitialised | None:
    """An init killed after it created the store's ledger but before it made it the default leaves one ledger
    and no default: the next init finishes that one (made the default) instead of creating a second ledger
    beside it. None when the store holds no ledger, or more than one, or one this store's keys do not sign."""
    from ledger.entries import is_ledger_id
    from ledger.sqlite import LEDGER_SUFFIX

    if not store.ledgers.is_dir():
        return None
    made = [p for p in store.ledgers.glob(f"*{LEDGER_SUFFIX}") if is_ledger_id(p.name[: -len(LEDGER_SUFFIX)])]
    if len(made) != 1:
        return None
    with ledger_backend(store).open(made[0].name[: -len(LEDGER_SUFFIX)]) as ledger:
        key_id = ledger.key.key_id
        if not store.private_key_path(key_id).is_file():
            return None
        ledger.verify()
        create_lock(ledger)
        store.set_default_ledger_id(ledger.ledger_id)
        return StoreInitialised(ledger_id=ledger.ledger_id, store=str(store.root), key_id=key_id, key_created=False,
                                note_verifier_key=ledger.verifier_key, ledger_location=ledger.location,
                                database=False)
