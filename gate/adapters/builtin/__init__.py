"""Adapters shipped with the gate. Each module is one adapter: a literal `MANIFEST` and `run`.

They are never imported by the gate process: `gate.adapters` reads the manifest statically and
the one-shot worker compiles the exact source bytes whose sha256 is the `implementation_hash`.
"""
