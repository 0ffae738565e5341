"""Clean errors everywhere (issue 9, section 6): file-system and database failures end as one line and exit 2
(exit 1 stays "verification failed"), usage errors are one line, temporary files never outlive a failure, and a
read-only copy of a store can be verified, audited and exported from. Every case runs a command as a user does."""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from heldout.cli import app
from tests.audit_support import AuditFixture, build_store, command_clock
from tests.cli_support import all_commands
from tests.conftest import REPO_ROOT

runner = CliRunner()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> AuditFixture:
    return build_store(tmp_path_factory.mktemp("errors"), bundles_per_generation=1)


def invoke(*args: str) -> Result:
    with command_clock("2026-09-02T00:00:00Z"):
        return runner.invoke(app, list(args))


def assert_one_line_error(result: Result, code: int = 2) -> str:
    """The command failed with ``code``, without an exception escaping, saying so in one line on stderr."""
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == code, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("heldout") and "error: " in lines[0], lines[0]
    assert "Traceback" not in result.output
    return lines[0]


def tree_state(root: Path) -> dict[str, str]:
    """Every file under ``root`` with its SHA-256, SQLite's transient -wal/-shm files aside."""
    state = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.name.endswith(("-wal", "-shm")):
            state[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return state


# --- paths of the wrong kind, missing folders, numbers out of range ------------------------------------------

def test_a_file_given_as_the_store_is_refused_by_every_kind_of_command(tmp_path: Path) -> None:
    a_file = tmp_path / "not-a-store"
    a_file.write_text("x")
    for args in (["init"], ["keys", "init"], ["keys", "list"], ["status"], ["ledger", "head"], ["audit"],
                 ["pool", "list"]):
        line = assert_one_line_error(invoke(*args, "--store", str(a_file)))
        assert str(a_file) in line and "not a store folder" in line, (args, line)
    assert a_file.read_text() == "x"


def test_a_store_below_a_file_is_an_environment_error(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    line = assert_one_line_error(invoke("init", "--store", str(a_file / "store")))
    assert "is a file, not a folder" in line
    line = assert_one_line_error(invoke("demo", "--store", str(a_file / "demo")))
    assert "is a file, not a folder" in line


def test_out_below_a_file_is_refused_before_any_work_and_writes_nothing(built: AuditFixture, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    for out in (tmp_path / "file" / "deeper" / "report.json", Path("/etc/passwd/report.json")):
        line = assert_one_line_error(invoke("audit", "--store", str(built.store), "--out", str(out)))
        assert "is a file, not a folder" in line
        line = assert_one_line_error(invoke("prove-member", "gen1", "bloodmnist-0000000000000000", "--out",
                                            str(out), "--store", str(built.store)))
        assert "is a file, not a folder" in line
    line = assert_one_line_error(invoke("ledger", "export", str(tmp_path / "file" / "x"), "--store",
                                        str(built.store)))
    assert "file" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_audit_out_a_folder_puts_the_report_inside_and_leaves_no_temporary_file(built: AuditFixture,
                                                                               tmp_path: Path) -> None:
    result = invoke("audit", "--store", str(built.store), "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit_report.json"]
    assert f"report written to {tmp_path / 'audit_report.json'}" in result.stdout


def test_audit_out_never_replaces_a_file_that_is_not_an_audit_report(built: AuditFixture, tmp_path: Path) -> None:
    """A typo in --out (the store's private key, a seal manifest, any file) is refused, the file untouched;
    an earlier report at --out is replaced as before."""
    store = tmp_path / "store"
    shutil.copytree(built.store, store)
    targets = [*sorted((store / "private" / "keys").glob("*")), store / "seals" / "gen1.seal.json"]
    before = tree_state(store)
    for target in targets:
        line = assert_one_line_error(invoke("audit", "--store", str(store), "--out", str(target)))
        assert "is not an audit report" in line
    assert tree_state(store) == before
    report = tmp_path / "report.json"
    for _ in range(2):
        assert invoke("audit", "--store", str(store), "--out", str(report)).exit_code == 0


def test_write_atomic_never_writes_through_a_link_at_its_temporary_name(tmp_path: Path) -> None:
    """Its temporary name (.NAME.tmpPID) is predictable: a link someone put there is removed, not followed."""
    from keys.files import write_atomic

    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    target = tmp_path / "report.json"
    (tmp_path / f".report.json.tmp{os.getpid()}").symlink_to(victim)
    write_atomic(target, b"the report")
    assert victim.read_bytes() == b"keep me" and target.read_bytes() == b"the report"
    assert not target.is_symlink() and sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "victim"]


def test_the_temporaries_of_killed_writers_go_with_the_next_write(tmp_path: Path) -> None:
    """A killed audit left ``.audit_report.json.tmp<pid>`` beside its report, one more per kill, and no later
    command removed it (red-team round 14). The next write of the file removes those of dead processes; a live
    writer's, and other names, stay."""
    from keys.files import write_atomic

    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True)
    dead = int(finished.stdout)
    target = tmp_path / "audit_report.json"
    for name in (f".audit_report.json.tmp{dead}", f".audit_report.json.tmp{os.getppid()}", ".audit_report.json.tmpx",
                 ".other.json.tmp1"):
        (tmp_path / name).write_bytes(b"partial")
    write_atomic(target, b"the report")
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".audit_report.json.tmp{os.getppid()}",
                                                          ".audit_report.json.tmpx", ".other.json.tmp1",
                                                          "audit_report.json"]


