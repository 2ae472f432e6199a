"""Whether a reader may trust a dataset: its signature, its freshness, and the reader's opt-ins.

Every reader opens a dataset through `workbench.dataset.load.open_dataset(root, trust)`, which
reads the manifest and asks `verdict(manifest, location, trust)` here. The answer is one of:

* signed: the manifest's `dataset_hash` matches its content and its signature verifies against
  `trust.anchors` (public keys: a saved key registry, `--key-registry` or GATE_KEY_REGISTRY, the
  keys a remote gate publishes pinned by fingerprint; and the gate's own keyring and HMAC secret
  where they are at hand). Verifying never needs a secret: a reader with no private key trusts
  the public registry. Only then does a report's `source` name the signing `key_id`;
* unsigned, by opt-in: the manifest carries no signature (a synthetic dataset, an export made with
  GATE_REQUIRE_SIGNING=false) and the reader said `allow_unsigned` (`--allow-unsigned`,
  GATE_ALLOW_UNSIGNED=1). Every report then carries `source.trust: "unsigned"` and `key_id: null`;
* refused (`Untrusted`, one line): a changed manifest, a signature that does not verify or names
  a key this reader does not trust, a missing signature without the opt-in, or a rollback.

Freshness. A reader with a home (`trust.seen_path`: `$GATE_HOME/cache/dataset-newest.json`, beside
the digest store) remembers, per dataset location, the newest signed manifest it has opened and
the hashes before it. A manifest it has seen replaced, or one whose signed run counter or chain
heads are behind the newest seen, is refused as a rollback; one whose `previous_dataset_hash` is
the newest seen (or a later run with no chain behind) becomes the newest. Where the live ledger is
at hand (`trust.ledger_heads`), a dataset whose chain heads are behind the ledger's by more than
`trust.stale_after` seconds (GATE_DATASET_STALE_AFTER, default one day) is marked stale: its
`source.stale` names the lag and the bound, pages and reports show it, and a dry-run over it
refuses to sign unless told `--allow-stale`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict

from gate.errors import CodedError
from gate.keys.anchors import SOURCE_KEY_REGISTRY_FILE, TrustAnchorError, TrustAnchors
from workbench.dataset.integrity import dataset_hash, signature_problem
from workbench.dataset.manifest import DatasetManifest

__all__ = ["DEFAULT_STALE_AFTER", "KEY_REGISTRY_SETTING", "DatasetTrust", "Staleness", "Trust", "Untrusted",
           "reader_trust", "registry_anchors", "seen_store_of", "stale_after_setting", "trust_of", "trust_text",
           "verdict"]

DEFAULT_STALE_AFTER = 86_400  # seconds a dataset may lag the live ledger before it is marked stale
SEEN_HASHES = 1_000  # earlier manifest hashes remembered per location (a rollback to one is named)
KEY_REGISTRY_SETTING = "GATE_KEY_REGISTRY"  # a saved public key registry every reader trusts
MAX_REGISTRY_BYTES = 4 * 1024 * 1024
UNSIGNED_HINT = "give --allow-unsigned (GATE_ALLOW_UNSIGNED=1) to read unsigned synthetic or local data as unsigned"


class Staleness(TypedDict):
    """`source.stale`: how far a dataset is behind the live ledger (`staleness`)."""

    lag_seconds: int
    bound_seconds: int
    behind_scopes: list[str]


class DatasetTrust(TypedDict):
    """A dataset's trust status (`verdict`): the `source` member every report of it names."""

    kind: Literal["dataset"]
    dataset_hash: str
    key_id: str | None  # only when the signature verified
    trust: Literal["signed", "unsigned"]
    synthetic: bool
    stale: NotRequired[Staleness]


class Untrusted(CodedError, ValueError):
    """The dataset may not be read: one line saying why (the caller adds where)."""

    CODE = "DATASET_UNTRUSTED"


@dataclass(frozen=True)
class Trust:
    """What a reader trusts. `anchors` None: no key registry (nothing verifies as signed)."""

    anchors: TrustAnchors | None = None
    allow_unsigned: bool = False
    seen_path: Path | None = None  # the reader's newest-seen state (None: no rollback check)
    ledger_heads: Sequence[Mapping[str, Any]] | None = None  # the live ledger's chain heads, when at hand
    stale_after: int = DEFAULT_STALE_AFTER

    @classmethod
    def unchecked(cls) -> Trust:
        """A library caller that names no trust: every manifest is read as unsigned (no key is
        ever named) and nothing is remembered. The CLI, the workbench and the notebooks never use it."""
        return cls(anchors=None, allow_unsigned=True)


