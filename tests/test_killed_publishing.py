"""SIGKILL while a folder is put in place beside its final name: ``heldout site build OUT`` over a published site
(``heldout/site/build.py:_publish``) and ``heldout ledger export ID DEST`` (``ledger/export.py:export_ledger``).

Each killed run is the real command in a child process (forked from this one, so it costs no interpreter start)
that sends itself SIGKILL at a chosen step: the N-th line run in the publishing module (or ``keys/files.py``,
where the swap and the clean-up live) after the render or export has written its last file (or its first, for
a kill mid-write). Every N is tried until the run finishes uncut, so every point of the swap is covered,
whatever the code does there. After each kill, ``OUT`` must hold a whole site (its ``manifest.json`` lists
exactly the files there, by SHA-256: the previous site or the new one, never none) and ``DEST`` nothing or a
whole export (``heldout ledger verify ID --from DEST`` exits 0); the next run must succeed and leave no
``.NAME.tmp<pid>`` / ``.NAME.old<pid>`` behind.

What the clean-up (:func:`keys.files.remove_stale_leftovers`) removes is only those names, and only when their
process no longer runs: a running build's folders and a user's own folders beside ``OUT`` are kept.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

import pytest
from typer.testing import CliRunner

import heldout.site.build as site_build
import keys.files as key_files
import ledger.export as ledger_export
from heldout.cli import app
from keys.files import exchange_paths, remove_stale_leftovers
from ledger.sqlite import LEDGER_SUFFIX, _remove_stale_builds
from tests.audit_support import build_store
from tests.cli_support import in_forked_child
from tests.site_support import run

MAX_STEPS = 80  # more line events than any publish step runs after its last file: the sweep must end before


@dataclass(frozen=True)
class Published:
    store: Path
    export: Path
    ledger_id: str


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Published:
    """A small store (public, gen1, gen2 sealed, one bundle each) and its export: a second or so."""
    root = tmp_path_factory.mktemp("killed-publishing")
    fixture = build_store(root, bundles_per_generation=1, n_public=20, per_task=10)
    exported = run("ledger", "export", fixture.ledger_id, str(root / "export"), "--store", str(fixture.store))
    assert exported.exit_code == 0, exported.output
    return Published(store=fixture.store, export=root / "export", ledger_id=fixture.ledger_id)


# --- killing the real command at a chosen step -----------------------------------------------------------------

def run_killed(argv: list[str], *, modules: tuple[ModuleType, ...], after: tuple[object, str],
               step: int) -> int | None:
    """Run ``heldout argv`` in a forked child that SIGKILLs itself at the ``step``-th line event in ``modules``
    after the first return of ``after`` (a module or class and the name of a function in it). None when it was
    killed, else the exit code of a run that finished before reaching that step."""
    return in_forked_child(lambda: _killed_child(argv, modules, after, step))


def _killed_child(argv: list[str], modules: tuple[ModuleType, ...], after: tuple[object, str],
                  step: int) -> int:
    files = {module.__file__ for module in modules}
    owner, name = after
    real = getattr(owner, name)
    armed = False
    seen = 0

    def arming(*args: Any, **kwargs: Any) -> Any:
        nonlocal armed
        result = real(*args, **kwargs)
        armed = True
        return result

    def on_line(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal seen
        if event == "line" and armed:
            seen += 1
            if seen == step:
                os.kill(os.getpid(), signal.SIGKILL)
        return on_line

    setattr(owner, name, arming)
    sys.settrace(lambda frame, event, arg: on_line if frame.f_code.co_filename in files else None)
    return CliRunner().invoke(app, argv).exit_code


def leftovers(folder: Path, name: str) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith((f".{name}.tmp", f".{name}.old")))


def whole_site(out: Path) -> str:
    """``out`` holds a complete site: its manifest lists exactly the files there, each by its SHA-256. Returns
    the site's release tag (which build it is)."""
    manifest = json.loads((out / site_build.MANIFEST).read_bytes())
    found = {p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
             for p in out.rglob("*") if p.is_file()}
    found.pop(site_build.MANIFEST)
    assert found == manifest["files"]
    return str(manifest["release_tag"])


