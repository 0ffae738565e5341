"""Private pools: the cases a task's sealed generations are drawn from, kept under the store's ``private/``.

``private/pools/<task>/<chunk>.npz`` (0600 files in 0700 folders): one chunk per ``heldout pool add`` that
brought new cases, holding ``images`` (uint8), ``labels`` (int64) and ``content_sha256`` (the
``heldout-case-v1`` hash of each case; the case id is ``<task>-<first 16 hex>``). A case already in the pool
(same image and label) is not added twice. The chunk name is the first 16 hex of the SHA-256 over the new
cases' content hashes. All images of one task have one shape. Registering cases writes nothing to the
ledger: a pool is private preparation; the ledger learns about cases only through seals and reveals.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.provenance import file_provenance
from heldout.generations.cases import (
    ImageArray,
    LabelArray,
    case_id,
    check_task,
    content_sha256,
    read_split,
)
from heldout.store import Store
from keys import MalformedInput, UsageError
from keys.files import ensure_private_dir, write_private_file


def pools_root(store: Store) -> Path:
    return store.pools


def pool_dir(store: Store, task: str) -> Path:
    return pools_root(store) / check_task(task)


def _chunks(store: Store, task: str) -> list[Path]:
    folder = pool_dir(store, task)
    return sorted(folder.glob("*.npz")) if folder.is_dir() else []


def pool_tasks(store: Store) -> list[str]:
    root = pools_root(store)
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and any(p.glob("*.npz")))


def _chunk_hashes(path: Path) -> list[str]:
    try:
        with np.load(path, allow_pickle=False) as data:
            return [str(h) for h in data["content_sha256"]]
    except (OSError, KeyError, ValueError) as exc:
        raise MalformedInput(f"pool file {path} is unreadable ({type(exc).__name__})", path=str(path)) from None


def _chunk_image_shape(path: Path) -> tuple[int, ...]:
    with np.load(path, allow_pickle=False) as data:
        return tuple(int(d) for d in data["images"].shape[1:])


def pool_content_hashes(store: Store, task: str) -> list[str]:
    """Content hashes of every case in the task's pool (chunk order, then row order)."""
    return [h for chunk in _chunks(store, task) for h in _chunk_hashes(chunk)]


def pool_entries(store: Store, task: str) -> dict[str, tuple[str, int]]:
    """``{case id: (content_sha256, label)}`` for the task's pool, without loading images."""
    out: dict[str, tuple[str, int]] = {}
    for chunk in _chunks(store, task):
        hashes = _chunk_hashes(chunk)
        with np.load(chunk, allow_pickle=False) as data:
            labels = data["labels"]
        for h, label in zip(hashes, labels, strict=True):
            out[case_id(task, h)] = (h, int(label))
    return out


def pool_case_ids(store: Store, task: str) -> list[str]:
    """The task's pool as case ids, sorted."""
    return sorted(case_id(task, h) for h in pool_content_hashes(store, task))


@dataclass(frozen=True)
class PoolAddResult:
    task: str
    file: str
    split: str
    read: int
    added: int
    already_in_pool: int
    repeated_in_file: int
    pool_size: int
    chunk: str | None
    origin: str = "local"  # harness.provenance: official (medmnist MD5), synthetic or local
    file_sha256: str = ""

    def to_json(self) -> dict[str, object]:
        return dict(self.__dict__)


def add_pool(store: Store, task: str, path: Path, split: str = "test", *,
             progress: Callable[[int, int], None] | None = None) -> PoolAddResult:
    """Register the cases of ``path``'s ``split`` as private cases of ``task``. All checks run before anything
    is written; a file with nothing new writes nothing. ``progress(done, total)`` is called while hashing."""
    check_task(task)
    if not store.private.is_dir():
        raise UsageError(f"no store at {store.root}; run: heldout init", path=str(store.root))
    arrays = read_split(path, split)
    provenance = file_provenance(path, task)
    existing_chunks = _chunks(store, task)
    if existing_chunks:
        shape = _chunk_image_shape(existing_chunks[0])
        found = tuple(int(d) for d in arrays.images.shape[1:])
        if shape != found:
            raise UsageError(f"{task}'s pool holds images of shape {shape}; {path.name} has {found}",
                             path=str(path), expected=list(shape), found=list(found))
    existing = set(pool_content_hashes(store, task))
    total = len(arrays.labels)
    hashes = []
    for i in range(total):
        hashes.append(content_sha256(arrays.images[i], int(arrays.labels[i])))
        if progress is not None and ((i + 1) % 256 == 0 or i + 1 == total):
            progress(i + 1, total)
    keep: list[int] = []
    seen: set[str] = set()
    repeated = already = 0
    for i, h in enumerate(hashes):
        if h in existing:
            already += 1
        elif h in seen:
            repeated += 1
        else:
            seen.add(h)
            keep.append(i)
    chunk_name = None
    if keep:
        new_hashes = [hashes[i] for i in keep]
        chunk_name = hashlib.sha256("\n".join(new_hashes).encode()).hexdigest()[:16] + ".npz"
        buffer = io.BytesIO()
        np.savez(buffer, images=arrays.images[keep], labels=arrays.labels[keep],
                 content_sha256=np.asarray(new_hashes, dtype="U64"))
        ensure_private_dir(pools_root(store))
        ensure_private_dir(pool_dir(store, task))
        write_private_file(pool_dir(store, task) / chunk_name, buffer.getvalue())
    return PoolAddResult(task=task, file=str(path), split=split, read=len(hashes), added=len(keep),
                         already_in_pool=already, repeated_in_file=repeated,
                         pool_size=len(existing) + len(keep), chunk=chunk_name, origin=provenance.origin,
                         file_sha256=provenance.sha256)


def load_pool_cases(store: Store, task: str, case_ids: Sequence[str]) -> tuple[ImageArray, LabelArray,
                                                                                list[str]]:
    """Images, labels and content hashes of ``case_ids`` (in that order) from the task's pool."""
    wanted = {cid: i for i, cid in enumerate(case_ids)}
    images: ImageArray | None = None
    labels = np.zeros(len(case_ids), dtype=np.int64)
    hashes: list[str] = [""] * len(case_ids)
    found = 0
    for chunk in _chunks(store, task):
        chunk_hashes = _chunk_hashes(chunk)
        rows = [(r, wanted[case_id(task, h)]) for r, h in enumerate(chunk_hashes) if case_id(task, h) in wanted]
        if not rows:
            continue
        with np.load(chunk, allow_pickle=False) as data:
            chunk_images = data["images"]
            chunk_labels = data["labels"]
        if images is None:
            images = np.zeros((len(case_ids), *chunk_images.shape[1:]), dtype=np.uint8)
        for r, i in rows:
            images[i] = chunk_images[r]
            labels[i] = int(chunk_labels[r])
            hashes[i] = chunk_hashes[r]
            found += 1
    if found != len(case_ids) or images is None:
        missing = next(cid for cid, i in wanted.items() if not hashes[i])
        raise MalformedInput(f"case {missing} is not in the private pool of {task}", case_id=missing,
                             path=str(pool_dir(store, task)))
    return images, labels, hashes
