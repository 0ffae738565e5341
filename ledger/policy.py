"""Witness policies in the C2SP ``tlog-policy`` format, and their evaluation on cosigned checkpoints.

A policy file is lines (space/tab separated; blank lines and ``#`` comments ignored)::

    log <vkey> [<url>]
    witness <name> <vkey> [<url>]
    group <name> all|any|<k> <member>...
    quorum <name>|none

Exactly one ``quorum`` line; a group or the quorum names only witnesses or groups defined on earlier lines;
each name is a group member at most once; ``1 <= k <= n``; no two logs or two witnesses with the same public
key. Log vkeys are type 0x01 (signed-note Ed25519), witness vkeys type 0x04 (``cosignature/v1``).

One deviation, stated: C2SP says a log vkey's key name is the log's origin; our checkpoints are signed by the
operator key, whose name is the key's own (the origin is ``heldout/ledger/<id>``). A ``log`` line here names
the ledger's checkpoint key; the origin is checked separately (the ledger id is the hash of its genesis).

:meth:`Policy.evaluate` returns which witnesses cosigned (verified) and which groups are satisfied, or raises
:class:`QuorumError` naming the quorum that is not met and the witnesses that are missing.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from keys import HeldoutError, MalformedInput, PublicKey, UsageError, VerificationError, parse_verifier_key
from keys.safeio import UnsafeFile, not_a_file, read_named
from ledger.checkpoint import Checkpoint, verify_checkpoint
from ledger.cosignature import Cosignature, Cosigner, time_of, verified_cosignatures, verified_times
from ledger.errors import LedgerError
from seals import CLOCK_TOLERANCE, format_utc, parse_utc

MAX_POLICY_BYTES = 64 * 1024
MAX_ITEMS = 64
_WS = re.compile(r"[ \t]+")
_BAD_OCTETS = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]")
_DECIMAL = re.compile(r"[1-9][0-9]{0,3}")


class PolicyError(LedgerError, UsageError):
    """A policy file is not valid ``tlog-policy`` (exit 2)."""

    exit_code = 2


class QuorumError(LedgerError, VerificationError):
    """A checkpoint is not cosigned by the quorum a policy requires (exit 1)."""

    exit_code = 1


@dataclass(frozen=True)
class PolicyLog:
    name: str
    key: PublicKey
    url: str | None = None


@dataclass(frozen=True)
class PolicyWitness:
    name: str  # the policy's name for it
    cosigner: Cosigner
    url: str | None = None


@dataclass(frozen=True)
class PolicyGroup:
    name: str
    threshold: int
    members: tuple[str, ...]


@dataclass(frozen=True)
class Witnessed:
    """The outcome of a policy on one checkpoint: the verified cosignatures (by policy witness name) and every
    witness or group name that is satisfied; ``quorum`` is the quorum's name (``none`` for no witnessing)."""

    checkpoint: Checkpoint
    quorum: str
    cosignatures: dict[str, Cosignature] = field(default_factory=dict)
    satisfied: frozenset[str] = frozenset()

    @property
    def time(self) -> datetime | None:
        """The latest cosignature timestamp among the policy's witnesses: a time the log could not yet have
        reached when it showed this checkpoint (``None`` without cosignatures)."""
        if not self.cosignatures:
            return None
        return time_of(max(c.timestamp for c in self.cosignatures.values()))

    def to_json(self) -> dict[str, object]:
        return {"size": self.checkpoint.size, "root": self.checkpoint.root_b64, "quorum": self.quorum,
                "cosigned_by": sorted(self.cosignatures),
                "witnessed_utc": self.time.strftime("%Y-%m-%dT%H:%M:%SZ") if self.time else None}