def test_attack_a_follower_state_that_cannot_be_read_is_never_a_first_use(built: AuditFixture,
                                                                          tmp_path: Path) -> None:
    """A --state path that exists but cannot be read (a link loop, a dangling link, a folder) was taken for
    "nothing accepted yet", so an older export (a rollback) was accepted and the state replaced."""
    export, store = tmp_path / "export", tmp_path / "store"
    shutil.copytree(built.store, store)  # (the module's store stays as it was built)
    assert invoke("ledger", "export", str(export), "--store", str(store)).exit_code == 0
    loop, dangling, folder = tmp_path / "loop", tmp_path / "dangling", tmp_path / "folder"
    loop.symlink_to(loop)
    dangling.symlink_to(tmp_path / "nowhere")
    folder.mkdir()
    for state in (loop, dangling, folder):
        line = assert_one_line_error(invoke("ledger", "follow", built.ledger_id, "--from", str(export), "--state",
                                            str(state)))
        assert "client state" in line, line
    assert loop.is_symlink() and dangling.is_symlink() and not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("args", [
    ["ledger", "show", "--start", "99999999999999999999"],
    ["ledger", "show", "--limit", "99999999999999999999"],
    ["ledger", "leaf", "--index", "-1"],
    ["ledger", "prove", "--index", "0", "--size", "99999999999999999999"],
    ["ledger", "consistency", "--old", "-5"],
    ["data", "synth", "bloodmnist", "--out", "unused", "--seed", "-1"],
    ["evaluate", "majority", "--generation", "gen1", "--tasks", "bloodmnist", "--seed", "-1"],
], ids=lambda a: " ".join(a[:3]))
def test_numbers_out_of_range_are_usage_errors(built: AuditFixture, args: list[str]) -> None:
    line = assert_one_line_error(invoke(*args, "--store", str(built.store)) if args[0] != "data"
                                 else invoke(*args))
    assert "Invalid value" in line


@pytest.mark.parametrize("args", [
    ["seal"],
    ["seal", "gen9"],
    ["ledger", "show", "--bogus"],
    ["passport", "verify"],
    ["ledger", "leaf", "--index", "x"],
], ids=" ".join)
def test_usage_errors_are_one_line(args: list[str]) -> None:
    line = assert_one_line_error(invoke(*args))
    assert "--help" in line


def test_python_audit_py_usage_error_is_one_line() -> None:
    result = subprocess.run([sys.executable, "audit.py", "--no-such-option"], capture_output=True, text=True,
                            cwd=REPO_ROOT, timeout=120, check=False)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "error: " in lines[0] and "Traceback" not in result.stderr, result.stderr


# --- an output closed by its reader ----------------------------------------------------------------------------

