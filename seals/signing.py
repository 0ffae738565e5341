"""Signed documents: canonical JSON objects carrying ``issuer`` and ``signature`` (the reference passport's
convention). The signature is Ed25519 over the canonical bytes of the document without ``signature``.

Verification trusts a key only when the caller supplies it (keyring or ``--key``): the embedded issuer key
is compared with the trusted one, never trusted on its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from keys import (
    ALGO,
    InvalidSignature,
    MalformedInput,
    PublicKey,
    Signer,
    TrustedKey,
    UntrustedKey,
    b64decode_strict,
    b64encode,
)
from seals.canonical import canonical_bytes, jcs_bytes, prepare

SIGNATURE_FIELD = "signature"
ISSUER_FIELD = "issuer"


@dataclass(frozen=True)
class Issuer:
    """Who signed a document: ``{algo, key_id, name, public_key_b64}``."""

    algo: str
    key_id: str
    name: str
    public_key: PublicKey

    @classmethod
    def from_signer(cls, signer: Signer) -> Issuer:
        return cls(ALGO, signer.key_id, signer.name, signer.public_key)

    @classmethod
    def from_json(cls, body: Any) -> Issuer:
        if not isinstance(body, dict):
            raise MalformedInput("document has no issuer object", field=ISSUER_FIELD)
        for member in ("algo", "key_id", "name", "public_key_b64"):
            if not isinstance(body.get(member), str):
                raise MalformedInput(f"issuer.{member} is missing or not a string", field=f"issuer.{member}")
        if body["algo"] != ALGO:
            raise MalformedInput("issuer.algo is not Ed25519", field="issuer.algo", expected=ALGO,
                                 found=body["algo"])
        return cls(body["algo"], body["key_id"], body["name"], PublicKey.from_b64(body["public_key_b64"]))

    def to_json(self) -> dict[str, str]:
        return {"algo": self.algo, "key_id": self.key_id, "name": self.name, "public_key_b64": self.public_key.b64}


@dataclass(frozen=True)
class VerifiedDocument:
    """A document whose signature verified under a trusted key. ``body`` excludes the signature."""

    body: dict[str, Any]
    issuer: Issuer
    signed_bytes: bytes


def signing_payload(doc: dict[str, Any]) -> bytes:
    """The bytes a signature covers: JCS of the document without ``signature``."""
    return jcs_bytes({k: v for k, v in doc.items() if k != SIGNATURE_FIELD})


def sign_document(doc: dict[str, Any], signer: Signer) -> dict[str, Any]:
    """Return a new document: ``doc`` prepared for emission (floats rounded once), with the signer's
    ``issuer`` and a ``signature`` over the canonical bytes."""
    body = prepare({k: v for k, v in doc.items() if k != SIGNATURE_FIELD})
    body[ISSUER_FIELD] = Issuer.from_signer(signer).to_json()
    payload = canonical_bytes(body)
    return {**body, SIGNATURE_FIELD: b64encode(signer.sign(payload))}


def _trusted_public_key(trusted: PublicKey | TrustedKey) -> PublicKey:
    return trusted.public_key if isinstance(trusted, TrustedKey) else trusted


def verify_document(doc: Any, trusted: PublicKey | TrustedKey, *, what: str = "document") -> VerifiedDocument:
    """Verify ``doc`` against a trusted key. Raises :class:`MalformedInput` for a document of the wrong
    shape, :class:`UntrustedKey` when the embedded issuer is not the trusted key, :class:`InvalidSignature`
    when the signature does not verify."""
    if not isinstance(doc, dict):
        raise MalformedInput(f"{what} is not a JSON object")
    if SIGNATURE_FIELD not in doc:
        raise MalformedInput(f"{what} has no signature member", field=SIGNATURE_FIELD)
    signature = b64decode_strict(doc[SIGNATURE_FIELD], what=f"{what} signature")
    if len(signature) != 64:
        raise MalformedInput(f"{what} signature is {len(signature)} bytes; Ed25519 signatures are 64",
                             field=SIGNATURE_FIELD, expected=64, found=len(signature))
    issuer = Issuer.from_json(doc.get(ISSUER_FIELD))
    key = _trusted_public_key(trusted)
    if issuer.public_key != key:
        raise UntrustedKey(
            f"{what} is issued under a key that is not the trusted one",
            field="issuer.public_key_b64", expected=key.b64, found=issuer.public_key.b64,
        )
    if isinstance(trusted, TrustedKey) and issuer.key_id != trusted.key_id:
        raise UntrustedKey(f"{what} names key id {issuer.key_id!r}; the trusted key is {trusted.key_id!r}",
                           field="issuer.key_id", expected=trusted.key_id, found=issuer.key_id)
    payload = signing_payload(doc)
    try:
        key.verify(payload, signature)
    except InvalidSignature as exc:
        raise InvalidSignature(
            f"{what} signature does not verify: the signed content was changed or signed by another key",
            field=SIGNATURE_FIELD, key_id=issuer.key_id,
        ) from exc
    return VerifiedDocument(
        body={k: v for k, v in doc.items() if k != SIGNATURE_FIELD}, issuer=issuer, signed_bytes=payload
    )