def build(out: Path, published: Published, tag: str) -> None:
    result = run("site", "build", str(out), "--from", str(published.export), "--release-tag", tag)
    assert result.exit_code == 0, result.output


def verify_exit(published: Published, dest: Path) -> int:
    return run("ledger", "verify", published.ledger_id, "--from", str(dest)).exit_code


@pytest.fixture
def dead_pid() -> int:
    """The PID of a process that has ended (and been reaped)."""
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


@pytest.fixture
def live_pid() -> Iterator[int]:
    """The PID of a process that runs until the test ends (it waits on its stdin: no sleeping)."""
    with subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL) as process:
        yield process.pid
        assert process.stdin is not None
        process.stdin.close()


# --- site build ------------------------------------------------------------------------------------------------

def test_site_build_killed_at_every_step_of_replacing_the_site_never_leaves_out_without_a_whole_site(
        published: Published, tmp_path: Path) -> None:
    """The red-team attack: SIGKILL between ``rename(OUT, old)`` and ``rename(tmp, OUT)`` left no site at OUT
    (a host serving OUT served nothing) and the two hidden folders for good."""
    probe_a, probe_b = tmp_path / "probe-a", tmp_path / "probe-b"
    probe_a.mkdir()
    probe_b.mkdir()
    if not exchange_paths(probe_a, probe_b):
        pytest.skip("no renameat2(RENAME_EXCHANGE) here: the two-rename fallback has a gap by nature")
    out = tmp_path / "site"
    seen: list[tuple[str, list[str]]] = []
    for step in itertools.count(1):
        assert step < MAX_STEPS, seen
        if not out.exists() or whole_site(out) != "r1":
            build(out, published, "r1")  # each kill replaces the same previous site
        code = run_killed(["site", "build", str(out), "--from", str(published.export), "--release-tag", "r2"],
                          modules=(site_build, key_files), after=(site_build, "render_into"), step=step)
        tag = whole_site(out)  # killed or not: OUT holds a whole site
        if code is not None:
            assert code == 0
            assert tag == "r2"
            break
        seen.append((tag, leftovers(tmp_path, "site")))
    tags = [tag for tag, _ in seen]
    assert "r1" in tags and "r2" in tags, seen  # killed before the swap and after it
    assert tags == sorted(tags), seen  # the previous site until the swap, the new one from then on
    assert any(left for _, left in seen), seen  # some kills left a folder behind...
    assert leftovers(tmp_path, "site") == []  # ...and the uncut run removed what the last kill left


def test_site_build_killed_while_rendering_keeps_the_previous_site_and_the_next_build_cleans_up(
        published: Published, tmp_path: Path) -> None:
    out = tmp_path / "site"
    build(out, published, "r1")
    code = run_killed(["site", "build", str(out), "--from", str(published.export), "--release-tag", "r2"],
                      modules=(site_build,), after=(site_build.DirectorySink, "write"), step=1)
    assert code is None
    assert whole_site(out) == "r1"
    assert len(leftovers(tmp_path, "site")) == 1  # the half-rendered site, under the dead build's PID
    build(out, published, "r3")
    assert whole_site(out) == "r3"
    assert leftovers(tmp_path, "site") == []


