"""The product's run-time files are package data with one home (gate/resources.py).

A module that found a file by climbing from its own `__file__` (`parents[2] / "data"`) found it
in a checkout and nowhere else: installed from a wheel, the folder above site-packages holds no
`data/`. These checks keep every such lookup in `gate.resources`; tests/test_wheel.py proves the
installed wheel reads them.
"""

from __future__ import annotations

import re
from pathlib import Path

import gate
from gate.resources import data_path, package_root, schemas_dir, schemas_path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("gate", "api", "gate_cli", "gate_client", "workbench")
# A path climbed from a module's own file: `Path(__file__)….parents[N]` or `.parent.parent`.
CLIMB = re.compile(r"__file__\)?(?:\.resolve\(\))?\.(?:parents\[|parent\.parent)")


def test_no_product_module_climbs_out_of_its_package_from_its_own_file():
    climbing = [f"{path.relative_to(ROOT)}:{number}"
                for package in PRODUCT for path in sorted((ROOT / package).rglob("*.py"))
                for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                if CLIMB.search(line)]
    assert climbing == []


def test_the_climb_finder_finds_the_shapes_that_were_there():
    assert CLIMB.search('ROOT = Path(__file__).resolve().parents[2] / "data"')
    assert CLIMB.search('FIXTURES = Path(__file__).resolve().parent.parent / "schemas"')
    assert not CLIMB.search('WORKER = Path(__file__).resolve().with_name("worker.py")')


def test_the_schemas_and_the_data_live_in_the_package_once():
    assert package_root() == Path(gate.__file__).resolve().parent
    assert schemas_dir() == package_root() / "schemas" and schemas_path("rulebook-v1.schema.json").is_file()
    assert data_path("rulebooks", "refund-approval.json").is_file()
    # One copy only: no top-level folder left beside the packages for the code to drift from.
    assert not (ROOT / "schemas").exists() and not (ROOT / "data").exists()