@pytest.mark.parametrize("command", [
    ["-m", "heldout", "status", "--store", "{store}"], ["-m", "heldout", "status", "--json", "--store", "{store}"],
    ["-m", "heldout", "ledger", "verify", "--store", "{store}"], ["-m", "heldout", "--help"],
    ["-m", "heldout", "--version"], ["audit.py", "--store", "{store}", "--jobs", "1"],
], ids=lambda c: " ".join(c[2:4]) if c[0] == "-m" else c[0])
def test_an_output_closed_by_its_reader_is_exit_2_never_a_verdict(built: AuditFixture, command: list[str]) -> None:
    """``heldout status | head``: rich and click ended a closed output with exit 1, the code of a failed
    verification (a script under ``pipefail`` would report tampering). It is an I/O error of the output: exit 2,
    one line on stderr, and no traceback from the interpreter's last flush."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone before the first byte
    try:
        result = subprocess.run([sys.executable, *(a.format(store=built.store) for a in command)],
                                stdout=write_end, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT, timeout=300,
                                env={**os.environ, "HELDOUT_NOW": "2026-09-02T00:00:00Z"}, check=False)
    finally:
        os.close(write_end)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == ["heldout: error: the output was closed by its reader before it was all written (broken pipe)"], \
        result.stderr


@pytest.mark.parametrize("command", [["status", "--json"], ["ledger", "leaf", "0"], ["ledger", "pubkey"],
                                     ["keys", "export-public", "--json"]], ids=" ".join)
def test_a_command_started_with_its_output_closed_does_nothing_in_one_line(built: AuditFixture,
                                                                          command: list[str]) -> None:
    """Started with stdout closed (``>&-``), Python has no stdout: commands ended in an AttributeError traceback,
    some after writing (red-team round 14). Refused first: exit 2, one line on stderr."""
    result = subprocess.run([sys.executable, "-m", "heldout", *command, "--store", str(built.store)],
                            stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT, timeout=120, check=False,
                            preexec_fn=lambda: os.close(1))
    assert result.returncode == 2, result.stderr
    assert [line for line in result.stderr.splitlines() if line.strip()] == [
        "heldout: error: standard output is closed; nothing was done (redirect it to a file or /dev/null instead)"]


def test_an_entry_read_from_a_closed_stdin_is_a_usage_error(built: AuditFixture, tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(built.store, store, symlinks=True)
    before = tree_state(store)
    result = subprocess.run([sys.executable, "-m", "heldout", "ledger", "append", "--type", "note", "--json-file",
                             "-", "--store", str(store)], capture_output=True, text=True, cwd=REPO_ROOT,
                            timeout=120, check=False, preexec_fn=lambda: os.close(0))
    assert result.returncode == 2 and "standard input, which is closed" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and tree_state(store) == before


# --- full disk, I/O errors and broken databases ----------------------------------------------------------------

@pytest.mark.parametrize(("code", "words"), [
    (errno.ENOSPC, "no space left"), (errno.EDQUOT, "quota"), (errno.EIO, "input/output error"),
    (errno.EROFS, "read-only"), (errno.EACCES, "permission denied"),
], ids=lambda v: errno.errorcode[v] if isinstance(v, int) else "")
def test_a_failing_disk_while_writing_is_exit_2_and_leaves_no_temporary_file(
        built: AuditFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, words: str) -> None:
    def failing(fd: int) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "fsync", failing)
    line = assert_one_line_error(invoke("audit", "--store", str(built.store), "--out", str(tmp_path / "r.json")))
    assert words in line
    assert list(tmp_path.iterdir()) == []
    line = assert_one_line_error(invoke("init", "--store", str(tmp_path / "store")))
    assert words in line
    line = assert_one_line_error(invoke("witness", "init", "--store", str(tmp_path / "witness"), "--name", "w.test/w"))
    assert words in line and not (tmp_path / "witness").exists()  # no folder left behind, empty or not
    assert not [p for p in tmp_path.rglob("*") if ".tmp" in p.name]


def test_a_disk_full_after_the_commit_says_the_operation_is_logged(built: AuditFixture, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """retire --reveal logs its entries, then publishes the reveal: the disk filling up in between was reported
    as any full disk ("nothing is written") though the generation was retired, and running it again was
    refused (red-team round 14). It says the operation is logged and the next command publishes its files;
    the next command does."""
    import heldout.staging as staging

    store = tmp_path / "store"
    shutil.copytree(built.store, store, symlinks=True)
    publish = staging._publish

    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(staging, "_publish", disk_full)
    line = assert_one_line_error(invoke("retire", "gen1", "--reason", "expired", "--reveal", "--store", str(store)))
    assert "the retire is logged (entries" in line and "no space left" in line and "next command" in line, line
    assert not (store / "seals" / "gen1.reveal.json").exists()
    # While the disk is still full, no command judges or writes the store as it is: its ledger names a reveal
    # not yet published. The audit called that tampering (exit 1, a failed report that blocked passports),
    # verify-reveal exit 5, status and export went on silently, and writers said only "no space left"
    # (red-team round 18). Each says what waits and how it is published, exit 2, and writes nothing.
    reports = {p: p.read_bytes() for p in (store / "audit").rglob("*.json")}
    for args in (["audit"], ["status"], ["verify-reveal", "gen1"], ["ledger", "verify"],
                 ["ledger", "export", str(tmp_path / "export")], ["retire", "gen2", "--reason", "expired"]):
        line = assert_one_line_error(invoke(*args, "--store", str(store)))
        assert "did not finish publishing" in line and "no space left" in line and "Nothing was judged" in line, \
            (args, line)
    assert not (tmp_path / "export").exists()
    assert {p: p.read_bytes() for p in (store / "audit").rglob("*.json")} == reports
    monkeypatch.setattr(staging, "_publish", publish)
    assert invoke("status", "--store", str(store)).exit_code == 0
    assert (store / "seals" / "gen1.reveal.json").is_file()  # published by the next command


def test_a_failing_disk_while_writing_synthetic_data_leaves_no_new_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("medmnist")
    import numpy as np

    def no_space(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(np, "savez_compressed", no_space)
    line = assert_one_line_error(invoke("data", "synth", "bloodmnist", "--out", str(tmp_path / "new" / "data"),
                                        "--n-test", "5"))
    assert "no space left" in line
    assert list(tmp_path.iterdir()) == []  # neither the folder it made nor its parent


def test_a_failed_audit_keeps_exit_1_when_its_report_cannot_be_written(
        built: AuditFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "store"
    shutil.copytree(built.store, copy)
    blob = next(p for p in (copy / "blobs").rglob("*") if p.is_file())
    blob.write_bytes(blob.read_bytes() + b"tampered")

    def no_space(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", no_space)
    result = invoke("audit", "--store", str(copy), "--out", str(tmp_path / "out" / "r.json"))
    assert result.exit_code == 1, result.output  # the verdict, not the disk
    assert "failed" in result.stdout and "no space left" in result.stderr
    assert list((tmp_path / "out").iterdir()) == []


def test_database_full_or_failing_is_exit_2_but_a_corrupt_database_is_exit_1(
        built: AuditFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ledger import Ledger

    for words in ("database or disk is full", "disk I/O error", "attempt to write a readonly database"):
        def failing(self: Ledger, *args: object, _words: str = words, **kwargs: object) -> int:
            raise sqlite3.OperationalError(_words)

        monkeypatch.setattr(Ledger, "checkpoint", failing)
        line = assert_one_line_error(invoke("ledger", "checkpoint", "--sign", "--store", str(built.store)))
        assert words in line
    monkeypatch.undo()
    copy = tmp_path / "corrupt"
    shutil.copytree(built.store, copy)
    database = next((copy / "ledgers").glob("*.sqlite"))
    database.write_bytes(b"this is not a database" * 100)
    line = assert_one_line_error(invoke("ledger", "verify", "--store", str(copy)), code=1)
    assert "not a readable ledger database" in line


def _can_mount_tmpfs(where: Path) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(where)], capture_output=True,
                          check=False)
    return done.returncode == 0


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 2 MiB file system (tmpfs; root only) that the test fills up."""
    where = tmp_path / "disk"
    if not _can_mount_tmpfs(where):
        pytest.skip("mounting a tmpfs needs root and mount rights; the fault-injection tests cover the mapping")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)


