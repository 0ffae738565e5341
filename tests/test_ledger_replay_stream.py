"""The streamed replay (ledger.replay): the consistency proofs it assembles from its compact range are the RFC's,
it holds no state that grows with the log, it reads entries, nodes and checkpoints as streams, and it refuses a
database whose stored tree nodes are missing, extra or out of place; the compact range agrees with the
reference tree at every size."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass, replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger.replay as replay_module
from keys import Signer
from ledger import Ledger, LedgerIntegrityError
from ledger.checkpoint import sign_checkpoint, verify_checkpoint
from ledger.entries import encode_entry, ledger_id_of, make_genesis, origin_of
from ledger.replay import CheckpointClaim, locate_damage, replay
from ledger.rfc6962 import leaf_hash, reference_consistency_proof, reference_root
from ledger.tree import CompactRange
from tests.test_ledger_attacks import tamper_database
from tests.test_ledger_support import (
    T0,
    bundle_entry,
    ledger_signer,
    new_ledger,
    refusal_alike_with_and_without_workers,
)


def signed_log(signer: Signer, count: int) -> list[bytes]:
    """Entry bytes of a log of ``count`` entries (genesis first), without a database."""
    genesis = make_genesis(name="stream", signer=signer, now=T0, nonce=bytes(32))
    return [encode_entry(genesis, index=0)[1]] + [encode_entry(bundle_entry(i))[1] for i in range(1, count)]


def claims_for(entries: list[bytes], sizes: list[int], signer: Signer) -> list[CheckpointClaim]:
    origin = origin_of(ledger_id_of(entries[0]))
    leaves = [leaf_hash(data) for data in entries]
    return [CheckpointClaim(size, sign_checkpoint(origin, size, reference_root(leaves[:size]), signer,
                                                  created_utc="2026-03-01T12:00:00Z").note) for size in sizes]


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_streamed_consistency_proofs_are_the_rfc_proofs(data: st.DataObject) -> None:
    signer = ledger_signer()
    count = data.draw(st.integers(min_value=1, max_value=70))
    sizes = sorted(data.draw(st.sets(st.integers(min_value=1, max_value=count - 1), max_size=8)) | {count}) \
        if count > 1 else [1]
    entries = signed_log(signer, count)
    seen: list[tuple[int, int, list[bytes]]] = []
    real = replay_module.verify_consistency

    def spy(old: int, new: int, old_root: bytes, new_root: bytes, proof: list[bytes]) -> None:
        seen.append((old, new, list(proof)))
        real(old, new, old_root, new_root, proof)

    replay_module.verify_consistency = spy  # type: ignore[assignment]
    try:
        report = replay(((e, None) for e in entries), count, iter(claims_for(entries, sizes, signer)))
    finally:
        replay_module.verify_consistency = real
    leaves = [leaf_hash(e) for e in entries]
    assert report.size == count and report.checkpoints == len(sizes)
    assert report.root == reference_root(leaves)
    assert [(old, new) for old, new, _ in seen] == list(pairwise(sizes))
    for old, new, proof in seen:
        assert proof == reference_consistency_proof(old, leaves[:new])


@given(st.integers(min_value=0, max_value=300))
def test_compact_range_root_and_frontier_at_every_size(size: int) -> None:
    leaves = [leaf_hash(i.to_bytes(4, "big")) for i in range(size)]
    tree = CompactRange()
    for leaf in leaves[: size // 2]:
        tree.push(leaf)
    tree.extend(leaves[size // 2:], keep_level=1)
    assert tree.size == size and tree.root() == reference_root(leaves)
    assert CompactRange.of(tree.frontier()).root() == tree.root()
    assert len(tree.hashes) == size.bit_count()


def test_a_forged_intermediate_checkpoint_is_refused_in_the_stream() -> None:
    signer, other = ledger_signer(), Signer.from_seed(bytes([9]) * 32, name="ledger-operator", key_id="ledger-op")
    entries = signed_log(signer, 12)
    claims = claims_for(entries, [1, 5, 12], signer)
    claims[1] = claims_for(entries, [5], other)[0]  # same name and key id, another key
    with pytest.raises(LedgerIntegrityError, match="checkpoint 5") as caught:
        replay(((e, None) for e in entries), 12, claims)
    assert caught.value.evidence["checkpoint"] == 5


def test_replay_reads_its_inputs_as_streams() -> None:
    """Entries and claims are consumed once, lazily: the replay never asks for a length or a second pass."""
    signer = ledger_signer()
    entries = signed_log(signer, 40)
    pulled: list[int] = []

    def stream() -> Iterator[tuple[bytes, None]]:
        for index, data in enumerate(entries):
            pulled.append(index)
            yield data, None

    report = replay(stream(), 40, iter(claims_for(entries, [1, 17, 40], signer)))
    assert report.size == 40 and pulled == list(range(40))


def test_locate_damage_names_the_entries_between_the_last_good_and_first_bad_checkpoint() -> None:
    signer = ledger_signer()
    entries = signed_log(signer, 30)
    claims = claims_for(entries, [1, 10, 20, 30], signer)
    checkpoints = [replay_module.verify_checkpoint(c.note, name=signer.name, key=signer.public_key,
                                                   origin=origin_of(ledger_id_of(entries[0]))) for c in claims]
    entries[14] = encode_entry(bundle_entry(999))[1]
    key = replay_module.genesis_key(replay_module.decode_entry(entries[0], index=0))
    verified, damaged = locate_damage(iter(entries), iter(checkpoints), key, origin_of(ledger_id_of(entries[0])))
    assert verified == {1, 10, 20, 30} and damaged == (10, 19)


def _peak_during_verify(path: Path) -> int:
    with Ledger.open(path, read_only=True) as opened:
        tracemalloc.start()
        try:
            opened.verify()
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()


def _bulk(folder: Path, size: int) -> Path:
    signer = ledger_signer()
    with new_ledger(folder) as ledger:
        while ledger.size < size:
            count = min(997, size - ledger.size)
            ledger._append_encoded([encode_entry(bundle_entry(ledger.size + k))
                                    for k in range(count)], signer=signer, now=T0)
        assert ledger.path is not None
        return ledger.path


def test_verify_memory_does_not_grow_with_the_log(tmp_path: Path) -> None:
    """Python memory the verify allocates (tracemalloc's peak) is the same for 10,000 and 30,000 entries: no
    per-entry map or list of leaf hashes (the replay before streaming held 64 bytes a leaf, 1.3 MB more here).
    Both logs are longer than two chunks (``replay.CHUNK``), the batch the replay holds at once."""
    assert 2 * replay_module.CHUNK < 10_000
    small = _peak_during_verify(_bulk(tmp_path / "small", 10_000))
    large = _peak_during_verify(_bulk(tmp_path / "large", 30_000))
    assert large < small + 256 * 1024, (small, large)


@pytest.mark.parametrize(("statement", "match"), [
    ("INSERT INTO nodes (level, idx, hash) VALUES (2, 0, zeroblob(32))", "tree node the entries do not make"),
    ("INSERT INTO nodes (level, idx, hash) VALUES (5, 1, zeroblob(32))", "beyond the entries"),
    ("DELETE FROM nodes WHERE level = 4 AND idx = 1", "tree nodes are missing"),
])
def test_attack_stored_tree_nodes_out_of_place_extra_or_deleted(tmp_path: Path, statement: str, match: str) -> None:
    """A node below the stored levels, one past the entries, one deleted: each is named by the streamed check."""
    with new_ledger(tmp_path, entries=40, batch=7) as ledger:
        tamper_database(ledger, "DROP TRIGGER IF EXISTS nodes_write_once", statement)
        with pytest.raises(LedgerIntegrityError, match=match):
            ledger.verify()


def test_many_checkpoints_and_cosignature_free_ledger_verifies(tmp_path: Path) -> None:
    """One checkpoint per append (the most a log can have): every one checked in the stream."""
    signer = ledger_signer()
    with new_ledger(tmp_path) as ledger:
        for i in range(1, 60):
            ledger.append(bundle_entry(i), signer=signer, now=T0)
        report = ledger.verify()
    assert report.size == 60 and report.checkpoints == 60


# --- chunked and parallel walks fail where the entry-by-entry walk fails ----------------------------------------

@dataclass(frozen=True)
class ListRanges:
    """A list's entries read by range, as decoding workers read a SQLite file (``replay.EntryRanges``).
    ``missing``: an index whose row the workers do not find (a gap in a file's indices); ``broken``: the
    workers cannot open the source."""

    entries: tuple[bytes, ...]
    stored: tuple[bytes | None, ...]
    missing: int | None = None
    broken: bool = False

    @property
    def size(self) -> int:
        return len(self.entries)

    def open(self) -> ListRanges:
        if self.broken:
            raise OSError("the source cannot be opened here")
        return self

    def rows(self, start: int, stop: int) -> list[tuple[bytes, bytes | None]]:
        return [(self.entries[i], self.stored[i]) for i in range(start, min(stop, self.size)) if i != self.missing]

    def close(self) -> None:
        pass


def _outcome(entries: list[bytes], stored: list[bytes | None], claims: list[CheckpointClaim], chunk: int,
             jobs: int, monkeypatch: pytest.MonkeyPatch, ranges: ListRanges | None = None) -> object:
    """The replay's report, or its error's message and evidence, with chunks of ``chunk`` entries decoded in
    ``jobs`` processes (1: here); ``ranges``: the workers read the entries themselves."""
    monkeypatch.setattr(replay_module, "CHUNK", chunk)
    try:
        report = replay(zip(entries, stored, strict=True), len(entries), iter(claims), jobs=jobs, ranges=ranges)
    except LedgerIntegrityError as exc:
        return exc.message, exc.evidence
    return report.to_json()


def _faulty_log(signer: Signer, faults: list[tuple[str, int]]) -> tuple[list[bytes], list[bytes | None],
                                                                        list[CheckpointClaim]]:
    """A 60-entry log with stored leaf hashes and a checkpoint every 5 entries, then the ``faults``: an entry
    that is not canonical, one of no known type, a stored leaf hash that is not the entry's, a checkpoint
    whose signature is not the log key's, a checkpoint note over the size limit."""
    entries = signed_log(signer, 60)
    stored: list[bytes | None] = [leaf_hash(data) for data in entries]
    claims = claims_for(entries, list(range(5, 61, 5)), signer)
    for kind, where in faults:
        if kind == "not canonical":
            entries[where] = entries[where].replace(b'{"', b'{ "', 1)
        elif kind == "unknown type":
            entries[where] = entries[where].replace(b'"type":"bundle"', b'"type":"bungle"')
        elif kind == "stored leaf":
            stored[where] = leaf_hash(b"another entry")
        elif kind == "oversized":  # a note over the size limit, read ahead by the parallel walk
            claims[where] = CheckpointClaim(claims[where].size, claims[where].note + "x" * 20_000)
        elif kind == "checkpoint":
            size = claims[where].size
            claims[where] = claims_for(entries, [size], Signer.from_seed(bytes([9]) * 32, name=signer.name,
                                                                        key_id="other"))[0]
    return entries, stored, claims


@pytest.mark.parametrize("faults", [
    [], [("not canonical", 13)], [("unknown type", 37)], [("stored leaf", 22)], [("checkpoint", 4)],
    [("checkpoint", 2), ("not canonical", 13)],  # entry 13 is read before the checkpoint of size 15
    [("checkpoint", 1), ("not canonical", 13)],  # size 10 is checked before entry 13 is read
    [("not canonical", 10), ("checkpoint", 1)],  # entry 10 is read before the checkpoint of size 10
    [("stored leaf", 10), ("checkpoint", 1)],    # the checkpoint of size 10 comes before leaf 10's check
    [("stored leaf", 9), ("checkpoint", 1)],     # leaf 9 is checked before the checkpoint of size 10
    [("stored leaf", 30), ("not canonical", 30)], [("stored leaf", 29), ("unknown type", 30)],
    # late checkpoints: with chunks of 7, their signatures are checked in the workers
    [("checkpoint", 8)], [("checkpoint", 11)], [("checkpoint", 9), ("not canonical", 48)],
    [("not canonical", 47), ("checkpoint", 9)], [("checkpoint", 7), ("checkpoint", 10)],
    [("oversized", 9)], [("oversized", 8), ("checkpoint", 10)], [("checkpoint", 8), ("oversized", 9)],
], ids=str)
def test_chunked_and_parallel_walks_fail_where_the_entry_by_entry_walk_does(
        faults: list[tuple[str, int]], monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of one entry are the entry-by-entry walk; chunks of 7 and 4096, decoded here and in two or three
    worker processes, sent to them or read by them (with a row they do not find, or a source they cannot
    open: the walk then reads on itself), give the same report or the same error (message and evidence),
    whichever fault comes first."""
    entries, stored, claims = _faulty_log(ledger_signer(), faults)
    expected = _outcome(entries, stored, claims, 1, 1, monkeypatch)
    assert (expected == _outcome(entries, stored, claims, 1, 1, monkeypatch)) and bool(faults) != isinstance(
        expected, dict)
    for chunk in (7, 4096):
        for jobs in (1, 2, 3):
            assert _outcome(entries, stored, claims, chunk, jobs, monkeypatch) == expected, (chunk, jobs)
    ranges = ListRanges(tuple(entries), tuple(stored))
    for chunk, jobs, source in ((7, 2, ranges), (7, 3, ranges), (4096, 2, ranges), (1, 2, ranges),
                                (7, 2, replace(ranges, missing=31)), (7, 2, replace(ranges, missing=0)),
                                (7, 3, replace(ranges, broken=True))):
        assert _outcome(entries, stored, claims, chunk, jobs, monkeypatch, source) == expected, (chunk, jobs, source)
    monkeypatch.setattr(replay_module, "CHUNK_BYTES", 1_000)  # chunks cut by their bytes (a few entries each)
    for jobs in (1, 2, 3):
        assert _outcome(entries, stored, claims, 4096, jobs, monkeypatch) == expected, ("bytes", jobs)


def test_decoding_workers_check_checkpoint_signatures_ahead_of_the_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once genesis has named the log key, the claims are sent with the chunks and their signatures checked in
    the workers: the walk verifies only the ones no worker vouched for (here those of the first chunks, sent
    before genesis was read), and a note a worker refused is verified again by the walk, which raises."""
    entries, stored, claims = _faulty_log(ledger_signer(), [])
    verified: list[str] = []

    def counting(note: str, **kwargs: object) -> object:
        verified.append(note)
        return verify_checkpoint(note, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(replay_module, "verify_checkpoint", counting)
    report = _outcome(entries, stored, claims, 7, 2, monkeypatch)
    assert isinstance(report, dict) and report["checkpoints"] == len(claims)
    assert 0 < len(verified) < len(claims)  # the walk's own checks: the early claims only
    assert {claim.note for claim in claims[-4:]}.isdisjoint(verified)
    entries, stored, claims = _faulty_log(ledger_signer(), [("checkpoint", 10)])
    verified.clear()
    _, evidence = _outcome(entries, stored, claims, 7, 2, monkeypatch)  # type: ignore[misc]
    assert evidence["checkpoint"] == claims[10].size and claims[10].note in verified


def test_parallel_verify_of_a_database_matches_the_walk_here(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """``Ledger.verify`` with decoding workers (forced on a small log) reports what it reports without them,
    and still refuses a tampered entry by its index."""
    path = _bulk(tmp_path / "db", 3_000)
    monkeypatch.setattr(replay_module, "PARALLEL_MIN_ENTRIES", 1)
    monkeypatch.setattr(replay_module, "available_cpus", lambda: 2)
    ranged: list[int] = []
    real = replay_module._DecoderPool.ranged

    def counting(self: replay_module._DecoderPool, size: int, *args: Any) -> Any:
        ranged.append(size)
        return real(self, size, *args)

    monkeypatch.setattr(replay_module._DecoderPool, "ranged", counting)
    with Ledger.open(path, read_only=True) as opened:
        parallel = opened.verify().to_json()
    assert ranged == [3_000]  # the workers read the file themselves
    monkeypatch.setattr(replay_module, "available_cpus", lambda: 1)
    with Ledger.open(path, read_only=True) as opened:
        assert opened.verify().to_json() == parallel
    assert parallel["size"] == 3_000 and parallel["entry_types"]["bundle"] == 2_999


def test_decoding_workers_read_the_ranges_themselves(monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``ranges``, the walk takes no entry from its stream while every range comes back whole; when one
    does not (a row missing), it reads on from the stream, and the replay is the same."""
    entries, stored, claims = _faulty_log(ledger_signer(), [])
    taken: list[int] = []

    def stream() -> Iterator[tuple[bytes, bytes | None]]:
        for index, row in enumerate(zip(entries, stored, strict=True)):
            taken.append(index)
            yield row

    monkeypatch.setattr(replay_module, "CHUNK", 7)
    ranges = ListRanges(tuple(entries), tuple(stored))
    whole = replay(stream(), len(entries), iter(claims), jobs=2, ranges=ranges).to_json()
    assert taken == [] and whole == replay(zip(entries, stored, strict=True), 60, iter(claims)).to_json()
    assert replay(stream(), len(entries), iter(claims), jobs=2, ranges=replace(ranges, missing=31)).to_json() == whole
    assert taken == list(range(60))


@pytest.mark.parametrize("statement", [
    "DELETE FROM entries WHERE idx = 23",  # a gap: the entries after it are read one place early
    "DELETE FROM entries WHERE idx = 39",  # the last entry: missing under the signed size
    "INSERT INTO entries (idx, type, data, leaf_hash, created_utc) SELECT -1, type, data, leaf_hash, created_utc "
    "FROM entries WHERE idx = 5",  # an index below 0: the stream meets it first
    "UPDATE entries SET data = CAST('not json' AS BLOB) WHERE idx = 17",
    "UPDATE entries SET leaf_hash = zeroblob(32) WHERE idx = 30",
])
def test_attack_rows_missing_or_out_of_place_fail_alike_whoever_reads_them(
        tmp_path: Path, statement: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A database whose entry rows were deleted, added below index 0 or changed: ``Ledger.verify`` with
    decoding workers that read the file themselves fails with the same error as the walk alone."""
    with new_ledger(tmp_path, entries=40, batch=7) as ledger:
        tamper_database(ledger, statement)
        path = ledger.path
    assert path is not None
    refusal_alike_with_and_without_workers(path, 8, monkeypatch)


def _big_entries_log(folder: Path, count: int) -> Path:
    signer = ledger_signer()
    with new_ledger(folder) as ledger:
        for start in range(1, count, 60):
            batch = [dict(bundle_entry(start + k), pad="p" * 40_000) for k in range(min(60, count - start))]
            ledger.append_batch(batch, signer=signer, now=T0)
        assert ledger.path is not None
        return ledger.path


def test_replay_memory_is_bounded_by_chunk_bytes_not_entry_count(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Large entries: the replay holds a few ``CHUNK_BYTES`` of them at once (the chunk, its joined text and
    decoded values), not ``CHUNK`` entries (4,096 of 64 KiB would be 256 MiB): with 1 MiB chunks, logs of 9.6
    and 19.2 MB of entries replay in the same, small, peak."""
    monkeypatch.setattr(replay_module, "CHUNK_BYTES", 1 << 20)
    small = _peak_during_verify(_big_entries_log(tmp_path / "small", 241))
    large = _peak_during_verify(_big_entries_log(tmp_path / "large", 481))
    assert large < small + (1 << 20) and large < 12 << 20, (small, large)


WORKER_SCRIPT = '''
import json, multiprocessing, sys, threading

import heldout  # noqa: F401  (registers the domain entry types, which the workers receive)
import ledger.replay as replay_module
from ledger import Ledger

if __name__ == "__main__":
    methods = []
    real = multiprocessing.get_context
    multiprocessing.get_context = lambda method=None: (methods.append(method), real(method))[1]
    if sys.argv[2] == "threads":  # a running thread (as a progress bar's): the workers come from a forkserver
        threading.Thread(target=threading.Event().wait, daemon=True).start()
    replay_module.PARALLEL_MIN_ENTRIES, replay_module.available_cpus = 1, lambda: 2
    with Ledger.open(sys.argv[1], read_only=True) as ledger:
        print(json.dumps({"report": ledger.verify().to_json(), "methods": methods}))
'''


@pytest.mark.parametrize("threads", ["threads", "alone"])
def test_decoding_workers_start_from_a_script_with_or_without_threads(tmp_path: Path, threads: str) -> None:
    """A script (with its main guard) verifies a ledger with two decoding workers: forked when it runs alone,
    from a forkserver when it runs other threads; the workers validate heldout's entry types as the parent
    does, and the report is the one the walk in this process gives."""
    import json
    import os
    import subprocess
    import sys

    path = _bulk(tmp_path / "db", 1_500)
    script = tmp_path / "verify_with_workers.py"
    script.write_text(WORKER_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    done = subprocess.run([sys.executable, str(script), str(path), threads], capture_output=True, text=True,
                          timeout=120, env=env, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    body = json.loads(done.stdout)
    assert body["methods"] == (["forkserver"] if threads == "threads" else ["fork"])
    with Ledger.open(path, read_only=True) as opened:
        assert body["report"] == opened.verify().to_json()


def test_a_decoding_worker_ends_quietly_when_its_parent_is_gone() -> None:
    """kill -9 of a verify leaves its workers reading a closed pipe: each ends at once, without a traceback,
    instead of waiting for work that will not come (an empty message or a closed end is the end)."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    theirs_in, chunks = context.Pipe(duplex=False)
    answers, theirs_out = context.Pipe(duplex=False)
    worker = context.Process(target=replay_module._decode_in_worker, daemon=True,
                             args=(theirs_in, theirs_out, {}, {}, (chunks, answers)))
    worker.start()
    for end in (theirs_in, theirs_out, chunks, answers):  # as the parent's death closes its ends
        end.close()
    worker.join(timeout=30)
    assert worker.exitcode == 0


KILLED_SCRIPT = '''
import sys, threading

import heldout  # noqa: F401
import ledger.replay as replay_module
from ledger import Ledger

if __name__ == "__main__":
    replay_module.PARALLEL_MIN_ENTRIES, replay_module.available_cpus = 1, lambda: 2
    start = replay_module._DecoderPool.start

    def announce(jobs, total, ranges=None):
        pool = start(jobs, total, ranges)
        print(" ".join(str(process.pid) for process, _ in pool.workers), flush=True)
        return pool

    replay_module._DecoderPool.start = staticmethod(announce)
    replay_module._PendingChunk._answer = lambda self: threading.Event().wait()  # killed here
    with Ledger.open(sys.argv[1], read_only=True) as ledger:
        ledger.verify()
'''


def _ends_within(pid: int, seconds: float) -> bool:
    """Whether process ``pid`` (not a child of this one) ends within ``seconds``: a pidfd becomes readable
    when it terminates (a zombie has ended; its reaping is its new parent's business)."""
    import os
    import select

    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([handle], [], [], seconds)[0])
    finally:
        os.close(handle)


def test_attack_kill_9_of_a_verify_leaves_no_decoding_worker_behind(tmp_path: Path) -> None:
    """SIGKILL of a verify that has two decoding workers (forked: each holds copies of pipe ends) ends both
    workers within seconds, rather than leaving them waiting on a pipe nobody will write."""
    import os
    import signal as signals
    import subprocess
    import sys

    path = _bulk(tmp_path / "db", 1_500)
    script = tmp_path / "killed_verify.py"
    script.write_text(KILLED_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    proc = subprocess.Popen([sys.executable, str(script), str(path)], stdout=subprocess.PIPE, env=env, text=True)
    try:
        assert proc.stdout is not None
        pids = [int(pid) for pid in proc.stdout.readline().split()]
        assert len(pids) == 2 and not any(_ends_within(pid, 0) for pid in pids)
    finally:
        proc.send_signal(signals.SIGKILL)
        proc.wait(timeout=30)
    assert all(_ends_within(pid, 20) for pid in pids), pids
