"""Bounded, confined reading of files nobody vouches for: exports, blobs, documents, key files, npz arrays.

Every reader of a file that a stranger (or a dishonest operator) may have crafted goes through here, so the
guarantees hold for one piece of code rather than for each call site:

* **regular files only.** A file is opened with ``O_NOFOLLOW | O_NONBLOCK`` and checked with ``fstat`` after
  opening: a FIFO opens at once (no hang) and is refused, as are devices, sockets and directories;
* **confined.** A name inside a root (an export, the store) is walked component by component from the root's
  descriptor (``dir_fd``), each directory opened with ``O_NOFOLLOW | O_DIRECTORY``: a symlink anywhere on the
  path is refused, and ``..``, ``.``, empty and absolute components never reach the filesystem;
* **bounded.** The size is checked before reading (a 2 GB sparse file is refused without a byte read) and the
  read itself stops one byte past the bound (a file that grows meanwhile is refused too);
* **JSON depth.** Nesting is measured by a linear pass over the text (strings removed, then innermost pairs
  removed per pass, all in C) before ``json`` recurses, so deep nesting is a one-line refusal, not a
  RecursionError;
* **npy/npz headers.** Zip members (count, names, declared against actual sizes, compression ratio) and each
  ``.npy`` header (allowed dtypes only, never objects; shape times itemsize equal to the member's size) are
  checked before anything is allocated; stored-predictions blobs are read by :func:`read_stored_npz`, which
  accepts exactly the stored layout of FORMATS section 8 and refuses anything else, naming what is wrong.

It lives in ``keys`` (the lowest layer, stdlib only) so that every package, including ``keys`` itself for key
files, can use it. Refusals are :class:`UnsafeFile` (exit 1: the input fails); callers that read the
operator's own private files re-raise them as usage errors where that is the right code.
"""

from __future__ import annotations

import ast
import errno
import functools
import os
import re
import stat
import struct
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from keys.errors import MalformedInput

KiB = 1024
MiB = 1024 * KiB

#: Bounds per kind of file (bytes). A ledger entry is at most 64 KiB by design; keys and checkpoint notes are a
#: few hundred bytes; documents (seal manifests, reveals, passports, export manifests) hold at most a few
#: hundred thousand cases' lines; blobs hold prediction arrays (a few MB for the largest MedMNIST task) and
#: reveal image files; the entries file of an export is every entry, kept in memory by its reader.
ENTRY_LIMIT = 64 * KiB
KEY_FILE_LIMIT = 64 * KiB
NOTE_LIMIT = 64 * KiB
DOCUMENT_LIMIT = 32 * MiB
BLOB_LIMIT = 256 * MiB
ENTRIES_FILE_LIMIT = 256 * MiB
#: Nesting deeper than this is refused before parsing (our deepest document, a passport, nests about 8).
MAX_JSON_DEPTH = 64
#: npz bounds: members per archive, total uncompressed bytes, and the largest compression ratio allowed (a
#: DEFLATE zip bomb reaches about 1000:1; real image arrays compress far less than 100:1).
NPZ_MAX_MEMBERS = 64
NPZ_MAX_RATIO = 200
NPY_MAX_HEADER = 10_000

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)