def trust_of(value: Trust | TrustAnchors | None) -> Trust:
    """A `Trust` from what older callers pass: None (unchecked), or anchors (signed required)."""
    if isinstance(value, Trust):
        return value
    if value is None:
        return Trust.unchecked()
    return Trust(anchors=value)


def stale_after_setting(env: Mapping[str, str] | None = None) -> int:
    """GATE_DATASET_STALE_AFTER (seconds, 0 or more), else the default; a bad value raises Untrusted."""
    raw = (os.environ if env is None else env).get("GATE_DATASET_STALE_AFTER", "").strip()
    if not raw:
        return DEFAULT_STALE_AFTER
    if not raw.isdigit():
        raise Untrusted(f"GATE_DATASET_STALE_AFTER must be a whole number of seconds, not {raw!r}")
    return int(raw)


def registry_anchors(location: str | Path | None) -> TrustAnchors:
    """The public keys of a saved receipt key registry (`GET /api/decision/receipt-keys` of the
    gate, saved to a file): no secret. None or empty: no key. Untrusted when it cannot be used."""
    if location is None or not str(location).strip():
        return TrustAnchors()
    try:
        with open(location, "rb") as handle:
            body = handle.read(MAX_REGISTRY_BYTES + 1)
    except OSError as exc:
        raise Untrusted(f"cannot read the key registry {location}: {exc.strerror}") from None
    if len(body) > MAX_REGISTRY_BYTES:
        raise Untrusted(f"the key registry {location} is larger than 4 MiB")
    try:
        return TrustAnchors.from_registry_body(body, SOURCE_KEY_REGISTRY_FILE)
    except TrustAnchorError as exc:
        raise Untrusted(f"the key registry {location}: {exc.message}") from None


def seen_store_of(home: Path) -> Path:
    """Where a reader with a home keeps the newest manifest it has seen per dataset location."""
    return Path(home) / "cache" / "dataset-newest.json"


def verdict(manifest: DatasetManifest, uri: str, trust: Trust) -> DatasetTrust:
    """The dataset's trust status (a report's `source`), or Untrusted. Records the manifest as
    the newest seen for `uri` when it is signed and ahead."""
    digest = dataset_hash(manifest)
    if manifest.get("dataset_hash") != digest:
        raise Untrusted("its dataset_hash does not match its content (the manifest was changed after it was sealed)")
    signed = isinstance(manifest.get("signature"), Mapping)
    problem = signature_problem(manifest, trust.anchors or TrustAnchors()) if signed else None
    if signed and problem is not None and not (trust.anchors is None and trust.allow_unsigned):
        raise Untrusted(f"{problem}; a dataset is read only when its signature verifies with a trusted key")
    if not signed and not trust.allow_unsigned:
        raise Untrusted(f"it is not signed; {UNSIGNED_HINT}")
    verified = signed and problem is None
    signature = manifest.get("signature")
    source: DatasetTrust = {
        "kind": "dataset", "dataset_hash": digest,
        "key_id": signature["key_id"] if verified and signature is not None else None,
        "trust": "signed" if verified else "unsigned", "synthetic": bool(manifest.get("synthetic"))}
    if verified and trust.seen_path is not None:
        _check_newest(manifest, uri, trust.seen_path)
    if trust.ledger_heads is not None:
        stale = staleness(manifest, trust.ledger_heads, trust.stale_after)
        if stale is not None:
            source["stale"] = stale
    return source


# --------------------------------------------------------------------------- rollback


def _load(path: Path) -> dict[str, Any]:
    try:
        held = json.loads(path.read_text(encoding="utf-8"))
        return held if isinstance(held, dict) else {}
    except (OSError, ValueError):
        return {}


def _position(manifest: DatasetManifest) -> tuple[int, dict[str, int]]:
    """The signed run counter and each scope's chain size."""
    counter = manifest.get("runs")
    runs = counter if isinstance(counter, int) else 0
    listed = manifest.get("chains")
    chains = listed if isinstance(listed, Mapping) else {}
    return runs, {str(scope): int(entry.get("size", 0)) for scope, entry in chains.items()
                  if isinstance(entry, Mapping) and isinstance(entry.get("size"), int)}


