"""Commit-then-draw: the pool commitment, the seed the operator cannot choose, and the deterministic draw.

A sealed generation is drawn in three logged steps, so that the operator cannot run the draw privately with
many seeds and keep the one it likes:

1. **pool commitment** (one ``pool`` entry per task): the candidates of the task (its private pool minus every
   case an earlier generation used) each get a fresh 32-byte salt and their ``heldout-commit-v1`` commitment;
   ``pool_root`` is the RFC 6962 root over the commitments sorted ascending (the same tree as a set hash),
   ``pool_size`` their number. Salts of cases that are not drawn are kept privately only until the seal is
   logged (a killed seal resumes the same draw) and never published, so those stay hidden forever.
2. **intent** (one ``intent`` entry, in the same batch, after the pool entries): generation, task sizes,
   expiry, release mode, and the index of the pool entry each task draws from. Every intent is logged: a
   retried draw is visible as a second intent (the audit reports it).
3. **seed**: derived from material the operator could not know when it committed, read from the first
   checkpoint that contains the intent (size = intent index + 1):

   * ``witness-cosignatures``: the cosignature lines of the witnesses on that checkpoint (each an Ed25519
     signature by a key the operator does not hold);
   * ``checkpoint-root``: without witnesses, that checkpoint's root. **Weaker**: the operator computes the root
     itself and can try salts offline before logging anything; it only binds the draw to what is logged.

   ``seed = SHA-256("heldout-seal-seed-v1\\n" || seed_source || "\\n" || material)`` where material is the
   32 raw root bytes (checkpoint-root) or the cosignature lines sorted, each followed by "\\n", UTF-8
   (witness-cosignatures).
4. **draw** (``heldout-draw-v1``), per task, from (seed, task, pool_size N, count k): a stream of 64-bit
   integers, block j = SHA-256("heldout-draw-v1\\n" || seed || task || "\\n" || uint64_be(j)) read as four
   big-endian uint64; ``uniform(n)`` takes the next integer u, rejecting u >= 2^64 - (2^64 mod n), and returns
   u mod n; a partial Fisher-Yates shuffle of [0, N) (for i in 0..k-1: swap a[i] with a[i + uniform(N - i)])
   gives the drawn positions a[0..k-1], sorted. The drawn cases are the pool commitments at those positions
   of the ascending list.

At reveal the reveal publishes each task's pool commitment list (``pools``): anyone recomputes the pool root,
the seed from the recorded material, the positions, and checks the revealed commitments are exactly those.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar

from heldout.generations.commitments import hex_bytes, set_hash
from keys import HeldoutError, MalformedInput, VerificationError
from ledger.cosignature import Cosignature
from seals import CLOCK_TOLERANCE, format_utc, shifted

DRAW_ALGORITHM = "heldout-draw-v1"
SEED_DOMAIN = b"heldout-seal-seed-v1\n"
DRAW_DOMAIN = b"heldout-draw-v1\n"
SEED_SOURCES = ("witness-cosignatures", "checkpoint-root")
_U64 = 1 << 64


def seed_material(seed_source: str, *, root: bytes | None = None, cosignatures: Sequence[str] = ()) -> bytes:
    """The bytes the seed is derived from (module docstring, step 3)."""
    if seed_source == "checkpoint-root":
        if root is None or len(root) != 32:
            raise MalformedInput("checkpoint-root seed material is the 32-byte root", field="draw.checkpoint")
        return root
    if seed_source == "witness-cosignatures":
        if not cosignatures:
            raise MalformedInput("witness-cosignatures seed material needs at least one cosignature",
                                 field="draw.cosignatures")
        return "".join(line + "\n" for line in sorted(cosignatures)).encode("utf-8")
    raise MalformedInput(f"unknown seed source {seed_source!r}", field="draw.seed_source",
                         expected=list(SEED_SOURCES), found=str(seed_source)[:40])


def derive_seed(seed_source: str, material: bytes) -> bytes:
    return hashlib.sha256(SEED_DOMAIN + seed_source.encode("ascii") + b"\n" + material).digest()


class _Stream:
    def __init__(self, seed: bytes, task: str) -> None:
        self.prefix = DRAW_DOMAIN + seed + task.encode("utf-8") + b"\n"
        self.block = 0
        self.buffer: list[int] = []

    def next_u64(self) -> int:
        if not self.buffer:
            digest = hashlib.sha256(self.prefix + self.block.to_bytes(8, "big")).digest()
            self.block += 1
            self.buffer = [int.from_bytes(digest[i:i + 8], "big") for i in (24, 16, 8, 0)]
        return self.buffer.pop()

    def uniform(self, n: int) -> int:
        limit = _U64 - (_U64 % n)
        while True:
            u = self.next_u64()
            if u < limit:
                return u % n


def draw_positions(seed: bytes, task: str, pool_size: int, count: int) -> list[int]:
    """The positions (sorted) that ``heldout-draw-v1`` selects from a pool of ``pool_size`` (module docstring)."""
    if not 0 < count <= pool_size:
        raise MalformedInput(f"cannot draw {count} of {pool_size} cases", field="draw", expected=f"1..{pool_size}",
                             found=count)
    stream = _Stream(seed, task)
    positions = list(range(pool_size))
    for i in range(count):
        j = i + stream.uniform(pool_size - i)
        positions[i], positions[j] = positions[j], positions[i]
    return sorted(positions[:count])


class _Opening(Protocol):
    @property
    def commitment(self) -> bytes: ...


OpeningT = TypeVar("OpeningT", bound=_Opening)


def draw_cases(seed: bytes, pools: Mapping[str, Sequence[OpeningT]], counts: Mapping[str, int]) -> list[OpeningT]:
    """The cases ``heldout-draw-v1`` selects: ``pools`` holds each task's candidates in ascending commitment
    order (the order of the committed pool's leaves), ``counts`` how many to draw per task."""
    drawn: list[OpeningT] = []
    for task in sorted(pools):
        pool = pools[task]
        drawn.extend(pool[p] for p in draw_positions(seed, task, len(pool), counts[task]))
    return drawn


@dataclass(frozen=True)
class PoolRef:
    """One task's pool commitment as a manifest records it: the entry, its root and size."""

    index: int
    pool_root: str
    pool_size: int

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "pool_root": self.pool_root, "pool_size": self.pool_size}