class UnsafeFile(MalformedInput):
    """A file is not what its reader must accept: absent where required, not a regular file, a symlink, outside
    its root, larger than its bound, nested too deeply, or an array whose header does not fit its size."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def path_kind(path: Path | str) -> str | None:
    """What a named path is, links followed: "a file", "a folder", "a dangling symbolic link", "a symbolic link
    loop", "a FIFO", "a device", "a socket"; ``None`` when it is absent or not inspectable. Lets a command say
    what it was given instead of reading a path that names something else as another kind of argument (a key's
    text, a URL)."""
    try:
        link = os.lstat(path)
    except (OSError, ValueError):
        return None
    try:
        target = os.stat(path)
    except OSError as exc:
        if stat.S_ISLNK(link.st_mode):
            return "a symbolic link loop" if exc.errno == errno.ELOOP else "a dangling symbolic link"
        return None
    if stat.S_ISREG(target.st_mode):
        return "a file"
    return "a folder" if stat.S_ISDIR(target.st_mode) else _kind(target.st_mode)


def not_a_file(path: Path | str, what: str) -> str:
    """Why ``path``, named as ``what`` (a policy file, a passport file), is not read: "no WHAT at PATH" when
    nothing is there, else what is there instead ("PATH is a FIFO, not a WHAT"): a FIFO, device, folder or
    dangling link was said to be missing (red-team round 19), or, for data, to need downloading."""
    kind = path_kind(path)
    if kind is None:
        return f"no {what} at {path}"
    return f"{path} is {kind}, not {'a ' if not what.startswith(('a ', 'an ')) else ''}{what}"


def split_relative(relative: str | Sequence[str], *, what: str) -> list[str]:
    """The components of a name inside a root, each checked: no empty, ``.``, ``..``, NUL or absolute part."""
    parts = relative.split("/") if isinstance(relative, str) else list(relative)
    if not parts or (isinstance(relative, str) and relative.startswith("/")):
        raise UnsafeFile(f"{what}: {str(relative)[:80]!r} is not a name inside its folder", found=str(relative)[:80])
    for part in parts:
        if not part or part in (".", "..") or "\x00" in part or "/" in part or "\\" in part:
            raise UnsafeFile(f"{what}: {str(relative)[:80]!r} is not a name inside its folder",
                             found=str(relative)[:80])
    return parts


def _open_root(root: Path, what: str) -> int | None:
    # The root itself is named by the caller (a user's --from, the store): links to it are the caller's choice.
    try:
        return os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise UnsafeFile(f"{what}: {root} is not a folder", file=str(root)) from None
    except OSError as exc:
        raise UnsafeFile(f"{what}: folder {root} cannot be opened ({exc.strerror})", file=str(root)) from None


def _refused(what: str, shown: str, exc: OSError, parent_fd: int, name: str) -> UnsafeFile:
    if exc.errno in (errno.ELOOP, errno.EMLINK):
        return UnsafeFile(f"{what}: {shown} is a symbolic link (links are not followed)", file=shown,
                          found="symlink")
    if exc.errno == errno.ENOTDIR:
        try:
            mode = os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mode
            return UnsafeFile(f"{what}: {shown} is {_kind(mode)} where a folder is expected", file=shown)
        except OSError:
            pass
    return UnsafeFile(f"{what}: {shown} cannot be opened ({exc.strerror})", file=shown)


def _walk(root: Path, parts: list[str], what: str) -> int | None:
    """Descriptor of the folder holding ``parts[-1]``, walked without following links; ``None`` if a folder on
    the way does not exist."""
    fd = _open_root(root, what)
    if fd is None:
        return None
    for i, part in enumerate(parts[:-1]):
        shown = "/".join(parts[: i + 1])
        try:
            child = os.open(part, _DIR_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            os.close(fd)
            return None
        except OSError as exc:
            error = _refused(what, shown, exc, fd, part)
            os.close(fd)
            raise error from None
        os.close(fd)
        fd = child
    return fd


def _open_in(root: Path, parts: list[str], what: str) -> int | None:
    parent = _walk(root, parts, what)
    if parent is None:
        return None
    shown = "/".join(parts)
    try:
        # lstat first so that a device is never opened (opening some devices has effects); fstat again after
        # opening, on what was actually opened.
        try:
            mode = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False).st_mode
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _refused(what, shown, exc, parent, parts[-1]) from None
        if not stat.S_ISREG(mode):
            raise UnsafeFile(f"{what}: {shown} is {_kind(mode)}, not a regular file", file=shown,
                             found=_kind(mode))
        try:
            return os.open(parts[-1], _READ_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _refused(what, shown, exc, parent, parts[-1]) from None
    finally:
        os.close(parent)


def read_fd(fd: int, *, limit: int, what: str, shown: str) -> bytes:
    """Read a whole regular file from ``fd`` (closed afterwards), refusing anything else or more than
    ``limit`` bytes."""
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeFile(f"{what}: {shown} is {_kind(info.st_mode)}, not a regular file", file=shown,
                             found=_kind(info.st_mode))
        if info.st_size > limit:
            raise UnsafeFile(f"{what}: {shown} is {info.st_size} bytes, over the {limit}-byte limit",
                             file=shown, expected=limit, found=info.st_size)
        # Ask for one byte more than announced: a file that grew meanwhile shows it and is refused. A regular
        # file answers in one read; the loop covers short reads.
        wanted = info.st_size + 1
        data = os.read(fd, wanted)
        while 0 < len(data) < wanted:
            more = os.read(fd, wanted - len(data))
            if not more:
                break
            data += more
        if len(data) > info.st_size:
            raise UnsafeFile(f"{what}: {shown} grew while read", file=shown, expected=info.st_size)
        return data
    except OSError as exc:
        raise UnsafeFile(f"{what}: {shown} cannot be read ({exc.strerror})", file=shown) from None
    finally:
        os.close(fd)


def read_in(root: Path, relative: str | Sequence[str], *, limit: int, what: str) -> bytes | None:
    """The bytes of the regular file ``relative`` inside ``root``, or ``None`` when it does not exist.
    Refuses (:class:`UnsafeFile`) links anywhere on the path, non-regular files and files over ``limit``."""
    parts = split_relative(relative, what=what)
    fd = _open_in(Path(root), parts, what)
    if fd is None:
        return None
    return read_fd(fd, limit=limit, what=what, shown="/".join(parts))


def require_in(root: Path, relative: str | Sequence[str], *, limit: int, what: str) -> bytes:
    """:func:`read_in`, refusing an absent file too."""
    data = read_in(root, relative, limit=limit, what=what)
    if data is None:
        shown = relative if isinstance(relative, str) else "/".join(relative)
        raise UnsafeFile(f"{what}: {shown} is missing", file=shown, found="missing")
    return data


def file_in(root: Path, relative: str | Sequence[str], *, what: str) -> bool:
    """Whether ``relative`` inside ``root`` is a regular file; ``False`` when absent; refuses (raises) a link
    or a non-regular file in its place, so that "absent" is never what a tampered path reads as."""
    parts = split_relative(relative, what=what)
    parent = _walk(Path(root), parts, what)
    if parent is None:
        return False
    try:
        mode = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise _refused(what, "/".join(parts), exc, parent, parts[-1]) from None
    finally:
        os.close(parent)
    if not stat.S_ISREG(mode):
        raise UnsafeFile(f"{what}: {'/'.join(parts)} is {_kind(mode)}, not a regular file",
                         file="/".join(parts), found=_kind(mode))
    return True


def list_in(root: Path, relative: str | Sequence[str], *, what: str) -> list[str] | None:
    """Names in the folder ``relative`` inside ``root`` (sorted), ``None`` when it does not exist; the folder and
    every folder above it inside ``root`` must be real folders, not links."""
    parts = split_relative(relative, what=what)
    parent = _walk(Path(root), [*parts, "."], what) if parts else None
    if parent is None:
        return None
    try:
        return sorted(os.listdir(parent))
    finally:
        os.close(parent)


def read_named(path: Path, *, limit: int, what: str) -> bytes:
    """A file the user named on the command line: it may be reached through links the user chose, but it must
    be a regular file within ``limit`` (a FIFO or a device is refused, never read, never waited on)."""
    return read_fd(_open_named(path, what), limit=limit, what=what, shown=str(path))


def _open_named(path: Path, what: str) -> int:
    # O_NONBLOCK: opening a FIFO returns at once (then fstat refuses it) instead of waiting for a writer
    try:
        return os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise UnsafeFile(f"{what}: no file at {path}", file=str(path), found="missing") from None
    except OSError as exc:
        raise UnsafeFile(f"{what}: {path} cannot be opened ({exc.strerror})", file=str(path)) from None


def open_named(path: Path, *, limit: int, what: str) -> IO[bytes]:
    """A binary handle on a regular file the user named (see :func:`read_named`), for readers that seek (zip)."""
    fd = _open_named(path, what)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
        os.close(fd)
        problem = (f"is {_kind(info.st_mode)}, not a regular file" if not stat.S_ISREG(info.st_mode)
                   else f"is {info.st_size} bytes, over the {limit}-byte limit")
        raise UnsafeFile(f"{what}: {path} {problem}", file=str(path))
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


# JSON depth ------------------------------------------------------------------------------------------------

#: A JSON string, or one never closed, to the end of the text (what the parser then refuses there). Possessive:
#: each quote that opens one is matched once, to its end, never retried (red-team round 21: ``\"`` repeated
#: made every quote a new attempt over the rest of the text, quadratic, minutes for a few hundred kilobytes).
_STRING_B = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKET_BYTES = bytes(b for b in range(256) if b not in b"[]{}")
_PAIR_B = re.compile(rb"\[\]|\{\}")


#: A document holds at most one array or object per this many characters, past :data:`JSON_CONTAINER_ALLOWANCE`
#: of them. Parsing makes each a Python object of 56 bytes or more, so a text of empty ones (``[],[],...``, 3
#: characters each) would cost 20-30 times its size in memory before any check of its shape could refuse it;
#: heldout's own documents have one per 70 characters or more (an evaluation: about one per 75).
JSON_CHARS_PER_CONTAINER = 16
JSON_CONTAINER_ALLOWANCE = 4096


def check_json_width(data: bytes | str, *, what: str) -> None:
    """Refuse a JSON text with more arrays and objects than its size allows (:data:`JSON_CHARS_PER_CONTAINER`),
    before parsing it: the memory a parse takes is then within a few times the text's size. Brackets inside
    strings are counted too (an over-count, never an under-count)."""
    opening = (data.count(b"[") + data.count(b"{")) if isinstance(data, bytes) else (data.count("[") + data.count("{"))
    allowed = JSON_CONTAINER_ALLOWANCE + len(data) // JSON_CHARS_PER_CONTAINER
    if opening > allowed:
        raise MalformedInput(f"{what} holds {opening} arrays and objects in {len(data)} characters: more than one "
                             f"per {JSON_CHARS_PER_CONTAINER} (past {JSON_CONTAINER_ALLOWANCE}), which no document "
                             "here has (refused before parsing: each costs memory)", expected=f"<= {allowed}",
                             found=opening)


def check_json_depth(data: bytes | str, *, what: str, limit: int = MAX_JSON_DEPTH) -> None:
    """Refuse JSON text nested deeper than ``limit`` without recursing: strings are removed, then everything but
    brackets, then innermost ``[]``/``{}`` pairs once per level. Each pass is linear and runs in C, and none
    makes an object per bracket; after ``limit`` passes a well-formed text within the limit is empty. Unbalanced
    text is left to the parser, which names the position. A text within the depth is then held to
    :func:`check_json_width` (every caller parses next)."""
    opening = (data.count(b"[") + data.count(b"{")) if isinstance(data, bytes) else (data.count("[") + data.count("{"))
    if opening <= limit:
        return  # fewer openings than the limit cannot nest deeper (the common case: a ledger entry)
    width_first = len(data) > _DEPTH_FIRST_UP_TO  # the passes below hold a reference per bracket pair
    if width_first:
        check_json_width(data, what=what)
    if _nested_deeper(data, limit):
        raise UnsafeFile(f"{what} is nested more than {limit} levels deep", expected=limit)
    if not width_first:
        check_json_width(data, what=what)


#: Up to this size a text is checked for depth before width (the message names what is wrong with a deeply nested
#: text, which is wide too); past it, width first, which bounds the memory of the depth passes.
_DEPTH_FIRST_UP_TO = 1024 * 1024


def _nested_deeper(data: bytes | str, limit: int) -> bool:
    # (as UTF-8: quotes, backslashes and brackets are single bytes there, which no other character's bytes are)
    raw = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
    brackets = _STRING_B.sub(b"", raw).translate(None, _NOT_BRACKET_BYTES)
    for passes in range(limit):
        if not brackets:
            return False
        brackets, replaced = _PAIR_B.subn(b"", brackets)
        if not replaced:
            # Unbalanced: the parser reports it, but only once it reaches the fault, after recursing into every
            # bracket opened before it (red-team round 20: 3,000 "[" and no "]" was a RecursionError). What is
            # left opens at most as many levels as it has opening brackets, inside the pairs removed so far.
            return passes + brackets.count(b"[") + brackets.count(b"{") > limit
    # nested ``limit`` deep: deeper if any bracket still opens a level
    return _PAIR_B.search(brackets) is not None or b"[" in brackets or b"{" in brackets


# npy / npz -------------------------------------------------------------------------------------------------

#: dtypes a stored array may have: booleans, integers, floats, fixed-width unicode (the format marker).
_DESCR = re.compile(r"[<>|=]?(b1|[iu][1248]|f[248]|U[0-9]{1,6})")
_NPY_MAGIC = b"\x93NUMPY"


def _itemsize(code: str) -> int:
    if code.startswith("U"):
        return 4 * int(code[1:])
    return int(code[1:])


def npy_header(head: bytes, *, what: str) -> tuple[str, tuple[int, ...], int]:
    """Parse the start of an ``.npy`` file: ``(descr, shape, header length)``; refuses unknown versions,
    object or structured dtypes, negative or non-integer dimensions, and oversize headers."""
    descr, shape, length, _ = _npy_header_fields(head, what=what)
    return descr, shape, length


def _npy_header_fields(head: bytes, *, what: str) -> tuple[str, tuple[int, ...], int, bool]:
    """:func:`npy_header` and the header's ``fortran_order``."""
    if len(head) < 10 or not head.startswith(_NPY_MAGIC):
        raise UnsafeFile(f"{what} is not an .npy array (bad magic)")
    major = head[6]
    if major == 1:
        length, start = int.from_bytes(head[8:10], "little"), 10
    elif major in (2, 3):
        length, start = int.from_bytes(head[8:12], "little"), 12
    else:
        raise UnsafeFile(f"{what} has an unknown .npy version {major}", found=major)
    if length > NPY_MAX_HEADER or len(head) < start + length:
        raise UnsafeFile(f"{what} has an oversize or truncated .npy header", found=length)
    try:
        text = head[start:start + length].decode("latin1")
        check_json_depth(text, what=what, limit=4)
        header = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError, UnsafeFile):
        raise UnsafeFile(f"{what} has an unreadable .npy header") from None
    if not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}:
        raise UnsafeFile(f"{what} has an unexpected .npy header")
    descr, shape = header["descr"], header["shape"]
    match = _DESCR.fullmatch(descr) if isinstance(descr, str) else None
    if match is None:
        raise UnsafeFile(f"{what} is not a plain .npy array: dtype {str(descr)[:40]!r} is refused "
                         "(numbers and text only)",
                         found=str(descr)[:40])
    if not isinstance(shape, tuple) or len(shape) > 8 or not all(
            type(d) is int and 0 <= d < 2**40 for d in shape):
        raise UnsafeFile(f"{what} has an invalid shape {str(shape)[:60]}", found=str(shape)[:60])
    if not isinstance(header["fortran_order"], bool):
        raise UnsafeFile(f"{what} has an invalid .npy header")
    return descr, shape, start + length, header["fortran_order"]


