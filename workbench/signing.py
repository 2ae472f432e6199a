"""The one signing rule for what a release may trust, in every shell: signed, or not written.
Every shell reaches it through the same services (`workbench.services.exports` for datasets,
`workbench.services.dry_runs` for results).

`gate export` and the workbench's dataset refresh sign a dataset manifest with `dataset_signer`;
`gate dry-run` and the Migration page's export sign a `rulebook_migration_v1` manifest with
`result_signer`. Both refuse (`SigningRefused`, nothing written) when the gate requires signing
(GATE_REQUIRE_SIGNING, the default) and has no key; `result_signer` also refuses to sign a result
over a dataset that lags the live ledger past the bound (`dry_run.source.stale`, docs/dataset.md)
unless the caller says `allow_stale` (`gate dry-run --allow-stale`): the signed manifest then
names the lag. With signing not required and no key, both write unsigned output, which no
release trusts (`gate dry-run --verify` reports it unsigned).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gate.keys.signing import ReceiptSigner, receipt_signer_for
from workbench.migration.errors import DryRunError

__all__ = ["SigningRefused", "dataset_signer", "result_signer"]

NO_KEY_FIX = ("run `gate keys signing-init` (or set GATE_RECEIPT_HMAC_SECRET), or GATE_REQUIRE_SIGNING=false "
              "for unsigned output that no release trusts")


class SigningRefused(DryRunError):
    """Nothing was written: `code` SIGNING_KEY_MISSING or DATASET_STALE, `message` one line."""


def _required(signing: Any) -> bool:
    return bool(signing.required)


def dataset_signer(signing: Any) -> ReceiptSigner | None:
    """The key that signs a dataset manifest: the keyring's active Ed25519 key (anyone with the
    public key registry verifies it offline), else the HMAC receipt secret; None only when
    signing is not required. `signing`: a `gate.keys.config.SigningSetup` or `LiveSigning`."""
    signer: ReceiptSigner | None = receipt_signer_for(signing.attestation_key()) or signing.receipt_signer()
    if signer is None and _required(signing):
        raise SigningRefused("SIGNING_KEY_MISSING", f"no key to sign the dataset manifest: {NO_KEY_FIX}")
    return signer


def result_signer(signing: Any, source: Mapping[str, Any] | None = None, *,
                  allow_stale: bool = False) -> ReceiptSigner | None:
    """The key that signs a dry-run's manifest (the receipt key); None only when signing is not
    required. With the run's `source` (`History.source`): refused when the dataset is stale and
    `allow_stale` is not given."""
    signer: ReceiptSigner | None = signing.receipt_signer()
    if signer is None and _required(signing):
        raise SigningRefused("SIGNING_KEY_MISSING", f"no receipt key to sign the result: {NO_KEY_FIX}")
    stale = (source or {}).get("stale")
    if signer is not None and stale and not allow_stale:
        raise SigningRefused(
            "DATASET_STALE",
            f"the dataset lags the live ledger by {stale['lag_seconds']} s (bound {stale['bound_seconds']} s, "
            f"GATE_DATASET_STALE_AFTER; scopes behind: {', '.join(stale['behind_scopes'])}): export it again "
            "(`gate export`), or give --allow-stale to sign a result that names the lag")
    return signer
