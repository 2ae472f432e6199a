"""The logs as a destination (issue 67; docs/privacy.md): while the gate handles one request (a
decide) or one delivery, every log line made in that context, by any logger, has that request's
declared values masked by the scope's `logs` rule before any handler sees it.

How: `install()` wraps the process's log record factory once; `masking(masker)` states the
masker of the work in hand (a context variable, so each request thread and each delivery has
its own). A record made while one is stated has its message formatted and masked, and its
exception and stack text formatted and masked at once, so no handler formats the clear text
later. Outside any such context a line is left as it is.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from gate.privacy.masking import Masker

_CURRENT: ContextVar[Masker | None] = ContextVar("gate_privacy_log_masker", default=None)
_INSTALLED: list[bool] = []  # one element once installed
_LOCK = threading.Lock()
_FORMATTER = logging.Formatter()


def _masked(masker: Masker, text: str) -> str:
    return masker.mask_text(text)[0]


def install() -> None:
    """Wrap the log record factory (once per process)."""
    with _LOCK:
        if _INSTALLED:
            return
        made = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = made(*args, **kwargs)
            masker = _CURRENT.get()
            if masker is None:
                return record
            record.msg, record.args = _masked(masker, record.getMessage()), None
            if record.exc_info:
                record.exc_text = _masked(masker, _FORMATTER.formatException(record.exc_info))
                record.exc_info = None
            if record.stack_info:
                record.stack_info = _masked(masker, record.stack_info)
            return record

        logging.setLogRecordFactory(factory)
        _INSTALLED.append(True)


@contextmanager
def masking(masker: Masker | None) -> Iterator[None]:
    """Mask every log line made inside with `masker` (None, or a masker with nothing to mask:
    lines are left as they are)."""
    token = _CURRENT.set(masker if masker is not None and masker.active else None)
    try:
        yield
    finally:
        _CURRENT.reset(token)
