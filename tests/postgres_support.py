"""A private PostgreSQL cluster for the tests and the benchmark: ``initdb`` in a fresh temporary folder, the
server listening on a Unix socket in that folder only (no TCP), trust authentication (nothing but this
process's user can reach the socket folder), stopped and removed at the end. No mock: the real server
Debian's ``postgresql`` package installs.

The binaries are looked up in ``$HELDOUT_PG_BIN``, else ``/usr/lib/postgresql/<newest>/bin``, else on the
``PATH``. ``initdb`` refuses to run as root; as root the cluster runs as the ``postgres`` system user
(``runuser``) and its folder is owned by that user. Without the binaries, tests that need the server are
skipped, except when ``CI=true``: then they fail, so CI cannot pass without testing PostgreSQL.

The tests' cluster uses ``fsync=off`` (its data are thrown away; the crash tests kill clients, not the
server); the benchmark's is ``durable`` (the server's defaults: fsync on, ``synchronous_commit`` on).
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ADMIN = "heldout_admin"
#: A login role that is a member of ``heldout_writer`` (INSERT and SELECT only): what operators append as.
APPENDER = "heldout_app"


def pg_bin_dir() -> Path | None:
    env = os.environ.get("HELDOUT_PG_BIN")
    if env:
        return Path(env) if (Path(env) / "initdb").is_file() else None
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"),
                      key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0)
    if versions:
        return versions[-1].parent
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def require_postgres() -> Path:
    """The binaries' folder; skips the test without them (fails it under ``CI=true``)."""
    found = pg_bin_dir()
    if found is None:
        message = "PostgreSQL server binaries (initdb, pg_ctl) not found; install Debian's postgresql"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + " (CI=true: PostgreSQL tests must run)")
        pytest.skip(message)
    return found


class PostgresCluster:
    """One running private cluster."""

    def __init__(self, bin_dir: Path, *, durable: bool = False) -> None:
        self.bin_dir = bin_dir
        self.as_postgres = os.geteuid() == 0
        self.root = Path(tempfile.mkdtemp(prefix="heldout-pg-"))
        self.data = self.root / "data"
        self.socket_dir = self.root
        self._numbers = itertools.count()
        if self.as_postgres:
            shutil.chown(self.root, "postgres", "postgres")
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", ADMIN, "-E", "UTF8", "--no-locale",
                  "--no-sync")
        flush = "" if durable else "-c fsync=off -c full_page_writes=off "
        options = (f"-k {self.socket_dir} -c listen_addresses='' {flush}-c max_connections=60 "
                   "-c shared_buffers=32MB")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"), "-w", "-o", options,
                  "start")
        self._admin_sql(f"CREATE ROLE {APPENDER} LOGIN")

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.bin_dir / tool), *args]
        if self.as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    def url(self, database: str = "postgres", user: str = ADMIN) -> str:
        return f"postgresql:///{database}?host={self.socket_dir}&user={user}"

    def _admin_sql(self, statement: str, database: str = "postgres") -> None:
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True) as conn:
            conn.execute(statement)

    def new_database(self) -> str:
        """A fresh empty database; returns its name. The appender role gets CONNECT on it (the ledger
        schemas grant the rest to heldout_writer when they are created)."""
        name = f"t{os.getpid()}_{next(self._numbers)}"
        self._admin_sql(f"CREATE DATABASE {name}")
        self._admin_sql(f"REVOKE ALL ON DATABASE {name} FROM PUBLIC")
        self._admin_sql(f"GRANT CONNECT ON DATABASE {name} TO {APPENDER}")
        return name

    def grant_writer(self) -> None:
        """Make the appender a member of heldout_writer (once the first ledger has created that role)."""
        self._admin_sql(f"GRANT heldout_writer TO {APPENDER}")

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