def npy_expected_size(descr: str, shape: tuple[int, ...], header_length: int) -> int:
    count = 1
    for dim in shape:
        count *= dim
    return header_length + count * _itemsize(descr.lstrip("<>|="))


def check_npz(archive: zipfile.ZipFile, *, archive_size: int, limit: int, what: str,
              max_members: int = NPZ_MAX_MEMBERS, stored_only: bool = False,
              c_order_only: bool = False) -> list[zipfile.ZipInfo]:
    """Check an npz archive before any member is loaded: at most ``max_members`` distinct ``name.npy`` members
    (plain names), stored or deflated, declared sizes within ``limit`` in total and within
    :data:`NPZ_MAX_RATIO` of their compressed size, compressed sizes within the archive, and each member's
    ``.npy`` header describing exactly its declared size; ``stored_only`` refuses compressed members and
    ``c_order_only`` members in Fortran order (a published file that another reader of the format may refuse:
    FORMATS section 8's rule for stored predictions, and section 10's for revealed images). Returns the
    members."""
    members = archive.infolist()
    if len(members) > max_members:
        raise UnsafeFile(f"{what} has {len(members)} members (at most {max_members})", found=len(members))
    names = [m.filename for m in members]
    if len(set(names)) != len(names):
        raise UnsafeFile(f"{what} has duplicate members")
    total = 0
    for info in members:
        name = info.filename
        if not name.endswith(".npy") or "/" in name or "\\" in name or name.startswith("."):
            raise UnsafeFile(f"{what} has an unexpected member {name[:60]!r}", found=name[:60])
        if stored_only and info.compress_type != zipfile.ZIP_STORED:
            raise UnsafeFile(f"{what}: member {name} is compressed (stored members only)", field=name)
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise UnsafeFile(f"{what}: member {name} uses an unsupported compression", field=name)
        if info.compress_size > archive_size:
            raise UnsafeFile(f"{what}: member {name} claims more bytes than the archive holds", field=name)
        if info.compress_type == zipfile.ZIP_STORED and info.compress_size != info.file_size:
            raise UnsafeFile(f"{what}: member {name} declares two sizes", field=name)
        if info.file_size > NPZ_MAX_RATIO * max(info.compress_size, 1) + 4096:
            raise UnsafeFile(f"{what}: member {name} expands {info.file_size} bytes from {info.compress_size} "
                             "(a zip bomb?)", field=name, found=info.file_size)
        total += info.file_size
        if total > limit:
            raise UnsafeFile(f"{what} expands to more than {limit} bytes", expected=limit)
        try:
            with archive.open(info) as handle:
                head = handle.read(min(info.file_size, NPY_MAX_HEADER + 12))
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as exc:
            raise UnsafeFile(f"{what}: member {name} is unreadable ({type(exc).__name__})", field=name) from None
        descr, shape, header_length, fortran = _npy_header_fields(head, what=f"{what}: member {name}")
        if c_order_only and fortran:
            raise UnsafeFile(f"{what}: member {name} is in Fortran order (C order only)", field=name)
        if npy_expected_size(descr, shape, header_length) != info.file_size:
            raise UnsafeFile(f"{what}: member {name} claims shape {shape} of {descr}, which does not fit its "
                             f"{info.file_size} bytes", field=name, found=list(shape))
    return members


