"""A one-line progress bar for long CLI runs (export, demo seed), drawn on stderr."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    """Call with (done, total); draws only when the stream is a terminal, at most 10 times a
    second, and ends the line when done reaches total."""

    WIDTH = 30

    def __init__(self, stream: TextIO | None = None, label: str = "export", unit: str = "rows") -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty()
        self.label = label
        self.unit = unit
        self.started = time.monotonic()
        self._last = 0.0

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if done < total and now - self._last < 0.1:
            return
        self._last = now
        fraction = done / total if total else 1.0
        filled = int(self.WIDTH * fraction)
        rate = done / max(now - self.started, 1e-6)
        self.stream.write(f"\r{self.label} {fraction:4.0%} |{'#' * filled}{'.' * (self.WIDTH - filled)}| "
                          f"{done:,}/{total:,} {self.unit}  {rate:,.0f} {self.unit}/s")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()
