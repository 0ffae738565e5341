"""heldout: generations, passports, the store and the CLI, on top of keys, seals, ledger and harness."""

__version__ = "0.1.0"