# The stored layout (FORMATS section 8), read strictly and without zipfile -------------------------------

#: Zip records (PKWARE APPNOTE 4.3.7, 4.3.12, 4.3.16) and the signatures of the records section 8 refuses.
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")
_CENTRAL_HEADER = struct.Struct("<4s4B4HL2L5H2L")
_END_RECORD = struct.Struct("<4s4H2LH")
_LOCAL_SIGNATURE = b"PK\x03\x04"
_CENTRAL_SIGNATURE = b"PK\x01\x02"
_END_SIGNATURE = b"PK\x05\x06"
_ZIP64_LOCATOR_SIGNATURE = b"PK\x06\x07"
_ZIP64_LOCATOR_SIZE = 20
_ZIP64_EXTRA_ID = 0x0001
#: Section 8's member time, 1980-01-01 00:00:00, as MS-DOS (time, date).
_STORED_DOS_TIME = (0, (1 << 5) | 1)
#: Member names the stored layout allows (ASCII: zipfile's cp437 decoding is then the identity; no NUL).
_PLAIN_MEMBER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,200}\.npy")


@dataclass(frozen=True)
class NpyMember:
    """One ``.npy`` member of an npz archive: its name without ``.npy``, its checked header's dtype and shape,
    and where its array data lie in the archive's bytes (``start`` to ``end``)."""

    name: str
    descr: str
    shape: tuple[int, ...]
    start: int
    end: int


