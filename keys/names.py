"""Plain names: what a key name, a key id or any other identifier typed by a person may be.

A name is NFC (so two spellings of one name are one name), printable (no control, format or separator
characters such as U+200B or U+0085), and free of whitespace and path separators (``/``, ``\\``) so that it
cannot become two names, a path or a line break anywhere it is written.
"""

from __future__ import annotations

import unicodedata
from typing import Any

SEPARATORS = frozenset("/\\")


def plain_name_problem(value: Any, *, max_chars: int = 128, refuse: str = "") -> str | None:
    """Why ``value`` is not a plain name (``None`` when it is); ``refuse`` adds characters refused too."""
    if not isinstance(value, str) or not value:
        return "empty"
    if len(value) > max_chars:
        return f"longer than {max_chars} characters"
    if unicodedata.normalize("NFC", value) != value:
        return "not in Unicode NFC form"
    for char in value:
        if not char.isprintable() or char.isspace():
            return f"holds the unprintable or blank character U+{ord(char):04X}"
        if char in SEPARATORS or char in refuse:
            return f"holds {char!r}"
    return None
