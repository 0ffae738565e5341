"""The few HTML pieces every page shares: escaping, the page shell with its Content-Security-Policy, embedded
JSON data blocks, and the one place numbers are turned into text.

Every number on the site goes through :func:`number` (its canonical JSON text, exactly as signed) or
:func:`fixed` (a fixed number of decimals for tables and pictures), so a value is formatted once, the same
way on every page and in every build.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable
from typing import Any

from keys.names import visible
from seals import jcs_bytes

# No external request of any kind; scripts and styles only from the site's own files (works from file://).
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'none'; "
       "font-src 'none'; object-src 'none'; media-src 'none'; frame-src 'none'; base-uri 'none'; "
       "form-action 'none'")
MISSING = "\u2014"


def esc(value: Any) -> str:
    """Text for a page: HTML-escaped, and every control, bidi or zero-width character shown as its ``\\uXXXX``
    escape (``keys.names.visible``): a model id that differs from another only by such a character must not
    look like it."""
    return html.escape(visible(str(value)), quote=True)


def raw_text(value: str) -> str:
    """Text that must stay byte for byte what was signed (an entry's or a passport's exact text, which the page's
    check hashes): HTML-escaped only, which the browser undoes."""
    return html.escape(value, quote=True)


def number(value: Any) -> str:
    """A JSON number as its canonical (RFC 8785) text: the exact value that was signed."""
    if value is None:
        return MISSING
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return esc(value)
    return jcs_bytes(value).decode("ascii")


def fixed(value: Any, places: int = 2) -> str:
    """A number to ``places`` decimals (for tables and picture labels); em dash for null."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return MISSING
    text = f"{value:.{places}f}"
    return "0." + "0" * places if text == "-0." + "0" * places else text


def value_text(value: Any) -> str:
    """Any JSON leaf for display: numbers canonical, null as an em dash, booleans as JSON writes them."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return number(value)
    if isinstance(value, (list, dict)):
        return esc(jcs_bytes(value).decode("utf-8"))
    return esc(value)


def data_block(element_id: str, value: Any) -> str:
    """A JSON data island (``type="application/json"``: never executed, so CSP allows it). Every ``<`` is
    written ``\\u003c`` (JSON-equivalent), so no text inside can close the element."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=True, separators=(",", ":")).replace("<", "\\u003c")
    return f'<script type="application/json" id="{esc(element_id)}">{text}</script>'


def table(headers: Iterable[str], rows: Iterable[Iterable[str]], *, cls: str = "") -> str:
    """A table from already-escaped cells."""
    head = "".join(f"<th>{h}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    klass = f' class="{cls}"' if cls else ""
    return f"<table{klass}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def definition_list(items: Iterable[tuple[str, str]]) -> str:
    return "<dl>" + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in items) + "</dl>"


def code(text: Any) -> str:
    return f"<code>{esc(text)}</code>"


def page(*, title: str, root: str, body: str, at_text: str, release_tag: str | None, scripts: bool = False) -> str:
    """A whole page. ``root`` is the relative path back to the site root ("" or "../")."""
    tag = f" · release {esc(release_tag)}" if release_tag else ""
    script = f'<script src="{root}static/verify.js"></script>' if scripts else ""
    nav = (f'<nav><a href="{root}index.html">Leaderboard</a> <a href="{root}ledger/index.html">Ledger</a> '
           f'<a href="{root}ledger/generations.html">Generations</a> <a href="{root}keys.html">Keys</a></nav>')
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="referrer" content="no-referrer">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title>"
        f'<link rel="stylesheet" href="{root}static/site.css"></head>'
        f'<body><header><span class="brand">heldout</span>{nav}'
        f'<span class="asof">as of {esc(at_text)}{tag}</span></header>'
        f"<main>{body}</main>"
        '<footer>Static, byte-reproducible render of a public ledger export. No external requests; every '
        "fact on this page is readable without JavaScript.</footer>"
        f"{script}</body></html>\n"
    )
