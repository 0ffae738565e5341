"""File permissions for private material: 0600 files inside 0700 folders, refused when more open."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import functools
import os
import re
import shutil
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from keys.errors import KeyFileError, StorageError, storage_error
from keys.safeio import DOCUMENT_LIMIT, UnsafeFile, read_in

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
#: Files anyone may read (reports, configurations, client state): the mode write_atomic gives them.
PUBLIC_FILE_MODE = 0o644


PRIVATE_ROOT_NAME = "private"


def _private_chain(path: Path) -> list[Path]:
    """``path`` and its ancestors up to the store's ``private/`` folder (inclusive); just ``path`` when no
    ancestor is named ``private`` (a key file kept elsewhere is checked with its own folder)."""
    chain = [path]
    for parent in path.parents:
        if chain[-1].name == PRIVATE_ROOT_NAME:
            break
        chain.append(parent)
    else:
        return [path]
    return chain if chain[-1].name == PRIVATE_ROOT_NAME else [path]


def _check_private(path: Path, *, folder: bool) -> None:
    """The one permission check: a real folder (0700 or stricter) or a regular file (0600 or stricter), not a
    link, owned by the user running the command. Never reads the file; messages never quote content."""
    kind, wanted, fix = ("folder", "0700", "chmod 700") if folder else ("file", "0600", "chmod 600")
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise KeyFileError(f"no private {kind} at {path}", path=str(path)) from None
    if stat.S_ISLNK(info.st_mode) or (stat.S_ISDIR(info.st_mode) != folder) or not (
            stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
        raise KeyFileError(f"private {kind} {path} is not a plain {kind} (a link, a device or the wrong kind)",
                           path=str(path))
    if info.st_uid != os.geteuid():
        raise KeyFileError(f"private {kind} {path} belongs to another user (uid {info.st_uid})", path=str(path),
                           expected=os.geteuid(), found=info.st_uid)
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        raise KeyFileError(f"private {kind} {path} is open to others (mode {mode:04o}); run: {fix} {path}",
                           path=str(path), expected=wanted, found=f"{mode:04o}")


def check_private_dir(path: Path) -> None:
    """``path`` and every folder above it up to ``private/``: 0700, not links, ours."""
    for folder in _private_chain(path):
        _check_private(folder, folder=True)


def check_private_file(path: Path) -> None:
    """A private file and every folder above it up to ``private/`` (see :func:`check_private_dir`)."""
    check_private_dir(path.parent)
    _check_private(path, folder=False)


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` and any missing folders above it with mode 0700 (each one, not only the last), then
    check the chain up to ``private/``; an existing folder that others can open is refused, not changed."""
    missing = []
    for folder in [path, *path.parents]:
        if folder.exists() or folder.is_symlink():
            break
        missing.append(folder)
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=PRIVATE_DIR_MODE)
        except FileExistsError:
            pass  # a concurrent command made it: the check below judges it
        else:
            os.chmod(folder, PRIVATE_DIR_MODE)
    check_private_dir(path)
    return path


def write_private_file(path: Path, data: bytes) -> None:
    """Write ``data`` to a new 0600 file atomically; the file never exists with wider permissions. A killed
    earlier write's temporary file of this name (``.NAME.tmpPID``, its process gone) is removed first."""
    ensure_private_dir(path.parent)
    remove_stale_leftovers(path.parent, path.name, tags=("tmp",))
    if path.exists():
        raise KeyFileError(f"refusing to overwrite existing private file {path}", path=str(path))
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:  # the temporary file goes whatever happens (a full disk, an I/O error, path created meanwhile)
        write_synced(tmp, data, PRIVATE_FILE_MODE)
        os.link(tmp, path)  # fails if someone created path meanwhile: never clobber a key
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)


