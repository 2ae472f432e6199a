"""Trusted adapter registry: adapters emit facts, the rulebook stays the verdict selector.

Invocation shape (reference facts §3): exactly `adapter_id`, `version` (`^\\d+\\.\\d+\\.\\d+$`),
`manifest_hash` (64 lowercase hex) and `input` (object). Only adapters registered by the
operator can run (shipped in `gate/adapters/builtin/` or installed as plugins under the
`decision_gate.adapters` entry-point group); customer-supplied code is never executed.

`AdapterRegistry.run(invocation)`:

1. `resolve`: invocation shape (422 `TRUSTED_ADAPTER_INVALID`), registered id and version (422
   `TRUSTED_ADAPTER_NOT_REGISTERED`), the caller's pinned `manifest_hash` equal to the
   registered one (422 `TRUSTED_ADAPTER_MANIFEST_MISMATCH`);
2. `input` against the closed input schema (422 `TRUSTED_ADAPTER_INPUT_INVALID`, per field);
3. one-shot isolated worker (`gate.adapters.executor`): 504 `TRUSTED_ADAPTER_EXECUTION_TIMEOUT`
   past 1,000 ms, 500 `TRUSTED_ADAPTER_CAPABILITY_DENIED` when the adapter touched the network,
   wrote a file, started a process or exhausted its memory bound;
4. output against the closed output schema (500 `TRUSTED_ADAPTER_OUTPUT_INVALID`, also for an
   adapter that raised or returned something that is not canonical JSON);
5. facts = input plus derived output; `trusted_adapter` = the record's lineage block.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
import re
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from gate import vocabulary as C
from gate.adapters.executor import WorkerPool
from gate.adapters.manifest import (
    ADAPTER_ID as _ADAPTER_ID,
)
from gate.adapters.manifest import (
    AdapterDefinitionError,
    AdapterManifest,
    RegisteredAdapter,
    adapter_from_source,
    schema_errors,
)
from gate.errors import GateError
from gate.protocol.canonical import CanonicalJSONError, clone, sha256_hex
from gate.protocol.fact_limits import check_facts
from gate.protocol.types import TrustedAdapter
from gate.strict_json import JsonValue

if TYPE_CHECKING:
    from gate.adapters.worker import Job, WorkerMessage

__all__ = [
    "BUILTIN_DIR",
    "AdapterDefinitionError",
    "AdapterRegistry",
    "AdapterRun",
    "RegisteredAdapter",
    "builtin_adapters",
    "default_registry",
    "load_adapter_file",
    "plugin_adapters",
    "validate_invocation",
]

log = logging.getLogger("gate.adapters")

_INVOCATION_KEYS = ("adapter_id", "version", "manifest_hash", "input")
_VERSION = re.compile(r"^\d+\.\d+\.\d+$")
_HASH = re.compile(r"^[0-9a-f]{64}$")
BUILTIN_DIR = Path(__file__).resolve().parent / "builtin"


def validate_invocation(adapter: dict[str, JsonValue]) -> None:
    """Raise `TRUSTED_ADAPTER_INVALID` with every problem of the invocation object."""
    errors: list[dict[str, str]] = []
    for key in sorted(adapter):
        if key not in _INVOCATION_KEYS:
            errors.append({"field": f"adapter.{key}", "code": "unknown_field",
                           "message": f"unknown adapter invocation member {key!r}"})
    checks = (
        ("adapter_id", lambda v: isinstance(v, str) and _ADAPTER_ID.fullmatch(v)),
        ("version", lambda v: isinstance(v, str) and _VERSION.fullmatch(v)),
        ("manifest_hash", lambda v: isinstance(v, str) and _HASH.fullmatch(v)),
        ("input", lambda v: isinstance(v, dict)),
    )
    for key, ok in checks:
        if key not in adapter:
            errors.append({"field": f"adapter.{key}", "code": "missing_field",
                           "message": f"adapter.{key} is required"})
        elif not ok(adapter[key]):
            errors.append({"field": f"adapter.{key}", "code": "invalid_value",
                           "message": f"adapter.{key} is malformed"})
    if errors:
        raise GateError("TRUSTED_ADAPTER_INVALID", "trusted adapter invocation is invalid",
                        errors=errors)


class AdapterExecution(TypedDict):
    """How a published adapter runs (the execution contract; not hashed)."""

    execution_isolation: str
    capability_enforcement: str
    execution_timeout_ms: int
    memory_limit_mb: int | None


class PublishedManifest(AdapterManifest):
    """A manifest as the public adapter registry lists it: with its hash, origin and execution."""

    manifest_hash: str
    origin: str
    execution: AdapterExecution


@dataclass(frozen=True)
class AdapterRun:
    """One completed adapter run: what the rulebook evaluates and what the record carries."""

    adapter: RegisteredAdapter
    facts: dict[str, JsonValue]           # input plus derived output: the rulebook's facts
    trusted_adapter: TrustedAdapter  # the record's `trusted_adapter` block
    adapter_facts: dict[str, JsonValue]    # the record's `adapter_facts` (same content as `facts`)
    output: dict[str, Any]          # the adapter's derived facts alone
    duration_ms: float


def load_adapter_file(path: str | Path, *, module_name: str | None = None,
                      origin: str = "registered") -> RegisteredAdapter:
    """Read and validate one adapter source file (no code of it runs in this process)."""
    path = Path(path)
    return adapter_from_source(path.read_bytes(), filename=str(path),
                               module_name=module_name or path.stem, origin=origin)


def builtin_adapters() -> list[RegisteredAdapter]:
    """The adapters shipped with the gate (`gate/adapters/builtin/*.py`), read and checked once per
    process: they are the installed package's own files, and each app built them anew (12 ms of the
    52 ms an app took to build: its manifests' schemas checked, its sources parsed). A
    `RegisteredAdapter` is frozen and its validators keep no state, so every registry shares them."""
    return list(_builtin_adapters())


@functools.cache
def _builtin_adapters() -> tuple[RegisteredAdapter, ...]:
    return tuple(load_adapter_file(path, module_name=f"gate.adapters.builtin.{path.stem}", origin="builtin")
                 for path in sorted(BUILTIN_DIR.glob("*.py")) if path.name != "__init__.py")


def plugin_adapters(group: str = C.ADAPTER_ENTRY_POINT_GROUP) -> list[RegisteredAdapter]:
    """Adapters installed as plugins: each entry point of `group` names an adapter *module*
    (``name = "package.module"``). The module's file is located without importing it; a plugin
    that cannot be read or validated is logged and left out (it then answers
    TRUSTED_ADAPTER_NOT_REGISTERED)."""
    found = []
    for entry in _entry_points(group, _search_path_state()):
        module_name = entry.value.split(":", 1)[0].strip()
        try:
            spec = importlib.util.find_spec(module_name)
            if spec is None or not spec.origin or not spec.origin.endswith(".py"):
                raise AdapterDefinitionError(f"{module_name}: no Python source file")
            found.append(load_adapter_file(spec.origin, module_name=module_name, origin="plugin"))
        except (ImportError, OSError, ValueError) as exc:
            log.error("trusted adapter plugin %r (%s) not registered: %s", entry.name, module_name, exc)
    return found


def _search_path_state() -> tuple[tuple[str, int], ...]:
    """Each entry of `sys.path` with its directory's last change (ns; -1: none there). Installing,
    upgrading or removing a distribution adds or removes its `.dist-info` directory, which changes
    the directory it is in, as prepending a folder changes the path: either gives a new state."""
    state = []
    for entry in sys.path:
        try:
            state.append((entry, os.stat(entry or ".").st_mtime_ns))
        except OSError:
            state.append((entry, -1))
    return tuple(state)


@functools.lru_cache(maxsize=16)
def _entry_points(group: str, _state: tuple[tuple[str, int], ...]) -> tuple[EntryPoint, ...]:
    """The installed entry points of `group`, read once per state of the search path: reading every
    installed distribution's `entry_points.txt` took 6-8 ms of each app's build (every test that
    builds an app, every server worker at boot). Only an `entry_points.txt` edited in place, under
    an unchanged `.dist-info`, would be missed until the path changes (pip never does that)."""
    return tuple(entry_points(group=group))


class AdapterRegistry:
    """Operator-registered adapters by (adapter_id, version), run in one-shot workers."""

    def __init__(self, adapters: Iterable[RegisteredAdapter] = (), *, pool: WorkerPool | None = None) -> None:
        self._adapters: dict[tuple[str, str], RegisteredAdapter] = {}
        self._lock = threading.Lock()
        self._pool = pool
        for adapter in adapters:
            self.register(adapter)

    @property
    def pool(self) -> WorkerPool:
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    self._pool = WorkerPool(size=0)
        return self._pool

    def register(self, adapter: RegisteredAdapter) -> RegisteredAdapter:
        """Add an adapter. The same (id, version) with another manifest hash is refused: a changed
        adapter is a new version (compatibility rule 3)."""
        key = (adapter.adapter_id, adapter.version)
        with self._lock:
            existing = self._adapters.get(key)
            if existing is not None and existing.manifest_hash != adapter.manifest_hash:
                raise AdapterDefinitionError(
                    f"adapter {key[0]}@{key[1]} is already registered with manifest {existing.manifest_hash}")
            self._adapters[key] = adapter
        return adapter

    def get(self, adapter_id: str, version: str) -> RegisteredAdapter | None:
        return self._adapters.get((adapter_id, version))

    # ------------------------------------------------------------------ public manifests

    @staticmethod
    def published(adapter: RegisteredAdapter, pool: WorkerPool | None = None) -> PublishedManifest:
        """A manifest as `GET /api/decision/adapters` lists it: the hashed manifest, its
        `manifest_hash`, where it comes from and the execution contract (not hashed)."""
        manifest: AdapterManifest = clone(adapter.manifest)
        return {
            **manifest,
            "manifest_hash": adapter.manifest_hash,
            "origin": adapter.origin,
            "execution": {
                "execution_isolation": C.ADAPTER_EXECUTION_ISOLATION,
                "capability_enforcement": C.ADAPTER_CAPABILITY_ENFORCEMENT,
                "execution_timeout_ms": C.ADAPTER_EXECUTION_TIMEOUT_MS,
                "memory_limit_mb": pool.memory_mb if pool is not None else None,
            },
        }

    def manifests(self) -> list[PublishedManifest]:
        """Every registered manifest with its hashes, sorted by id then version."""
        ordered = sorted(self._adapters.values(),
                         key=lambda a: (a.adapter_id, tuple(int(p) for p in a.version.split("."))))
        return [self.published(adapter, self.pool) for adapter in ordered]

    # ------------------------------------------------------------------ resolve and run

    def resolve(self, invocation: dict[str, Any]) -> RegisteredAdapter:
        validate_invocation(invocation)
        registered = self._adapters.get((invocation["adapter_id"], invocation["version"]))
        if registered is None:
            raise GateError(
                "TRUSTED_ADAPTER_NOT_REGISTERED",
                f"adapter {invocation['adapter_id']}@{invocation['version']} is not registered on this gate",
                adapter_id=invocation["adapter_id"],
                version=invocation["version"],
            )
        if invocation["manifest_hash"] != registered.manifest_hash:
            raise GateError(
                "TRUSTED_ADAPTER_MANIFEST_MISMATCH",
                f"adapter {registered.adapter_id}@{registered.version} is registered with another manifest hash",
                adapter_id=registered.adapter_id,
                version=registered.version,
                expected_manifest_hash=invocation["manifest_hash"],
                registered_manifest_hash=registered.manifest_hash,
            )
        return registered

    def run(self, invocation: dict[str, Any]) -> AdapterRun:
        """Resolve the pinned adapter, check its input, run it in a one-shot worker, check its
        output and bind both hashes into the record's `trusted_adapter` block."""
        adapter = self.resolve(invocation)
        detail = {"adapter_id": adapter.adapter_id, "version": adapter.version}
        payload = invocation["input"]
        input_hash = _checked_input(adapter, payload, detail)
        job: Job = {"module": adapter.module_name, "filename": adapter.filename, "source": adapter.source,
               "input": payload, "path": [p for p in sys.path if p]}
        message = self.pool.execute(job, **detail)
        output = _checked_output(adapter, message, detail)
        facts = {**payload, **output}
        try:
            output_hash = sha256_hex(facts)
        except (CanonicalJSONError, ValueError):
            raise GateError("TRUSTED_ADAPTER_OUTPUT_INVALID", "adapter output is not canonical JSON",
                            reason="not_canonical", **detail) from None
        return AdapterRun(adapter=adapter, facts=facts,
                          trusted_adapter=self._trusted_adapter(adapter, input_hash, output_hash),
                          adapter_facts=clone(facts), output=output,
                          duration_ms=float(message.get("duration_ms") or 0.0))

    def _trusted_adapter(self, adapter: RegisteredAdapter, input_hash: str, output_hash: str) -> TrustedAdapter:
        """The record's `trusted_adapter` block: which adapter ran, on what, with what result."""
        return {
            "manifest_version": adapter.manifest["manifest_version"],
            "adapter_id": adapter.adapter_id,
            "version": adapter.version,
            "implementation_revision": adapter.manifest["implementation_revision"],
            "implementation_hash": adapter.implementation_hash,
            "manifest_hash": adapter.manifest_hash,
            "input_hash": input_hash,
            "output_hash": output_hash,
            "execution_isolation": C.ADAPTER_EXECUTION_ISOLATION,
            "capability_enforcement": C.ADAPTER_CAPABILITY_ENFORCEMENT,
            "execution_timeout_ms": self.pool.timeout_ms,
        }