@functools.lru_cache(maxsize=256)
def _cached_npy_header(header: bytes) -> tuple[str, tuple[int, ...], int, bool]:
    """:func:`_npy_header_fields` of a complete header, cached: the headers of one kind of archive repeat (same
    dtypes, same shapes), and the check parses Python literals. A refusal is not cached (it raises)."""
    return _npy_header_fields(header, what="member")


def _explicit_descr(descr: str) -> bool:
    """Whether an allowed ``.npy`` dtype is spelled as numpy writes it: ``|`` for one-byte numbers, ``<`` or
    ``>`` for the others (never ``=`` or no prefix, which leave the byte order to the reader's machine)."""
    code = descr.lstrip("<>|=")
    one_byte = not code.startswith("U") and _itemsize(code) == 1
    return descr[:1] == "|" if one_byte else descr[:1] in ("<", ">")


def _dos_time(time: int, date: int) -> str:
    return (f"{(date >> 9) + 1980:04d}-{(date >> 5) & 15:02d}-{date & 31:02d} "
            f"{time >> 11:02d}:{(time >> 5) & 63:02d}:{(time & 31) * 2:02d}")


def _extra_ids(extra: bytes) -> list[int]:
    """The header ids of a zip extra field's blocks (as far as they parse)."""
    ids: list[int] = []
    at = 0
    while at + 4 <= len(extra):
        ids.append(int.from_bytes(extra[at:at + 2], "little"))
        at += 4 + int.from_bytes(extra[at + 2:at + 4], "little")
    return ids


