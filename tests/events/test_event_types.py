"""docs/events.md lists exactly the event types the gate can write, and every setting it names."""

from __future__ import annotations

import re
from pathlib import Path

from gate.events.cloudevent import EVENT_TYPES

DOC = (Path(__file__).resolve().parents[2] / "docs" / "events.md").read_text()


def test_the_types_table_lists_every_type_and_no_other():
    table = DOC.split("## Types", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `([a-z_.]+)` \|", table, flags=re.MULTILINE))
    assert documented == set(EVENT_TYPES)
