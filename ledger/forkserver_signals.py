"""Imported only by the forkserver process this project's worker pools fork from (``ledger.replay.
forkserver_context`` preloads it), never by a command: the terminal's interrupt is ignored there, so every worker
forked from it ignores it from its first instruction (multiprocessing's forkserver gives each child the signal
handlers the server had before it started serving). A worker that took Ctrl-C in the moment between its fork and
its own setup printed a KeyboardInterrupt traceback (red-team round 19); the command that started the pool
handles the interrupt and ends its workers."""

import signal

signal.signal(signal.SIGINT, signal.SIG_IGN)
