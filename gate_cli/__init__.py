"""The `gate` command line.

Startup cost: `jsonschema` imports the optional `rfc3987_syntax` package whenever it is installed
(Jupyter's extras install it), and that package compiles a Lark grammar at import: about 1.2 s of
CPU in every `gate` process, `gate serve`'s workers included, for the `iri` and `iri-reference`
formats only. The gate asserts neither format (`gate.adapters.manifest` leaves them out, so
an adapter's schema reads the same whatever is installed), so the command line's processes do not
load it: `gate --help` starts in about 0.6 s instead of 2.5 s. Only a process the command line
owns is affected; a program that imports the gate as a library keeps its own imports.
"""

import sys

if "jsonschema" not in sys.modules:
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]  # None refuses the import: see above
