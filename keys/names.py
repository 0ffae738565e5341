"""Plain names: what a key name, a key id or any other identifier typed by a person may be.

A name is NFC (so two spellings of one name are one name), printable (no control, format or separator
characters such as U+200B or U+0085), and free of whitespace and path separators (``/``, ``\\``) so that it
cannot become two names, a path or a line break anywhere it is written.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

SEPARATORS = frozenset("/\\")

#: The whitespace a signed-note key name may not hold (C2SP signed-note, as Go's ``note`` package reads it:
#: ``unicode.IsSpace``): tab, newline, vertical tab, form feed, carriage return, space, U+0085, U+00A0 and the
#: other White_Space characters. One class for every reader here (Python's ``\s`` also takes U+001C-U+001F,
#: JavaScript's takes U+FEFF and not U+0085: a name one of them refused, another accepted).
NOTE_NAME_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
#: A signed-note key name: no such whitespace and no ``+``.
NOTE_NAME = re.compile(f"[^{NOTE_NAME_SPACE}+]+")

#: A decimal number as every text of the project writes one: ASCII digits only (``str.isdigit`` also takes "²"
#: and other Unicode digits, which ``int`` then refuses or reads as another number; ``fullmatch``).
ASCII_DIGITS = re.compile(r"[0-9]+")

#: A SHA-256 digest as every format of the project writes it (blob names, entry members, manifests, records):
#: 64 lowercase hex digits, nothing else (``fullmatch``).
SHA256_HEX = re.compile(r"[0-9a-f]{64}")


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


#: Characters that would drive or deceive a terminal rather than show: control characters but tab and newline
#: (ESC starts a terminal command; CR returns to the start of the line), and format characters (the bidi
#: overrides that reverse text on screen, zero-width ones), line and paragraph separators.
_UNSHOWN = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2028\u2029"
                      r"\u2060-\u206f\ufeff\ufff9-\ufffb]")


def visible(text: str) -> str:
    """``text`` with every character of :data:`_UNSHOWN` written as its ``\\uXXXX`` escape: names and values
    shown by a command or a page come from ledgers and exports, which a stranger may have written, and must
    neither move a terminal's cursor (erase a "failed" line and print a "clean" one) nor reorder or hide what is
    shown (ids that differ only by a zero-width or bidi character would look alike)."""
    return _UNSHOWN.sub(lambda found: f"\\u{ord(found.group()):04x}", text)
