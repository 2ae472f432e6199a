"""What a page's part reads of the one `WorkbenchStore` (`workbench.app.store`): its services,
its ledger and dataset, the dataset's trust, and its frame and figure caches. A protocol, so a
part names what it is given without importing the store that builds it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from gate.keys.config import SigningSetup
from gate.ledger import Ledger
from gate.services.chains import AuditChainService
from gate.services.decide import DecisionService
from gate.services.holds import HoldService
from gate.services.lifecycle import LifecycleService
from gate.strict_json import JsonValue
from workbench.dataset.load import Frames, Opened
from workbench.dataset.trust import Trust
from workbench.services.root import Services


class StoreShared(Protocol):
    """The store as its parts see it (`WorkbenchStore` is one)."""

    @property
    def ledger(self) -> Ledger: ...

    @property
    def signing(self) -> SigningSetup: ...

    @property
    def services(self) -> Services: ...

    @property
    def service(self) -> DecisionService: ...

    @property
    def lifecycle(self) -> LifecycleService: ...

    @property
    def audit(self) -> AuditChainService: ...

    @property
    def holds(self) -> HoldService: ...

    @property
    def dataset_dir(self) -> Path: ...

    @property
    def cluster(self) -> str | None: ...

    @property
    def reference(self) -> bool: ...

    @property
    def allow_stale(self) -> bool: ...

    def trust(self) -> Trust: ...

    def opened(self) -> Opened | None: ...

    def current_rulebook(self, scope: str, rulebook_id: str) -> dict[str, JsonValue] | None: ...

    def _manifest_key(self) -> str | None: ...

    def _frames(self, scopes: tuple[str, ...], policy_id: str, limit: int | None,
                manifest_key: str | None = None) -> Frames: ...

    def _remembered(self, key: tuple[Any, ...], compute: Callable[[], Any]) -> Any: ...
