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
from typing import Any

import numpy as np
from numpy.typing import NDArray

from harness.metrics.npz import read_npz_file
from harness.provenance import file_provenance
from heldout.generations.cases import (
    ImageArray,
    LabelArray,
    SplitArrays,
    case_id,
    check_task,
    content_sha256,
    read_split,
)
from heldout.store import Store
from keys import MalformedInput, UsageError
from keys.files import check_private_file, ensure_private_dir, write_private_file


def pools_root(store: Store) -> Path:
    return store.pools


def pool_dir(store: Store, task: str) -> Path:
    return pools_root(store) / check_task(task)


def _chunks(store: Store, task: str) -> list[Path]:
    folder = pool_dir(store, task)
    if not folder.is_dir():
        return []
    chunks = sorted(folder.glob("*.npz"))
    for chunk in chunks:  # the pool is private: checked (0600 files, 0700 folders up to private/) before reading
        check_private_file(chunk)
    return chunks


def pool_tasks(store: Store) -> list[str]:
    root = pools_root(store)
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and any(p.glob("*.npz")))


def _chunk_hashes(path: Path) -> list[str]:
    try:
        return [str(h) for h in read_npz_file(path, what=f"pool file {path}",
                                              members=frozenset({"content_sha256"}))["content_sha256"]]
    except KeyError:
        raise MalformedInput(f"pool file {path} is unreadable (no content_sha256)", path=str(path)) from None


def _chunk_member(path: Path, name: str) -> NDArray[Any]:
    found = read_npz_file(path, what=f"pool file {path}", members=frozenset({name}))
    if name not in found:
        raise MalformedInput(f"pool file {path} is unreadable (no {name})", path=str(path))
    return found[name]


def _chunk_image_shape(path: Path) -> tuple[int, ...]:
    return tuple(int(d) for d in _chunk_member(path, "images").shape[1:])


def pool_content_hashes(store: Store, task: str) -> list[str]:
    """Content hashes of every case in the task's pool (chunk order, then row order)."""
    return [h for chunk in _chunks(store, task) for h in _chunk_hashes(chunk)]


def pool_entries(store: Store, task: str) -> dict[str, tuple[str, int]]:
    """``{case id: (content_sha256, label)}`` for the task's pool, without loading images."""
    out: dict[str, tuple[str, int]] = {}
    for chunk in _chunks(store, task):
        hashes = _chunk_hashes(chunk)
        labels = _chunk_member(chunk, "labels")
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


def check_against_task_info(task: str, arrays: SplitArrays, path: Path) -> None:
    """Refuse a file that cannot be the task's: labels outside its classes, images of another shape or channel
    count than its MedMNIST INFO says. Without medmnist (the core install) the INFO is not at hand and only
    the pool's own shape check below applies."""
    from harness.tasks import task_spec

    try:
        spec = task_spec(task)
    except UsageError as exc:
        if "not installed" in exc.message:
            return
        raise
    labels = arrays.labels
    if len(labels) and (int(labels.min()) < 0 or int(labels.max()) >= spec.n_classes):
        raise UsageError(f"{path.name}: labels must be 0..{spec.n_classes - 1} for {task} (found "
                         f"{int(labels.min())}..{int(labels.max())})", path=str(path),
                         expected=[0, spec.n_classes - 1], found=[int(labels.min()), int(labels.max())])
    found = tuple(int(d) for d in arrays.images.shape[1:])
    if found != spec.image_shape:
        raise UsageError(f"{path.name}: {task} images have shape {spec.image_shape} ({spec.channels} channels); "
                         f"the file has {found}", path=str(path), expected=list(spec.image_shape), found=list(found))


def add_pool(store: Store, task: str, path: Path, split: str = "test", *,
             progress: Callable[[int, int], None] | None = None) -> PoolAddResult:
    """Register the cases of ``path``'s ``split`` as private cases of ``task``. All checks run before anything
    is written; a file with nothing new writes nothing. ``progress(done, total)`` is called while hashing."""
    check_task(task)
    if not store.private.is_dir():
        raise UsageError(f"no store at {store.root}; run: heldout init", path=str(store.root))
    arrays = read_split(path, split)
    check_against_task_info(task, arrays, path)
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
        chunk_images = _chunk_member(chunk, "images")
        chunk_labels = _chunk_member(chunk, "labels")
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
