"""The command line's processes start without the optional grammar jsonschema would compile
(gate_cli/__init__.py), and the adapters' `format` checks read the same with or without it."""

from __future__ import annotations

import subprocess
import sys

from gate.adapters.manifest import _FORMATS


def test_a_gate_process_never_compiles_the_iri_grammar():
    probe = ("import sys, gate_cli.main, jsonschema; "
             "print(repr(sys.modules.get('rfc3987_syntax', 'absent')))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() in ("None", "'absent'"), done.stdout


def test_the_adapters_assert_formats_but_never_the_iri_ones():
    assert "iri" not in _FORMATS.checkers and "iri-reference" not in _FORMATS.checkers
    assert _FORMATS.conforms("not an iri at all ::", "iri")  # an annotation, whatever is installed
    assert not _FORMATS.conforms("2026-13-45", "date") and _FORMATS.conforms("2026-11-26", "date")
