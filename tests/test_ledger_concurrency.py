"""Several writer processes at once, and writers SIGKILLed at random moments.

* Concurrency: 4 processes x 250 appends (``HELDOUT_LEDGER_APPENDS_PER_WRITER``) give one history of 1000
  entries (plus genesis) with a checkpoint per append, every checkpoint consistent with the next.
* Crash: each round runs two writers appending random batches. The first is SIGKILLed by the test after a
  random number of its acknowledgements (0: during start-up). The second SIGKILLs itself from an SQLite
  progress handler after a random number of VM instructions, i.e. at a random point *inside* the ledger's
  statements and transaction (inserts, triggers, tree reads, the checkpoint insert), without the test
  sleeping; if still alive when the round ends it is killed too. On PostgreSQL it SIGKILLs itself before or
  after a random one of its client statements (the advisory lock, inserts, tree reads, the checkpoint
  insert, the commit's neighbours): the server must roll the open transaction back.
  ``HELDOUT_LEDGER_CRASH_KILLS`` kills in all
  (default 100, at least 50). A writer reports an entry as acknowledged only after ``append_batch`` returned,
  by one ``write()`` of a short line to a pipe (atomic below PIPE_BUF). After every round the ledger must
  open and verify; at the end it must hold every acknowledged entry at its acknowledged index.

Both tests run on SQLite and on PostgreSQL (``ledger_backend``).
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal

import pytest

from ledger import LedgerBackend
from tests.test_ledger_support import T0, bundle_entry, ledger_signer, new_ledger

APPENDS_PER_WRITER = int(os.environ.get("HELDOUT_LEDGER_APPENDS_PER_WRITER", "250"))
CRASH_KILLS = max(50, int(os.environ.get("HELDOUT_LEDGER_CRASH_KILLS", "100")))
WRITERS_PER_ROUND = 2
FORK = multiprocessing.get_context("fork")  # the children reuse the parent's imports: fast start


def _entry(writer: str, n: int) -> dict:
    entry = bundle_entry(n)
    entry["model_id"] = f"{writer}-{n}"
    return entry


def _steady_writer(backend: LedgerBackend, ledger_id: str, writer: str, count: int, ack_fd: int) -> None:
    signer = ledger_signer()
    with backend.open(ledger_id) as ledger:
        for n in range(count):
            index = ledger.append(_entry(writer, n), signer=signer, now=T0)
            os.write(ack_fd, f"{index} {writer}-{n}\n".encode())
    os.close(ack_fd)


def _kill_inside_postgres_statements(rng: random.Random) -> None:
    """SIGKILL this process before or after its n-th client statement (n random), wherever it falls."""
    import psycopg

    remaining = [rng.randint(1, 60)]
    for name in ("execute", "executemany"):
        original = getattr(psycopg.Cursor, name)

        def counted(self: object, *args: object, _original: object = original, **kwargs: object) -> object:
            remaining[0] -= 1
            after = rng.random() < 0.5
            if remaining[0] <= 0 and not after:
                os.kill(os.getpid(), signal.SIGKILL)
            result = _original(self, *args, **kwargs)  # type: ignore[operator]
            if remaining[0] <= 0:
                os.kill(os.getpid(), signal.SIGKILL)
            return result

        setattr(psycopg.Cursor, name, counted)


def _crash_writer(backend: LedgerBackend, ledger_id: str, writer: str, seed: int, ack_fd: int,
                  self_kill: bool) -> None:
    rng = random.Random(seed)
    signer = ledger_signer()
    with backend.open(ledger_id) as ledger:
        if self_kill and backend.database is not None:
            _kill_inside_postgres_statements(rng)
        elif self_kill:
            remaining = [rng.randint(1, 400)]

            def tick() -> int:
                remaining[0] -= 1
                if remaining[0] <= 0:
                    os.kill(os.getpid(), signal.SIGKILL)
                return 0

            ledger.db.conn.set_progress_handler(tick, 7)  # every 7 SQLite VM instructions
        n = 0
        while True:
            batch = [_entry(writer, n + k) for k in range(rng.randint(1, 4))]
            indices = ledger.append_batch(batch, signer=signer, now=T0)
            line = " ".join(f"{i}:{e['model_id']}" for i, e in zip(indices, batch, strict=True))
            os.write(ack_fd, (line + "\n").encode())
            n += len(batch)


def _read_lines(fd: int) -> list[str]:
    data = b""
    while chunk := os.read(fd, 65536):
        data += chunk
    return data.decode().splitlines()


@pytest.mark.slow
def test_four_writers_make_one_history(ledger_backend: LedgerBackend) -> None:
    with new_ledger(ledger_backend) as created:  # closed before forking: no connection crosses a fork
        ledger_id = created.ledger_id
    pipes, processes = [], []
    for w in range(4):
        read_fd, write_fd = os.pipe()
        process = FORK.Process(target=_steady_writer,
                               args=(ledger_backend, ledger_id, f"w{w}", APPENDS_PER_WRITER, write_fd))
        process.start()
        os.close(write_fd)
        pipes.append(read_fd)
        processes.append(process)
    acks: dict[str, list[tuple[int, str]]] = {}
    for w, read_fd in enumerate(pipes):
        acks[f"w{w}"] = [(int(i), name) for i, name in (line.split() for line in _read_lines(read_fd))]
        os.close(read_fd)
    for process in processes:
        process.join()
        assert process.exitcode == 0
    total = 4 * APPENDS_PER_WRITER
    with ledger_backend.open(ledger_id) as ledger:
        report = ledger.verify()  # signatures, tree, and consistency of each checkpoint with the one before
        assert report.size == ledger.size == total + 1
        assert report.checkpoints == total + 1  # one per append, none skipped, none doubled
        for acked in acks.values():
            assert len(acked) == APPENDS_PER_WRITER
            assert [i for i, _ in acked] == sorted(i for i, _ in acked)  # each writer's order is kept
            for index, name in acked:
                assert ledger.entry(index)["model_id"] == name
        names = [e["model_id"] for _, e in ledger.entries(1)]
        assert len(set(names)) == total
        final = ledger.root()
        for checkpoint in ledger.checkpoints()[:: max(1, total // 50)]:
            ledger.consistency_proof(checkpoint.size).verify(checkpoint.root, final)


@pytest.mark.slow
def test_sigkilled_writers_lose_no_acknowledged_entry(ledger_backend: LedgerBackend) -> None:
    rng = random.Random(20260301)
    with new_ledger(ledger_backend) as created:
        ledger_id = created.ledger_id
    acknowledged: dict[int, str] = {}
    kills = round_number = 0
    while kills < CRASH_KILLS:
        round_number += 1
        pipes, processes = [], []
        for w in range(WRITERS_PER_ROUND):
            read_fd, write_fd = os.pipe()
            process = FORK.Process(target=_crash_writer,
                                   args=(ledger_backend, ledger_id, f"r{round_number}w{w}", rng.randrange(2**32),
                                         write_fd, w == 1))
            process.start()
            os.close(write_fd)
            pipes.append(read_fd)
            processes.append(process)
        wanted = rng.choice([0, 0, 1, 1, 2, 3, 5, 8])
        seen = 0
        with os.fdopen(os.dup(pipes[0]), "rb", buffering=0) as first:
            while seen < wanted:  # read acknowledgements of the first writer, one line at a time
                raw = b""
                while not raw.endswith(b"\n"):
                    byte = first.read(1)
                    if not byte:
                        break
                    raw += byte
                if not raw.endswith(b"\n"):
                    break
                for item in raw.decode().split():
                    position, name = item.split(":")
                    acknowledged[int(position)] = name
                seen += 1
        for process in processes:
            if process.exitcode is None and process.pid is not None:
                os.kill(process.pid, signal.SIGKILL)
        for process in processes:
            process.join()
            assert process.exitcode == -signal.SIGKILL
            kills += 1
        for read_fd in pipes:
            for line in _read_lines(read_fd):
                for item in line.split():
                    position, name = item.split(":")
                    acknowledged[int(position)] = name
            os.close(read_fd)
        with ledger_backend.open(ledger_id) as ledger:  # opens and verifies after every round of kills
            ledger.verify()
    with ledger_backend.open(ledger_id) as ledger:
        report = ledger.verify()
        assert acknowledged, "no writer ever acknowledged an entry"
        for index, name in acknowledged.items():
            assert ledger.entry(index)["model_id"] == name
        assert report.size == ledger.size >= len(acknowledged) + 1
    assert kills >= 50