@dataclass(frozen=True)
class DrawRecord:
    """The manifest's ``draw`` member: how the seed was obtained and what it was applied to."""

    seed_source: str
    intent_index: int
    pools: Mapping[str, PoolRef]
    checkpoint_size: int
    checkpoint_note: str
    cosignatures: tuple[str, ...]
    seed: str
    algorithm: str = DRAW_ALGORITHM

    def to_json(self) -> dict[str, Any]:
        return {"algorithm": self.algorithm, "seed_source": self.seed_source, "intent_index": self.intent_index,
                "pools": {task: ref.to_json() for task, ref in sorted(self.pools.items())},
                "checkpoint": {"size": self.checkpoint_size, "note": self.checkpoint_note},
                "cosignatures": list(self.cosignatures), "seed": self.seed}

    @classmethod
    def from_json(cls, body: Any) -> DrawRecord:
        members = {"algorithm", "seed_source", "intent_index", "pools", "checkpoint", "cosignatures", "seed"}
        if not isinstance(body, dict) or set(body) != members:
            raise MalformedInput(f"seal manifest: draw is an object with exactly {sorted(members)}", field="draw")
        if body["algorithm"] != DRAW_ALGORITHM:
            raise MalformedInput("seal manifest: unsupported draw algorithm", field="draw.algorithm",
                                 expected=DRAW_ALGORITHM, found=str(body["algorithm"])[:40])
        if body["seed_source"] not in SEED_SOURCES:
            raise MalformedInput("seal manifest: draw.seed_source is witness-cosignatures or checkpoint-root",
                                 field="draw.seed_source", found=str(body["seed_source"])[:40])
        checkpoint = body["checkpoint"]
        pools = body["pools"]
        cosignatures = body["cosignatures"]
        if not isinstance(checkpoint, dict) or set(checkpoint) != {"size", "note"} or \
                not _count(checkpoint["size"]) or not isinstance(checkpoint["note"], str):
            raise MalformedInput("seal manifest: draw.checkpoint is {size, note}", field="draw.checkpoint")
        if not isinstance(pools, dict) or not pools or not all(
                isinstance(ref, dict) and set(ref) == {"index", "pool_root", "pool_size"} and _count(ref["index"])
                and _count(ref["pool_size"]) and isinstance(ref["pool_root"], str) for ref in pools.values()):
            raise MalformedInput("seal manifest: draw.pools is {task: {index, pool_root, pool_size}}",
                                 field="draw.pools")
        if not isinstance(cosignatures, list) or not all(isinstance(c, str) for c in cosignatures):
            raise MalformedInput("seal manifest: draw.cosignatures is a list of lines", field="draw.cosignatures")
        if not _count(body["intent_index"]):
            raise MalformedInput("seal manifest: draw.intent_index is an entry index", field="draw.intent_index")
        for ref in pools.values():
            hex_bytes(ref["pool_root"], size=32, what="draw.pools.pool_root")
        hex_bytes(body["seed"], size=32, what="draw.seed")
        return cls(seed_source=body["seed_source"], intent_index=body["intent_index"],
                   pools={task: PoolRef(ref["index"], ref["pool_root"], ref["pool_size"])
                          for task, ref in sorted(pools.items())},
                   checkpoint_size=checkpoint["size"], checkpoint_note=checkpoint["note"],
                   cosignatures=tuple(cosignatures), seed=body["seed"])

    def latest_cosignature_time(self) -> datetime | None:
        """The latest timestamp among the seed's cosignature lines (None for a checkpoint-root seed): the seed,
        and so the cases, were unknown to anyone before it."""
        if self.seed_source != "witness-cosignatures":
            return None
        try:
            return max(Cosignature.parse_line(line).time for line in self.cosignatures)
        except (HeldoutError, ValueError) as exc:
            raise VerificationError("a draw.cosignatures line is not a cosignature/v1 line with its timestamp",
                                    field="draw.cosignatures", found=str(exc)[:120]) from None


