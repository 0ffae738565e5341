"""The seal manifest: the signed, published statement that a generation of held-out cases is sealed.

``seals/<generation>.seal.json`` holds the *canonical bytes* of the signed manifest (RFC 8785 via
``seals.canonical_bytes``, no trailing newline), so ``manifest_sha256`` = SHA-256 of the file = SHA-256 of the
canonical bytes of the signed document, and the ``seal`` ledger entry carries exactly that hash.

The manifest records the ledger index its ``seal`` entry gets (``entry_index``). The index is predicted
(= the ledger size) while the sealing process holds the generations lock and then checked against the index
the append returns; the entry in turn carries ``manifest_sha256``, so manifest and entry bind each other.

:class:`SealManifest` is validated in its constructor: a value of this type is always a well-formed manifest.
``from_json`` accepts the signed document (``issuer`` and ``signature`` are ignored there: use :meth:`verify`
to check them against a trusted key) and refuses unknown members.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from keys import MalformedInput, PublicKey, Signer, TrustedKey
from keys.names import SHA256_HEX
from seals.canonical import canonical_bytes, sha256_hex
from seals.signing import ISSUER_FIELD, SIGNATURE_FIELD, sign_document, verify_document
from seals.timeutil import format_utc, parse_utc, parse_utc_text

MANIFEST_TYPE = "heldout/seal-manifest"
MANIFEST_VERSION = 1
SPEC_VERSION = "MedEval-1 v0.1"
#: The commitment scheme, named in every manifest (heldout/generations/commitments.py implements it).
COMMITMENT_SCHEME = (
    "heldout-commit-v1: commitment = SHA-256(salt || JCS{case_id, content_sha256, label}); "
    "set_hash = RFC 6962 Merkle tree hash over leaf_hash(commitment) of the commitments sorted ascending; "
    "content_sha256 = heldout-case-v1"
)
GENERATION_PATTERN = re.compile(r"(gen[1-9][0-9]{0,5}|public)")
TASK_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,63}")
LEDGER_ID_PATTERN = re.compile(r"[0-9a-f]{20}")
MEMBERSHIPS = ("sealed", "public")
BUDGET_BASES = ("default", "explicit", "public")
RELEASE_MODES = ("full", "ladder", "thresholdout")
MAX_SEED = 2**53 - 1
_MEMBERS = frozenset({
    "type", "manifest_version", "generation", "spec_version", "membership", "tasks", "n_cases", "set_hash",
    "commitment_scheme", "created_utc", "expiry_utc", "leakage_budget", "release", "seed", "predecessor",
    "ledger_id", "entry_index", "draw",
})


def _bad(message: str, **evidence: Any) -> MalformedInput:
    return MalformedInput(f"seal manifest: {message}", **evidence)


def check_generation_name(name: Any) -> str:
    if not isinstance(name, str) or not GENERATION_PATTERN.fullmatch(name):
        raise _bad("a generation is named genN (N = 1, 2, ...) or public", field="generation",
                   found=str(name)[:60])
    return name


def _float6(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _bad(f"{what} must be a finite number", field=what, found=repr(value)[:60])
    return round(float(value), 6)


def _int(value: Any, what: str, *, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or value > MAX_SEED:
        raise _bad(f"{what} must be an integer in {low}..2^53-1", field=what, found=repr(value)[:60])
    return value


def _member(body: dict[str, Any], name: str, kind: type | tuple[type, ...], where: str = "") -> Any:
    if name not in body:
        raise _bad(f"lacks {where}{name}", field=f"{where}{name}")
    value = body[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, float, (int, float))):
        raise _bad(f"{where}{name} has the wrong type", field=f"{where}{name}", found=type(value).__name__)
    return value


ORIGINS = ("official", "synthetic", "local")


@dataclass(frozen=True)
class TaskCount:
    """One task's case count; for the public generation also the origin of the file its split came from
    (official only when its MD5 is medmnist's) and the file's SHA-256."""

    task: str
    cases: int
    origin: str | None = None
    sha256: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.task, str) or not TASK_PATTERN.fullmatch(self.task):
            raise _bad("a task name is lowercase letters, digits and '_' (e.g. bloodmnist_224)", field="tasks",
                       found=str(self.task)[:60])
        _int(self.cases, f"tasks.{self.task}.cases", low=1)
        if (self.origin is None) != (self.sha256 is None):
            raise _bad(f"tasks.{self.task}: origin and sha256 go together", field=f"tasks.{self.task}")
        if self.origin is not None and (self.origin not in ORIGINS or not isinstance(self.sha256, str)
                                        or not SHA256_HEX.fullmatch(self.sha256)):
            raise _bad(f"tasks.{self.task}: origin is official, synthetic or local with the file's sha256",
                       field=f"tasks.{self.task}.origin", found=str(self.origin)[:40])

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"cases": self.cases}
        if self.origin is not None:
            body.update(origin=self.origin, sha256=self.sha256)
        return body


@dataclass(frozen=True)
class LeakageBudget:
    """The generation's leakage budget in bits and the parameters it follows from.

    ``bits`` is None only for the public generation (membership and labels are public: nothing to leak).
    ``basis``: ``default`` (bits = (2 n eps^2 - ln(2k/delta)) / ln 2), ``explicit`` (the operator chose the
    bits; ``eps`` is then the error those bits imply under the same bound), or ``public``.
    """

    bits: float | None
    basis: str
    n: int
    k: int
    delta: float
    eps: float | None
    rule: str
    #: Bits the seal itself releases about the labels (each task's smallest class size), spent from the start.
    statement_bits: float = 0.0
    #: Each released statistic family with the n it concentrates at and its eps on its published scale when the
    #: whole budget is spent (heldout.generations.budget.budget_record).
    families: tuple[dict[str, Any], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "statement_bits", _float6(self.statement_bits, "leakage_budget.statement_bits"))
        if self.statement_bits < 0:
            raise _bad("leakage_budget.statement_bits must not be negative", field="leakage_budget.statement_bits")
        if not isinstance(self.families, tuple) or not all(isinstance(f, dict) for f in self.families):
            raise _bad("leakage_budget.families is a list of objects", field="leakage_budget.families")
        if self.basis not in BUDGET_BASES:
            raise _bad("leakage_budget.basis is default, explicit or public", field="leakage_budget.basis",
                       found=str(self.basis)[:40])
        if (self.bits is None) != (self.basis == "public"):
            raise _bad("leakage_budget.bits is null exactly when the basis is public",
                       field="leakage_budget.bits")
        if self.bits is not None:
            object.__setattr__(self, "bits", _float6(self.bits, "leakage_budget.bits"))
            if self.bits < 0:
                raise _bad("leakage_budget.bits must not be negative", field="leakage_budget.bits",
                           found=self.bits)
        _int(self.n, "leakage_budget.n", low=1)
        _int(self.k, "leakage_budget.k", low=1)
        object.__setattr__(self, "delta", _float6(self.delta, "leakage_budget.delta"))
        if not 0 < self.delta < 1:
            raise _bad("leakage_budget.delta must be in (0, 1)", field="leakage_budget.delta", found=self.delta)
        if self.eps is not None:
            object.__setattr__(self, "eps", _float6(self.eps, "leakage_budget.eps"))
            if self.eps <= 0:
                raise _bad("leakage_budget.eps must be positive", field="leakage_budget.eps", found=self.eps)
        if not isinstance(self.rule, str) or not self.rule:
            raise _bad("leakage_budget.rule must be a non-empty string", field="leakage_budget.rule")

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"bits": self.bits, "basis": self.basis, "n": self.n, "k": self.k,
                                "delta": self.delta, "eps": self.eps, "rule": self.rule}
        if self.statement_bits or self.families:
            body["statement_bits"] = self.statement_bits
            body["families"] = [dict(f) for f in self.families]
        return body

    @classmethod
    def from_json(cls, body: Any) -> LeakageBudget:
        if not isinstance(body, dict):
            raise _bad("leakage_budget is not an object", field="leakage_budget")
        extra = set(body) - {"bits", "basis", "n", "k", "delta", "eps", "rule", "statement_bits", "families"}
        if extra:
            raise _bad(f"leakage_budget has unknown members {sorted(extra)}", field="leakage_budget")
        bits = body.get("bits", "missing")
        eps = body.get("eps", "missing")
        if bits == "missing" or eps == "missing":
            raise _bad("leakage_budget lacks bits or eps", field="leakage_budget")
        return cls(bits=bits, basis=_member(body, "basis", str, "leakage_budget."),
                   n=_member(body, "n", int, "leakage_budget."), k=_member(body, "k", int, "leakage_budget."),
                   delta=_member(body, "delta", (int, float), "leakage_budget."), eps=eps,
                   rule=_member(body, "rule", str, "leakage_budget."),
                   statement_bits=body.get("statement_bits", 0.0),
                   families=tuple(body["families"]) if isinstance(body.get("families"), list)
                   else body.get("families", ()))


@dataclass(frozen=True)
class ReleasePolicy:
    """How numbers computed on the generation are released: ``full`` (the whole evaluation object),
    ``ladder`` (only a score that beats the best so far by ``step``, rounded to a multiple of ``step``) or
    ``thresholdout`` (a public estimate unless the held-out score differs from it by more than ``threshold``
    plus noise, then the held-out score plus Laplace(``sigma``) noise rounded to ``step``; the noise comes from
    a secret whose SHA-256 is ``noise_sha256``, published at retirement). See heldout.generations.release."""

    mode: str = "full"
    step: float | None = None
    threshold: float | None = None
    sigma: float | None = None
    noise_sha256: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in RELEASE_MODES:
            raise _bad("release.mode is full, ladder or thresholdout", field="release.mode",
                       found=str(self.mode)[:40])
        if (self.step is None) != (self.mode == "full"):
            raise _bad("release.step is set exactly when the mode is ladder or thresholdout", field="release.step")
        if self.step is not None:
            object.__setattr__(self, "step", _float6(self.step, "release.step"))
            if not 0 < self.step <= 100:
                raise _bad("release.step must be in (0, 100]", field="release.step", found=self.step)
        thresholdout = (self.threshold, self.sigma, self.noise_sha256)
        if (self.mode == "thresholdout") != all(v is not None for v in thresholdout) or \
                (self.mode != "thresholdout" and any(v is not None for v in thresholdout)):
            raise _bad("release.threshold, sigma and noise_sha256 are set exactly when the mode is thresholdout",
                       field="release")
        if self.mode == "thresholdout":
            for name in ("threshold", "sigma"):
                value = _float6(getattr(self, name), f"release.{name}")
                if not 0 < value <= 100:
                    raise _bad(f"release.{name} must be in (0, 100]", field=f"release.{name}", found=value)
                object.__setattr__(self, name, value)
            if not isinstance(self.noise_sha256, str) or not SHA256_HEX.fullmatch(self.noise_sha256):
                raise _bad("release.noise_sha256 must be 64 lowercase hex characters", field="release.noise_sha256")

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"mode": self.mode, "step": self.step}
        if self.mode == "thresholdout":
            body.update(threshold=self.threshold, sigma=self.sigma, noise_sha256=self.noise_sha256)
        return body

    @classmethod
    def from_json(cls, body: Any) -> ReleasePolicy:
        extra = {"threshold", "sigma", "noise_sha256"}
        if not isinstance(body, dict) or set(body) not in ({"mode", "step"}, {"mode", "step"} | extra):
            raise _bad("release is an object {mode, step} (thresholdout: also threshold, sigma, noise_sha256)",
                       field="release")
        return cls(mode=body["mode"], step=body["step"], threshold=body.get("threshold"), sigma=body.get("sigma"),
                   noise_sha256=body.get("noise_sha256"))


@dataclass(frozen=True)
class SealManifest:
    generation: str
    membership: str
    tasks: tuple[TaskCount, ...]
    set_hash: str
    created: datetime
    expiry: datetime
    leakage_budget: LeakageBudget
    release: ReleasePolicy
    seed: int | None
    predecessor: str | None
    ledger_id: str
    entry_index: int
    spec_version: str = SPEC_VERSION
    commitment_scheme: str = COMMITMENT_SCHEME
    n_cases: int = field(default=0)
    #: How the cases were drawn (commit-then-draw, ``heldout/generations/draw.py``); None for ``public``. Its
    #: inner shape is checked by ``heldout.generations.draw.DrawRecord`` (that layer owns the draw).
    draw: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        check_generation_name(self.generation)
        if self.membership not in MEMBERSHIPS:
            raise _bad("membership is sealed or public", field="membership", found=str(self.membership)[:40])
        if (self.membership == "public") != (self.generation == "public"):
            raise _bad("only the public generation has public membership", field="membership",
                       found=self.membership)
        if not isinstance(self.tasks, tuple) or not self.tasks or \
                not all(isinstance(t, TaskCount) for t in self.tasks):
            raise _bad("tasks must list at least one task with its case count", field="tasks")
        names = [t.task for t in self.tasks]
        if names != sorted(set(names)):
            raise _bad("tasks must be sorted by name without repeats", field="tasks", found=names)
        total = sum(t.cases for t in self.tasks)
        if self.n_cases == 0:
            object.__setattr__(self, "n_cases", total)
        if self.n_cases != total:
            raise _bad("n_cases must equal the sum of the task counts", field="n_cases", expected=total,
                       found=self.n_cases)
        if not isinstance(self.set_hash, str) or not SHA256_HEX.fullmatch(self.set_hash):
            raise _bad("set_hash must be 64 lowercase hex characters", field="set_hash")
        for name in ("created", "expiry"):
            moment = getattr(self, name)
            if not isinstance(moment, datetime):
                raise _bad(f"{name}_utc must be a time", field=f"{name}_utc")
            # Seconds precision, UTC: exactly what the JSON form can hold, so round trips are exact.
            object.__setattr__(self, name, parse_utc(format_utc(moment)))
        if self.expiry <= self.created:
            raise _bad("expiry_utc must be after created_utc", field="expiry_utc",
                       expected=f"> {format_utc(self.created)}", found=format_utc(self.expiry))
        if not isinstance(self.leakage_budget, LeakageBudget):
            raise _bad("leakage_budget must be a LeakageBudget", field="leakage_budget")
        if (self.leakage_budget.basis == "public") != (self.membership == "public"):
            raise _bad("the public generation, and only it, has a public (no) budget", field="leakage_budget")
        if not isinstance(self.release, ReleasePolicy):
            raise _bad("release must be a ReleasePolicy", field="release")
        if self.seed is not None:
            _int(self.seed, "seed")
        if self.draw is not None and (not isinstance(self.draw, dict) or self.membership == "public"):
            raise _bad("draw is an object, and null for the public generation", field="draw")
        if self.predecessor is not None:
            check_generation_name(self.predecessor)
            if self.predecessor in (self.generation, "public"):
                raise _bad("predecessor must be an earlier sealed generation", field="predecessor",
                           found=self.predecessor)
        if not isinstance(self.ledger_id, str) or not LEDGER_ID_PATTERN.fullmatch(self.ledger_id):
            raise _bad("ledger_id must be 20 lowercase hex characters", field="ledger_id",
                       found=str(self.ledger_id)[:40])
        _int(self.entry_index, "entry_index", low=1)
        if self.spec_version != SPEC_VERSION:
            raise _bad("unsupported spec_version", field="spec_version", expected=SPEC_VERSION,
                       found=str(self.spec_version)[:60])
        if self.commitment_scheme != COMMITMENT_SCHEME:
            raise _bad("unsupported commitment_scheme", field="commitment_scheme",
                       found=str(self.commitment_scheme)[:80])

    @property
    def task_counts(self) -> dict[str, int]:
        return {t.task: t.cases for t in self.tasks}

    @property
    def task_sources(self) -> dict[str, dict[str, Any]]:
        """``{task: {origin, sha256}}`` for tasks whose file origin is recorded (the public generation)."""
        return {t.task: {"origin": t.origin, "sha256": t.sha256} for t in self.tasks if t.origin is not None}

    def to_json(self) -> dict[str, Any]:
        """The unsigned body (what :meth:`sign` signs)."""
        return {
            "type": MANIFEST_TYPE,
            "manifest_version": MANIFEST_VERSION,
            "generation": self.generation,
            "spec_version": self.spec_version,
            "membership": self.membership,
            "tasks": {t.task: t.to_json() for t in self.tasks},
            "n_cases": self.n_cases,
            "set_hash": self.set_hash,
            "commitment_scheme": self.commitment_scheme,
            "created_utc": format_utc(self.created),
            "expiry_utc": format_utc(self.expiry),
            "leakage_budget": self.leakage_budget.to_json(),
            "release": self.release.to_json(),
            "seed": self.seed,
            "predecessor": self.predecessor,
            "ledger_id": self.ledger_id,
            "entry_index": self.entry_index,
            "draw": self.draw,
        }

    @classmethod
    def from_json(cls, doc: Any) -> SealManifest:
        """Parse a manifest body or signed document (issuer and signature are not checked here)."""
        if not isinstance(doc, dict):
            raise _bad("not a JSON object")
        body = {k: v for k, v in doc.items() if k not in (ISSUER_FIELD, SIGNATURE_FIELD)}
        unknown = set(body) - _MEMBERS
        if unknown:
            raise _bad(f"unknown members {sorted(unknown)}", field=sorted(unknown)[0])
        if body.get("type") != MANIFEST_TYPE:
            raise _bad("type is not a seal manifest", field="type", expected=MANIFEST_TYPE,
                       found=str(body.get("type"))[:60])
        if body.get("manifest_version") != MANIFEST_VERSION:
            raise _bad("unsupported manifest_version", field="manifest_version", expected=MANIFEST_VERSION,
                       found=repr(body.get("manifest_version"))[:20])
        tasks_body = _member(body, "tasks", dict)
        tasks = []
        for task, count in tasks_body.items():
            if not isinstance(count, dict) or set(count) not in ({"cases"}, {"cases", "origin", "sha256"}):
                raise _bad(f"tasks.{task} must be an object {{cases[, origin, sha256]}}", field=f"tasks.{task}")
            tasks.append(TaskCount(task=task, cases=count["cases"], origin=count.get("origin"),
                                   sha256=count.get("sha256")))
        for name in ("seed", "predecessor", "draw"):
            if name not in body:
                raise _bad(f"lacks {name}", field=name)
        return cls(
            generation=_member(body, "generation", str),
            membership=_member(body, "membership", str),
            tasks=tuple(sorted(tasks, key=lambda t: t.task)),
            n_cases=_int(_member(body, "n_cases", int), "n_cases", low=1),
            set_hash=_member(body, "set_hash", str),
            # (section 1 form only: the seal entry carries them as text, and a verifier compares them as text)
            created=parse_utc_text(_member(body, "created_utc", str), what="seal manifest created_utc"),
            expiry=parse_utc_text(_member(body, "expiry_utc", str), what="seal manifest expiry_utc"),
            leakage_budget=LeakageBudget.from_json(body.get("leakage_budget")),
            release=ReleasePolicy.from_json(body.get("release")),
            seed=body["seed"],
            draw=body["draw"],
            predecessor=body["predecessor"],
            ledger_id=_member(body, "ledger_id", str),
            entry_index=_member(body, "entry_index", int),
            spec_version=_member(body, "spec_version", str),
            commitment_scheme=_member(body, "commitment_scheme", str),
        )

    def sign(self, signer: Signer) -> dict[str, Any]:
        """The signed document (body + issuer + signature)."""
        return sign_document(self.to_json(), signer)

    @classmethod
    def verify(cls, doc: Any, trusted: PublicKey | TrustedKey) -> SealManifest:
        """Check the signature against a trusted key, then the shape; raises on either."""
        verified = verify_document(doc, trusted, what="seal manifest")
        return cls.from_json(verified.body)


def manifest_bytes(signed: dict[str, Any]) -> bytes:
    """The published bytes of a signed manifest (the file content; its SHA-256 is ``manifest_sha256``)."""
    return canonical_bytes(signed)


def manifest_sha256(signed: dict[str, Any]) -> str:
    return sha256_hex(manifest_bytes(signed))
