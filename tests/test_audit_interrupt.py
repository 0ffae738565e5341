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
