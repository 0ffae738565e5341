"""Every path the site writes or links that is built from logged data (model ids, generation names, seal file
names, source paths, blob digests) is made here, and only here, bounded and safe.

Logged strings are up to 256 characters of any script (a non-ASCII letter takes up to 4 bytes in a file name),
so a file name made from them could pass the file system's 255-byte limit or carry characters a URL or a file
system reads differently. So:

* a page named after logged strings (:func:`passport_page`) is the entry index (which makes it unique) and a
  readable part of at most :data:`READABLE_CHARS` ASCII characters (letters, digits, ``-``, ``_``, ``.``;
  anything else becomes ``_``), followed by 12 hex digits of the SHA-256 of the full text when it was cut;
* a file copied under its own name (the export's ``seals/``) is published only when the name is already a
  plain ASCII name of at most :data:`COPIED_NAME_BYTES` bytes (:func:`copied_seal_path`); the export keeps
  any other, and the site shows its name as text;
* a blob is published and linked only under ``blobs/sha256/<hh>/<hex>`` of a 64-hex SHA-256;
* a source path a passport names is linked only when it is exactly one of the forms the site publishes
  (:func:`source_href`), else it is shown as escaped text.

:func:`check_output_path` is the writer's last check: any path outside these forms refuses the build.
"""

from __future__ import annotations

import hashlib
import re

from keys.names import SHA256_HEX

READABLE_CHARS = 80
COPIED_NAME_BYTES = 128
HASH_CHARS = 12
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")
_READABLE_KEEP = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")
# A path component the site may write: a plain ASCII name, never "." or "..", within NAME_MAX with room to spare.
_OUTPUT_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,199}")


def readable(text: str, limit: int = READABLE_CHARS) -> str:
    """``text`` as a short ASCII file-name part: kept characters as they are, others ``_``; when longer than
    ``limit``, cut and followed by ``-`` and the first 12 hex digits of the SHA-256 of the full text."""
    safe = "".join(c if c in _READABLE_KEEP else "_" for c in text)
    if len(safe) <= limit:
        return safe
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_CHARS]
    return f"{safe[:limit]}-{digest}"


def passport_page(entry_index: int, model_id: str, generation: str) -> str:
    """``passports/<entry index>-<readable model id and generation>.html``: unique by the index, at most about
    110 ASCII bytes whatever was logged."""
    return f"passports/{int(entry_index)}-{readable(f'{model_id}__{generation}')}.html"


def blob_path(digest: str) -> str | None:
    """``blobs/sha256/<hh>/<hex>`` for a SHA-256 in lowercase hex; None for anything else."""
    if not isinstance(digest, str) or not SHA256_HEX.fullmatch(digest):
        return None
    return f"blobs/sha256/{digest[:2]}/{digest}"


def copied_seal_path(name: str) -> str | None:
    """``seals/<name>`` for a file of the export's ``seals/`` whose name is a plain ASCII name of at most
    :data:`COPIED_NAME_BYTES` bytes; None (not published on the site) for any other name."""
    if not isinstance(name, str) or len(name) > COPIED_NAME_BYTES or not _PLAIN_NAME.fullmatch(name):
        return None
    return f"seals/{name}"


def seal_manifest_name(generation: str) -> str:
    return f"{generation}.seal.json"


def source_href(path: str, digest: str, *, seals: dict[str, str], blobs: set[str]) -> str | None:
    """The site path a passport's ``computed.sources[]`` entry may link to, or None (shown as text).

    ``seals`` maps each seal manifest the site publishes (``seals/<gen>.seal.json``) to its SHA-256, ``blobs``
    is the set of blobs it publishes. A source is linked only when its path is exactly such a file and its
    ``sha256`` is that file's: ``seals/<gen>.seal.json`` of a published generation manifest, or
    ``blobs/sha256/<hh>/<hex>`` whose hex is the source's ``sha256`` and is published."""
    if not isinstance(path, str) or not isinstance(digest, str):
        return None
    if path.startswith("seals/"):
        return path if seals.get(path) == digest and path.endswith(".seal.json") else None
    expected = blob_path(digest)
    if expected is not None and path == expected and digest in blobs:
        return expected
    return None


def check_output_path(path: str) -> bool:
    """Whether ``path`` is a relative path the site may write: plain ASCII components of at most 200 bytes."""
    parts = path.split("/")
    return bool(parts) and all(_OUTPUT_PART.fullmatch(p) and p not in (".", "..") for p in parts)
