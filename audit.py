"""``python audit.py <ledger-id> [--store DIR | --from EXPORT_DIR] [--out FILE] [--json]``

Replays a heldout ledger end to end and re-derives every evaluation bundle from its stored predictions.
Exit codes: 0 clean, 1 something failed (each finding names its entry or file), 2 usage, 5 intact but
incomplete (bundles on still-sealed generations in a third-party replay).
"""

import sys

try:
    from heldout.cli.audit_cmd import main
except KeyboardInterrupt:  # Ctrl-C while it loads (a second or so): the interrupt's one line, not a traceback
    sys.stderr.write("audit.py: aborted\n")
    sys.exit(130)

if __name__ == "__main__":
    main()
