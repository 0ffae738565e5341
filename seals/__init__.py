"""Signed documents: canonical JSON, signing and verification, seal manifests and passports."""

from seals.canonical import (
    CanonicalError,
    canonical_bytes,
    jcs_bytes,
    parse_json,
    parse_json_object,
    prepare,
    sha256_hex,
)
from seals.passport import EXIT_CODE_FOR_STATE, Passport, PassportState, PassportVerdict, verify_passport
from seals.signing import Issuer, VerifiedDocument, sign_document, signing_payload, verify_document
from seals.timeutil import CLOCK_TOLERANCE, Clock, format_utc, parse_utc, shifted, system_clock

__all__ = [
    "CLOCK_TOLERANCE",
    "EXIT_CODE_FOR_STATE",
    "CanonicalError",
    "Clock",
    "Issuer",
    "Passport",
    "PassportState",
    "PassportVerdict",
    "VerifiedDocument",
    "canonical_bytes",
    "format_utc",
    "jcs_bytes",
    "parse_json",
    "parse_json_object",
    "parse_utc",
    "prepare",
    "sha256_hex",
    "shifted",
    "sign_document",
    "signing_payload",
    "system_clock",
    "verify_document",
    "verify_passport",
]
