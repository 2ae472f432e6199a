"""Compiled evaluators, one per rulebook hash, in a bounded thread-safe LRU cache.

`get_evaluator(rulebook, rulebook_hash)` validates and compiles a rulebook the first time its
hash is seen and returns the same `CompiledRulebook` object for that hash afterwards.

SECURITY: the cache key must be the content hash, otherwise one rulebook could be served
for another. On a miss (before anything is stored) the hash is recomputed from the rulebook
(`sha256(canon(rulebook))`) and a mismatch raises ValueError; a hit costs one dict lookup.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from gate.protocol.canonical import sha256_hex
from gate.rulebook.compile import CompiledRulebook, compile_rulebook
from gate.rulebook.validate import checked_rulebook

__all__ = ["CACHE_SIZE", "clear_cache", "get_evaluator"]

CACHE_SIZE = 512

_lock = threading.Lock()
_cache: OrderedDict[str, CompiledRulebook] = OrderedDict()


def get_evaluator(rulebook: object, rulebook_hash: str) -> CompiledRulebook:
    """The compiled evaluator for `rulebook`, whose canonical sha256 is `rulebook_hash`.

    Any value is accepted: it is validated on a miss. Raises `gate.errors.RulebookInvalid`
    (with all `{field, code, message}` errors) when the rulebook is invalid, and ValueError
    when `rulebook_hash` is not its hash. The result's `document` is the rulebook, typed.
    """
    with _lock:
        compiled = _cache.get(rulebook_hash)
        if compiled is not None:
            _cache.move_to_end(rulebook_hash)
            return compiled
    document = checked_rulebook(rulebook)
    actual = sha256_hex(document)
    if actual != rulebook_hash:
        raise ValueError("rulebook_hash is not the sha256 of the canonical rulebook")
    # Compiled outside the lock: two threads may race on a new hash; the first one stored wins.
    compiled = compile_rulebook(document, rulebook_hash)
    with _lock:
        existing = _cache.get(rulebook_hash)
        if existing is not None:
            _cache.move_to_end(rulebook_hash)
            return existing
        _cache[rulebook_hash] = compiled
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return compiled


def clear_cache() -> None:
    """Drop every compiled evaluator (tests and operational resets)."""
    with _lock:
        _cache.clear()
