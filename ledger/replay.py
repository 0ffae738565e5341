"""Replay: rebuild a ledger's tree from its entry bytes alone and check every signed checkpoint against it, in one
streamed pass that holds ``O(log n)`` tree state (a compact range), whatever the length of the log.

The same walk serves the operator's database (``Ledger.verify``), a third party's export or tiles
(``verify``), and the audit (``heldout.audit``, which also uses :func:`locate_damage` to name the entries a
failed replay points at). It trusts nothing but entry 0: the ledger id is recomputed from the genesis bytes
(and compared with the id the caller asked for), the checkpoint key is the one genesis declares, and then

* every entry must be canonical JSON of a known type, valid for its index (genesis at 0 only), decoded once;
* every checkpoint must be a well-formed note for this ledger's origin, signed by the genesis key, for a
  size within the entries, with the root the streamed tree has at that size;
* checkpoint sizes strictly increase, each is consistent with the one before (an RFC 9162 consistency proof
  assembled from the streamed tree: the old checkpoint's compact range, the perfect subtrees completed since,
  and the new compact range; checked by ``ledger.verify``), and the last one covers every entry (no unsigned
  tail; entries missing under a signed size are a truncation);
* with ``stored_nodes`` (a database's interior tree nodes in the order their last leaf completes them), every
  stored node is the one the entries give, none is missing and none lies beyond the entries.

Entries and checkpoints are iterables consumed once, in order (a database cursor, an export's lines), so
nothing here grows with the log: the state is the compact range, the pending consistency proof of the current
pair of checkpoints (``O(log n)`` hashes), a count per entry type and a few chunks of entries in flight.

Entries are taken a chunk at a time: decoded as a batch (``ledger.entries.decode_entries``) and hashed, with
every tree node that lies inside the chunk (``ledger.tree.ChunkNodes``), by default in worker processes for a
long log (``jobs``; decoding and hashing are most of the CPU), which read the chunk themselves where the
source allows it (``ranges``: a SQLite file) and are sent it otherwise; the walk then adds the chunk's leaves
to the tree up to each size where a checkpoint or a progress tick needs it, hashing only the nodes that
straddle the chunk's start (the subtrees a consistency proof needs are caught as the tree completes them).
Failures are raised in the order an entry-by-entry walk would meet them, so the error names the same entry
or checkpoint whatever the chunking or the number of workers.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import multiprocessing
import os
import pickle
import signal
import struct
import threading
from array import array
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import accumulate, chain, islice
from operator import itemgetter
from types import TracebackType
from typing import Any, Protocol, TypeVar

from keys import HeldoutError, PublicKey, TrustedKey, b64encode, verifier_key_string
from ledger.checkpoint import MAX_NOTE_BYTES, Checkpoint, parse_checkpoint, verify_checkpoint
from ledger.entries import (
    decode_entries,
    decode_entry,
    entry_type_registry,
    genesis_key,
    install_entry_types,
    ledger_id_of,
    origin_of,
)
from ledger.errors import LedgerIntegrityError, LedgerStorageError, ProofError
from ledger.rfc6962 import HASH_SIZE, LEAF_PREFIX, leaf_hash
from ledger.tree import ChunkNodes, CompactRange, consistency_ranges
from ledger.verify import verify_consistency

ProgressFn = Callable[[int, int], None]
#: Called with (index, entry bytes, decoded entry) for every entry, in order, as the replay decodes it.
EntryFn = Callable[[int, bytes, dict[str, Any]], None]
PROGRESS_EVERY = 4096
#: Entries read, decoded and hashed as one batch (a progress tick falls on each chunk's first entry).
CHUNK = PROGRESS_EVERY
#: ... or fewer, once their bytes reach this: a chunk of the largest entries (64 KiB) would otherwise hold
#: 256 MiB, several times over with the chunks in flight to the workers; and a chunk must fit a worker's
#: pipe (:data:`_PIPE_BYTES`).
CHUNK_BYTES = 640 << 10
#: A replay of at least this many entries decodes in worker processes by default (below it, starting them
#: costs more than they save).
PARALLEL_MIN_ENTRIES = 65_536
#: A stored tree node as a database yields it: (level, index, hash).
StoredNode = tuple[int, int, bytes]

_sha256 = hashlib.sha256
_NEVER = 1 << 62
_T = TypeVar("_T")


class RangeReader(Protocol):
    """A decoding worker's own reader of a log's entries (see :class:`EntryRanges`)."""

    def rows(self, start: int, stop: int) -> Iterable[tuple[bytes, bytes | None]]:
        """``(entry bytes, stored leaf hash)`` of the entries with index in ``[start, stop)``, in index order
        (fewer rows than that when some are missing: the walk then reads those itself, in its order)."""
        ...

    def close(self) -> None: ...


class EntryRanges(Protocol):
    """A source whose entries decoding workers can read by index range themselves (a SQLite file: each
    worker opens it read-only), instead of receiving them from the walk through a pipe. Reading is then
    split between the workers, and the walk only sends ranges and receives their tree nodes.

    ``size``: the entries the walk's own snapshot holds (the ranges cover ``[0, size)``). A worker's reader
    may see a later state of the source; for an append-only log that is the same rows below ``size``, and
    whatever it reads is hashed into the tree that the signed checkpoints must match, so a row changed
    between the two reads can fail the replay but never make a wrong log pass."""

    @property
    def size(self) -> int: ...

    def open(self) -> RangeReader: ...


@dataclass(frozen=True)
class CheckpointClaim:
    """A checkpoint as a source presents it: the size it is filed under, its note, and the root the source
    stored beside it (``None`` when the source keeps only the note)."""

    size: int
    note: str
    root: bytes | None = None


@dataclass(frozen=True)
class ReplayReport:
    ledger_id: str
    origin: str
    size: int
    root: bytes
    key: TrustedKey
    checkpoints: int
    latest: Checkpoint
    entry_types: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        return {
            "ledger_id": self.ledger_id,
            "origin": self.origin,
            "size": self.size,
            "root": b64encode(self.root),
            "key": {"key_id": self.key.key_id, "name": self.key.name, "public_key_b64": self.key.public_key.b64},
            "note_verifier_key": verifier_key_string(self.key.name, self.key.public_key),
            "checkpoints": self.checkpoints,
            "latest_checkpoint": self.latest.size,
            "entry_types": dict(sorted(self.entry_types.items())),
        }


def _with_checkpoint(exc: HeldoutError, size: int) -> LedgerIntegrityError:
    evidence = {k: v for k, v in exc.evidence.items() if k != "checkpoint"}
    return LedgerIntegrityError(f"checkpoint {size}: {exc.message}", checkpoint=size, **evidence)


@dataclass
class _Walk:
    """Where the chunked walk is: entries done, the next size at which something besides adding a leaf
    happens, and the current chunk's tree nodes (the tree is extended from them up to each such size, and to
    the chunk's end)."""

    size: int = 0
    stop: int = 0
    nodes: ChunkNodes | None = None


