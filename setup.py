"""The one compiled part of the project: the canonical JSON writer's fast path.

Everything else is configured in pyproject.toml. The extension is optional: where it cannot be
compiled (no C compiler, as in a slim container image), `gate.protocol.canonical` writes the
same text in Python, more slowly (tests/core/test_canonical_c.py holds the two equal).
"""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("gate.protocol._canonical", sources=["gate/protocol/_canonical.c"], optional=True,
              extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"]),
])