def test_a_really_full_disk_is_exit_2_never_tampered(built: AuditFixture, small_disk: Path) -> None:
    store = small_disk / "store"
    shutil.copytree(built.store, store)
    filler = small_disk / "filler"
    with open(filler, "wb", buffering=0) as handle:  # fill the file system to the last block (unbuffered:
        # a buffered writer keeps the bytes of a short write and fails again when closed)
        try:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    before = tree_state(store)
    line = assert_one_line_error(invoke("audit", "--store", str(store), "--out", str(small_disk / "r.json")))
    print(line)
    assert "no space left" in line or "disk" in line  # SQLite may be first to notice, creating its WAL index
    line = assert_one_line_error(invoke("ledger", "checkpoint", "--sign", "--store", str(store),
                                        "--at", "2026-09-03T00:00:00Z"))
    assert "disk" in line or "space" in line
    assert tree_state(store) == before
    line = assert_one_line_error(invoke("init", "--store", str(small_disk / "new-store")))
    assert "space" in line or "disk" in line
    assert not [p for p in small_disk.rglob("*.tmp*")]  # no temporary file outlives its failure
    filler.unlink()
    assert invoke("ledger", "verify", "--store", str(store)).exit_code == 0


# --- read-only stores ----------------------------------------------------------------------------------------