def _check_newest(manifest: DatasetManifest, uri: str, path: Path) -> None:
    """Refuse a rollback against the newest manifest seen at `uri`; record a newer one."""
    held = _load(path)
    known = held.get(uri) if isinstance(held.get(uri), dict) else None
    digest = manifest["dataset_hash"]
    runs, sizes = _position(manifest)
    if known is not None and known.get("newest") != digest:
        newest, earlier = known.get("newest"), list(known.get("earlier") or [])
        seen_runs, seen_sizes = int(known.get("runs", 0)), dict(known.get("sizes") or {})
        behind = [scope for scope, size in seen_sizes.items() if sizes.get(scope, -1) < size]
        if digest in earlier or (manifest.get("previous_dataset_hash") != newest and (runs <= seen_runs or behind)):
            raise Untrusted(
                f"rollback: this manifest (run {runs}, dataset_hash {digest[:16]}…) does not follow the newest one this "
                f"reader has seen (run {seen_runs}, dataset_hash {str(newest)[:16]}…"
                + (f"; chain of scope {behind[0]} shorter" if behind else "") + f"), recorded in {path}")
        known = {"newest": digest, "runs": runs, "sizes": sizes, "earlier": [*earlier, newest][-SEEN_HASHES:]}
    elif known is None:
        known = {"newest": digest, "runs": runs, "sizes": sizes, "earlier": []}
    else:
        return
    latest = _load(path)  # another process may have written since: keep its other locations
    latest[uri] = known
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(latest, sort_keys=True), encoding="utf-8")
        os.replace(temporary, path)
    except OSError as exc:
        raise Untrusted(f"cannot record the newest dataset seen in {path}: {exc.strerror or exc}") from None


# --------------------------------------------------------------------------- staleness


def _instant(text: Any) -> datetime | None:
    if isinstance(text, datetime):
        return text
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None


def staleness(manifest: DatasetManifest, heads: Sequence[Mapping[str, Any]], bound: int) -> Staleness | None:
    """`{lag_seconds, bound_seconds, behind_scopes}` when a scope's chain in the live ledger is longer
    than the dataset's and moved more than `bound` seconds after the dataset was cut; else None."""
    cut = _instant(manifest.get("updated_at"))
    chains = found if isinstance(found := manifest.get("chains"), Mapping) else {}
    lag, behind = 0.0, []
    for head in heads:
        scope = head.get("scope")
        entry = chains.get(scope) if isinstance(scope, str) else None
        size = entry.get("size", 0) if isinstance(entry, Mapping) else 0
        moved = _instant(head.get("updated_at"))
        if int(head.get("size") or 0) <= size or moved is None or cut is None:
            continue
        if moved.tzinfo is None:
            moved = moved.replace(tzinfo=cut.tzinfo)
        seconds = (moved - cut).total_seconds()
        if seconds > bound:
            behind.append(str(head.get("scope")))
            lag = max(lag, seconds)
    if not behind:
        return None
    return {"lag_seconds": int(lag), "bound_seconds": bound, "behind_scopes": sorted(behind)}


def reader_trust(home: Path, anchors: TrustAnchors | None, *, allow_unsigned: bool = False, ledger: Any = None,
                 env: Mapping[str, str] | None = None, key_registry: str | Path | None = None) -> Trust:
    """The trust of a reader with a home (the CLI, the workbench, the notebooks): the gate's trusted
    keys, the public keys of `key_registry` (else GATE_KEY_REGISTRY's file), its opt-in, its
    newest-seen state under `home`, the live ledger's chain heads when it has one at hand and the
    staleness bound of GATE_DATASET_STALE_AFTER."""
    registry = key_registry or (os.environ if env is None else env).get(KEY_REGISTRY_SETTING)
    public = registry_anchors(registry)
    if not public.empty:
        anchors = public if anchors is None else anchors + public
    heads = None
    if ledger is not None:
        from gate.ledger.stream import chain_heads_of  # lazy: SQLAlchemy only with a ledger

        heads = chain_heads_of(ledger)
    return Trust(anchors=anchors, allow_unsigned=allow_unsigned, seen_path=seen_store_of(home), ledger_heads=heads,
                 stale_after=stale_after_setting(env))


def trust_text(source: Mapping[str, Any] | None) -> str:
    """A dataset's trust status in words, as a page shows it beside every figure: the verified
    key, or UNSIGNED; and STALE with the lag and the bound (plain text: the page escapes it)."""
    if not source:
        return "live ledger"
    words = (f"signed by key {source['key_id']}" if source.get("trust") == "signed" and source.get("key_id")
             else "UNSIGNED dataset (read by opt-in: no key vouches for these figures)")
    stale = source.get("stale")
    if isinstance(stale, Mapping):
        words += (f" · STALE: {_duration(int(stale.get('lag_seconds', 0)))} behind the live ledger "
                  f"(bound {_duration(int(stale.get('bound_seconds', 0)))})")
    return words


def _duration(seconds: int) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds} s"