@dataclass
class _Piece:
    """A chunk as the walk takes it: ``count`` entries from ``start``, their decoding (the entries when decoded
    here, ``None`` when decoded in a worker, which sends back only counts; how many of each type; the first
    failure as (offset in the chunk, the error)), the tree nodes inside the chunk, the offset of the first
    stored leaf hash that is not its entry's (``count``: none) and that stored hash, and the entry bytes by
    offset: all of them, or (when a worker read the chunk itself) those the walk needs, genesis and the
    faulty entry."""

    start: int
    count: int
    entries: list[dict[str, Any]] | None
    counts: dict[str, int]
    fault: tuple[int, LedgerIntegrityError] | None
    nodes: ChunkNodes
    bad_leaf: int
    bad_stored: bytes | None
    datas: list[bytes] | dict[int, bytes]


_TYPE_OF = itemgetter("type")


def _take_chunk(entries: Iterator[tuple[bytes, bytes | None]]) -> tuple[list[bytes], list[bytes | None]]:
    """The next chunk of the stream: :data:`CHUNK` entries, or fewer once they hold :data:`CHUNK_BYTES`. Rows
    are taken a slice at a time (in C): 16 first, then as many as the entries' mean length so far leaves room
    for, so a chunk ends within a few entries of the byte bound (hostile sizes: within one slice, at most 256
    entries, over it)."""
    datas: list[bytes] = []
    stored: list[bytes | None] = []
    held = 0
    while len(datas) < CHUNK and held < CHUNK_BYTES:
        room = min(CHUNK - len(datas), _SLICE)
        room = min(room, max(1, (CHUNK_BYTES - held) * len(datas) // max(held, 1))) if datas else min(room, 16)
        rows = list(islice(entries, room))
        if not rows:
            break
        slice_datas, slice_stored = zip(*rows, strict=True)
        datas.extend(slice_datas)
        stored.extend(slice_stored)
        held += sum(map(len, slice_datas))
    return datas, stored


_SLICE = 256


def _decode_here(datas: list[bytes], first: int) -> tuple[list[dict[str, Any]], Counter[str],
                                                          tuple[int, LedgerIntegrityError] | None]:
    entries, fault = decode_entries(datas, first=first)
    return entries, Counter(map(_TYPE_OF, entries)), None if fault is None else (len(entries), fault)


def _piece(first: int, datas: list[bytes], stored: list[bytes | None], entries: list[dict[str, Any]] | None,
           counts: dict[str, int], fault: tuple[int, LedgerIntegrityError] | None,
           levels: list[bytes] | None) -> _Piece:
    """A chunk the walk read itself: its nodes (hashed here without ``levels``) and the first stored leaf hash
    at fault."""
    nodes = ChunkNodes.of_leaves(_leaf_hashes(datas), first) if levels is None else \
        ChunkNodes(first, first + len(datas), levels)
    bad_leaf = _first_bad_leaf(stored, nodes.levels[0])
    return _Piece(first, len(datas), entries, counts, fault, nodes, bad_leaf,
                  stored[bad_leaf] if bad_leaf < len(datas) else None, datas)


def _leaf_hashes(datas: list[bytes]) -> list[bytes]:
    sha256, prefix = _sha256, LEAF_PREFIX
    return [sha256(prefix + data).digest() for data in datas]


def _first_bad_leaf(stored: list[bytes | None] | tuple[bytes | None, ...], leaves: bytes) -> int:
    """The offset of the first stored leaf hash that is not its entry's, ``leaves`` being the entries' leaf
    hashes joined (``None`` stored: the source keeps none for that entry, nothing to compare); ``len(stored)``
    when there is none."""
    if not any(leaf is not None for leaf in stored):  # a source without stored leaf hashes (an export)
        return len(stored)
    try:
        if b"".join(stored) == leaves:  # type: ignore[arg-type]
            return len(stored)
    except TypeError:  # some entries without a stored leaf hash
        pass
    return next((k for k, want in enumerate(stored)
                 if want is not None and want != leaves[k * HASH_SIZE:(k + 1) * HASH_SIZE]), len(stored))


def _decode_in_worker(chunks: Any, answers: Any, required: Any, optional: Any,
                      inherited: tuple[Any, ...] = (), ranges: EntryRanges | None = None) -> None:
    """A decoding worker's loop: each message is one chunk (its first index, its entry count, and the entry
    lengths and the entries joined: one buffer rather than thousands of small objects to pickle; or, with
    ``ranges``, no entries: the worker reads them itself); each answer is the chunk's type counts, the offset
    of its first faulty entry (the parent decodes that one again for the error itself, which need not survive
    pickling), the chunk's tree nodes (:class:`ChunkNodes` levels, a buffer each) and the worker's verdicts
    on the checkpoint notes sent with it (a ranged chunk's answer has more, see :func:`_read_range`).
    An empty message, or the parent's end closing (it was killed), ends the loop; an interrupt from the
    terminal is the parent's to handle (it closes the pipes). ``inherited``: the parent's ends of the pipes
    that a fork copied into this process, closed first (while a copy is open here, the parent's death would
    not close the pipe, and the worker would wait forever)."""
    for end in inherited:
        end.close()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The walk in the parent is the pipeline's critical path (it builds the tree and checks the checkpoints in
    # order, and every worker waits on it): a worker yields the CPU to it when both want it.
    with contextlib.suppress(OSError):
        os.nice(_WORKER_NICENESS)
    install_entry_types(required, optional)
    reader: RangeReader | None = None
    try:
        while message := _receive(chunks):
            first, count, ranged = _HEADER.unpack_from(message)
            if ranged:
                if reader is None and ranges is not None:
                    try:
                        reader = ranges.open()
                    except Exception:  # the ranges come back unread: the walk reads the entries itself
                        reader = None
                answer = _read_range(reader, first, count)
                notes = message[_HEADER.size:]
            else:
                lengths = array("I")
                lengths.frombytes(message[_HEADER.size:_HEADER.size + 4 * count])
                ends = list(accumulate(lengths, initial=_HEADER.size + 4 * count))
                datas = list(map(message.__getitem__, map(slice, ends, ends[1:])))
                _, counts, fault = _decode_here(datas, first)
                answer = (dict(counts), None if fault is None else fault[0],
                          ChunkNodes.of_leaves(_leaf_hashes(datas), first).levels)
                notes = message[ends[-1]:]
            try:
                answers.send((*answer, _signed_notes(notes)))
            except OSError:  # the parent is gone
                return
    finally:
        if reader is not None:
            with contextlib.suppress(Exception):
                reader.close()


#: A ranged chunk's answer: type counts, the offset of the first faulty entry, the tree nodes, then the
#: offset of the first stored leaf hash that is not its entry's and that stored hash, and the entry bytes the
#: walk needs (by offset: the faulty entry, genesis); or, when the rows were not all there, ``None`` for the
#: nodes and the number read (-1: the source could not be read) in place of the counts.
_RangeAnswer = tuple[Any, ...]


def _read_range(reader: RangeReader | None, first: int, count: int) -> _RangeAnswer:
    """Read entries ``[first, first + count)`` with a worker's own reader, a piece at a time (pieces as the
    walk cuts a stream: at most :data:`CHUNK` entries or :data:`CHUNK_BYTES`, so hostile sizes are held a
    piece at a time), decode them until the first fault, hash every leaf, and find the first stored leaf
    hash that differs (up to the fault: nothing later is looked at by the walk)."""
    if reader is None:
        return -1, None, None
    counts: Counter[str] = Counter()
    fault: int | None = None
    bad_leaf, bad_stored = count, None
    keep: dict[int, bytes] = {}
    leaves: list[bytes] = []
    try:
        rows = iter(reader.rows(first, first + count))
        while (piece := _take_chunk(rows))[0]:
            datas, stored = piece
            offset = len(leaves)
            if offset + len(datas) > count:
                return -1, None, None
            if first + offset == 0:
                keep[0] = datas[0]
            if fault is None:
                entries, failure = decode_entries(datas, first=first + offset)
                counts.update(map(_TYPE_OF, entries))
                if failure is not None:
                    fault = offset + len(entries)
                    keep[fault] = datas[len(entries)]
            hashes = _leaf_hashes(datas)
            leaves.extend(hashes)
            if bad_leaf == count and (fault is None or offset <= fault):
                found = _first_bad_leaf(stored, b"".join(hashes))
                if found < len(datas):
                    bad_leaf, bad_stored = offset + found, stored[found]
    except Exception:  # whatever is wrong with the rows, the walk's own read of them names it
        return -1, None, None
    if len(leaves) != count:
        return len(leaves), None, None
    levels = ChunkNodes.of_leaves(leaves, first).levels
    return dict(counts), fault, levels, bad_leaf, bad_stored, keep


def _signed_notes(message: bytes) -> list[bool]:
    """For checkpoint notes sent with a chunk (after its entries: the log key's name, the key, the origin and
    the notes, pickled by the parent), whether each passes :func:`verify_checkpoint` with that key."""
    if not message:
        return []
    name, key_b64, origin, notes = pickle.loads(message)  # from the parent process, over its own pipe
    key = PublicKey.from_b64(key_b64)
    signed = []
    for note in notes:
        try:
            verify_checkpoint(note, name=name, key=key, origin=origin)
        except HeldoutError:
            signed.append(False)
        else:
            signed.append(True)
    return signed


_HEADER = struct.Struct("<QIB")  # first index, entry count, whether the worker reads the entries itself
_IN_FLIGHT = 2  # chunks a worker has in flight: one decoding, one waiting in its pipe
_NOTES_PER_CHUNK = 64  # checkpoint notes sent with a chunk at most (a log has one per 256 entries or fewer)
_WORKER_NICENESS = 5
#: A pipe this large (Linux's default pipe-max-size, settable without privilege) takes a whole chunk (at most
#: CHUNK_BYTES, one entry more and the lengths) without blocking the sender while the worker is still decoding
#: the previous one: the default 64 KiB held the walk up until the worker was free.
_PIPE_BYTES = 1 << 20


class _Channel:
    """The parent's side of a worker: a one-way pipe for chunks (enlarged, see :data:`_PIPE_BYTES`) and one
    for answers."""

    def __init__(self, context: Any) -> None:
        self.theirs_in, self.chunks = context.Pipe(duplex=False)
        self.answers, self.theirs_out = context.Pipe(duplex=False)
        with contextlib.suppress(OSError, AttributeError, ValueError):  # not Linux, or not allowed
            fcntl.fcntl(self.chunks.fileno(), fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
            # an answer carries the chunk's tree nodes (64 bytes an entry): the worker must not wait for the
            # walk to read it before taking its next chunk
            fcntl.fcntl(self.answers.fileno(), fcntl.F_SETPIPE_SZ, _PIPE_BYTES)

    def ours(self) -> tuple[Any, Any]:
        return self.chunks, self.answers

    def send_bytes(self, message: bytes) -> None:
        self.chunks.send_bytes(message)

    def recv(self) -> Any:
        return self.answers.recv()

    def close(self) -> None:
        with contextlib.suppress(OSError):  # the worker is gone already
            self.chunks.send_bytes(b"")
        self.chunks.close()
        self.answers.close()


def _receive(connection: Any) -> bytes:
    try:
        return bytes(connection.recv_bytes())
    except (EOFError, OSError):
        return b""


class _PendingChunk:
    def __init__(self, connection: Any, claims: list[CheckpointClaim],
                 vouched: Callable[[list[CheckpointClaim], list[bool]], None]) -> None:
        self._connection, self._claims, self._vouched = connection, claims, vouched

    def _answer(self) -> tuple[Any, ...]:
        """The worker's answer; its verdicts on the claims sent with the chunk go to ``vouched``."""
        try:
            *answer, verified = self._connection.recv()
        except (EOFError, OSError) as exc:
            raise LedgerStorageError(f"a decoding worker of the replay ended without answering ({exc!r})") from None
        self._vouched(self._claims, verified)
        return tuple(answer)

    def result(self, datas: list[bytes], stored: list[bytes | None], first: int) -> _Piece:
        """The chunk sent with its entries, decoded."""
        counts, offset, levels = self._answer()
        return _piece(first, datas, stored, None, counts, _fault(datas, first, offset), levels)

    def ranged(self, first: int, count: int) -> _Piece | None:
        """The chunk the worker read itself, decoded; ``None`` when it did not find every row of it."""
        counts, offset, levels, *rest = self._answer()
        if levels is None:
            return None
        bad_leaf, bad_stored, datas = rest
        nodes = ChunkNodes(first, first + count, levels)
        return _Piece(first, count, None, counts, _fault(datas, first, offset), nodes, bad_leaf, bad_stored, datas)


def _fault(datas: list[bytes] | dict[int, bytes], first: int,
           offset: int | None) -> tuple[int, LedgerIntegrityError] | None:
    """The error of the entry a worker found faulty (decoded again here: the error need not survive pickling)."""
    if offset is None:
        return None
    try:
        decode_entry(datas[offset], index=first + offset)
    except LedgerIntegrityError as exc:
        return offset, exc
    raise LedgerIntegrityError(  # pragma: no cover (decoding is deterministic)
        f"internal: entry {first + offset} failed to decode in a worker but not here", index=first + offset)


def forkserver_context(preload: list[str]) -> Any:
    """multiprocessing's forkserver context, its server (one per process) started without the folder the command
    runs from on its path. The server imports ``preload`` before any worker forks from it, and Python puts the
    working folder first on the path of the server it starts (``python -c``): a user's file there named like one
    of the project's packages (``harness.py``) would be imported in its place, and every worker would inherit
    it. ``PYTHONSAFEPATH`` (Python 3.11) leaves the folder out; each worker still takes this process's path as it
    starts (a preload that cannot be imported from the server's path is only skipped)."""
    import multiprocessing.forkserver
    import multiprocessing.resource_tracker

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["ledger.forkserver_signals", *preload])  # (first: workers ignore Ctrl-C)
    saved = os.environ.get("PYTHONSAFEPATH")
    os.environ["PYTHONSAFEPATH"] = "1"
    try:
        # (the resource tracker first: starting it unblocks the interrupt in this thread, whatever held it)
        multiprocessing.resource_tracker.ensure_running()
        with _interrupt_left_to_this_process():
            multiprocessing.forkserver.ensure_running()
    finally:
        if saved is None:
            del os.environ["PYTHONSAFEPATH"]
        else:
            os.environ["PYTHONSAFEPATH"] = saved
    return context


@contextlib.contextmanager
def _interrupt_left_to_this_process() -> Iterator[None]:
    """A server started in the block starts with the terminal's interrupt blocked (a process inherits the mask
    of the thread that starts it, through its exec): it is of the terminal's process group, and one Ctrl-C in
    the moment it was starting killed it, with a "Fatal Python error" KeyboardInterrupt traceback, before its
    own main() could ignore the interrupt; the command then reported a dead worker instead of the interrupt
    (red-team round 20). The server never unblocks it; here it is only held in this thread for the block: it
    reaches this process's own handler all the same (multiprocessing's resource tracker is started this way)."""
    if threading.current_thread() is not threading.main_thread():  # (only the main thread takes signals here)
        yield
        return
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def available_cpus() -> int:
    """Every core this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover (not Linux)
        return max(1, os.cpu_count() or 1)


def decoding_workers(total: int, jobs: int | None = None) -> int:
    """How many worker processes a replay of ``total`` entries decodes in: ``jobs``, or by default one per CPU
    when there are two or more and the log has at least :data:`PARALLEL_MIN_ENTRIES` entries; 0 (fewer than
    two): it decodes in its own process."""
    count = (available_cpus() if total >= PARALLEL_MIN_ENTRIES else 1) if jobs is None else jobs
    return count if count >= 2 else 0


class _DecoderPool:
    """Worker processes that decode and validate chunks of entries, and hash their leaves and the tree nodes
    inside them, while the main process reads the entries, builds the tree from those nodes and checks the
    checkpoints: that work is most of a replay's CPU (about 2 us for a 100-byte entry, against under 1 us
    to read it and hash its leaf). Each worker has its own pipes and
    takes chunks in turn (no pool threads in this process to compete with the walk). The workers are forked;
    from a process running other threads (a progress bar's), from a forkserver instead (a fork copies no other
    thread, so a lock one of them held would stay held), and then, as with any multiprocessing start method
    but fork, a script calling this must guard its main code with ``if __name__ == "__main__"``. They receive
    the parent's entry type registry, so they validate exactly as it would."""

    def __init__(self, workers: list[tuple[Any, _Channel]]) -> None:
        self.workers = workers

    @classmethod
    def start(cls, jobs: int | None, total: int, ranges: EntryRanges | None = None) -> _DecoderPool | None:
        """A pool of :func:`decoding_workers` workers; ``None`` for decoding in this process. ``ranges``: the
        workers can read the entries themselves (:meth:`ranged`)."""
        count = decoding_workers(total, jobs)
        methods = multiprocessing.get_all_start_methods()
        if not count or "fork" not in methods:
            return None
        context: Any
        if threading.active_count() == 1 or "forkserver" not in methods:
            context = multiprocessing.get_context("fork")
        else:
            context = forkserver_context([__name__])
        workers: list[tuple[Any, _Channel]] = []
        pool = cls(workers)
        try:
            for _ in range(count):
                channel = _Channel(context)
                # a forked worker holds copies of the parent's ends made so far; a forkserver's holds none
                inherited = (*(end for _, made in workers for end in made.ours()), *channel.ours()) \
                    if context.get_start_method() == "fork" else ()
                process = context.Process(target=_decode_in_worker, daemon=True, args=(
                    channel.theirs_in, channel.theirs_out, *entry_type_registry(), inherited, ranges))
                process.start()
                channel.theirs_in.close()
                channel.theirs_out.close()
                workers.append((process, channel))
        except (OSError, ValueError, TypeError, AttributeError, pickle.PicklingError):  # e.g. an unpicklable check
            pool.close()
            return None
        return pool

    def close(self) -> None:
        for _, channel in self.workers:
            channel.close()
        for process, _ in self.workers:
            process.join(timeout=5)
            if process.is_alive():  # pragma: no cover (a worker stuck mid-chunk when the walk failed)
                process.terminate()
                process.join()

    def __enter__(self) -> _DecoderPool:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if kind is not None:  # the walk stopped early: answers may be pending; don't wait for them
            self.stop()
        self.close()

    def stop(self) -> None:
        """End the workers now, whatever they still have in hand."""
        for process, _ in self.workers:
            process.terminate()

    def pipeline(self, entries: Iterator[tuple[bytes, bytes | None]],
                 notes_for: Callable[[int], tuple[bytes, list[CheckpointClaim]]],
                 vouched: Callable[[list[CheckpointClaim], list[bool]], None]) -> Iterator[
                     tuple[tuple[list[bytes], list[bytes | None]], _PendingChunk]]:
        """Each chunk of ``entries`` (its entry bytes and stored leaf hashes) with its pending decoding, in
        order, the chunk sent to a worker with its entries (see :meth:`_in_turn`)."""
        def sent() -> Iterator[tuple[tuple[list[bytes], list[bytes | None]], int, tuple[bytes, ...]]]:
            first = 0
            while (chunk := _take_chunk(entries))[0]:
                datas = chunk[0]
                yield chunk, first + len(datas), (_HEADER.pack(first, len(datas), 0),
                                                  array("I", map(len, datas)).tobytes(), *datas)
                first += len(datas)

        return self._in_turn(sent(), notes_for, vouched)

    def ranged(self, size: int, notes_for: Callable[[int], tuple[bytes, list[CheckpointClaim]]],
               vouched: Callable[[list[CheckpointClaim], list[bool]], None]) -> Iterator[
                   tuple[tuple[int, int], _PendingChunk]]:
        """Each chunk of ``[0, size)`` as ``(first, count)`` with its pending decoding, in order, the chunk sent
        to a worker as its range only: the worker reads the entries itself (see :class:`EntryRanges`)."""
        def sent() -> Iterator[tuple[tuple[int, int], int, tuple[bytes, ...]]]:
            for first in range(0, size, CHUNK):
                count = min(CHUNK, size - first)
                yield (first, count), first + count, (_HEADER.pack(first, count, 1),)

        return self._in_turn(sent(), notes_for, vouched)

    def _in_turn(self, chunks: Iterator[tuple[_T, int, tuple[bytes, ...]]],
                 notes_for: Callable[[int], tuple[bytes, list[CheckpointClaim]]],
                 vouched: Callable[[list[CheckpointClaim], list[bool]], None]) -> Iterator[tuple[_T, _PendingChunk]]:
        """Each of ``chunks`` (what the caller gets back, the index its entries end at, and the message parts)
        with its pending decoding, in order; keeps two chunks a worker in flight, sent to the workers in turn
        (so answers come back in order on each pipe). ``notes_for(end)``: the checkpoint claims whose
        signatures the worker checks with the chunk that ends at ``end`` (see :meth:`Replay._notes_for`), and
        the message part that carries them; ``vouched`` gets the verdicts."""
        in_flight: deque[tuple[_T, _PendingChunk]] = deque()
        sent = 0
        while True:
            while len(in_flight) < _IN_FLIGHT * len(self.workers) and (chunk := next(chunks, None)) is not None:
                item, end, parts = chunk
                connection = self.workers[sent % len(self.workers)][1]
                notes, claims = notes_for(end)
                connection.send_bytes(b"".join((*parts, notes)))
                in_flight.append((item, _PendingChunk(connection, claims, vouched)))
                sent += 1
            if not in_flight:
                return
            yield in_flight.popleft()


class _PendingProof:
    """The consistency proof from a verified checkpoint (``old``) to the next claimed size, filled in as the
    stream passes the subtrees it needs: those left of ``old`` come from the old compact range at once, the
    perfect subtrees right of it when their last leaf is pushed, the ragged right edge from the new compact
    range at the new size. The tree fills ``wanted`` in as its pushes complete those subtrees."""

    def __init__(self, old: Checkpoint, tree: CompactRange, new_size: int) -> None:
        self.old = old
        self.new_size = new_size
        self.path: list[bytes | None] = []
        self.slots: dict[tuple[int, int], int] = {}  # (level, index) -> slot
        self.wanted: dict[tuple[int, int], bytes | None] = {}  # (level, index) -> hash, once a push completes it
        self.edge: tuple[int, int] | None = None  # (slot, start) of the ragged range ending at new_size
        for start, end in consistency_ranges(old.size, new_size):
            slot = len(self.path)
            self.path.append(None)
            width = end - start
            if end <= old.size:
                self.path[slot] = tree.subtree(start)
            elif width & (width - 1) == 0:
                level = width.bit_length() - 1
                self.slots[(level, start >> level)] = slot
                self.wanted[(level, start >> level)] = None
            else:
                self.edge = (slot, start)

    def proof(self, tree: CompactRange) -> list[bytes]:
        for key, digest in self.wanted.items():
            self.path[self.slots[key]] = digest
        if self.edge is not None:
            self.path[self.edge[0]] = tree.suffix_root(self.edge[1])
        missing = [slot for slot, item in enumerate(self.path) if item is None]
        if missing:  # pragma: no cover (the stream passes every subtree the ranges name before the new size)
            raise LedgerIntegrityError("internal: a consistency proof element was not streamed", found=missing)
        return [item for item in self.path if item is not None]


class Replay:
    """One streamed replay. Iterate :meth:`checkpoints` for each checkpoint as it is verified (the entries
    below its size are checked by then); once it is exhausted, :attr:`report` holds the result. Any failure
    raises :class:`LedgerIntegrityError` naming the entry or checkpoint at fault."""

    def __init__(self, entries: Iterable[tuple[bytes, bytes | None]], total: int, claims: Iterable[CheckpointClaim],
                 *, expected_id: str | None = None, progress: ProgressFn | None = None,
                 stored_nodes: Iterable[StoredNode] | None = None, min_node_level: int = 1,
                 on_entry: EntryFn | None = None, jobs: int | None = None,
                 ranges: EntryRanges | None = None) -> None:
        self._entries = entries
        self._ranges = ranges
        self.jobs = jobs
        self.total = total
        self._claims = iter(claims)
        self.expected_id = expected_id
        self.progress = progress
        self._nodes = None if stored_nodes is None else iter(stored_nodes)
        self.min_node_level = min_node_level if stored_nodes is not None else _NEVER
        self.on_entry = on_entry
        self.tree = CompactRange()
        self.ledger_id = self.origin = ""
        self.key: TrustedKey | None = None
        self.types: dict[str, int] = {}
        self.previous: Checkpoint | None = None
        self.verified = 0
        self.pending: _PendingProof | None = None
        self._next_claim: CheckpointClaim | None = next(self._claims, None)
        self._ahead: deque[CheckpointClaim] = deque()  # claims read past the next one, their notes sent
        self._signed: set[str] = set()  # notes a decoding worker verified with the log key
        self.report: ReplayReport | None = None

    # the stream ---------------------------------------------------------------------------------------------
    def checkpoints(self) -> Iterator[Checkpoint]:
        """The walk, a chunk of entries at a time: each chunk is decoded as a batch (in worker processes when
        the replay has a decoder pool, see :class:`_DecoderPool`), its leaves and the tree nodes inside it
        hashed, its leaves compared with the stored ones, and added to the tree up to each size where
        something else happens (a claimed checkpoint, a progress tick), then to the chunk's end. A failure is
        raised where the entry-by-entry walk would raise it: a fault in entry ``i`` after every checkpoint of
        size up to ``i`` (a leaf hash mismatch: up to ``i + 1``), and every stored node the entries before
        ``i`` complete, has been checked, and before any later one."""
        state = _Walk()
        for piece in self._chunks():
            yield from self._chunk(state, piece)
        size = state.size
        if self.progress is not None:
            self.progress(size, self.total)
        if size == 0 or self.key is None:
            raise LedgerIntegrityError("the ledger has no entries (not even its genesis entry)", found=0)
        yield from self._events(size)
        while self._next_claim is not None:  # claims past the entries: each is refused (truncation at the latest)
            yield self._check_claim(self._take_claim(), size)
        self._finish(size)

    def _chunks(self) -> Iterator[_Piece]:
        """Each chunk of the stream, decoded and hashed, in order."""
        entries = iter(self._entries)
        first = 0
        pool = _DecoderPool.start(self.jobs, self.total, self._ranges) if self.on_entry is None else None
        if pool is not None and self._ranges is not None:
            with pool:
                for (start, count), pending in pool.ranged(self._ranges.size, self._notes_for, self._vouched):
                    piece = pending.ranged(start, count)
                    if piece is None:  # rows missing or unreadable there: the rest is read here, from the stream
                        pool.stop()
                        break
                    yield piece
                    first += count
                else:
                    return
            pool = None
            for _ in islice(entries, first):  # the stream's rows before ``first`` are the ranges read so far
                pass
        if pool is None:
            while (chunk := _take_chunk(entries))[0]:
                datas, stored = chunk
                yield _piece(first, datas, stored, *_decode_here(datas, first), None)
                first += len(datas)
            return
        with pool:
            for (datas, stored), pending in pool.pipeline(entries, self._notes_for, self._vouched):
                yield pending.result(datas, stored, first)
                first += len(datas)

    def _chunk(self, state: _Walk, piece: _Piece) -> Iterator[Checkpoint]:
        start, datas, entries = piece.start, piece.datas, piece.entries
        nodes = state.nodes = piece.nodes
        bad_entry = piece.count if piece.fault is None else piece.fault[0]
        bad_leaf = piece.bad_leaf
        whole = min(bad_entry, bad_leaf)  # entries whose step runs to the end
        on_entry = self.on_entry
        reported = pos = 0
        while pos < whole:
            index = start + pos
            if index != state.stop:
                pos = min(whole, state.stop - start)  # up to the next size where something happens
                continue
            if on_entry is not None and entries is not None:
                for k in range(reported, pos):
                    on_entry(start + k, datas[k], entries[k])
                reported = pos
            yield from self._stop(state, index, datas[pos] if index == 0 else b"",
                                  entries[pos] if entries is not None else None)
            state.stop = self._next_stop(index)
            pos += 1
        if on_entry is not None and entries is not None:
            for k in range(reported, whole):
                on_entry(start + k, datas[k], entries[k])
        state.size = start + whole
        self._extend_to(state.size, nodes)  # the chunk's leaves into the tree (the next chunk has its own nodes)
        if whole == piece.count:
            for kind, count in piece.counts.items():
                self.types[kind] = self.types.get(kind, 0) + count
            return
        if bad_entry <= bad_leaf:  # the entry's decoding comes first in its step
            assert piece.fault is not None
            raise piece.fault[1]
        index = start + bad_leaf
        if index == state.stop:  # a leaf's check comes after the checkpoints of its own size
            yield from self._stop(state, index, datas[bad_leaf] if index == 0 else b"",
                                  entries[bad_leaf] if entries is not None else None)
        raise LedgerIntegrityError(f"entry {index}: stored leaf hash does not match the entry bytes",
                                   index=index, expected=b64encode(nodes.node(0, index)),
                                   found=b64encode(piece.bad_stored or b""))

    def _stop(self, state: _Walk, index: int, data: bytes, entry: dict[str, Any] | None) -> Iterator[Checkpoint]:
        """What happens before the leaf at ``index`` when ``index`` is a stop: the leaves before it go into the
        tree, genesis is read at 0, and the checkpoints of size up to ``index`` are checked."""
        assert state.nodes is not None
        self._extend_to(index, state.nodes)
        if index == 0:
            self._genesis(data, entry if entry is not None else decode_entry(data, index=0))
        yield from self._events(index)

    def _extend_to(self, size: int, nodes: ChunkNodes) -> None:
        """Add the leaves up to ``size`` (in the chunk of ``nodes``) to the tree and check the nodes they
        complete against the stored ones."""
        kept = self.tree.extend_from(size - self.tree.size, nodes, self.min_node_level,
                                     self.pending.wanted if self.pending else None)
        if not kept:
            return
        assert self._nodes is not None
        stored = list(islice(self._nodes, len(kept)))
        if stored != kept:  # name the first node at fault, one by one
            self._nodes = chain(stored, self._nodes)
            for level, index, digest in kept:
                self._check_node(level, index, digest)

    def _genesis(self, data: bytes, entry: dict[str, Any]) -> None:
        self.ledger_id = ledger_id_of(data)
        self.origin = origin_of(self.ledger_id)
        self.key = genesis_key(entry)
        if self.expected_id is not None and not self.ledger_id.startswith(self.expected_id):
            raise LedgerIntegrityError("this is not the ledger asked for: its genesis entry hashes to another id",
                                       index=0, expected=self.expected_id, found=self.ledger_id)

    def _next_stop(self, size: int) -> int:
        stops = [((size // PROGRESS_EVERY) + 1) * PROGRESS_EVERY]
        if self._next_claim is not None and self._next_claim.size > size:
            stops.append(self._next_claim.size)
        return min(stops)

    def _events(self, size: int) -> Iterator[Checkpoint]:
        if size and size % PROGRESS_EVERY == 0 and self.progress is not None:
            self.progress(size, self.total)
        while self._next_claim is not None and self._next_claim.size <= size:
            yield self._check_claim(self._take_claim(), size)

    def _take_claim(self) -> CheckpointClaim:
        claim = self._next_claim
        assert claim is not None
        self._next_claim = self._ahead.popleft() if self._ahead else next(self._claims, None)
        return claim

    def _notes_for(self, end: int) -> tuple[bytes, list[CheckpointClaim]]:
        """The checkpoint claims whose signatures a decoding worker checks with the chunk that ends at ``end``,
        and their notes pickled with the log key (nothing until genesis has named the key): the claims not
        read yet, up to the first past ``end`` and at most :data:`_NOTES_PER_CHUNK` of them (reading ahead
        stops at a note over the size limit, which is left to the walk: a source's oversized notes are never
        held ahead in numbers). The signatures are checked while the walk does other work; the walk still
        checks everything else about each claim in its order, and verifies itself every note no worker
        vouched for, so an error is raised where it would be."""
        claims: list[CheckpointClaim] = []
        while self.key is not None and len(claims) < _NOTES_PER_CHUNK \
                and (claim := next(self._claims, None)) is not None:
            self._ahead.append(claim)
            if len(claim.note) > MAX_NOTE_BYTES:  # refused by the walk; and no more such claims held ahead
                break
            claims.append(claim)
            if claim.size > end:
                break
        if not claims:
            return b"", []
        assert self.key is not None
        notes = [claim.note for claim in claims]
        return pickle.dumps((self.key.name, self.key.public_key.b64, self.origin, notes)), claims

    def _vouched(self, claims: list[CheckpointClaim], verdicts: list[bool]) -> None:
        """A worker's verdicts: the notes that verified, of claims not checked yet, need no second check."""
        done = -1 if self.previous is None else self.previous.size
        self._signed.update(claim.note for claim, ok in zip(claims, verdicts, strict=True)
                            if ok and claim.size > done)

    def _check_node(self, level: int, index: int, digest: bytes) -> None:
        """The next stored node (``NODE_ORDER``) must be this one: a later one means this one is missing, an
        earlier one is a node the entries do not make."""
        assert self._nodes is not None
        stored = next(self._nodes, None)
        if stored is None or ((stored[1] + 1) << stored[0], stored[0]) > ((index + 1) << level, level):
            raise LedgerIntegrityError("tree nodes are missing from the database", level=level, index=index)
        if stored[0] != level or stored[1] != index:
            raise LedgerIntegrityError("the database holds a tree node the entries do not make", level=stored[0],
                                       index=stored[1], expected=f"level {level} index {index}")
        if stored[2] != digest:
            raise LedgerIntegrityError("a stored tree node does not match the entries", level=level, index=index)

    # checkpoints --------------------------------------------------------------------------------------------
    def _check_claim(self, claim: CheckpointClaim, size: int) -> Checkpoint:
        """Check one claim with the tree at ``size`` leaves (the claim's size, or fewer: the stream ended)."""
        key = self.key
        assert key is not None
        try:
            if claim.note in self._signed:  # a worker verified this very note with this key and origin
                self._signed.discard(claim.note)
                checkpoint = parse_checkpoint(claim.note)
            else:
                checkpoint = verify_checkpoint(claim.note, name=key.name, key=key.public_key, origin=self.origin)
        except HeldoutError as exc:
            raise _with_checkpoint(exc, claim.size) from None
        if checkpoint.size != claim.size or (claim.root is not None and checkpoint.root != claim.root):
            raise LedgerIntegrityError(f"checkpoint filed under size {claim.size} signs another tree head",
                                       checkpoint=claim.size, found=checkpoint.size)
        previous = self.previous
        if previous is not None and checkpoint.size <= previous.size:
            raise LedgerIntegrityError("checkpoint sizes must strictly increase", checkpoint=checkpoint.size,
                                       expected=f"> {previous.size}", found=checkpoint.size)
        if checkpoint.size > size:
            raise LedgerIntegrityError(
                f"ledger truncated: checkpoint signs {checkpoint.size} entries but only {size} are present",
                checkpoint=checkpoint.size, expected=checkpoint.size, found=size)
        replayed = self.tree.root()
        if replayed != checkpoint.root:
            raise LedgerIntegrityError(
                f"checkpoint {checkpoint.size}: signed root does not match the entries (tampered, reordered "
                "or replaced entries)", checkpoint=checkpoint.size, expected=checkpoint.root_b64,
                found=b64encode(replayed))
        if previous is not None:
            pending = self.pending
            try:
                if pending is None or pending.new_size != checkpoint.size:  # pragma: no cover (planned at the last)
                    raise ProofError("no consistency proof was planned for this size", found=checkpoint.size)
                verify_consistency(previous.size, checkpoint.size, previous.root, checkpoint.root,
                                   pending.proof(self.tree))
            except ProofError as exc:
                raise _with_checkpoint(exc, checkpoint.size) from None
        self.previous = checkpoint
        self.verified += 1
        self.pending = None
        upcoming = self._next_claim
        if upcoming is not None and upcoming.size > checkpoint.size:
            self.pending = _PendingProof(checkpoint, self.tree, upcoming.size)
        return checkpoint

    def _finish(self, size: int) -> None:
        previous = self.previous
        if previous is None:
            raise LedgerIntegrityError("the ledger has no signed checkpoint", size=size)
        if previous.size != size:
            raise LedgerIntegrityError(
                f"{size - previous.size} entries after the last signed checkpoint ({previous.size})",
                checkpoint=previous.size, expected=previous.size, found=size)
        if self._nodes is not None:
            extra = next(self._nodes, None)
            if extra is not None:
                raise LedgerIntegrityError("the database holds a tree node beyond the entries", level=extra[0],
                                           index=extra[1])
        assert self.key is not None
        self.report = ReplayReport(self.ledger_id, self.origin, size, self.tree.root(), self.key,
                                   self.verified, previous, dict(self.types))


def replay(entries: Iterable[tuple[bytes, bytes | None]], total: int, claims: Iterable[CheckpointClaim], *,
           expected_id: str | None = None, progress: ProgressFn | None = None,
           stored_nodes: Iterable[StoredNode] | None = None, min_node_level: int = 1,
           on_entry: EntryFn | None = None, jobs: int | None = None,
           ranges: EntryRanges | None = None) -> ReplayReport:
    """Replay ``entries`` (each ``(bytes, stored leaf hash or None)``, in index order; ``total`` of them is
    only for progress) and check ``claims`` (sorted by size), both streamed once (see :class:`Replay`).
    ``ranges``: the same entries, for decoding workers to read themselves (:class:`EntryRanges`); the stream
    is then read only where a range comes back incomplete."""
    walk = Replay(entries, total, claims, expected_id=expected_id, progress=progress, stored_nodes=stored_nodes,
                  min_node_level=min_node_level, on_entry=on_entry, jobs=jobs, ranges=ranges)
    for _ in walk.checkpoints():
        pass
    assert walk.report is not None
    return walk.report


def locate_damage(entries: Iterable[bytes], checkpoints: Iterable[Checkpoint], key: TrustedKey,
                  origin: str) -> tuple[set[int], tuple[int, int] | None]:
    """After a failed replay: walk the checkpoints (sorted by size) that verify under ``key`` against the streamed
    tree of ``entries``. Returns the sizes whose notes verify, and the first and last index of the entries that
    break the signed history: those after the last checkpoint that still holds, up to the first that does not
    (or the unsigned tail); ``None`` for the range when every verified checkpoint holds and nothing is
    unsigned. Notes that do not verify are skipped (they say nothing about the entries)."""
    ordered = iter(checkpoints)
    tree = CompactRange()
    verified: set[int] = set()
    good = 0
    damaged: tuple[int, int] | None = None
    upcoming = next(ordered, None)

    def judge(checkpoint: Checkpoint, size: int) -> None:
        nonlocal good, damaged
        try:
            verify_checkpoint(checkpoint.note, name=key.name, key=key.public_key, origin=origin)
        except HeldoutError:
            return
        verified.add(checkpoint.size)
        if damaged is not None or checkpoint.size <= good:
            return
        if checkpoint.size > size or tree.root() != checkpoint.root:
            damaged = (good, checkpoint.size - 1)
        else:
            good = checkpoint.size

    for data in entries:
        while upcoming is not None and upcoming.size <= tree.size:
            judge(upcoming, tree.size)
            upcoming = next(ordered, None)
        tree.push(leaf_hash(data))
    while upcoming is not None:
        judge(upcoming, tree.size)
        upcoming = next(ordered, None)
    if damaged is None and tree.size > good:
        damaged = (good, tree.size - 1)
    return verified, damaged