@dataclass(frozen=True)
class Policy:
    logs: tuple[PolicyLog, ...]
    witnesses: dict[str, PolicyWitness]
    groups: dict[str, PolicyGroup]
    quorum: str | None  # None: "quorum none"
    text: str = ""

    @property
    def requires_witnesses(self) -> bool:
        return self.quorum is not None

    def witness_for(self, cosigner: Cosigner) -> str | None:
        for name, witness in self.witnesses.items():
            if witness.cosigner == cosigner:
                return name
        return None

    def cosignatures(self, checkpoint: Checkpoint) -> dict[str, Cosignature]:
        """Verified cosignatures on ``checkpoint`` by this policy's witnesses, keyed by policy name."""
        by_cosigner = verified_cosignatures(checkpoint, [w.cosigner for w in self.witnesses.values()])
        return {name: by_cosigner[w.cosigner.name] for name, w in self.witnesses.items()
                if w.cosigner.name in by_cosigner
                and by_cosigner[w.cosigner.name].key_id == w.cosigner.key_id}

    def cosignature_times(self, checkpoint: Checkpoint) -> dict[str, tuple[datetime, datetime]]:
        """(earliest, latest) verified cosignature time on ``checkpoint`` of each of this policy's witnesses that
        cosigned it, keyed by policy name."""
        by_key = verified_times(checkpoint, [w.cosigner for w in self.witnesses.values()])
        return {name: (time_of(times[0]), time_of(times[1])) for name, w in self.witnesses.items()
                if (times := by_key.get((w.cosigner.name, w.cosigner.key_id))) is not None}

    def attests(self, names: Iterable[str]) -> bool:
        """Whether these witnesses together are what the policy trusts: they satisfy its quorum (with ``quorum
        none``, any one witness)."""
        cosigned = set(names)
        if self.quorum is None:
            return bool(cosigned)
        return self.quorum in self._satisfied(cosigned)

    def attested_latest(self, latest_by_vkey: Mapping[str, datetime]) -> datetime | None:
        """The latest time this policy's quorum attests having cosigned the log, from each witness key's latest
        cosignature time on any of its checkpoints (``latest_by_vkey``; keys the policy does not list are
        ignored): what :meth:`WitnessedTimes.logged_after` gives past the log's last entry, without reading every
        checkpoint. None when no quorum cosigned."""
        times = {name: (latest_by_vkey[w.cosigner.vkey], 0) for name, w in self.witnesses.items()
                 if w.cosigner.vkey in latest_by_vkey}
        attested = _attested(times, self.attests, latest_first=True)
        return None if attested is None else attested[1]

    def check_log(self, checkpoint: Checkpoint, *, origin: str | None = None) -> None:
        """The checkpoint is signed by one of the policy's logs (when it lists any)."""
        if not self.logs:
            return
        problems = []
        for log in self.logs:
            try:
                verify_checkpoint(checkpoint.note, name=log.name, key=log.key, origin=origin)
                return
            except VerificationError as exc:
                problems.append(f"{log.name}: {exc.message}")
        raise QuorumError("checkpoint is not signed by a log the policy lists", size=checkpoint.size,
                          found=problems)

    def evaluate(self, checkpoint: Checkpoint, *, origin: str | None = None) -> Witnessed:
        """Check the log signature (when the policy lists logs) and the quorum; raise :class:`QuorumError`
        naming the quorum and the witnesses missing from it."""
        self.check_log(checkpoint, origin=origin)
        cosigned = self.cosignatures(checkpoint)
        satisfied = self._satisfied(set(cosigned))
        if self.quorum is None:
            return Witnessed(checkpoint, "none", cosigned, frozenset(satisfied))
        if self.quorum not in satisfied:
            missing = sorted(set(self.witnesses) - set(cosigned))
            raise QuorumError(
                f"checkpoint {checkpoint.size} does not satisfy the policy quorum {self.quorum!r}: "
                f"{self._need(self.quorum, set(cosigned))}", quorum=self.quorum, size=checkpoint.size,
                expected=self.quorum, found=sorted(cosigned), missing=missing)
        return Witnessed(checkpoint, self.quorum, cosigned, frozenset(satisfied))

    def _satisfied(self, cosigned: set[str]) -> set[str]:
        done = set(cosigned)
        for name, group in self.groups.items():  # groups refer only to earlier names: one pass suffices
            if sum(member in done for member in group.members) >= group.threshold:
                done.add(name)
        return done

    def _need(self, name: str, cosigned: set[str]) -> str:
        if name in self.witnesses:
            return f"witness {name} has not cosigned"
        group = self.groups[name]
        have = [m for m in group.members if m in self._satisfied(cosigned)]
        return (f"group {name} needs {group.threshold} of {len(group.members)} "
                f"({', '.join(group.members)}), has {len(have)}" + (f" ({', '.join(have)})" if have else ""))


