from __future__ import annotations

import pytest

from tests.demo_support import build_demo_home


@pytest.fixture(scope="session")
def demo_dataset(tmp_path_factory):
    return build_demo_home(tmp_path_factory.mktemp("demo-home"))
