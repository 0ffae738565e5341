"""The operator's side of witnessing: which witnesses a store uses, sending them each new checkpoint, and keeping
their cosignatures in the ledger.

Configuration lives in the store: ``witnesses/witnesses.json`` (``heldout witness add URL --key VKEY``: the
submission URL and ``cosignature/v1`` verifier key of each witness) and optionally ``witnesses/policy`` (a C2SP
tlog-policy file, ``heldout witness policy FILE``) saying what counts as witnessed. Without a policy file the
policy is a majority of the configured witnesses.

Every checkpoint the ledger signs through :func:`attach` is sent to every witness at once (one thread each,
keep-alive connections), with the consistency proof from the size that witness last cosigned (from the
ledger's cosignatures table; 0 at first). A 409 answer carries the witness's size: the request is rebuilt
from that size and sent once more. Each returned cosignature is verified under the witness's key and stored
by the ledger. A witness that is down, slow or refuses changes nothing in the ledger: the append is already
committed; the checkpoint simply lacks that cosignature, and ``heldout witness sync`` retries later with the
latest checkpoint (which covers every earlier one).
"""

from __future__ import annotations

import http.client
import json
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

from heldout.store import Store
from keys import HeldoutError, MalformedInput, UsageError
from keys.files import write_atomic
from keys.safeio import DOCUMENT_LIMIT, read_named
from ledger import Checkpoint, Ledger
from ledger.cosignature import Cosignature, Cosigner, with_cosignatures
from ledger.policy import Policy, QuorumError, Witnessed, parse_policy
from ledger.tiles import deadline_response_class
from ledger.witness import SIZE_CONTENT_TYPE, parse_size_response, request_body
from seals import parse_json_object

CONFIG_FILE = "witnesses.json"
POLICY_FILE = "policy"
REQUEST_TIMEOUT_S = 5.0
MAX_RESPONSE_BYTES = 64 * 1024


def witness_folder(store: Store) -> Path:
    return store.root / "witnesses"


@dataclass(frozen=True)
class WitnessEndpoint:
    url: str
    cosigner: Cosigner

    def to_json(self) -> dict[str, str]:
        return {"url": self.url, "vkey": self.cosigner.vkey}


def check_url(url: str) -> str:
    """``url`` as a witness's submission prefix, or a usage error: urlsplit's own ValueErrors (an unclosed ``[``
    IPv6 host, a port out of range, read lazily by ``.port``) are the same bad input."""
    try:
        parts = urlsplit(url)
        host, _port = parts.hostname, parts.port
    except ValueError:
        host = None
    if not host or parts.scheme not in ("http", "https") or parts.query or parts.fragment:
        raise UsageError("a witness URL is its submission prefix, http(s)://HOST[:PORT][/PATH]", found=url[:200])
    return url.rstrip("/")


def witness_file(path: Path, what: str) -> bytes | None:
    """The bytes of one of the store's witness files (its configuration, its policy); None when there is none.
    Present in any other form (a folder, a FIFO, a link to a device, oversized) it is an error (exit 2), never
    "not configured": a witnessed store would silently stop answering to its witnesses (a seal would draw its
    seed from the checkpoint root, which the operator can grind, and the audit would apply no quorum)."""
    if not os.path.lexists(path):
        return None
    try:
        return read_named(path, limit=DOCUMENT_LIMIT, what=what)
    except MalformedInput as exc:
        raise UsageError(f"the store's {what} is damaged: {exc.message}", path=str(path)) from None


def load_endpoints(store: Store) -> list[WitnessEndpoint]:
    path = witness_folder(store) / CONFIG_FILE
    data = witness_file(path, "witness configuration")
    if data is None:
        return []
    try:
        body = parse_json_object(data, what=str(path))
        return [WitnessEndpoint(check_url(str(item["url"])), Cosigner.from_vkey(str(item["vkey"])))
                for item in body.get("witnesses") or []]
    except (HeldoutError, KeyError, TypeError) as exc:
        raise UsageError(f"the store's witness configuration {path} is unreadable: {exc}", path=str(path)) from None


