"""Notebook outputs show caller text as text (issue 18).

The anomaly-investigation notebook runs over a dataset exported from a ledger decided with
markup in the rulebook version, an action, a fact name and a fact value
(`tests/workbench/hostile_ledger.py`). Its outputs reach people as HTML (data frames) and text
(prints): no HTML output may hold an element made from caller text, and the payload must be
there as text.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.workbench.hostile_ledger import (
    HOSTILE_FACT,
    HOSTILE_VERSION,
    SCOPE,
    build_hostile_ledger,
)
from tests.workbench.markup_support import parse

ROOT = Path(__file__).resolve().parents[2]
GATE = str(Path(sys.executable).parent / "gate")

pytestmark = [pytest.mark.notebook, pytest.mark.slow]


@pytest.fixture(scope="module")
def hostile_dataset(tmp_path_factory):
    home = tmp_path_factory.mktemp("hostile-notebook")
    build_hostile_ledger(home)
    env = {**os.environ, "GATE_HOME": str(home)}
    env.pop("GATE_DATABASE_URL", None)
    subprocess.run([GATE, "export", "--out", str(home / "dataset")], env=env, check=True,
                   capture_output=True, timeout=300)
    return home / "dataset"


def outputs(notebook, kind: str) -> list[str]:
    found = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if output.get("output_type") == "stream" and kind == "text/plain":
                found.append(output["text"])
            data = output.get("data", {})
            if kind in data:
                found.append(data[kind])
    return found


def test_anomaly_notebook_outputs_hold_caller_text_as_text(hostile_dataset, monkeypatch):
    import jupytext
    from nbclient import NotebookClient

    notebook = jupytext.read(ROOT / "notebooks" / "anomaly_investigation.py")
    monkeypatch.setenv("GATE_DATASET", str(hostile_dataset))
    monkeypatch.setenv("GATE_HOME", str(hostile_dataset.parent))  # its keyring signed the export
    monkeypatch.setenv("GATE_SCOPE", SCOPE)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    NotebookClient(notebook, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(ROOT)}}).execute()
    html = outputs(notebook, "text/html")
    assert html, "the notebook shows data frames"
    for document in html:
        parsed = parse(document)
        assert not [tag for tag, _ in parsed.tags if tag in {"img", "script", "svg", "iframe", "a"}]
    shown = "".join("".join(parse(document).text) for document in html)
    assert HOSTILE_VERSION in shown  # the drivers' policy_version column
    assert HOSTILE_FACT in shown  # a column of the facts frame
    assert HOSTILE_VERSION in "".join(outputs(notebook, "text/plain"))  # the printed reasons