def test_reading_commands_never_change_the_store(built: AuditFixture, tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(built.store, store)
    before = tree_state(store)
    for args in (["ledger", "verify"], ["ledger", "head"], ["ledger", "show"], ["status"], ["pool", "list"],
                 ["ledger", "prove", "--index", "1"], ["spec", "list"],
                 ["audit", "--out", str(tmp_path / "report.json")],
                 ["ledger", "export", str(tmp_path / "export")]):
        result = invoke(*args, "--store", str(store))
        assert result.exit_code == 0, (args, result.output)
    assert tree_state(store) == before


@pytest.fixture
def read_only_copy(built: AuditFixture) -> Iterator[tuple[Path, Path]]:
    """A copy of the store that the user running the commands cannot write: ``chmod -R a-w``; when the tests
    run as root (who writes anything), the commands run without the capabilities that override file modes
    (see :func:`run_as_reader`). Returns (store, a writable work folder)."""
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: cannot drop the capability to write read-only files")
    top = Path(tempfile.mkdtemp(prefix="heldout-ro-"))
    try:
        store = top / "store"
        shutil.copytree(built.store, store)
        work = top / "work"
        work.mkdir()
        for path in [*store.rglob("*"), store]:
            path.chmod(path.stat().st_mode & ~0o222)
        yield store, work
    finally:
        for path in [top, *top.rglob("*")]:
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | 0o700)
        shutil.rmtree(top, ignore_errors=True)


def run_as_reader(args: list[str], work: Path) -> subprocess.CompletedProcess[str]:
    """``heldout ARGS`` as a user who cannot write read-only files (root: without CAP_DAC_OVERRIDE and
    CAP_FOWNER, so file modes bind it as they bind anyone)."""
    env = {**os.environ, "HOME": str(work), "TMPDIR": str(work), "PYTHONPATH": str(REPO_ROOT),
           "HELDOUT_NOW": "2026-09-02T00:00:00Z", "XDG_DATA_HOME": str(work / "xdg")}
    prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"] if os.geteuid() == 0 else []
    return subprocess.run([*prefix, sys.executable, "-m", "heldout", *args], capture_output=True, text=True,
                          env=env, cwd=work, timeout=300, check=False)


