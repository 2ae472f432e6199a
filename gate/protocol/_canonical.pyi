from collections.abc import Callable
from typing import Any

def encode(value: Any, key_order: Callable[[Any], list[str]], /) -> str | None: ...
