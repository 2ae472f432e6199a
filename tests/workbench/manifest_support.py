"""Manifests for the datasets tests write by hand: every Parquet file under the root listed with
its sha256, bytes and rows, as the export lists them (`workbench.dataset.integrity`), then sealed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow.parquet as pq

from workbench.dataset import integrity
from workbench.dataset.location import open_location
from workbench.dataset.schema import TABLES


def listed_manifest(root: Path, base: dict[str, Any], signer=None) -> dict[str, Any]:
    """`base` plus `tables` and `facts` listing every Parquet file under `root`, sealed."""
    root = Path(root)
    location = open_location(str(root))
    tables: dict[str, Any] = {name: {"rows": 0, "files": []} for name in TABLES}
    facts: dict[str, Any] = {}
    for path in sorted(root.rglob("*.parquet")):
        relative = path.relative_to(root).as_posix()
        rows = pq.ParquetFile(path).metadata.num_rows
        entry = {"path": relative, "rows": rows, "run": 1, **integrity.describe_file(location, relative)}
        head = relative.split("/")
        if head[0] in TABLES:
            holder = tables[head[0]]
        elif head[0] == "facts":
            holder = facts.setdefault(unquote(head[1].split("=", 1)[1]), {"rows": 0, "files": []})
        else:
            continue
        holder["files"].append(entry)
        holder["rows"] += rows
    return integrity.seal({**base, "tables": tables, "facts": facts}, signer)


def write_listed_manifest(root: Path, base: dict[str, Any], signer=None) -> dict[str, Any]:
    manifest = listed_manifest(root, base, signer)
    (Path(root) / "manifest.json").write_text(json.dumps(manifest))
    return manifest


def signer_of(env: dict[str, str]):
    """The Ed25519 signer of a test gate's keyring (`gate_env`): the key `gate export` signs with."""
    from gate.keys.signing import load_keyring, receipt_signer_for

    return receipt_signer_for(load_keyring(Path(env["GATE_SIGNING_KEY_FILE"])).active)


def forge_outcomes(root: Path, *, keep_signature: bool) -> dict[str, Any]:
    """Issue 41's forgery: every outcome of the dataset made `succeeded`, each changed file's sha256,
    bytes and rows and the manifest's `dataset_hash` recomputed, the old signature kept or removed."""
    import pyarrow as pa

    root = Path(root)
    manifest = json.loads((root / "manifest.json").read_text())
    for entry in manifest["tables"]["outcomes"]["files"]:
        path = root / entry["path"]
        table = pq.read_table(path)
        statuses = pa.array(["succeeded"] * table.num_rows, table.schema.field("status").type)
        pq.write_table(table.set_column(table.schema.get_field_index("status"), "status", statuses), path)
        entry.update(integrity.describe_file(open_location(str(root)), entry["path"]), rows=table.num_rows)
    signature = manifest.pop("signature")
    manifest["dataset_hash"] = integrity.dataset_hash(manifest)
    if keep_signature:
        manifest["signature"] = signature
    (root / "manifest.json").write_text(json.dumps(manifest))
    return manifest
