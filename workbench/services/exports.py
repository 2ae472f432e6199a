"""The export use case: the ledger into the signed dataset, and the dataset's rollups rebuilt.

The one signing rule for datasets, in every shell (`gate export`, `gate export --rebuild-rollups`,
the workbench's refresh): the manifest is signed with the gate's dataset key
(`workbench.signing.dataset_signer`: the keyring's active Ed25519 key, else the HMAC receipt
secret). Without a key the export is refused before anything is opened or written
(`SigningRefused`, SIGNING_KEY_MISSING), unless the operator asked for unsigned output by
turning signing off (GATE_REQUIRE_SIGNING=false): the dataset is then written unsigned, and
readers refuse it without their own opt-in (`--allow-unsigned`). There is no other way to an
unsigned dataset.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gate.keys.config import LiveSigning, SigningSetup
    from gate.keys.signing import ReceiptSigner
    from gate.ledger import Ledger
    from workbench.dataset.export import ExportResult
    from workbench.dataset.manifest import DatasetManifest

__all__ = ["DatasetExport", "ExportService"]


@dataclass(frozen=True)
class DatasetExport:
    """One export (or rollup rebuild) whose signer the rule has chosen: the signer, and the keys
    an earlier run's manifest must verify with."""

    signer: ReceiptSigner | None
    signing: SigningSetup | LiveSigning

    def run(self, ledger: Ledger, out: str, **options: Any) -> ExportResult:
        """What is new in `ledger` into the dataset at `out` (`workbench.dataset.export.export_ledger`;
        `options`: scope, batch size, settle seconds, progress, Iceberg target and layout)."""
        from workbench.dataset.export import export_ledger

        return export_ledger(ledger, out, signer=self.signer, anchors=self.signing.trust_anchors(), **options)

    def rebuild_rollups(self, out: str, *, cluster: Any = None,
                        progress: Callable[[int, int], None] | None = None) -> DatasetManifest:
        """Every partition's rollups of the dataset at `out` recomputed and committed (on the Dask
        `cluster` client's workers when given); the committed manifest."""
        if cluster is None:
            from workbench.dataset.rebuild import rebuild_rollups

            return rebuild_rollups(out, signer=self.signer, progress=progress, anchors=self.signing.trust_anchors())
        from workbench.cluster.rebuild import cluster_rebuild

        return cluster_rebuild(cluster, out, signer=self.signer, progress=progress,
                               anchors=self.signing.trust_anchors())


@dataclass(frozen=True)
class ExportService:
    """Exports signed with the gate's keys (`signing`)."""

    signing: SigningSetup | LiveSigning

    def begin(self) -> DatasetExport:
        """An export signed by the rule (module doc); `SigningRefused` (nothing opened, nothing
        written) when there is no key while signing is required."""
        from workbench.signing import dataset_signer

        return DatasetExport(dataset_signer(self.signing), self.signing)