def test_site_build_without_an_atomic_exchange_still_replaces_the_previous_site(
        published: Published, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(site_build, "exchange_paths", lambda a, b: False)
    out = tmp_path / "site"
    build(out, published, "r1")
    build(out, published, "r2")
    assert whole_site(out) == "r2"
    assert leftovers(tmp_path, "site") == []


# --- ledger export ---------------------------------------------------------------------------------------------

def test_ledger_export_killed_at_every_step_of_putting_it_in_place_leaves_nothing_partial_at_dest(
        published: Published, tmp_path: Path) -> None:
    dest = tmp_path / "export"
    argv = ["ledger", "export", published.ledger_id, str(dest), "--store", str(published.store)]
    outcomes: list[tuple[bool, list[str]]] = []
    for step in itertools.count(1):
        assert step < MAX_STEPS, outcomes
        if dest.exists():
            shutil.rmtree(dest)  # an export is refused over a non-empty DEST
        code = run_killed(argv, modules=(ledger_export, key_files), after=(ledger_export, "_build"), step=step)
        if dest.exists():
            assert verify_exit(published, dest) == 0  # whatever is at DEST is whole
        if code is not None:
            assert code == 0
            assert dest.exists()
            break
        outcomes.append((dest.exists(), leftovers(tmp_path, "export")))
    assert any(not present and left for present, left in outcomes), outcomes  # killed before the rename
    assert leftovers(tmp_path, "export") == []


def test_ledger_export_killed_while_writing_leaves_no_export_and_the_next_export_cleans_up(
        published: Published, tmp_path: Path) -> None:
    dest = tmp_path / "export"
    argv = ["ledger", "export", published.ledger_id, str(dest), "--store", str(published.store)]
    code = run_killed(argv, modules=(ledger_export,), after=(ledger_export, "_write_file"), step=1)
    assert code is None
    assert not dest.exists()
    assert verify_exit(published, dest) != 0
    assert len(leftovers(tmp_path, "export")) == 1  # the partial export, under the dead exporter's PID
    result = run(*argv)
    assert result.exit_code == 0, result.output
    assert verify_exit(published, dest) == 0
    assert leftovers(tmp_path, "export") == []


# --- what the clean-up keeps -----------------------------------------------------------------------------------

def publish(kind: str, out: Path, published: Published) -> None:
    if kind == "site":
        build(out, published, "r1")
    else:
        if out.exists():
            shutil.rmtree(out)
        result = run("ledger", "export", published.ledger_id, str(out), "--store", str(published.store))
        assert result.exit_code == 0, result.output


@pytest.mark.parametrize("kind", ["site", "export"])
def test_a_leftover_of_a_build_that_still_runs_is_kept_until_it_ends(
        kind: str, published: Published, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL) as running:
        for tag in ("tmp", "old"):
            (tmp_path / f".out.{tag}{running.pid}").mkdir()
            (tmp_path / f".out.{tag}{running.pid}" / "index.html").write_text("being written")
        publish(kind, out, published)
        assert leftovers(tmp_path, "out") == [f".out.old{running.pid}", f".out.tmp{running.pid}"]
        assert running.stdin is not None
        running.stdin.close()
    publish(kind, out, published)  # its process has ended: now it is a leftover
    assert leftovers(tmp_path, "out") == []


@pytest.mark.parametrize("kind", ["site", "export"])
def test_a_users_own_folders_beside_the_output_are_never_removed(
        kind: str, published: Published, tmp_path: Path, dead_pid: int) -> None:
    out = tmp_path / "out"
    users = [".out.backup", ".out.tmp", ".out.old", ".out.tmpx", f".out.tmp{dead_pid}x", f".out.old{dead_pid}.bak",
             f".out.tmp{dead_pid}-wal", ".out.tmp0", f".out.tmp0{dead_pid}", ".out.tmp-5", f"out.tmp{dead_pid}",
             f".other.tmp{dead_pid}", f".out.new{dead_pid}", ".out.tmp99999999999999",
             ".out.old1"]  # PID 1 always runs
    for name in users:
        (tmp_path / name).mkdir()
        (tmp_path / name / "mine.txt").write_text("a user's file")
    (tmp_path / f".out.tmp{dead_pid}").mkdir()  # a killed build's: removed
    os.symlink(tmp_path / ".out.backup", tmp_path / f".out.old{dead_pid}")  # removed: the link, not what it names
    publish(kind, out, published)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*users, "out"])
    for name in users:
        assert (tmp_path / name / "mine.txt").read_text() == "a user's file"