def _checked_input(adapter: RegisteredAdapter, payload: Any, detail: dict[str, str]) -> str:
    """The input's hash, once it is bounded, matches the closed input schema and is canonical."""
    check_facts(payload)  # SECURITY: bounded before any walk (422 EVALUATION_INPUT_TOO_LARGE)
    errors = schema_errors(adapter.input_validator, payload, "adapter.input")
    if errors:
        raise GateError("TRUSTED_ADAPTER_INPUT_INVALID",
                        "adapter input does not match the adapter's closed input schema",
                        errors=errors, **detail)
    try:
        return sha256_hex(payload)
    except (CanonicalJSONError, ValueError):
        raise GateError("TRUSTED_ADAPTER_INPUT_INVALID", "adapter input is not canonical JSON",
                        errors=[{"field": "adapter.input", "code": "invalid_value",
                                 "message": "not representable as canonical JSON"}], **detail) from None


def _checked_output(adapter: RegisteredAdapter, message: WorkerMessage, detail: dict[str, str]) -> dict[str, JsonValue]:
    """The adapter's output from the worker's result, once no capability was refused, the run
    succeeded and the output matches the closed output schema."""
    denied = message.get("denied") or []
    if message.get("error") == "memory" and not denied:
        denied = ["memory"]
    if denied:
        raise GateError("TRUSTED_ADAPTER_CAPABILITY_DENIED",
                        "the adapter attempted a capability its worker denies",
                        capabilities=sorted({str(d) for d in denied})[:16], **detail)
    if not message.get("ok"):
        raise GateError("TRUSTED_ADAPTER_OUTPUT_INVALID", "the adapter produced no output",
                        reason=str(message.get("error")), exception=str(message.get("type"))[:120],
                        **detail)
    output = message.get("output")
    errors = schema_errors(adapter.output_validator, output, "output")
    if errors or not isinstance(output, dict):  # the output schema is `type: object`
        raise GateError("TRUSTED_ADAPTER_OUTPUT_INVALID",
                        "adapter output does not match the adapter's closed output schema",
                        errors=errors, **detail)
    return output


def default_registry(*, pool_size: int = 2, memory_mb: int = 256, plugins: bool = True) -> AdapterRegistry:
    """Builtins plus entry-point plugins, with a warm pool of `pool_size` one-shot workers
    (started lazily on first use, so a forking server starts them in each worker process)."""
    pool = WorkerPool(size=pool_size, memory_mb=memory_mb, timeout_ms=C.ADAPTER_EXECUTION_TIMEOUT_MS)
    registry = AdapterRegistry(pool=pool)
    for adapter in builtin_adapters():
        registry.register(adapter)
    if plugins:
        for adapter in plugin_adapters():
            try:
                registry.register(adapter)
            except AdapterDefinitionError as exc:
                log.error("trusted adapter plugin not registered: %s", exc)
    return registry
