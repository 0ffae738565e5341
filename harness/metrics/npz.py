"""Loading npz archives that nobody vouches for (stored predictions, reveal images, pool files).

The archive's structure and every member's ``.npy`` header are checked first (``keys.safeio.check_npz``:
member count, declared against compressed sizes, compression ratio, allowed dtypes, shape times itemsize equal
to the member's size), so that what numpy then allocates is bounded by what the archive really holds; nothing
is unpickled. :func:`load_stored_npz` reads a stored-predictions blob, which must be in the stored layout of
FORMATS section 8 (``keys.safeio.read_stored_npz``: anything else is refused, never read another way),
straight from the bytes.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import IO, Any

import numpy as np
from numpy.typing import NDArray

from keys.safeio import BLOB_LIMIT, UnsafeFile, check_npz, open_named, read_stored_npz

#: An npz file of cases (a MedMNIST split file, a pool chunk) expands to at most this many bytes: the largest
#: MedMNIST+ file (224 px) is a few GB; anything above is refused before it is allocated.
CASES_FILE_LIMIT = 8 * 1024**3


def load_npz(source: bytes | IO[bytes], *, what: str, limit: int = BLOB_LIMIT,
             members: frozenset[str] | None = None, stored_only: bool = False,
             c_order_only: bool = False) -> dict[str, NDArray[Any]]:
    """Every member (or only those named in ``members``, without ``.npy``) of an npz archive given as bytes
    or as a seekable binary handle, as arrays keyed by name without ``.npy``; raises :class:`UnsafeFile`
    naming the problem (``stored_only`` and ``c_order_only``: see ``keys.safeio.check_npz``)."""
    if isinstance(source, bytes):
        size = len(source)
        handle: IO[bytes] = io.BytesIO(source)
    else:
        handle = source
        size = handle.seek(0, io.SEEK_END)
        handle.seek(0)
    try:
        archive = zipfile.ZipFile(handle)
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise UnsafeFile(f"{what} is not a readable npz file (not a zip archive: {type(exc).__name__})") from None
    arrays: dict[str, NDArray[Any]] = {}
    with archive:
        for info in check_npz(archive, archive_size=size, limit=limit, what=what,
                               stored_only=stored_only, c_order_only=c_order_only):
            name = info.filename[: -len(".npy")]
            if members is not None and name not in members:
                continue
            try:
                with archive.open(info) as member:
                    arrays[name] = np.lib.format.read_array(member, allow_pickle=False)
            except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
                raise UnsafeFile(f"{what}: member {info.filename} is not a plain .npy array "
                                 f"({type(exc).__name__})", field=info.filename) from None
    return arrays


def read_npz_file(path: Path, *, what: str, members: frozenset[str] | None = None,
                  limit: int = CASES_FILE_LIMIT) -> dict[str, NDArray[Any]]:
    """The named members of an npz file on disk (a regular file: a FIFO or a device is refused, never waited
    on), loaded as :func:`load_npz` does."""
    with open_named(path, limit=limit, what=what) as handle:
        return load_npz(handle, what=what, limit=limit, members=members)


def load_stored_npz(data: bytes, *, what: str, limit: int) -> dict[str, NDArray[Any]]:
    """The members of a blob in the stored layout of FORMATS section 8 (``keys.safeio.read_stored_npz``, which
    refuses anything else with :class:`UnsafeFile` naming what is wrong: there is no lenient fallback), in
    archive order, keyed by name without ``.npy``: read-only views of ``data``, nothing copied or allocated
    for them."""
    arrays: dict[str, NDArray[Any]] = {}
    for member in read_stored_npz(data, limit=limit, what=what):
        dtype = np.dtype(member.descr)
        count = (member.end - member.start) // dtype.itemsize  # itemsize > 0: read_stored_npz refuses zero
        arrays[member.name] = np.frombuffer(data, dtype=dtype, count=count,
                                            offset=member.start).reshape(member.shape)
    return arrays