def check_drawn_before_sealed(generation: str, sealed: datetime, draw: DrawRecord) -> None:
    """A seal is made after its draw: its manifest's ``created_utc`` is no earlier than the latest cosignature its
    seed comes from, to within the clock tolerance (the witness's clock is not the operator's; FORMATS rule 8).
    A manifest dated earlier contradicts itself: its operator set the clock back (a generation "sealed" before
    its cases could be known)."""
    drawn = draw.latest_cosignature_time()
    if drawn is not None and sealed < shifted(drawn, -CLOCK_TOLERANCE):
        raise VerificationError(f"the seal manifest of {generation} is dated {format_utc(sealed)}, more than the "
                                "clock tolerance (a day) before the witness cosignature its draw seed comes from "
                                f"({format_utc(drawn)}): a seal is made after its draw (was the clock set back?)",
                                field="created_utc", expected=f">= {format_utc(shifted(drawn, -CLOCK_TOLERANCE))}",
                                found=format_utc(sealed))


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check_pool(task: str, commitments: Sequence[bytes], ref: PoolRef) -> None:
    """Raise unless ``commitments`` (ascending, no repeats) are the pool ``ref`` commits to."""
    if len(commitments) != ref.pool_size:
        raise VerificationError(f"the revealed pool of {task} has {len(commitments)} commitments; its pool entry "
                                f"{ref.index} commits to {ref.pool_size}", field=f"pools.{task}", index=ref.index,
                                expected=ref.pool_size, found=len(commitments))
    if any(a >= b for a, b in itertools.pairwise(commitments)):
        raise VerificationError(f"the revealed pool of {task} is not in ascending order without repeats",
                                field=f"pools.{task}", index=ref.index)
    root = set_hash(list(commitments))
    if root != ref.pool_root:
        raise VerificationError(f"the revealed pool of {task} does not hash to the root its pool entry {ref.index} "
                                "commits to", field=f"pools.{task}", index=ref.index, expected=ref.pool_root,
                                found=root)


def recompute_seed(draw: DrawRecord, checkpoint_root: bytes) -> bytes:
    """The seed from the material the manifest records; raise unless it is the recorded seed."""
    material = seed_material(draw.seed_source, root=checkpoint_root, cosignatures=draw.cosignatures)
    seed = derive_seed(draw.seed_source, material)
    if seed.hex() != draw.seed:
        raise VerificationError(f"the draw's seed is not the one its {draw.seed_source} material gives",
                                field="draw.seed", expected=seed.hex(), found=draw.seed)
    return seed


def check_drawn(generation: str, task: str, seed: bytes, pool: Sequence[bytes], drawn: Mapping[bytes, str]) -> None:
    """Raise unless the task's revealed commitments (``drawn``: commitment -> case id) are exactly the pool
    commitments the seed selects; names the first case that differs."""
    selected = {pool[p] for p in draw_positions(seed, task, len(pool), len(drawn))}
    extra = sorted(c for c in drawn if c not in selected)
    if extra:
        case = drawn[extra[0]]
        raise VerificationError(f"{generation}: case {case} of {task} is not one the draw's seed selects from the "
                                "committed pool (the draw does not match the seed)", field="draw", case_id=case,
                                generation=generation, task=task, found=extra[0].hex())
    missing = sorted(selected - set(drawn))
    if missing:
        raise VerificationError(f"{generation}: the seed selects a case of {task} that the reveal lacks",
                                field="draw", generation=generation, task=task, expected=missing[0].hex())