def add_endpoint(store: Store, url: str, vkey: str) -> WitnessEndpoint:
    """Add (or replace, by witness name) a witness in the store's configuration (the store is created if it does
    not exist yet, once the input is checked)."""
    try:
        endpoint = WitnessEndpoint(check_url(url), Cosigner.from_vkey(vkey))
    except MalformedInput as exc:
        raise UsageError(f"--key: {exc.message}", found=vkey[:120]) from None
    own = {k.key_id for k in store.keyring.list() if k.public_key.raw == endpoint.cosigner.key.raw}
    if own:
        # The store's own key cosigning its own checkpoints would meet the store's quorum for any history.
        raise UsageError(f"--key is the store's own key {sorted(own)[0]!r}: a witness must hold a key of its own",
                         found=endpoint.cosigner.name)
    endpoints = [e for e in load_endpoints(store) if e.cosigner.name != endpoint.cosigner.name]
    endpoints.append(endpoint)
    body = {"witnesses": [e.to_json() for e in endpoints]}
    store.create()  # (only now, every input checked: a refused add writes nothing, not even a store skeleton)
    write_atomic(witness_folder(store) / CONFIG_FILE, (json.dumps(body, indent=1, sort_keys=True) + "\n").encode())
    return endpoint


def default_policy_text(endpoints: Sequence[WitnessEndpoint]) -> str:
    """A majority of the configured witnesses (``quorum none`` without witnesses)."""
    if not endpoints:
        return "quorum none\n"
    lines = [f"witness {e.cosigner.name} {e.cosigner.vkey} {e.url}" for e in endpoints]
    names = " ".join(e.cosigner.name for e in endpoints)
    lines += [f"group configured {len(endpoints) // 2 + 1} {names}", "quorum configured"]
    return "\n".join(lines) + "\n"


def store_policy(store: Store) -> Policy:
    """The store's witness policy: ``witnesses/policy`` when present, else a majority of the configured ones."""
    path = witness_folder(store) / POLICY_FILE
    data = witness_file(path, "witness policy")
    if data is not None:
        return parse_policy(data, what=str(path))
    return parse_policy(default_policy_text(load_endpoints(store)), what="default policy")


def configured_policy(store: Store) -> Policy | None:
    """The policy the store answers to when it is witnessed at all (a ``witnesses/policy`` file, or witnesses
    configured), else None. The policy file alone counts: deleting the witness list must not switch the policy
    off for the audit while ``witness status`` still applies it."""
    if os.path.lexists(witness_folder(store) / POLICY_FILE) or load_endpoints(store):
        return store_policy(store)
    return None


def attested_time(store: Store, ledger: Ledger) -> datetime | None:
    """The time the witnesses attest this ledger has reached, as every verifier judges it: with a witness policy,
    the latest time its quorum attests cosigning a checkpoint (``WitnessedTimes.logged_after`` of the next
    entry), so one witness whose clock runs ahead (or fewer than a quorum) cannot make the operator refuse what
    the audit would accept; without one, the latest cosignature of any witness. None when nothing counts yet."""
    policy = configured_policy(store)
    if policy is None:
        return ledger.witnessed_time()
    # Each witness's latest stored time (verified when it was stored) decides it: what WitnessedTimes gives past
    # the last entry, without a query and signature checks per checkpoint on every evaluation.
    return policy.attested_latest(ledger.witness_latest_times())


def set_policy(store: Store, data: bytes) -> Policy:
    policy = parse_policy(data, what="policy")  # refused before anything is written
    write_atomic(witness_folder(store) / POLICY_FILE, data)
    return policy


@dataclass(frozen=True)
class WitnessOutcome:
    witness: str
    url: str
    ok: bool
    size: int
    detail: str
    timestamp: int | None = None

    def to_json(self) -> dict[str, object]:
        return {"witness": self.witness, "url": self.url, "ok": self.ok, "size": self.size, "detail": self.detail,
                "timestamp": self.timestamp}


@dataclass(frozen=True)
class _Answer:
    status: int
    content_type: str
    body: bytes