def read_stored_npz(data: bytes, *, limit: int, what: str,
                    max_members: int = NPZ_MAX_MEMBERS) -> list[NpyMember]:
    """The members of ``data``, which must be an npz archive in the stored layout of FORMATS section 8, in
    archive order; anything else is refused with :class:`UnsafeFile` naming what is wrong. There is no other
    reader to fall back on.

    The stored layout: the first member's local header at offset 0 (nothing before it: no polyglot); each
    member uncompressed (``ZIP_STORED``), dated 1980-01-01 00:00:00, with no flags (no data descriptor), no
    extra field (no zip64), no comment, version needed at most 2.0, its local header saying what its central
    directory record says, its data directly after its local header and the next local header directly after
    its data; then the central directory, then the end record ending the file (no zip64 record, no comment,
    nothing appended). At most ``max_members`` members with distinct plain ``name.npy`` names, sizes within
    ``limit`` in total, each an ``.npy`` file of format 1.0 whose header (exactly ``descr``, ``fortran_order``
    False and ``shape``; a plain dtype spelled with its explicit byte order) describes exactly its member's
    size, and whose data match the recorded CRC-32. The members are located in the bytes
    without copying them: one linear pass over ``data``, nothing allocated beyond this list."""
    if not data.startswith(_LOCAL_SIGNATURE):
        first = data.find(_LOCAL_SIGNATURE)
        if first > 0:
            raise UnsafeFile(f"{what} has {first} bytes before its first zip record (the stored layout starts "
                             "with its first member at offset 0: a polyglot?)", expected=0, found=first)
        raise UnsafeFile(f"{what} is not a zip archive (no member at offset 0)")
    size = len(data)
    end_at = size - _END_RECORD.size
    if end_at < 0 or data[end_at:end_at + 4] != _END_SIGNATURE:
        found = data.rfind(_END_SIGNATURE)
        if 0 <= found <= end_at:
            trailing = size - found - _END_RECORD.size
            raise UnsafeFile(f"{what} has {trailing} bytes after its end-of-central-directory record (an archive "
                             "comment or appended data: the end record must end the file)", expected=0,
                             found=trailing)
        raise UnsafeFile(f"{what} is not a zip archive (no end-of-central-directory record at its end)")
    (_, disk, cd_disk, disk_entries, entries, cd_size, cd_offset, comment) = _END_RECORD.unpack_from(data, end_at)
    if 0xFFFF in (disk, cd_disk, disk_entries, entries) or 0xFFFFFFFF in (cd_size, cd_offset) \
            or data[max(0, end_at - _ZIP64_LOCATOR_SIZE):end_at].startswith(_ZIP64_LOCATOR_SIGNATURE):
        raise UnsafeFile(f"{what} is a zip64 archive (the stored layout has no zip64 records)")
    if comment:
        raise UnsafeFile(f"{what}: its end record claims a {comment}-byte comment past the end of the file")
    if disk or cd_disk or disk_entries != entries:
        raise UnsafeFile(f"{what} is a multi-disk zip archive")
    if entries > max_members:
        raise UnsafeFile(f"{what} has {entries} members (at most {max_members})", found=entries)
    if cd_offset + cd_size != end_at:
        gap = end_at - cd_offset - cd_size
        raise UnsafeFile(f"{what}: its end record does not place the central directory directly before it "
                         f"({gap} bytes unaccounted for: data before the archive or between its records)", found=gap)
    view = memoryview(data)
    members: list[NpyMember] = []
    names: set[bytes] = set()
    position = cd_offset
    local_at = 0
    total = 0
    for number in range(1, entries + 1):
        if position + _CENTRAL_HEADER.size > end_at or data[position:position + 4] != _CENTRAL_SIGNATURE:
            raise UnsafeFile(f"{what}: central directory record {number} of {entries} is missing or malformed",
                             found=position)
        (_, _, _, version, version_high, flags, method, time, date, crc, compressed, file_size, name_length,
         extra_length, comment_length, disk_start, _, _, offset) = _CENTRAL_HEADER.unpack_from(data, position)
        version |= version_high << 8  # "version needed to extract" is a 2-byte field
        name_at = position + _CENTRAL_HEADER.size
        position = name_at + name_length + extra_length + comment_length
        if position > end_at:
            raise UnsafeFile(f"{what}: central directory record {number} of {entries} runs past the directory")
        raw_name = data[name_at:name_at + name_length]
        name = raw_name.decode("latin1")
        if not _PLAIN_MEMBER.fullmatch(name):
            raise UnsafeFile(f"{what} has an unexpected member {name[:60]!r}", found=name[:60])
        if raw_name in names:
            raise UnsafeFile(f"{what} has duplicate members ({name})", field=name)
        names.add(raw_name)
        where = f"{what}: member {name}"
        extra = data[name_at + name_length:name_at + name_length + extra_length]
        if method != zipfile.ZIP_STORED:
            raise UnsafeFile(f"{where} is compressed (method {method}; stored members only)", field=name,
                             found=method)
        if version >= 45 or _ZIP64_EXTRA_ID in _extra_ids(extra):
            raise UnsafeFile(f"{where} is a zip64 member (the stored layout has no zip64 fields)", field=name)
        if flags:
            raise UnsafeFile(f"{where} has general-purpose flags {flags:#06x} (none allowed: no data descriptor, "
                             "no encryption)", field=name, found=flags)
        if extra_length:
            raise UnsafeFile(f"{where} has an extra field (ids {[f'{i:#06x}' for i in _extra_ids(extra)]}; "
                             "none allowed)", field=name)
        if comment_length:
            raise UnsafeFile(f"{where} has a comment", field=name)
        if version > 20 or disk_start:
            raise UnsafeFile(f"{where} needs zip version {version // 10}.{version % 10} or another disk "
                             "(at most 2.0, one disk)", field=name, found=version)
        if (time, date) != _STORED_DOS_TIME:
            raise UnsafeFile(f"{where} is dated {_dos_time(time, date)}, not 1980-01-01 00:00:00", field=name,
                             found=_dos_time(time, date))
        if compressed != file_size:
            raise UnsafeFile(f"{where} declares two sizes", field=name)
        total += file_size
        if total > limit:
            raise UnsafeFile(f"{what} expands to more than {limit} bytes", expected=limit)
        if offset != local_at:
            raise UnsafeFile(f"{where}: its local header is at offset {offset}, not {local_at} (members follow "
                             "each other from offset 0, nothing between them)", field=name, expected=local_at,
                             found=offset)
        start = local_at + _LOCAL_HEADER.size + name_length
        end = start + file_size
        if start > cd_offset:
            raise UnsafeFile(f"{where}: its local header runs into the central directory", field=name)
        local = _LOCAL_HEADER.unpack_from(data, local_at)
        if local[0] != _LOCAL_SIGNATURE or local[1] | local[2] << 8 != version \
                or local[3:7] != (flags, method, time, date) \
                or local[7:] != (crc, compressed, file_size, name_length, 0) \
                or data[local_at + _LOCAL_HEADER.size:start] != raw_name:
            extra_at = local_at + _LOCAL_HEADER.size + local[10]
            zip64 = local[0] == _LOCAL_SIGNATURE and _ZIP64_EXTRA_ID in _extra_ids(
                data[extra_at:min(extra_at + local[11], cd_offset)])
            raise UnsafeFile(f"{where} " + ("is a zip64 member (the stored layout has no zip64 fields)" if zip64
                                            else "has a local header that differs from its central directory "
                                                 "record"), field=name)
        if end > cd_offset:
            raise UnsafeFile(f"{where}: its data run into the central directory", field=name)
        if file_size < 10 or data[start:start + 6] != _NPY_MAGIC:
            raise UnsafeFile(f"{where} is not an .npy array (bad magic)", field=name)
        major, minor = data[start + 6], data[start + 7]
        if (major, minor) != (1, 0):
            raise UnsafeFile(f"{where} is .npy format {major}.{minor} (format 1.0 only)", field=name,
                             expected="1.0", found=f"{major}.{minor}")
        header_end = start + 10 + int.from_bytes(data[start + 8:start + 10], "little")
        if header_end > end:
            raise UnsafeFile(f"{where} has a truncated .npy header", field=name)
        header = data[start:header_end]
        try:
            descr, shape, header_length, fortran_order = _cached_npy_header(header)
        except UnsafeFile:
            _npy_header_fields(header, what=where)  # raises again, naming the member
            raise
        if fortran_order:
            raise UnsafeFile(f"{where} is in Fortran order (fortran_order True; C order only)", field=name)
        if not _explicit_descr(descr):
            raise UnsafeFile(f"{where} has dtype {descr!r}, not written as numpy writes it (with an explicit "
                             "byte order: '<f4', '<i2', '<U31')", field=name, found=descr)
        if _itemsize(descr.lstrip("<>|=")) == 0:
            raise UnsafeFile(f"{where} has a zero-width dtype {descr}", field=name, found=descr)
        if npy_expected_size(descr, shape, header_length) != file_size:
            raise UnsafeFile(f"{where} claims shape {shape} of {descr}, which does not fit its {file_size} bytes",
                             field=name, found=list(shape))
        if zlib.crc32(view[start:end]) != crc:
            raise UnsafeFile(f"{where} is unreadable (BadZipFile): its data do not match the recorded CRC-32",
                             field=name)
        members.append(NpyMember(name[:-4], descr, shape, start + header_length, end))
        local_at = end
    if local_at != cd_offset:
        raise UnsafeFile(f"{what} has {cd_offset - local_at} bytes between its last member and its central "
                         "directory", found=cd_offset - local_at)
    if position != end_at:
        raise UnsafeFile(f"{what}: its central directory holds {end_at - position} bytes past its {entries} "
                         "records", found=end_at - position)
    return members


def plain_stored_npz(data: bytes, *, limit: int, max_members: int = NPZ_MAX_MEMBERS) -> list[NpyMember] | None:
    """:func:`read_stored_npz`'s members, or None where it refuses ``data`` (for callers that only ask whether
    a blob is in the stored layout; readers call :func:`read_stored_npz`, which says why not)."""
    try:
        return read_stored_npz(data, limit=limit, what="archive", max_members=max_members)
    except UnsafeFile:
        return None
