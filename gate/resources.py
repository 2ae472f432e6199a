"""The files the product reads at run time, found as package data of `gate`.

Two folders ship inside the package, so a wheel installed anywhere carries them:

* `gate/schemas/`: the public contract artifacts served byte for byte under `/schemas/…`
  (Rulebook v1, the migration manifest and vendor policy table schemas, the conformance
  fixtures, the golden replay corpus);
* `gate/data/`: the sample and built-in data (rulebooks, the demo's requests, the policy
  pattern registry, the policy-check tables, the golden inputs, a sample migration manifest).

They are found through `importlib.resources`, never from a module's `__file__` and a count of
parent folders (which pointed outside the package once installed). Installed packages are plain
folders (a wheel is unpacked, never imported zipped), so the helpers return `Path`s; a `gate`
imported from a zip archive is refused with a message rather than read half-way.

`GATE_SCHEMAS_DIR` replaces the schemas folder as a whole (read when this module is imported,
docs/operating.md): an operator serving a reviewed copy of the contract files.
"""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path

__all__ = ["data_path", "package_root", "schemas_dir", "schemas_path"]


def package_root() -> Path:
    """The folder of the `gate` package, wherever it is installed (a checkout or site-packages)."""
    root = files("gate")
    if not isinstance(root, Path):
        raise RuntimeError(f"the gate package must be installed as files, not imported from {root!r}")
    return root


_SCHEMAS_DIR = Path(os.environ.get("GATE_SCHEMAS_DIR") or package_root() / "schemas")


def schemas_dir() -> Path:
    """The contract artifacts' folder: `GATE_SCHEMAS_DIR` when set, else `gate/schemas`."""
    return _SCHEMAS_DIR


def schemas_path(*parts: str) -> Path:
    """A file or folder under `schemas_dir()`."""
    return _SCHEMAS_DIR.joinpath(*parts)


def data_path(*parts: str) -> Path:
    """A file or folder under the shipped `gate/data/` (e.g. `data_path("rulebooks")`)."""
    return package_root().joinpath("data", *parts)