class _Connection:
    """One keep-alive HTTP connection to a witness, reopened once when the peer closed it; used by that
    witness's one sender thread only."""

    def __init__(self, url: str, timeout: float) -> None:
        parts = urlsplit(url)
        self.path = (parts.path or "").rstrip("/") + "/add-checkpoint"
        cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        self._make = lambda: cls(parts.hostname or "", parts.port, timeout=timeout)
        self._conn: http.client.HTTPConnection | None = None
        # The whole answer, not only each read, within this: a witness that sends a byte every few seconds
        # (or endless "100 Continue" lines) would otherwise hold its sender thread, and with it the command
        # that waits for the thread at its end, for as long as it likes (red-team round 19).
        self.answer_deadline_s = 2 * timeout

    def post(self, body: bytes) -> _Answer:
        for attempt in (0, 1):
            if self._conn is None:
                self._conn = self._make()
            self._conn.response_class = deadline_response_class(self.answer_deadline_s)
            try:
                self._conn.request("POST", self.path, body=body, headers={"Content-Type": "text/plain"})
                response = self._conn.getresponse()
                data = response.read(MAX_RESPONSE_BYTES + 1)
                if len(data) > MAX_RESPONSE_BYTES:
                    raise OSError("witness response too large")
                answer = _Answer(response.status, response.getheader("Content-Type") or "", data)
                if response.will_close:
                    self.close()
                return answer
            except (http.client.HTTPException, OSError) as exc:
                self.close()
                if attempt or isinstance(exc, TimeoutError):  # (once more only for a kept-alive connection the
                    raise  # peer closed: a witness out of time has had its time)
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class Witnessing:
    """Sends checkpoints to a set of witnesses and stores their cosignatures in the ledger. Usable as the
    ledger's ``after_checkpoint`` hook. ``clock`` stamps when cosignatures were received.

    With a ``policy`` whose quorum needs witnesses, :meth:`witness` returns as soon as the cosignatures it has
    satisfy the quorum (the answers of slower witnesses are then dropped: their state moved on anyway, and the
    next request learns their size from a 409). Each witness has its own sender thread and keep-alive
    connection, and gets at most one request in flight: a witness that hangs delays nobody else."""

    def __init__(self, endpoints: Sequence[WitnessEndpoint], *, clock: Callable[[], datetime],
                 policy: Policy | None = None, timeout: float = REQUEST_TIMEOUT_S) -> None:
        self.endpoints = list(endpoints)
        self.clock = clock
        self.policy = policy if policy is not None and policy.requires_witnesses else None
        self.timeout = timeout
        self._connections = {e.url: _Connection(e.url, timeout) for e in self.endpoints}
        self._senders = {e.url: ThreadPoolExecutor(max_workers=1, thread_name_prefix="witness")
                         for e in self.endpoints}
        self._in_flight: dict[str, Future[_Answer | Exception]] = {}
        self.last_outcomes: list[WitnessOutcome] = []

    def close(self) -> None:
        for sender in self._senders.values():
            sender.shutdown(wait=True)
        for connection in self._connections.values():
            connection.close()

    def __call__(self, ledger: Ledger, checkpoint: Checkpoint) -> None:
        self.witness(ledger, checkpoint)

    def _body(self, ledger: Ledger, old: int, checkpoint: Checkpoint) -> bytes:
        proof = () if old in (0, checkpoint.size) else ledger.consistency_proof(old, checkpoint.size).path
        return request_body(old, proof, checkpoint.note)

    def _send(self, endpoint: WitnessEndpoint, body: bytes) -> _Answer | Exception:
        try:
            return self._connections[endpoint.url].post(body)
        except (http.client.HTTPException, OSError) as exc:
            return exc

    def _quorum_met(self, checkpoint: Checkpoint, received: list[tuple[Cosigner, Cosignature]],
                    stored: list[str], wait_all: bool = False) -> bool:
        if self.policy is None or wait_all:
            return False
        try:
            self.policy.evaluate(with_cosignatures(checkpoint, [*stored, *(c.line for _, c in received)]))
        except HeldoutError:
            return False
        return True

    def witness(self, ledger: Ledger, checkpoint: Checkpoint | None = None, *,
                wait_all: bool = False) -> list[WitnessOutcome]:
        """Send ``checkpoint`` (default: the latest) to the witnesses; store what comes back. Never raises for
        a witness's failure: each outcome says what happened. ``wait_all``: wait for every witness's answer
        (up to the timeout) even once the quorum is met."""
        checkpoint = checkpoint or ledger.latest_checkpoint()
        known = ledger.witness_sizes()
        stored = ledger.cosignature_lines(checkpoint.size)
        pending = {e.url: known.get(e.cosigner.vkey, 0) for e in self.endpoints}
        outcomes: dict[str, WitnessOutcome] = {}
        received: list[tuple[Cosigner, Cosignature]] = []
        by_url = {e.url: e for e in self.endpoints}
        deadline = time.monotonic() + 2 * self.timeout
        for _round in (0, 1):  # the second round only for witnesses that answered 409 with another size
            futures: dict[Future[_Answer | Exception], WitnessEndpoint] = {}
            for url, old in pending.items():
                e = by_url[url]
                busy = self._in_flight.get(url)
                if busy is not None and not busy.done() and wait_all:
                    wait([busy], timeout=self.timeout)  # an earlier, unawaited request: let it finish first
                if busy is not None and not busy.done():
                    outcomes[url] = WitnessOutcome(e.cosigner.name, url, False, checkpoint.size,
                                                   "busy: its previous request is still unanswered")
                elif old > checkpoint.size:
                    outcomes[url] = WitnessOutcome(e.cosigner.name, url, False, old,
                                                   f"the witness has size {old}, larger than this checkpoint")
                else:
                    future = self._senders[url].submit(self._send, e, self._body(ledger, old, checkpoint))
                    self._in_flight[url] = future
                    futures[future] = e
            pending = {}
            waiting = set(futures)
            while waiting and not self._quorum_met(checkpoint, received, stored, wait_all):
                done, waiting = wait(waiting, timeout=max(0.0, deadline - time.monotonic()),
                                     return_when=FIRST_COMPLETED)
                if not done:
                    break
                for future in done:
                    e = futures[future]
                    outcome, retry, cosignature = self._settle(e, checkpoint, future.result())
                    if retry is not None and _round == 0:
                        pending[e.url] = retry
                    if cosignature is not None:
                        received.append((e.cosigner, cosignature))
                    outcomes[e.url] = outcome
            for future in waiting:  # not needed for the quorum: answered later or never, dropped either way
                e = futures[future]
                outcomes[e.url] = WitnessOutcome(e.cosigner.name, e.url, False, checkpoint.size,
                                                 "not awaited: the quorum was met without it"
                                                 if self._quorum_met(checkpoint, received, stored)
                                                 else "no answer in time")
            if not pending or self._quorum_met(checkpoint, received, stored, wait_all):
                break
        if received:  # verified above; the ledger verifies again and stores them in one transaction
            ledger.add_cosignatures(checkpoint.size, received, now=self.clock())
        self.last_outcomes = [outcomes[e.url] for e in self.endpoints if e.url in outcomes]
        return self.last_outcomes

    def _settle(self, endpoint: WitnessEndpoint, checkpoint: Checkpoint, answer: _Answer | Exception
                ) -> tuple[WitnessOutcome, int | None, Cosignature | None]:
        """One witness's answer: the outcome, the size to retry from after a 409, and its verified cosignature."""
        name, url = endpoint.cosigner.name, endpoint.url

        def failed(detail: str) -> WitnessOutcome:
            return WitnessOutcome(name, url, False, checkpoint.size, detail)

        if isinstance(answer, Exception):
            return failed(f"unreachable: {answer}"), None, None
        if answer.status == 409 and answer.content_type.split(";")[0].strip() == SIZE_CONTENT_TYPE:
            try:
                size = parse_size_response(answer.body)
            except HeldoutError as exc:
                return failed(f"409 with a bad body: {exc.message}"), None, None
            return failed(f"409: the witness is at size {size}"), size, None
        if answer.status != 200:
            text = answer.body[:200].decode("utf-8", errors="replace").strip()
            return failed(f"{answer.status}: {text}"), None, None
        try:
            for line in answer.body.decode("utf-8").splitlines(keepends=True):
                try:
                    cosignature = Cosignature.parse_line(line)
                except HeldoutError:
                    continue  # lines by keys we do not know are ignored
                if (cosignature.name, cosignature.key_id) != (endpoint.cosigner.name, endpoint.cosigner.key_id):
                    continue
                cosignature.verify(checkpoint, endpoint.cosigner)
                return (WitnessOutcome(name, url, True, checkpoint.size, "cosigned", cosignature.timestamp), None,
                        cosignature)
        except (HeldoutError, UnicodeDecodeError) as exc:
            return failed(f"bad cosignature: {exc}"), None, None
        return failed("200 without a cosignature by this witness's key"), None, None


def attach(store: Store, ledger: Ledger, *, clock: Callable[[], datetime]) -> Witnessing | None:
    """Make ``ledger`` send every new checkpoint to the store's witnesses (none configured: nothing); an append
    waits until the store's policy quorum has cosigned (or every witness answered, or the timeout)."""
    endpoints = load_endpoints(store)
    if not endpoints:
        return None
    witnessing = Witnessing(endpoints, clock=clock, policy=store_policy(store))
    ledger.after_checkpoint = witnessing
    return witnessing


def witnessed_head(ledger: Ledger, policy: Policy) -> Witnessed:
    """The ledger's latest checkpoint with its cosignatures, evaluated under ``policy`` (raises
    :class:`QuorumError` naming the missing quorum)."""
    return policy.evaluate(ledger.cosigned_checkpoint(), origin=ledger.origin)


def unwitnessed(ledger: Ledger, policy: Policy) -> QuorumError | None:
    try:
        witnessed_head(ledger, policy)
    except QuorumError as exc:
        return exc
    return None
