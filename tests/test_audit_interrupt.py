"""Ctrl-C during an audit with worker processes (red-team round 19): the terminal's interrupt reaches the whole
process group, and the re-derivation workers took it too: each printed a KeyboardInterrupt traceback, and the
pool, broken, could leave the audit waiting for good. The workers leave the interrupt to the parent, which
drops the batches not started and ends the pool: one clean exit, no traceback."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import REPO_ROOT

DRIVER = textwrap.dedent('''
    import os, signal, sys
    import numpy as np
    from heldout.audit.rederive import RederiveJob, bundle_rederiver

    def main() -> None:
        # a job each worker answers at once (the predictions are not a zip: a "failed" outcome)
        job = RederiveJob(index=1, evaluation=b'{"spec_version": "MedEval-1 v0.1"}', predictions=b"not a zip",
                          labels=np.zeros(10, dtype=np.int64))
        try:
            with bundle_rederiver(4, 100_000) as (submit, in_flight):
                first = submit(job)
                for _ in range(400):
                    submit(job)
                first.result()  # the workers are up
                os.killpg(0, signal.SIGINT)  # as a terminal does: to the whole process group
                while True:
                    submit(job).result()
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            sys.exit(130)

    if __name__ == "__main__":
        main()
''')


def test_an_interrupted_parallel_audit_exits_once_without_a_worker_traceback(tmp_path: Path) -> None:
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    for _ in range(3):  # (a worker idle or busy when the signal lands: each time alike)
        run = subprocess.run([sys.executable, str(driver)], capture_output=True, text=True, timeout=120,
                             start_new_session=True, env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"})
        assert (run.returncode, run.stdout) == (130, "interrupted\n"), run.stderr[-2000:]
        assert "Traceback" not in run.stderr and "KeyboardInterrupt" not in run.stderr, run.stderr[-2000:]



def test_the_worker_server_starts_with_the_interrupt_held() -> None:
    """The pool's forkserver is a process of the terminal's group: Ctrl-C in the moment it was starting killed
    it with a "Fatal Python error" KeyboardInterrupt traceback before its own main() ignored the interrupt, and
    the audit reported a worker that "ended without answering" (red-team round 20). It starts with the interrupt
    blocked (read from /proc the moment it is spawned, before its main() runs), and the command that starts it
    keeps its own mask."""
    code = textwrap.dedent('''
        import multiprocessing.forkserver as forkserver, signal
        from ledger.replay import forkserver_context
        forkserver_context([])
        status = open(f"/proc/{forkserver._forkserver._forkserver_pid}/status").read()
        blocked = int(next(l for l in status.splitlines() if l.startswith("SigBlk:")).split()[1], 16)
        print(bool(blocked & (1 << (signal.SIGINT - 1))), signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, []))
    ''')
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"})
    assert run.stdout.split() == ["True", "False"], run.stdout + run.stderr[-2000:]


def test_an_interrupt_while_the_audit_starts_its_workers_is_the_interrupt(tmp_path: Path) -> None:
    """``audit.py --jobs 2`` interrupted (the whole process group, as a terminal does) as soon as its worker
    server appears: exit 130 with one line, never a dead worker's exit 2 nor the server's traceback."""
    import os
    import signal
    import time

    from tests.audit_support import build_store

    fixture = build_store(tmp_path / "fx", bundles_per_generation=2)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1", "HELDOUT_REHEARSAL": "1",
           "HELDOUT_NOW": "2026-09-02T00:00:00Z"}

    def server_of(pid: int) -> bool:
        for entry in filter(str.isdigit, os.listdir("/proc")):
            try:
                parent = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
                if parent == pid and b"forkserver" in Path(f"/proc/{entry}/cmdline").read_bytes():
                    return True
            except (OSError, ValueError, IndexError):
                continue
        return False

    for attempt in range(3):
        audit = subprocess.Popen([sys.executable, str(REPO_ROOT / "audit.py"), fixture.ledger_id, "--store",
                                  str(fixture.store), "--jobs", "2", "--out", str(tmp_path / f"r{attempt}.json")],
                                 env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 start_new_session=True, cwd=tmp_path)
        deadline = time.monotonic() + 60
        while audit.poll() is None and time.monotonic() < deadline and not server_of(audit.pid):
            time.sleep(0.002)
        assert audit.poll() is None, "the audit ended before its worker server started"
        os.killpg(audit.pid, signal.SIGINT)
        _, stderr = audit.communicate(timeout=120)
        assert audit.returncode == 130, stderr[-2000:]
        assert "Traceback" not in stderr and "Fatal Python error" not in stderr, stderr[-2000:]
        assert len([line for line in stderr.splitlines() if line.strip()]) <= 1, stderr[-2000:]


TERMINATED = textwrap.dedent('''
    import os, signal, sys
    import numpy as np
    from heldout.audit.rederive import RederiveJob, bundle_rederiver

    def main() -> None:
        job = RederiveJob(index=1, evaluation=b'{"spec_version": "MedEval-1 v0.1"}', predictions=b"not a zip",
                          labels=np.zeros(10, dtype=np.int64))
        with bundle_rederiver(2, 100_000) as (submit, in_flight):
            submit(job).result()  # the workers are up
            os.kill(os.getpid(), signal.SIGTERM)  # as `kill PID` does: this process only
            while True:
                submit(job).result()

    if __name__ == "__main__":
        main()
''')


def test_a_terminated_parallel_audit_ends_its_workers(tmp_path: Path) -> None:
    """``kill PID`` of an audit with workers (red-team round 21): SIGTERM ended the main process on the spot, and
    its workers, its forkserver and the resource tracker lived on, holding the command's output open (a caller
    waiting for its end waited for good). The audit ends the pool and exits 143; nothing of it is left."""
    import os
    import time

    driver = tmp_path / "driver.py"
    driver.write_text(TERMINATED)
    run = subprocess.Popen([sys.executable, str(driver)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           start_new_session=True, env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"})
    _, stderr = run.communicate(timeout=120)  # (EOF: nothing holds the output open any more)
    assert run.returncode == 143, stderr[-2000:]

    def in_session() -> list[int]:
        found = []
        for entry in filter(str.isdigit, os.listdir("/proc")):
            try:
                if int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[3]) == run.pid:
                    found.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
        return found

    deadline = time.monotonic() + 10
    while in_session() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert in_session() == []