def test_a_read_only_copy_with_an_operation_killed_before_its_commit_is_judged_as_it_is(
        built: AuditFixture) -> None:
    """A copy taken while an operation was still staging (killed before its commit: nothing logged): every
    reader refused it, exit 2, saying its files waited to be published on a writable copy (red-team round 19),
    though a writable run would only discard them. Nothing logged waits: the copy is judged as it is. One whose
    entries are logged is still refused (the store would lack files its ledger names)."""
    import json

    from heldout.staging import INTENT, INTENT_VERSION, staging_root
    from heldout.store import Store

    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: cannot drop the capability to write read-only files")
    top = Path(tempfile.mkdtemp(prefix="heldout-ro-staged-"))
    try:
        store, work = top / "store", top / "work"
        shutil.copytree(built.store, store)
        work.mkdir()
        root = staging_root(Store.open(store), built.ledger_id)
        (root / "evaluate-killed-before-intent").mkdir(parents=True)
        (root / "evaluate-killed-before-intent" / "blob").write_bytes(b"staged, never logged")
        unlogged = root / "evaluate-killed-before-commit"
        unlogged.mkdir()
        (unlogged / INTENT).write_text(json.dumps({
            "intent_version": INTENT_VERSION, "ledger_id": built.ledger_id, "size_before": 1,
            "entries_sha256": ["0" * 64], "files": []}))
        for path in [*store.rglob("*"), store]:
            path.chmod(path.stat().st_mode & ~0o222)
        for args in (["status"], ["ledger", "verify"], ["audit"]):
            run = run_as_reader([*args, "--store", str(store)], work)
            assert run.returncode == 0, (args, run.stdout + run.stderr)
        logged = root / "retire-logged"  # entries that are in the ledger (its genesis): files wait to be published
        root.chmod(0o755)
        logged.mkdir()
        genesis = hashlib.sha256(next(iter(_entry_lines(store, built.ledger_id)))).hexdigest()
        (logged / INTENT).write_text(json.dumps({
            "intent_version": INTENT_VERSION, "ledger_id": built.ledger_id, "size_before": 0,
            "entries_sha256": [genesis], "files": []}))
        for path in [root, *root.rglob("*")]:
            path.chmod(path.stat().st_mode & ~0o222)
        run = run_as_reader(["status", "--store", str(store)], work)
        assert run.returncode == 2 and "did not finish publishing" in run.stderr, run.stdout + run.stderr
    finally:
        for path in [top, *top.rglob("*")]:
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | 0o700)
        shutil.rmtree(top, ignore_errors=True)


def _entry_lines(store: Path, ledger_id: str) -> list[bytes]:
    from ledger import Ledger

    with Ledger.open(Ledger.locate(store / "ledgers", ledger_id), read_only=True) as ledger:
        return [data for _, data in ledger.entries_bytes()]