class WitnessedTimeError(LedgerError, VerificationError):
    """An entry dated outside the window its policy's witnesses attest for it (more than the clock tolerance)."""


#: Per checkpoint: its size and, per witness (by policy name), the (earliest, latest) time it cosigned it.
CosignedTimes = tuple[int, Mapping[str, tuple[datetime, datetime]]]


def _any_witness(names: frozenset[str]) -> bool:
    return bool(names)


class WitnessedTimes:
    """The window of time the witnesses of a policy attest for each entry of a log, from the checkpoints they
    cosigned: entry ``i`` is in every checkpoint of size ``s > i`` and in none of size ``s <= i``. So it was
    logged after the latest time they cosigned a checkpoint without it (:meth:`logged_after`), and by the
    earliest time they cosigned one with it (:meth:`logged_by`). An operator who holds the clock dates its
    entries at will; the witnesses' clocks are not its own.

    A bound is what the policy's quorum attests, not any one witness: the latest time T such that witnesses
    satisfying the quorum each cosigned a checkpoint without the entry at T or later (and the earliest such time
    for a checkpoint with it). One witness with a wrong clock, or a few fewer than a quorum, move no bound, as
    they could not certify a checkpoint either. ``cosigned``: :data:`CosignedTimes` of every checkpoint;
    ``attests``: whether a set of witnesses satisfies the quorum (default: any one witness)."""

    def __init__(self, cosigned: Iterable[CosignedTimes],
                 attests: Callable[[frozenset[str]], bool] = _any_witness) -> None:
        ordered = sorted((size, dict(times)) for size, times in cosigned if times)
        self._sizes = [size for size, _ in ordered]
        # by position: the bound the quorum attests at or below that size (after), and at or above it (by)
        self._after: list[tuple[int, datetime] | None] = []
        latest: dict[str, tuple[datetime, int]] = {}  # witness -> its latest time so far, and the size
        for size, times in ordered:
            for name, (_, last) in times.items():
                if name not in latest or last > latest[name][0]:
                    latest[name] = (last, size)
            self._after.append(_attested(latest, attests, latest_first=True))
        self._by: list[tuple[int, datetime] | None] = []
        earliest: dict[str, tuple[datetime, int]] = {}
        for size, times in reversed(ordered):
            for name, (first, _) in times.items():
                if name not in earliest or first < earliest[name][0]:
                    earliest[name] = (first, size)
            self._by.append(_attested(earliest, attests, latest_first=False))
        self._by.reverse()

    @classmethod
    def of(cls, policy: Policy, checkpoints: Iterable[Checkpoint]) -> WitnessedTimes:
        """The window from every checkpoint's cosignatures by the policy's witnesses (each verified; one that
        does not verify raises, as :meth:`Policy.cosignatures` does)."""
        return cls([(checkpoint.size, policy.cosignature_times(checkpoint)) for checkpoint in checkpoints],
                   policy.attests)

    def logged_after(self, index: int) -> tuple[int, datetime] | None:
        """(size, time): the latest time the quorum attests cosigning a checkpoint without entry ``index``, and
        that checkpoint's size; None when no quorum cosigned one."""
        position = bisect_right(self._sizes, index) - 1
        return self._after[position] if position >= 0 else None

    def logged_by(self, index: int) -> tuple[int, datetime] | None:
        """(size, time): the earliest time the quorum attests cosigning a checkpoint with entry ``index``, and that
        checkpoint's size; None when no quorum cosigned one."""
        position = bisect_right(self._sizes, index)
        return self._by[position] if position < len(self._sizes) else None

    def check_entry(self, index: int, entry: Mapping[str, Any]) -> None:
        """:meth:`check_date` on an entry's ``created_utc``. An entry without a valid date is left to the
        entry checks, which name it."""
        stamp = entry.get("created_utc")
        if not isinstance(stamp, str):
            return
        try:
            created = parse_utc(stamp)
        except HeldoutError:
            return
        self.check_date(index, created, stamp)

    def check_date(self, index: int, created: datetime, stamp: str | None = None) -> None:
        """Raise :class:`WitnessedTimeError` when entry ``index``, dated ``created`` (``stamp``: as the entry
        writes it), is dated more than the clock tolerance before the witnesses attest it was logged, or after
        they attest the log held it."""
        stamp = stamp or format_utc(created)
        after, by = self.logged_after(index), self.logged_by(index)
        if after is not None and after[1] - created > CLOCK_TOLERANCE:  # (differences: no date overflows)
            raise WitnessedTimeError(
                f"entry {index} is dated {stamp}, more than the clock tolerance (a day) before the witnesses attest "
                f"it was logged: after {format_utc(after[1])} (checkpoint {after[0]}, cosigned then, does not "
                "contain it)", index=index, field="created_utc",
                expected=f"no more than a day before {format_utc(after[1])}", found=stamp)
        if by is not None and created - by[1] > CLOCK_TOLERANCE:
            raise WitnessedTimeError(
                f"entry {index} is dated {stamp}, more than the clock tolerance (a day) after the witnesses attest "
                f"the log held it: checkpoint {by[0]} contains it and was cosigned {format_utc(by[1])}",
                index=index, field="created_utc", expected=f"no more than a day after {format_utc(by[1])}",
                found=stamp)


