"""Ledger entries: typed canonical JSON objects, validated before they are appended and again on replay.

An entry is a JSON object with ``type`` and an integer ``v`` (its version) and the members its type requires
(extra members are allowed, so later versions can add without breaking old verifiers). Its bytes are
``seals.canonical_bytes(entry)`` (RFC 8785 with the 6-decimal float rule) and at most 64 KiB: large data goes
to a content-addressed blob and the entry carries its SHA-256. Canonical JSON never contains a raw newline
(RFC 8785 escapes control characters), which the export's one-entry-per-line file relies on.

The ledger id is the first 20 hex characters of SHA-256 of the genesis entry's bytes, so anyone holding
entry 0 can recompute it; the checkpoint origin line is derived from the id.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from itertools import repeat
from typing import Any, cast

from keys import HeldoutError, MalformedInput, PublicKey, Signer, TrustedKey
from keys.names import SHA256_HEX
from keys.safeio import check_json_depth
from keys.signer import check_key_id, check_key_name
from ledger.errors import EntryRejected, LedgerIntegrityError
from seals import canonical_bytes, format_utc, jcs_bytes, parse_json
from seals.canonical import canonical_value, canonical_values, plain_canonical_bytes, plain_canonical_many
from seals.timeutil import UTC_TEXT

MAX_ENTRY_BYTES = 64 * 1024
LEDGER_ID_HEX_CHARS = 20
ORIGIN_PREFIX = "heldout/ledger/"
NONCE_BYTES = 32
MAX_NOTE_CHARS = 16384

_LEDGER_ID = re.compile(r"[0-9a-f]{20}")
_LEDGER_PREFIX = re.compile(r"[0-9a-f]{1,20}")


def _text(value: Any) -> str | None:
    if not isinstance(value, str) or not value or len(value) > 256:
        return "a non-empty string of at most 256 characters"
    return None


def _hex64(value: Any) -> str | None:
    if not isinstance(value, str) or not SHA256_HEX.fullmatch(value):
        return "64 lowercase hex characters (a SHA-256)"
    return None


def _utc(value: Any) -> str | None:
    return _utc_text(value) if isinstance(value, str) else "a UTC time YYYY-MM-DDTHH:MM:SSZ"


@functools.lru_cache(maxsize=1024)  # a batch's entries mostly share their times
def _utc_text(value: str) -> str | None:
    if not UTC_TEXT.fullmatch(value):
        return "a UTC time YYYY-MM-DDTHH:MM:SSZ"
    try:  # the constructor checks the calendar (strptime would too, ten times slower)
        datetime(int(value[0:4]), int(value[5:7]), int(value[8:10]), int(value[11:13]), int(value[14:16]),
                 int(value[17:19]))
    except ValueError:
        return "a real calendar time YYYY-MM-DDTHH:MM:SSZ"
    return None


def _key(value: Any) -> str | None:
    if not isinstance(value, dict):
        return "an object {key_id, name, public_key_b64}"
    try:
        check_key_id(value.get("key_id"))  # type: ignore[arg-type]
        check_key_name(value.get("name"))  # type: ignore[arg-type]
        PublicKey.from_b64(value.get("public_key_b64"))  # type: ignore[arg-type]
    except (HeldoutError, ValueError, TypeError) as exc:
        return f"an object {{key_id, name, public_key_b64}} ({exc})"
    return None


def _note_text(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_NOTE_CHARS:
        return f"a non-blank string of at most {MAX_NOTE_CHARS} characters"
    return None


def _size(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return "a positive integer"
    return None


def _per_task(value: Any) -> str | None:
    if not isinstance(value, dict) or not value or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value.values()):
        return "a non-empty object {task: positive integer}"
    return None


Check = Callable[[Any], "str | None"]

#: The member checks an entry type's registration may use (each returns None, or what the value must be).
check_text, check_hex64, check_utc, check_positive_int, check_per_task = _text, _hex64, _utc, _size, _per_task

#: Required members (besides ``type`` and ``v``) of each registered entry type and the check each must pass.
#: The generic log knows only its own types (genesis, key, note); an application registers its own with
#: :func:`register_entry_type` (heldout's: ``heldout.entries``) before it reads or writes a log holding them,
#: and an entry of a type nobody registered is refused on append and is an integrity failure on replay.
ENTRY_TYPES: dict[str, dict[str, Check]] = {
    "genesis": {"name": _text, "key": _key, "created_utc": _utc, "nonce": _hex64},
    "key": {"key": _key, "role": _text, "created_utc": _utc},
    # A generic note: free text, optionally referencing a blob (a document, an announcement). It changes no
    # domain state, so it is what ``heldout ledger append`` writes.
    "note": {"text": _note_text, "created_utc": _utc},
}

#: Optional members: checked when present.
OPTIONAL_MEMBERS: dict[str, dict[str, Check]] = {
    "note": {"blob_sha256": _hex64},
}

GENERIC_TYPES = frozenset(ENTRY_TYPES)


def register_entry_type(kind: str, required: Mapping[str, Check], optional: Mapping[str, Check] | None = None) -> None:
    """Register an application's entry type with the log: the members it requires and the checks they (and
    the optional ones, when present) must pass. Registering the same definition again is a no-op; a different
    definition of a registered type, or a redefinition of a generic one, is refused (a log's validity must not
    depend on which definition was imported last)."""
    required, optional = dict(required), dict(optional or {})
    if kind in ENTRY_TYPES:
        if kind in GENERIC_TYPES or ENTRY_TYPES[kind] != required or OPTIONAL_MEMBERS.get(kind, {}) != optional:
            raise ValueError(f"entry type {kind!r} is already registered with another definition")
        return
    if not kind or not kind.isascii() or not kind.replace("-", "").isalnum() or not required:
        raise ValueError(f"entry type {kind!r}: a lowercase ASCII name with at least one required member")
    ENTRY_TYPES[kind] = required
    if optional:
        OPTIONAL_MEMBERS[kind] = optional
    _compile_rules(kind)


def entry_type_registry() -> tuple[dict[str, dict[str, Check]], dict[str, dict[str, Check]]]:
    """The registered types (required and optional member checks), for :func:`install_entry_types` in another
    process (the replay's decoding workers)."""
    return ({kind: dict(checks) for kind, checks in ENTRY_TYPES.items()},
            {kind: dict(checks) for kind, checks in OPTIONAL_MEMBERS.items()})


def install_entry_types(required: Mapping[str, Mapping[str, Check]],
                        optional: Mapping[str, Mapping[str, Check]]) -> None:
    """Register every type of :func:`entry_type_registry`'s answer (in a worker process started without the
    parent's imports)."""
    for kind, checks in required.items():
        if kind not in GENERIC_TYPES:
            register_entry_type(kind, checks, optional.get(kind))


#: Each registered type's checks as flat tuples (required, optional), for :func:`_entry_is_valid`: the same
#: checks :func:`validate_entry` runs, without building its error evidence (the replay's and the append's
#: per-entry cost).
_RULES: dict[str, tuple[tuple[tuple[str, Check], ...], tuple[tuple[str, Check], ...]]] = {}


def _compile_rules(kind: str) -> None:
    _RULES[kind] = (tuple(ENTRY_TYPES[kind].items()), tuple(OPTIONAL_MEMBERS.get(kind, {}).items()))


for _kind in ENTRY_TYPES:
    _compile_rules(_kind)


def _entry_is_valid(entry: Any, index: int | None) -> bool:
    """Whether ``entry`` passes :func:`validate_entry` (a plain dict; anything else answers False and takes the
    path that names the fault). The same checks, in a loop that builds nothing: a True here is a pass there."""
    if type(entry) is not dict:
        return False
    kind = entry.get("type")
    rules = _RULES.get(kind) if type(kind) is str else None
    if rules is None:
        return False
    version = entry.get("v")
    if type(version) is not int or version < 1:
        return False
    required, optional = rules
    for member, check in required:
        if member not in entry or check(entry[member]) is not None:
            return False
    for member, check in optional:
        if member in entry and check(entry[member]) is not None:
            return False
    return index is None or (index == 0) == (kind == "genesis")


# The member checks over a whole batch at once, in C passes (the replay's per-chunk cost): each answers True
# only when its check passes every value, and False when it cannot tell (the caller then runs the check on
# each value). Exact types only: a str or int subclass is left to the per-value check.
_HEX_DIGITS = b"0123456789abcdef"


def _all_text(values: list[Any]) -> bool:
    return set(map(type, values)) == {str} and min(map(len, values)) >= 1 and max(map(len, values)) <= 256


def _all_hex64(values: list[Any]) -> bool:
    if set(map(type, values)) != {str} or set(map(len, values)) != {64}:
        return False
    try:
        return not "".join(values).encode("ascii").translate(None, _HEX_DIGITS)
    except UnicodeEncodeError:
        return False


def _all_utc(values: list[Any]) -> bool:
    return set(map(type, values)) == {str} and not any(map(_utc_text, set(values)))


def _all_size(values: list[Any]) -> bool:
    return set(map(type, values)) == {int} and min(values) >= 1


_BATCH_CHECKS: dict[Check, Callable[[list[Any]], bool]] = {
    _text: _all_text, _hex64: _all_hex64, _utc: _all_utc, _size: _all_size,
}
_ABSENT = object()


def _passes(check: Check, values: list[Any]) -> bool:
    """Whether ``check`` passes every value (``_ABSENT`` for a member an entry lacks: never passes; the batch
    forms take exact str or int values only)."""
    batch = _BATCH_CHECKS.get(check)
    if batch is not None and batch(values):
        return True
    return _ABSENT not in values and list(map(check, values)).count(None) == len(values)


def _entries_are_valid(entries: list[Any], first: int | None) -> bool:
    """Whether every entry passes :func:`validate_entry` at its index (``first + k``; ``None``: indices not
    known yet, as ``validate_entry`` without one): the checks of :func:`_entry_is_valid`, run a member at a
    time over all the entries of a type instead of an entry at a time (a few C passes per member). False when
    any entry fails, and the caller finds which one entry by entry; a True here is a True of
    :func:`_entry_is_valid` for every entry."""
    if not entries or set(map(type, entries)) != {dict}:
        return False
    kinds: list[Any] = list(map(dict.get, entries, repeat("type")))
    if set(map(type, kinds)) != {str}:
        return False
    # genesis at index 0 only, and only genesis there
    if first is not None and (kinds.count("genesis") != int(first == 0) or (first == 0 and kinds[0] != "genesis")):
        return False
    distinct = set(kinds)
    for kind in distinct:
        rules = _RULES.get(kind)
        if rules is None:
            return False
        group = entries if len(distinct) == 1 else [entry for entry, k in zip(entries, kinds, strict=True) if k == kind]
        versions: list[Any] = list(map(dict.get, group, repeat("v")))
        if set(map(type, versions)) != {int} or min(versions) < 1:
            return False
        required, optional = rules
        for member, check in required:
            if not _passes(check, list(map(dict.get, group, repeat(member), repeat(_ABSENT)))):
                return False
        named = set().union(*map(dict.keys, group)) if optional else set()  # (one C pass: a type with many
        for member, check in optional:  # optional members pays nothing for those no entry of the batch has)
            if member not in named:
                continue
            present = [value for value in map(dict.get, group, repeat(member), repeat(_ABSENT))
                       if value is not _ABSENT]
            if not _passes(check, present):
                return False
    return True


#: Types the raw ``heldout ledger append`` may write: generic notes, and ``key`` (no other command declares a
#: key; the append checks it as an operation would, see :func:`check_key_declaration`). Every other type
#: changes domain state (a seal, a bundle charged to a budget, a retirement, a reveal, a passport, a spec
#: supersession) and is appended only by its own operation, which validates it against the ledger under the
#: generations lock.
RAW_APPEND_TYPES = frozenset({"note", "key"})


def check_key_declaration(entry: Mapping[str, Any], entries: Iterable[tuple[int, Mapping[str, Any]]]) -> None:
    """Refuse a ``key`` entry whose key id the ledger already declares (genesis or an earlier key entry), for
    another key or the same one: one key id names one key, once."""
    key_id = entry["key"]["key_id"]
    for index, earlier in entries:
        declared = earlier.get("key") if earlier.get("type") in ("genesis", "key") else None
        if isinstance(declared, Mapping) and declared.get("key_id") == key_id:
            raise EntryRejected(f"key id {key_id!r} is already declared by entry {index}", field="key.key_id",
                                index=index, found=key_id)


def validate_entry(entry: Any, *, index: int | None = None) -> str:
    """Check an entry's shape; return its type. Raises :class:`EntryRejected` naming the member at fault.

    ``index`` is where the entry is (or would be): genesis is allowed at index 0 only, and only genesis there.
    """
    if _entry_is_valid(entry, index):
        return str(entry["type"])
    return _validate_entry_naming_the_fault(entry, index)


def _validate_entry_naming_the_fault(entry: Any, index: int | None) -> str:
    """validate_entry's full path: every check in turn, raising with the member at fault and its value."""
    where = {} if index is None else {"index": index}
    if not isinstance(entry, Mapping):
        raise EntryRejected("a ledger entry is a JSON object", found=type(entry).__name__, **where)
    kind = entry.get("type")
    if not isinstance(kind, str) or kind not in ENTRY_TYPES:
        raise EntryRejected(f"unknown entry type {kind!r}", field="type", expected=sorted(ENTRY_TYPES),
                            found=str(kind)[:60], **where)
    version = entry.get("v")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise EntryRejected("entry member v (version) must be a positive integer", field="v",
                            found=repr(version)[:60], **where)
    for member, check in ENTRY_TYPES[kind].items():
        if member not in entry:
            raise EntryRejected(f"{kind} entry lacks the member {member!r}", field=member, **where)
        problem = check(entry[member])
        if problem:
            raise EntryRejected(f"{kind} entry member {member!r} must be {problem}", field=member,
                                found=repr(entry[member])[:80], **where)
    for member, check in OPTIONAL_MEMBERS.get(kind, {}).items():
        problem = check(entry[member]) if member in entry else None
        if problem:
            raise EntryRejected(f"{kind} entry member {member!r} must be {problem}", field=member,
                                found=repr(entry[member])[:80], **where)
    if index is not None and (index == 0) != (kind == "genesis"):
        raise EntryRejected(
            "the genesis entry is entry 0 and only entry 0" if kind == "genesis"
            else "entry 0 of a ledger must be its genesis entry",
            field="type", found=kind, **where)
    return kind


def entry_canonical_bytes(entry: Any) -> bytes:
    """``seals.canonical_bytes(entry)``, computed by the C JSON encoder when the entry is in the domain where
    the two coincide (``seals.canonical.plain_canonical_bytes``; tests check the equality with hypothesis), and
    by ``seals.canonical_bytes`` otherwise. The shortcut keeps batched appends near raw SQLite speed: the
    pure-Python RFC 8785 serialiser costs about 45 us for a 1 KiB entry, the C encoder about 8."""
    fast = plain_canonical_bytes(entry)
    return fast if fast is not None else canonical_bytes(entry, exact_integers=True)


def encode_entry(entry: Mapping[str, Any], *, index: int | None = None) -> tuple[str, bytes]:
    """Validate and canonicalise an entry: ``(type, bytes)``; refuses more than 64 KiB."""
    kind = validate_entry(entry, index=index)
    try:
        data = entry_canonical_bytes(entry if type(entry) is dict else dict(entry))
    except MalformedInput as exc:
        raise EntryRejected(f"entry is not canonical JSON: {exc.message}", **exc.evidence) from None
    except UnicodeError:  # a lone surrogate in a member name escapes seals.jcs_bytes as UnicodeEncodeError
        raise EntryRejected("entry is not canonical JSON: it contains a lone surrogate (not UTF-8)") from None
    if len(data) > MAX_ENTRY_BYTES:
        raise EntryRejected(
            f"entry is {len(data)} bytes, over the {MAX_ENTRY_BYTES}-byte limit; put large data in a blob "
            "and reference its SHA-256", expected=MAX_ENTRY_BYTES, found=len(data),
            **({} if index is None else {"index": index}))
    try:  # what every reader refuses is never signed (plain entries, the fast path, are within it by construction)
        check_json_depth(data, what="entry")
    except MalformedInput as exc:
        raise EntryRejected(exc.message, **exc.evidence, **({} if index is None else {"index": index})) from None
    return kind, data


def encode_entries(entries: list[dict[str, Any]]) -> list[bytes]:
    """The canonical bytes of validated entries (:func:`encode_entry` without the validation, which the caller
    has done in order), the plain ones encoded in one pass over the batch; refuses one over 64 KiB."""
    encoded = plain_canonical_many(entries)
    if None not in encoded:  # the common case: every entry plain, checked for size in one pass
        whole = cast(list[bytes], encoded)
        if max(map(len, whole), default=0) <= MAX_ENTRY_BYTES:
            return whole
    for position, (entry, data) in enumerate(zip(entries, encoded, strict=True)):
        if data is None or len(data) > MAX_ENTRY_BYTES:
            try:
                encoded[position] = encode_entry(entry)[1]
            except EntryRejected as exc:
                raise EntryRejected(exc.message, position=position,
                                    **{k: v for k, v in exc.evidence.items() if k != "position"}) from None
    return [data for data in encoded if data is not None]


def validate_batch(entries: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """The entries of a batch to append as plain dicts, and their types: each validated as
    :func:`validate_entry` validates it (a member at a time over the batch where it can), refused with
    :class:`EntryRejected` naming the first entry at fault and its position; genesis is refused (a ledger has
    one, written when it is created)."""
    plain: list[Any] = [entry if type(entry) is dict or not isinstance(entry, Mapping) else dict(entry)
                        for entry in entries]  # anything else is refused below, by position
    if _entries_are_valid(plain, None):
        checked: list[Any] = list(map(dict.get, plain, repeat("type")))
        if "genesis" not in checked:
            return plain, checked
    kinds = []
    for position, entry in enumerate(plain):
        try:
            kind = validate_entry(entry)
        except EntryRejected as exc:
            raise EntryRejected(exc.message, position=position, **exc.evidence) from None
        if kind == "genesis":
            raise EntryRejected("a ledger has one genesis entry, written when it is created", field="type",
                                position=position)
        kinds.append(kind)
    return plain, kinds


def decode_entry(data: bytes, *, index: int) -> dict[str, Any]:
    """Parse stored entry bytes, insisting they are canonical and valid; raises
    :class:`LedgerIntegrityError` (a stored entry that fails is tampering, not a usage error)."""
    if len(data) > MAX_ENTRY_BYTES:
        raise LedgerIntegrityError(f"entry {index} is {len(data)} bytes, over the limit", index=index,
                                   expected=MAX_ENTRY_BYTES, found=len(data))
    value = canonical_value(data)  # the common case, decided in C; None: the full strict path names the fault
    canonical = value is not None
    if value is None:
        try:
            value = parse_json(data, what=f"entry {index}")
        except MalformedInput as exc:
            raise LedgerIntegrityError(exc.message, index=index) from None
    try:
        validate_entry(value, index=index)
        canonical = canonical or jcs_bytes(value) == data
    except (EntryRejected, MalformedInput) as exc:
        raise LedgerIntegrityError(f"entry {index}: {exc.message}", index=index,
                                   **{k: v for k, v in exc.evidence.items() if k != "index"}) from None
    if not canonical:
        raise LedgerIntegrityError(f"entry {index} is not in canonical form", index=index)
    return value


def decode_entries(items: list[bytes], *, first: int) -> tuple[list[dict[str, Any]], LedgerIntegrityError | None]:
    """:func:`decode_entry` of each item (item ``k`` is entry ``first + k``), the canonical form decided for the
    whole batch at once (``seals.canonical.canonical_values``) where it can be. Returns the entries decoded
    before the first that fails, and that failure (``None`` when every item passes): the replay raises it at
    the point the entry-by-entry order would."""
    values = canonical_values(items) if items and max(map(len, items)) <= MAX_ENTRY_BYTES else None
    decoded: list[dict[str, Any]] = []
    if values is not None and _entries_are_valid(values, first):
        return values, None
    if values is not None:
        index = first
        for value in values:
            if not _entry_is_valid(value, index):
                break
            index += 1
        if index - first == len(values):
            return values, None
        decoded = values[:index - first]
    for k in range(len(decoded), len(items)):
        try:
            decoded.append(decode_entry(items[k], index=first + k))
        except LedgerIntegrityError as exc:
            return decoded, exc
    return decoded, None


def ledger_id_of(genesis_bytes: bytes) -> str:
    return hashlib.sha256(genesis_bytes).hexdigest()[:LEDGER_ID_HEX_CHARS]


def origin_of(ledger_id: str) -> str:
    """The checkpoint origin line of a ledger: ``heldout/ledger/<ledger id>``."""
    return ORIGIN_PREFIX + ledger_id


def is_ledger_id(text: str) -> bool:
    return bool(_LEDGER_ID.fullmatch(text))


def is_ledger_prefix(text: str) -> bool:
    """A ledger id or a non-empty prefix of one (how commands name a ledger)."""
    return bool(_LEDGER_PREFIX.fullmatch(text))


def make_genesis(*, name: str, signer: Signer, now: datetime, nonce: bytes) -> dict[str, Any]:
    """The genesis entry: names the ledger, its checkpoint key, its creation time and a random nonce."""
    if len(nonce) != NONCE_BYTES:
        raise EntryRejected(f"the genesis nonce is {NONCE_BYTES} bytes", expected=NONCE_BYTES, found=len(nonce))
    return {
        "type": "genesis",
        "v": 1,
        "name": name,
        "key": {"key_id": signer.key_id, "name": signer.name, "public_key_b64": signer.public_key.b64},
        "created_utc": format_utc(now),
        "nonce": nonce.hex(),
    }


def genesis_key(genesis: Mapping[str, Any]) -> TrustedKey:
    """The checkpoint key a genesis entry declares."""
    key = genesis["key"]
    return TrustedKey(key_id=key["key_id"], name=key["name"], public_key=PublicKey.from_b64(key["public_key_b64"]))


def blob_references(entry: Mapping[str, Any]) -> list[str]:
    """SHA-256 hex values of members named ``*_sha256`` (top level and nested): the blobs an entry may
    reference. Whether a blob exists for each is the store's business; the export copies those it has."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, Mapping):
            for key, item in value.items():
                if isinstance(key, str) and key.endswith("_sha256") and isinstance(item, str) \
                        and SHA256_HEX.fullmatch(item):
                    found.append(item)
                else:
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(entry)
    return found