def test_a_read_only_store_can_be_verified_audited_and_exported(read_only_copy: tuple[Path, Path],
                                                                built: AuditFixture) -> None:
    store, work = read_only_copy
    before = tree_state(store)
    note = work / "note.json"
    note.write_text('{"text": "probe"}')
    # (an append: ``ledger checkpoint --sign`` writes nothing when the head is signed already)
    probe = run_as_reader(["ledger", "append", "--type", "note", "--json-file", str(note), "--store", str(store)],
                          work)
    assert probe.returncode == 2 and ("readonly" in probe.stderr or "permission denied" in probe.stderr), \
        "the copy must be read-only: " + probe.stderr
    verified = run_as_reader(["ledger", "verify", "--store", str(store)], work)
    assert verified.returncode == 0, verified.stderr
    status = run_as_reader(["status", "--store", str(store)], work)
    assert status.returncode == 0, status.stderr
    audited = run_as_reader(["audit", "--store", str(store)], work)
    assert audited.returncode == 0, audited.stdout + audited.stderr
    assert "cannot be written" in audited.stderr and "clean" in audited.stdout
    spare = Path(os.environ["XDG_STATE_HOME"]) / "heldout" / "audit-reports" / built.ledger_id / "audit_report.json"
    assert spare.is_file() and not (work / "heldout-audit").exists()  # never the shared temporary folder
    exported = run_as_reader(["ledger", "export", str(work / "export"), "--store", str(store)], work)
    assert exported.returncode == 0, exported.stderr
    replay = run_as_reader(["ledger", "verify", built.ledger_id, "--from", str(work / "export")], work)
    assert replay.returncode == 0, replay.stderr
    assert tree_state(store) == before
    # Writing into it is an environment error (exit 2, one line), never "tampered" (the probe above).
    lines = [line for line in probe.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "error: " in lines[0] and "Traceback" not in probe.stderr, probe.stderr


# --- the mapping holds for every command, not only the ones listed above ------------------------------------------

def _commands_with_a_store(entry_file: Path) -> list[list[str]]:
    """Every command that takes --store, with its required arguments filled so that it reaches the store."""
    from tests.conftest import REFERENCE_PASSPORT

    real = {("passport", "verify"): [str(REFERENCE_PASSPORT)],
            ("ledger", "append"): ["--type", "note", "--json-file", str(entry_file)],
            ("seal",): ["gen9", "--tasks", "bloodmnist", "--per-task", "1", "--expires", "2027-06-01"],
            ("spec", "supersede"): ["old", "--by", "new", "--effective", "2027-06-01"]}
    found = []
    for path, command in all_commands():
        if path == ["demo"] or not any("--store" in getattr(p, "opts", []) for p in command.params):
            continue  # the demo builds its own store elsewhere (covered above)
        args = [*path, *real.get(tuple(path), [])]
        if tuple(path) not in real:
            for param in command.params:
                if param.required:
                    args += ([param.opts[0]] if param.opts[0].startswith("--") else []) + ["1"]
        found.append(args)
    return found


ENTRY_FILE = Path(tempfile.gettempdir()) / "heldout-test-entry.json"
COMMANDS_WITH_A_STORE = _commands_with_a_store(ENTRY_FILE)


@pytest.fixture
def entry_file() -> Iterator[Path]:
    ENTRY_FILE.write_text('{"text": "hello"}')
    try:
        yield ENTRY_FILE
    finally:
        ENTRY_FILE.unlink(missing_ok=True)


@pytest.mark.parametrize("args", COMMANDS_WITH_A_STORE, ids=lambda a: " ".join(a[:2]))
def test_every_command_reports_a_failing_disk_in_one_line_with_exit_2(
        args: list[str], tmp_path: Path, entry_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from heldout.store import Store

    def failing(cls: type, root: Path | None = None) -> Store:
        raise OSError(errno.EIO, os.strerror(errno.EIO), str(tmp_path / "store"))

    monkeypatch.setattr(Store, "open", classmethod(failing))
    line = assert_one_line_error(invoke(*args, "--store", str(tmp_path / "store")))
    assert "input/output error" in line, line


@pytest.mark.parametrize("args", [a for a in COMMANDS_WITH_A_STORE if a[0] in ("ledger", "status", "audit", "spec",
                                                                                "pool", "retire", "seal")
                                  and a[:2] not in (["ledger", "init"], ["pool", "add"])],
                         ids=lambda a: " ".join(a[:2]))
def test_every_ledger_user_reports_a_failing_database_in_one_line_with_exit_2(
        built: AuditFixture, args: list[str], entry_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ledger.sqlite

    def failing(path: Path, **kwargs: object) -> object:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(ledger.sqlite, "connect", failing)  # where the SQLite backend opens ledger files
    argv = [a if a != "1" else ("0" if i and args[i - 1] == "--index" else "1") for i, a in enumerate(args)]
    line = assert_one_line_error(invoke(*argv, "--store", str(built.store)))
    assert "disk I/O error" in line, line


def test_running_out_of_memory_is_exit_2_in_one_line_never_a_verdict(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A hostile input that outgrows the machine's memory limit is the environment's limit, not a finding about
    the data: exit 2 in one line (it was a rich traceback and exit 1, the tamper verdict)."""
    import heldout.cli.ledger_cmd

    def exhausted(source: object) -> object:
        raise MemoryError

    monkeypatch.setattr(heldout.cli.ledger_cmd, "open_public_log", exhausted)
    (tmp_path / "export").mkdir()
    result = CliRunner().invoke(app, ["ledger", "verify", "a" * 20, "--from", str(tmp_path / "export")])
    assert result.exit_code == 2, result.output
    assert "not enough memory" in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