def _attested(times: Mapping[str, tuple[datetime, int]], attests: Callable[[frozenset[str]], bool], *,
              latest_first: bool) -> tuple[int, datetime] | None:
    """The bound witnesses satisfying the quorum attest together: taking the witnesses from the latest time down
    (``latest_first``; else from the earliest up) until those taken satisfy it, the last one's (size, time)."""
    taken: set[str] = set()
    for name, (moment, size) in sorted(times.items(), key=lambda item: item[1][0], reverse=latest_first):
        taken.add(name)
        if attests(frozenset(taken)):
            return size, moment
    return None


def parse_policy(data: bytes | str, *, what: str = "policy") -> Policy:
    """Parse a ``tlog-policy`` file; raises :class:`PolicyError` naming the line at fault."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if len(raw) > MAX_POLICY_BYTES:
        raise PolicyError(f"{what} is too large", expected=MAX_POLICY_BYTES, found=len(raw))
    bad = _BAD_OCTETS.search(raw)
    if bad:
        raise PolicyError(f"{what} contains a control character other than tab and newline",
                          found=hex(bad.group()[0]))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise PolicyError(f"{what} is not UTF-8") from None
    logs: list[PolicyLog] = []
    witnesses: dict[str, PolicyWitness] = {}
    groups: dict[str, PolicyGroup] = {}
    quorum: str | None = None
    quorum_seen = False
    keys_seen: set[bytes] = set()
    log_keys: set[bytes] = set()

    for number, line in enumerate(text.split("\n"), start=1):
        words = [w for w in _WS.split(line.strip(" \t")) if w]
        if not words or words[0].startswith("#"):
            continue
        where = {"line": number, "file": what}

        def fail(message: str) -> PolicyError:
            return PolicyError(f"{what} line {number}: {message}", **where)  # noqa: B023

        keyword, args = words[0], words[1:]
        if keyword == "log":
            if len(args) not in (1, 2):
                raise fail("log <vkey> [<url>]")
            try:
                name, _, key = parse_verifier_key(args[0])
            except MalformedInput as exc:
                raise fail(f"log key: {exc.message}") from None
            if key.raw in log_keys:
                raise fail("duplicate log key")
            log_keys.add(key.raw)
            logs.append(PolicyLog(name, key, args[1] if len(args) == 2 else None))
        elif keyword == "witness":
            if len(args) not in (2, 3):
                raise fail("witness <name> <vkey> [<url>]")
            name = args[0]
            if name == "none" or name in witnesses or name in groups:
                raise fail(f"the name {name!r} is reserved or already defined")
            try:
                cosigner = Cosigner.from_vkey(args[1])
            except MalformedInput as exc:
                raise fail(f"witness key: {exc.message}") from None
            if cosigner.key.raw in keys_seen:
                raise fail("duplicate witness key")
            keys_seen.add(cosigner.key.raw)
            witnesses[name] = PolicyWitness(name, cosigner, args[2] if len(args) == 3 else None)
        elif keyword == "group":
            if len(args) < 3:
                raise fail("group <name> all|any|<k> <member>...")
            name, k_text, members = args[0], args[1], tuple(args[2:])
            if name == "none" or name in witnesses or name in groups:
                raise fail(f"the name {name!r} is reserved or already defined")
            if len(set(members)) != len(members):
                raise fail("a name is a member of a group at most once")
            for member in members:
                if member not in witnesses and member not in groups:
                    raise fail(f"group member {member!r} is not a witness or group defined earlier")
            if k_text == "all":
                k = len(members)
            elif k_text == "any":
                k = 1
            elif _DECIMAL.fullmatch(k_text) and 1 <= int(k_text) <= len(members):
                k = int(k_text)
            else:
                raise fail(f"threshold {k_text!r} must be all, any, or a decimal k with 1 <= k <= {len(members)}")
            groups[name] = PolicyGroup(name, k, members)
        elif keyword == "quorum":
            if len(args) != 1:
                raise fail("quorum <name>|none")
            if quorum_seen:
                raise fail("a policy has exactly one quorum line")
            quorum_seen = True
            if args[0] == "none":
                quorum = None
            elif args[0] in witnesses or args[0] in groups:
                quorum = args[0]
            else:
                raise fail(f"quorum {args[0]!r} is not a witness or group defined earlier")
        else:
            raise fail(f"unknown keyword {keyword!r} (log, witness, group, quorum)")
        if len(logs) > MAX_ITEMS or len(witnesses) > MAX_ITEMS or len(groups) > MAX_ITEMS:
            raise fail(f"more than {MAX_ITEMS} logs, witnesses or groups")
    if not quorum_seen:
        raise PolicyError(f"{what} has no quorum line", file=what)
    for witness in witnesses.values():
        # A witness exists to say what a log showed someone other than its operator; one holding a log's own
        # key is the operator cosigning itself, and a quorum met by it would vouch for any history it shows.
        if witness.cosigner.key.raw in log_keys:
            raise PolicyError(f"{what}: witness {witness.name!r} has the key of a log of the policy: a log cannot "
                              "witness itself", file=what, found=witness.name)
    return Policy(tuple(logs), witnesses, groups, quorum, text)


def load_policy(path: Path) -> Policy:
    """Read and parse a policy file (a usage error when it cannot be read)."""
    file = Path(path)
    if not file.is_file():
        raise PolicyError(not_a_file(file, "policy file"), path=str(file))
    return parse_policy(read_policy_file(file), what=str(file))


def read_policy_file(file: Path) -> bytes:
    """A policy file's bytes, read bounded (:data:`MAX_POLICY_BYTES`: a larger file is refused before it is read,
    never held in memory) and regular only; a usage error otherwise."""
    try:
        return read_named(file, limit=MAX_POLICY_BYTES, what="policy file")
    except UnsafeFile as exc:
        raise PolicyError(exc.message, path=str(file)) from None
