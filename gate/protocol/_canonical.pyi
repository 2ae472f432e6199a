from collections.abc import Callable
from typing import Any

def encode(value: Any, key_order: Callable[[Any], list[str]],
           orders: dict[tuple[str, ...], list[str]] | None = None, /) -> str | None: ...