def test_sqlite_builds_share_the_clean_up_of_temporaries_and_keep_a_running_builders(
        tmp_path: Path, dead_pid: int, live_pid: int) -> None:
    ledger_id = "0" * 20
    stem = f".{ledger_id}{LEDGER_SUFFIX}.tmp"
    # (-journal too: a build killed before it set WAL mode leaves one, which a reused process id would read as a
    # hot journal of its own temporary file)
    dead = [f"{stem}{dead_pid}", f"{stem}{dead_pid}-wal", f"{stem}{dead_pid}-shm", f"{stem}{dead_pid}-journal",
            f"{stem}{os.getpid()}"]
    kept = [f"{stem}{live_pid}", f"{stem}{live_pid}-wal", f"{stem}{live_pid}-journal",
            f".{ledger_id}{LEDGER_SUFFIX}.old{dead_pid}", f"{ledger_id}{LEDGER_SUFFIX}"]
    for name in dead + kept:
        (tmp_path / name).write_bytes(b"x")
    _remove_stale_builds(tmp_path, ledger_id)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(kept)


# --- the two primitives --------------------------------------------------------------------------------------

def test_remove_stale_leftovers_never_removes_the_callers_own_or_a_running_process(
        tmp_path: Path, dead_pid: int, live_pid: int) -> None:
    for pid in (os.getpid(), live_pid, dead_pid):
        (tmp_path / f".site.tmp{pid}").mkdir()
    assert remove_stale_leftovers(tmp_path, "site") == [tmp_path / f".site.tmp{dead_pid}"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([f".site.tmp{os.getpid()}", f".site.tmp{live_pid}"])
    assert remove_stale_leftovers(tmp_path / "missing", "site") == []


@pytest.mark.parametrize("answer", [errno.ENOSYS, errno.EINVAL, errno.ENOTSUP])
def test_exchange_paths_reports_an_unsupported_exchange_and_changes_nothing(
        answer: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refusing(*args: Any) -> int:
        ctypes.set_errno(answer)
        return -1

    monkeypatch.setattr(key_files, "_renameat2", lambda: refusing)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert exchange_paths(tmp_path / "a", tmp_path / "b") is False
    monkeypatch.setattr(key_files, "_renameat2", lambda: None)  # no renameat2 in libc, or not Linux
    assert exchange_paths(tmp_path / "a", tmp_path / "b") is False


def test_exchange_paths_raises_other_failures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def denied(*args: Any) -> int:
        ctypes.set_errno(errno.EACCES)
        return -1

    monkeypatch.setattr(key_files, "_renameat2", lambda: denied)
    with pytest.raises(PermissionError):
        exchange_paths(tmp_path / "a", tmp_path / "b")


def test_exchange_paths_swaps_two_folders(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "from-a").write_text("a")
    (tmp_path / "b").mkdir()
    if not exchange_paths(tmp_path / "a", tmp_path / "b"):
        pytest.skip("no renameat2(RENAME_EXCHANGE) here")
    assert [p.name for p in (tmp_path / "b").iterdir()] == ["from-a"]
    assert list((tmp_path / "a").iterdir()) == []


def test_leftovers_of_a_killed_ledger_copy_and_private_write_go_with_the_next_run(tmp_path: Path,
                                                                                  dead_pid: int) -> None:
    """A migrate killed after linking its copy into place left ``.<id>.sqlite.tmpPID`` (a hard link to the
    ledger) that the refused re-run never removed; a pool add killed inside its private write left
    ``.<name>.tmpPID`` for good (red-team round 10). Each next attempt removes its dead process's leftover."""
    from ledger.errors import LedgerUsageError
    from ledger.sqlite import create_storage

    pid = dead_pid
    folder = tmp_path / "ledgers"
    ledger_id = "0123456789abcdef0123"
    folder.mkdir()
    (folder / f"{ledger_id}.sqlite").write_bytes(b"the ledger")
    leftover = folder / f".{ledger_id}.sqlite.tmp{pid}"
    os.link(folder / f"{ledger_id}.sqlite", leftover)
    with pytest.raises(LedgerUsageError, match="already exists"):
        create_storage(folder, ledger_id, lambda storage: None)
    assert not leftover.exists() and (folder / f"{ledger_id}.sqlite").read_bytes() == b"the ledger"

    private = tmp_path / "private"
    key_files.ensure_private_dir(private)
    half = private / f".pool.npz.tmp{pid}"
    half.write_bytes(b"half")
    key_files.write_private_file(private / "pool.npz", b"whole")
    assert not half.exists() and (private / "pool.npz").read_bytes() == b"whole"
