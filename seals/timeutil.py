"""UTC times: one textual form (``YYYY-MM-DDTHH:MM:SSZ``), parsing that names what it refused, and an
injectable clock so nothing depends on today's date."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from keys.errors import MalformedInput, UsageError

Clock = Callable[[], datetime]

EARLIEST, LATEST = "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z"  # the range a datetime holds, in UTC

#: How far two honest clocks of the system may disagree: the log's host, the host that dated an entry, a
#: witness's. The ledger refuses an entry dated further ahead of its append; verifiers judge a date against
#: another clock's time to within it (a seal against its draw's cosignatures, an entry against the times the
#: witnesses attest around it).
CLOCK_TOLERANCE = timedelta(days=1)


def shifted(moment: datetime, delta: timedelta) -> datetime:
    """``moment + delta``, held at the last (or first) time a datetime holds instead of overflowing. Times read
    from input may lie at either end of the range (a reference time of 9999-12-31T12:00:00Z, an entry dated
    0001-01-01T00:00:00Z), and a tolerance added to one must still compare and print, not raise: nothing is
    later than the end, nothing earlier than the start."""
    try:
        return moment + delta
    except OverflowError:
        end = datetime.max if delta > timedelta(0) else datetime.min
        return end.replace(tzinfo=moment.tzinfo)


def system_clock() -> datetime:
    return datetime.now(UTC)


def parse_utc(text: str, *, what: str = "time", usage: bool = False) -> datetime:
    """Parse an ISO 8601 time. A naive time or a date alone is taken as UTC. ``usage=True`` raises a
    usage error (exit 2) for command-line arguments; otherwise a malformed-input error (exit 1)."""
    error = UsageError if usage else MalformedInput
    if not isinstance(text, str):
        raise error(f"{what} is not a string", found=type(text).__name__)
    raw = text.strip()
    try:
        parsed = datetime.fromisoformat(raw[:-1] + "+00:00" if raw.endswith(("Z", "z")) else raw)
    except ValueError:
        raise error(f"{what} {text!r} is not an ISO 8601 time such as 2026-08-04T00:00:00Z",
                    found=text[:60]) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    try:
        return parsed.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00:00+01:00 is in year 0 in UTC: outside what a datetime holds
        raise error(f"{what} {text!r} is outside the times this tool can hold "
                    f"({EARLIEST} to {LATEST} in UTC)", found=text[:60]) from None


#: A time a document states with its offset (an evaluation's ``timestamp``; FORMATS section 1): seconds, an
#: optional fraction of 1 to 6 digits, then ``Z`` or ``+HH:MM``/``-HH:MM``. ASCII digits only, nothing around it:
#: every verifier must read one text as one instant (``parse_utc``, for command lines, is lenient).
OFFSET_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}"
                         r"(?:\.[0-9]{1,6})?(?:Z|[+-][0-9]{2}:[0-9]{2})")


def parse_offset_time(text: object, *, what: str = "time") -> datetime:
    """The UTC instant of a document's time in the :data:`OFFSET_TIME` form; :class:`MalformedInput` otherwise."""
    if not isinstance(text, str) or not OFFSET_TIME.fullmatch(text):
        raise MalformedInput(f"{what} is not a time in the form 2026-08-04T00:00:00Z or 2026-08-04T00:00:00+00:00",
                             found=str(text)[:60])
    try:
        return datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text).astimezone(UTC)
    except (ValueError, OverflowError):
        raise MalformedInput(f"{what} {text!r} is not a real calendar time this tool can hold",
                             found=text[:60]) from None


#: A UTC time as documents state it (FORMATS section 1): seconds, always ``Z``.
UTC_TEXT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")


def parse_utc_text(text: object, *, what: str = "time") -> datetime:
    """A document's UTC time in the :data:`UTC_TEXT` form (what every writer of heldout writes); any other
    spelling is :class:`MalformedInput`: verifiers that compare such times as text and those that parse them
    must read one instant from one text."""
    if not isinstance(text, str) or not UTC_TEXT.fullmatch(text):
        raise MalformedInput(f"{what} is not a UTC time in the form 2026-08-04T00:00:00Z", field=what,
                             found=str(text)[:60])
    return parse_offset_time(text, what=what)


def format_utc(moment: datetime) -> str:
    """``2026-09-20T00:00:00Z``: seconds precision, always UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    moment = moment.astimezone(UTC)  # (not strftime: its %Y drops the zero padding of years before 1000 on Linux,
    # and the ledger compares these strings as text)
    return (f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
            f"T{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}Z")