def write_synced(path: Path, data: bytes, mode: int, *, exclusive: bool = True) -> None:
    """Create ``path`` with exactly ``mode``, write all of ``data`` and fsync it. ``exclusive``: refuse an
    existing file; otherwise truncate it. A partial file may remain on failure: callers write temporaries."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else os.O_TRUNC)
    fd = os.open(path, flags, mode)
    try:
        os.fchmod(fd, mode)  # umask cannot widen it, but be explicit
        view = memoryview(data)
        while view:  # os.write may write less than asked
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def read_private_file(path: Path, *, limit: int = DOCUMENT_LIMIT) -> bytes:
    """A private file's bytes, after checking its folder and itself (regular, not a link, 0600, within
    ``limit``); refusals are usage errors that never quote the content."""
    if not path.exists() and not path.is_symlink():
        if path.parent.exists():
            check_private_dir(path.parent)
        raise KeyFileError(f"no private key file at {path}", path=str(path))
    check_private_file(path)
    try:
        data = read_in(path.parent, path.name, limit=limit, what="private file")
    except UnsafeFile as exc:
        raise KeyFileError(exc.message, path=str(path)) from None
    if data is None:
        raise KeyFileError(f"no private key file at {path}", path=str(path))
    return data


def fsync_dir(path: Path) -> None:
    """Make a rename or link inside ``path`` durable (POSIX: the directory entry lives in the directory)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that readers see the old bytes or the new, never a part, and the new
    bytes survive a crash once this returns (temporary file in the same folder, fsync, rename, fsync). The
    temporary file is removed whatever fails; a folder at ``path`` is refused."""
    if path.is_dir():
        raise StorageError(f"{path} is a folder; give a file name", path=str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        # A leftover (or a link someone put there: the name is predictable) is removed, never written through:
        # the temporary file is created anew (O_EXCL also refuses to follow a link made in between).
        tmp.unlink(missing_ok=True)
        write_synced(tmp, data, PUBLIC_FILE_MODE)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)
    remove_dead_temporaries(path)


_TEMPORARY_PID = re.compile(r"\.tmp([0-9]{1,10})")


def remove_dead_temporaries(path: Path) -> None:
    """The temporary files (``.<name>.tmp<pid>``) that writers of ``path`` killed mid-write left beside it, one
    more per kill (a killed audit's report, say): removed when their process is gone. A live writer's is left
    alone; so is anything not named so."""
    prefix = f".{path.name}"
    try:
        with os.scandir(path.parent) as listing:
            names = [entry.name for entry in listing if entry.name.startswith(prefix + ".tmp")]
    except OSError:
        return
    for name in names:
        match = _TEMPORARY_PID.fullmatch(name[len(prefix):])
        if match is None or _alive(int(match.group(1))):
            continue
        with contextlib.suppress(OSError):
            os.unlink(path.parent / name)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # someone else's process, or no such number: not ours to judge
    return True


@contextmanager
def removed_on_failure(*folders: Path) -> Iterator[None]:
    """The folders among ``folders`` that do not exist yet, and the missing folders above them, are removed
    again (with what the block put in them) when the block raises: a refused command leaves no empty folder
    behind. Folders that existed are kept."""
    new = []
    for folder in map(Path, folders):
        top = None
        while not folder.exists() and folder != folder.parent:
            top, folder = folder, folder.parent
        if top is not None:
            new.append(top)
    try:
        yield
    except BaseException:
        for folder in new:  # the outermost first: what it holds goes with it
            shutil.rmtree(folder, ignore_errors=True)
        raise


class HeldFolder:
    """A folder held by :func:`folder_held`: whether that call made it (``made``), and how to take it away
    again when what the holder set up in it fails (:meth:`removed_on_failure`)."""

    def __init__(self, folder: Path, made: bool, top: Path | None) -> None:
        self.folder, self.made, self.top = folder, made, top

    @contextmanager
    def removed_on_failure(self) -> Iterator[None]:
        """When the block raises and the folder was made by this hold: the folder, with what the block put in
        it, is removed again, and the folders above it that were made with it when they are empty. (Only around
        what the holder itself sets up: a holder that finds another's work in the folder and stops must not
        take it away.)"""
        try:
            yield
        except BaseException:
            if self.made:
                shutil.rmtree(self.folder, ignore_errors=True)
                parent = self.folder.parent
                while self.top is not None and parent != self.top.parent:  # (empty: another command may have
                    with contextlib.suppress(OSError):  # made one of them since)
                        parent.rmdir()
                    parent = parent.parent
            raise


@contextmanager
def folder_held(folder: Path) -> Iterator[HeldFolder]:
    """Hold ``folder`` for the block, making it (and the folders above it) when missing: an exclusive lock on
    the folder itself (``flock`` of its descriptor: no file is added to it), so that two commands that would
    both set it up run one after the other, the second seeing what the first made."""
    folder = Path(folder)
    top = None
    probe = folder
    while not probe.exists() and probe != probe.parent:
        top, probe = probe, probe.parent
    while True:
        try:
            try:
                folder.mkdir(parents=True)  # (made here, or it exists: whoever made it, it is held the same way)
                made = True
            except FileExistsError:
                made = False
            descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as exc:
            raise storage_error(exc) from None
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            held = os.fstat(descriptor)
            try:
                now = os.stat(folder)
            except FileNotFoundError:
                now = None
        except OSError as exc:
            os.close(descriptor)
            raise storage_error(exc) from None
        if now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
            break
        # The folder was taken away (a holder that made it failed and removed it) or replaced while this call
        # waited: the lock is on a folder no longer there, and another command may hold the new one. Again.
        os.close(descriptor)
    try:
        yield HeldFolder(folder, made, top)
    finally:
        os.close(descriptor)  # (releases the lock)


# --- leftovers of killed commands, and swapping a folder into place ------------------------------------------

LEFTOVER_TAGS = ("tmp", "old")


def remove_stale_leftovers(folder: Path, name: str, *, tags: tuple[str, ...] = LEFTOVER_TAGS,
                           suffixes: tuple[str, ...] = ("",)) -> list[Path]:
    """Remove what killed commands left beside ``folder / name``: entries named exactly
    ``.<name>.<tag><pid><suffix>`` (a tag of ``tags``, such as ``.site.tmp4242`` or ``.site.old4242``; a suffix
    of ``suffixes``, such as SQLite's ``-wal``) whose process no longer runs. Kept: the caller's own (it
    handles them itself), those of a running process (``os.kill(pid, 0)`` succeeds, or fails with
    PermissionError: another user's), and every other name (a user's ``.site.backup`` is never touched).
    A folder goes with its contents, a file or a link (never followed) alone; a leftover that cannot be
    removed is left for the next run. Returns what was removed.

    A process that reuses a dead builder's PID keeps its leftover until it ends too: only ever kept longer."""
    pattern = re.compile(rf"\.{re.escape(name)}\.(?:{'|'.join(map(re.escape, tags))})([1-9][0-9]{{0,9}})"
                         rf"(?:{'|'.join(map(re.escape, suffixes))})")
    try:
        names = sorted(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    removed = []
    for entry in names:
        match = pattern.fullmatch(entry)
        if match is None or int(match.group(1)) == os.getpid() or _process_runs(int(match.group(1))):
            continue
        path = Path(folder) / entry
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        except FileNotFoundError:  # another run removed it first
            pass
        except OSError:
            continue
        removed.append(path)
    return removed


def _process_runs(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):  # another user's process; a number no PID can be: not ours
        return True
    return True


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
#: renameat2's answers when the kernel (ENOSYS), the file system or the flag (EINVAL, ENOTSUP) cannot exchange
_EXCHANGE_UNSUPPORTED = frozenset({errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP})


@functools.cache
def _renameat2() -> Any:
    """libc's ``renameat2`` (Linux, glibc 2.28 or later, musl), or None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    function.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
    function.restype = ctypes.c_int
    return function


def exchange_paths(a: Path, b: Path) -> bool:
    """Swap two existing entries of one file system in a single step (``renameat2`` with ``RENAME_EXCHANGE``):
    at every moment each name holds one of the two, never nothing. False, with nothing changed, where this
    system cannot (not Linux, no ``renameat2`` in libc, a kernel or file system without the flag): the caller
    falls back to plain renames. Any other failure raises OSError."""
    function = _renameat2()
    if function is None:
        return False
    if function(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in _EXCHANGE_UNSUPPORTED:
        return False
    raise OSError(code, os.strerror(code), str(a), None, str(b))
