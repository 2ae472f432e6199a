"""The compiled parts of the project: the canonical JSON writer's and the collation's fast paths.

Everything else is configured in pyproject.toml. The extensions are optional: where they cannot be
compiled (no C compiler, as in a slim container image), `gate.protocol.canonical` writes the
same text in Python, more slowly (tests/core/test_canonical_c.py holds the two equal), and
`gate.protocol.collation` computes the same keys in Python (tests/core/test_collation.py holds
both equal to pyuca).
"""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("gate.protocol._canonical", sources=["gate/protocol/_canonical.c"], optional=True,
              extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"]),
    Extension("gate.protocol._collation", sources=["gate/protocol/_collation.c"], optional=True,
              extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"]),
])
