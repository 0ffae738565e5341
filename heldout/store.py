"""The store: one directory of data, never inside the source tree (DESIGN.md, "The store").

``ledgers/`` SQLite ledgers (or ``ledgers/DATABASE``, the URL of the PostgreSQL database holding them);
``blobs/sha256/`` content-addressed files; ``seals/`` signed seal manifests;
``keys/`` trusted public keys; ``passports/``; ``audit/`` reports; ``private/`` (0700) private keys, pools,
salts and sealed labels, Thresholdout noise secrets, and ``private/withheld/`` the blobs of bundles on ladder and
Thresholdout generations until they are retired. Nothing under ``private/`` is exported, logged or printed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from keys import Keyring, MalformedInput, Signer, StorageError, TrustedKey, UntrustedKey, UsageError, storage_error
from keys.files import check_private_dir, ensure_private_dir, write_atomic
from keys.safeio import read_in
from keys.signer import check_key_id

STORE_ENV = "HELDOUT_STORE"
#: What a store folder holds (any one of them: a store begun by an older version, or by a killed init, counts),
#: and the mark of a folder ``heldout demo`` made for its store.
_STORE_NAMES = ("ledgers", "blobs", "seals", "keys", "passports", "audit", "private", "witnesses", ".heldout-demo")


def xdg_base(variable: str, *default: str) -> Path:
    """``$XDG_DATA_HOME`` and the like: the variable's folder when it is an absolute path, else the default under
    the home folder. The XDG base-directory specification says a relative value is ignored: taken as is, it
    put the store under whatever folder a command ran in (a source checkout among them)."""
    value = os.environ.get(variable)
    path = Path(value).expanduser() if value else None
    return path if path is not None and path.is_absolute() else Path.home().joinpath(*default)


def default_store_path() -> Path:
    """``$HELDOUT_STORE``, else ``$XDG_DATA_HOME/heldout``, else ``~/.local/share/heldout``."""
    env = os.environ.get(STORE_ENV)
    if env:
        return Path(env).expanduser()
    return xdg_base("XDG_DATA_HOME", ".local", "share") / "heldout"


def auditor_state_path() -> Path:
    """What the auditor keeps for itself, outside every store (the record of the clean audit reports it wrote):
    ``$XDG_STATE_HOME/heldout``, else ``~/.local/state/heldout``."""
    return xdg_base("XDG_STATE_HOME", ".local", "state") / "heldout"


@dataclass(frozen=True)
class Store:
    root: Path

    @classmethod
    def open(cls, root: Path | None = None) -> Store:
        """The store at ``root`` (default: :func:`default_store_path`); refused when that is not a folder."""
        given = (root or default_store_path()).expanduser()
        try:
            path = given.resolve()
        except (RuntimeError, OSError) as exc:  # a symbolic link loop (RuntimeError before Python 3.13)
            raise StorageError(f"the store path {str(given)!a} cannot be resolved: {exc}; give a folder with "
                               "--store", path=ascii(str(given))) from None
        if path.exists() and not path.is_dir():
            raise StorageError(f"{path} is a file, not a store folder; give a folder with --store", path=str(path))
        return cls(path)

    @property
    def ledgers(self) -> Path:
        return self.root / "ledgers"

    @property
    def blobs(self) -> Path:
        return self.root / "blobs" / "sha256"

    @property
    def seals(self) -> Path:
        return self.root / "seals"

    @property
    def keys(self) -> Path:
        return self.root / "keys"

    @property
    def passports(self) -> Path:
        return self.root / "passports"

    @property
    def audit(self) -> Path:
        return self.root / "audit"

    @property
    def private(self) -> Path:
        return self.root / "private"

    @property
    def private_keys(self) -> Path:
        return self.private / "keys"

    @property
    def keyring(self) -> Keyring:
        return Keyring(self.keys)

    def issuer_key(self, doc: Mapping[str, Any], *, what: str = "document") -> TrustedKey:
        """The keyring's key named by a signed document's ``issuer.key_id`` (a passport, a seal manifest, a
        member proof); refused (UntrustedKey) when the keyring lacks it."""
        issuer = doc.get("issuer")
        if not isinstance(issuer, Mapping) or not isinstance(issuer.get("key_id"), str):
            raise MalformedInput(f"the {what} has no issuer.key_id to look up in the keyring", field="issuer.key_id")
        keyring = self.keyring
        try:
            return keyring.get(issuer["key_id"])
        except UsageError:
            raise UntrustedKey(f"issuer key {issuer['key_id']!r} is not in the keyring at {keyring.folder}; "
                               "pass --key to trust one", field="issuer.key_id", found=issuer["key_id"]) from None

    def create(self) -> None:
        """Create the layout; ``private/`` is 0700 from its first instant. A folder that holds other files and
        nothing of a store is refused: ``HELDOUT_STORE=/ heldout init`` made a store, private key included,
        among the files of the root folder (or of a home folder)."""
        if self.root.is_dir() and not any(os.path.lexists(self.root / name) for name in _STORE_NAMES):
            try:
                with os.scandir(self.root) as listing:
                    other = next((entry.name for entry in listing), None)
            except OSError as exc:
                raise storage_error(exc) from None
            if other is not None:
                raise UsageError(f"{self.root} is a folder of other files ({other!r}, ...), not a heldout store: "
                                 "give a new or empty folder for one", path=str(self.root), found=other[:80])
        self.root.mkdir(parents=True, exist_ok=True)
        for folder in (self.ledgers, self.blobs, self.seals, self.keys, self.passports, self.audit):
            folder.mkdir(parents=True, exist_ok=True)
        ensure_private_dir(self.private)
        ensure_private_dir(self.private_keys)

    def private_key_path(self, key_id: str) -> Path:
        return self.private_keys / f"{check_key_id(key_id)}.key"

    def load_signer(self, key_id: str | None = None) -> Signer:
        """Load a private key by id, or the only one when the store holds exactly one."""
        if key_id is None:
            if self.private_keys.is_dir():
                check_private_dir(self.private_keys)
            found = sorted(self.private_keys.glob("*.key")) if self.private_keys.is_dir() else []
            if len(found) != 1:
                raise UsageError(
                    f"the store at {self.root} holds {len(found)} private keys; name one with --key-id"
                    if found else f"no private key in the store at {self.root}; run: heldout keys init",
                    store=str(self.root),
                )
            return Signer.load(found[0])
        path = self.private_key_path(key_id)
        if not path.exists():
            raise UsageError(f"no private key {key_id!r} in the store at {self.root}", key_id=key_id)
        return Signer.load(path)

    # --- default ledger and private generation material (generations) ---------------------------------------
    @property
    def default_ledger_file(self) -> Path:
        """``ledgers/DEFAULT``: the id of the ledger commands use when none is named (written by init)."""
        return self.ledgers / "DEFAULT"

    def default_ledger_id(self) -> str:
        """The id in ``ledgers/DEFAULT``; a usage error (run ``heldout init``) when there is none."""
        path = self.default_ledger_file
        if not os.path.lexists(path):
            raise UsageError(f"no default ledger in the store at {self.root}; run: heldout init "
                             "(or name one with --ledger)", store=str(self.root))
        return self._setting("ledgers/DEFAULT", "default ledger file")

    def _setting(self, name: str, what: str) -> str:
        """The text of one of the store's own setting files (``ledgers/DEFAULT``, ``ledgers/DATABASE``), bounded
        and read without following links. A damaged one (oversized, a link, not a plain file) is a fault of the
        store's setup, as a missing one is (exit 2), not evidence about any ledger."""
        try:
            data = read_in(self.root, name, limit=1024, what=what)
        except MalformedInput as exc:
            raise UsageError(f"{exc.message}: the store's {what} {self.root / name} is damaged; rewrite it (heldout "
                             "init writes it)", store=str(self.root), file=name) from None
        return (data or b"").decode("utf-8", "replace").strip()

    @property
    def database_file(self) -> Path:
        """``ledgers/DATABASE``: the PostgreSQL URL (never with a password) holding the store's ledgers, when
        ``heldout init --database`` put them there."""
        return self.ledgers / "DATABASE"

    def database_url(self) -> str | None:
        path = self.database_file
        # (present in any form, a folder, a link or emptied too, it is read: a damaged one is an error, never
        # "none set", which would send appends to a local file instead of the configured server)
        if not os.path.lexists(path):
            return None
        url = self._setting("ledgers/DATABASE", "database file")
        if not url:
            raise UsageError(f"the store's database file {path} is empty: it names the PostgreSQL server holding the "
                             "store's ledgers (heldout init --database writes it)", store=str(self.root),
                             file="ledgers/DATABASE")
        return url

    def set_database_url(self, url: str) -> None:
        self.ledgers.mkdir(parents=True, exist_ok=True)
        tmp = self.database_file.with_name(f".DATABASE.tmp{os.getpid()}")
        tmp.write_text(url + "\n")
        os.replace(tmp, self.database_file)

    def set_default_ledger_id(self, ledger_id: str) -> None:
        write_atomic(self.default_ledger_file, (ledger_id + "\n").encode())

    @property
    def pools(self) -> Path:
        """``private/pools/<task>/``: private cases that sealed generations are drawn from."""
        return self.private / "pools"

    @property
    def openings(self) -> Path:
        """``private/generations/<ledger id>/<generation>/``: salts and labels (the opening) of each seal."""
        return self.private / "generations"
