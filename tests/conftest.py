"""Shared fixtures: deterministic keys from fixed seeds, the reference files in tests/data, an isolated store."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import heldout.entries  # noqa: F401  (registers heldout's entry types, for tests that use the ledger alone)
from keys import Signer, TrustedKey
from ledger import LedgerBackend
from tests.postgres_support import PostgresCluster, require_postgres

REPO_ROOT = Path(__file__).resolve().parent.parent
TEST_DATA = REPO_ROOT / "tests" / "data"
# Test data lives in the repository (tests/data, with provenance) so a bare clone passes.
REFERENCE_PASSPORT = Path(
    os.environ.get("HELDOUT_REFERENCE", TEST_DATA / "reference")
) / "biomedclip_zeroshot.passport.json"
REFERENCE_KEY_B64 = "0PBCC6mjzcppR5QdPcK7vP/AamB6MP8l1T4ypMYbsMw="


def seeded_signer(i: int, *, name: str = "test-operator", key_id: str | None = None) -> Signer:
    """A deterministic Ed25519 key: seed = 32 copies of byte ``i``."""
    return Signer.from_seed(bytes([i]) * 32, name=name, key_id=key_id or f"test-key-{i}")


@pytest.fixture
def signer() -> Signer:
    return seeded_signer(1)


@pytest.fixture
def other_signer() -> Signer:
    return seeded_signer(2, name="someone-else")


@pytest.fixture
def trusted(signer: Signer) -> TrustedKey:
    return TrustedKey(key_id=signer.key_id, name=signer.name, public_key=signer.public_key)


@pytest.fixture
def reference_passport_path() -> Path:
    if not REFERENCE_PASSPORT.is_file():
        pytest.fail(f"reference passport not found at {REFERENCE_PASSPORT} (set HELDOUT_REFERENCE)")
    return REFERENCE_PASSPORT


@pytest.fixture(autouse=True)
def private_data_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test writes to the user's data or state folders: the default store, and the auditor's record of its
    clean reports, go to folders of the test's own."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("data-home")))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state-home")))


@pytest.fixture(autouse=True)
def rehearsal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests date their stores' entries by fixed times (``$HELDOUT_NOW``, ``--at``), some after today's date:
    never by the machine's clock. So every test runs as a rehearsal (see ``REHEARSAL_ENV``), except the tests of
    the clock bound itself, which unset it and give the machine's clock a fixed time."""
    monkeypatch.setenv("HELDOUT_REHEARSAL", "1")


@pytest.fixture
def store_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty store location; HELDOUT_STORE points at it so no test touches the user's store."""
    path = tmp_path / "store"
    monkeypatch.setenv("HELDOUT_STORE", str(path))
    monkeypatch.delenv("HELDOUT_DATABASE", raising=False)
    return path


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    """A private PostgreSQL server for the whole run (tests/postgres_support.py); skipped without the
    binaries, failed without them under CI=true."""
    cluster = PostgresCluster(require_postgres())
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def postgres_url(postgres_cluster: PostgresCluster) -> str:
    """A fresh, empty database of the private server (as its administrator)."""
    return postgres_cluster.url(postgres_cluster.new_database())


LEDGER_BACKENDS = ("sqlite", "postgresql")
BackendFactory = Callable[[], LedgerBackend]


def fresh_backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> LedgerBackend:
    """A new place for ledgers on the backend ``request.param`` names, for module-scoped fixtures (which
    cannot take the function-scoped ``make_backend``)."""
    if request.param == "sqlite":
        return LedgerBackend(folder=tmp_path_factory.mktemp("ledgers"))
    cluster = request.getfixturevalue("postgres_cluster")
    return LedgerBackend(database=cluster.url(cluster.new_database()))


@pytest.fixture(params=LEDGER_BACKENDS)
def make_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], LedgerBackend]:
    """Makes places for ledgers: a test taking it runs once on SQLite (folders ``tmp_path/ledgers``,
    ``ledgers1``, ...) and once on PostgreSQL (a fresh database per call)."""
    numbers = itertools.count()

    def make() -> LedgerBackend:
        number = next(numbers)
        if request.param == "sqlite":
            return LedgerBackend(folder=tmp_path / f"ledgers{number or ''}")
        cluster = request.getfixturevalue("postgres_cluster")
        return LedgerBackend(database=cluster.url(cluster.new_database()))

    return make


@pytest.fixture
def ledger_backend(make_backend: Callable[[], LedgerBackend]) -> LedgerBackend:
    """Where a ledger test keeps its ledgers: once a SQLite folder, once a fresh PostgreSQL database."""
    return make_backend()
