"""Decision Record verification: the one code path for the API, the CLI and offline use.

`verify_record(record, anchors=..., original_input=..., request_public_key=...)` recomputes
every hash the record states, checks the receipt signature and the attestation signatures
against *trust anchors*, and reports each step as a named check (True / False / None for
"not applicable or not checkable"). Each step is a function that returns its `CheckResult`.
Expected failures are values; only a record that is not a JSON object raises
(`VerificationInputError`).

Trust: only keys in `TrustAnchors` (server key registry, an operator-supplied key registry
file or PEM, an HMAC secret) can make a record authentic. A public key that arrives inside the
request or inside the record is never a trust anchor; it is used only for the diagnostic check
`signature_matches_untrusted_key` (and `rulebook_attestation_signature_matches_untrusted_key`).
HMAC records are authentic only to a holder of the secret. Digests and signatures are
compared with `hmac.compare_digest`.

See docs/verification.md for the algorithm written out step by step.
"""

from __future__ import annotations

from gate.keys.anchors import (
    SOURCE_HMAC_SECRET,
    SOURCE_KEY_REGISTRY_FILE,
    SOURCE_KEY_REGISTRY_URL,
    SOURCE_PUBLIC_KEY_PEM,
    SOURCE_SERVER_KEY_REGISTRY,
    TrustAnchorError,
    TrustAnchors,
    TrustedEd25519Key,
    TrustedHmacSecret,
)
from gate.verify.record import (
    RULEBOOK_RECORD_ALLOWED,
    RULEBOOK_RECORD_REQUIRED,
    VerificationInputError,
    input_hash_of,
    verify_record,
    verify_request_body,
)
from gate.verify.result import (
    AUTHENTICITY_CHECKS,
    DIAGNOSTIC_CHECKS,
    INTEGRITY_CHECKS,
    CheckResult,
    CheckValue,
    VerificationResult,
)

__all__ = [
    "AUTHENTICITY_CHECKS",
    "DIAGNOSTIC_CHECKS",
    "INTEGRITY_CHECKS",
    "RULEBOOK_RECORD_ALLOWED",
    "RULEBOOK_RECORD_REQUIRED",
    "SOURCE_HMAC_SECRET",
    "SOURCE_KEY_REGISTRY_FILE",
    "SOURCE_KEY_REGISTRY_URL",
    "SOURCE_PUBLIC_KEY_PEM",
    "SOURCE_SERVER_KEY_REGISTRY",
    "CheckResult",
    "CheckValue",
    "TrustAnchorError",
    "TrustAnchors",
    "TrustedEd25519Key",
    "TrustedHmacSecret",
    "VerificationInputError",
    "VerificationResult",
    "input_hash_of",
    "verify_record",
    "verify_request_body",
]
