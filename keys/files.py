"""File permissions for private material: 0600 files inside 0700 folders, refused when more open."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from keys.errors import KeyFileError

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) with mode 0700, or refuse an existing one that others can open."""
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
    check_private_dir(path)
    return path


def check_private_dir(path: Path) -> None:
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise KeyFileError(
            f"private folder {path} is open to others (mode {mode:04o}); run: chmod 700 {path}",
            path=str(path), expected="0700", found=f"{mode:04o}",
        )


def check_private_file(path: Path) -> None:
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise KeyFileError(
            f"private file {path} is open to others (mode {mode:04o}); run: chmod 600 {path}",
            path=str(path), expected="0600", found=f"{mode:04o}",
        )


def write_private_file(path: Path, data: bytes) -> None:
    """Write ``data`` to a new 0600 file atomically; the file never exists with wider permissions."""
    ensure_private_dir(path.parent)
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


def read_private_file(path: Path) -> bytes:
    if not path.is_file():
        raise KeyFileError(f"no private key file at {path}", path=str(path))
    check_private_dir(path.parent)
    check_private_file(path)
    return path.read_bytes()


def fsync_dir(path: Path) -> None:
    """Make a rename or link inside ``path`` durable (POSIX: the directory entry lives in the directory)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that readers see the old bytes or the new, never a part, and the new
    bytes survive a crash once this returns (temporary file in the same folder, fsync, rename, fsync)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)
