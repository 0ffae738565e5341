"""heldout: generations, passports, the store and the CLI, on top of keys, seals, ledger and harness."""

__version__ = "0.1.0"

# Registers heldout's entry types (seal, bundle, ...) with the generic log before anything reads or writes one.
from heldout import entries as _entries  # noqa: F401
