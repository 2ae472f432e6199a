"""The at-rest codec alone (gate/ledger/codec.py): exact round trips, plain text passes, and every
malformed value (corrupt frame, wrong or unknown dictionary, bomb, trailing bytes, non-UTF-8) is
`StoredValueUnreadable`, never a guess and never an unbounded allocation."""

from __future__ import annotations

import hashlib

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from gate.ledger import codec
from gate.ledger.codec import MARK, StoredValueUnreadable, decode, encode, pack

RECORD = ('{"decision_id":"dec_0123456789abcdef01234567","record_hash":"' + "ab" * 32
          + '","verdict":"yes","note":"caf\u00e9 \u2713 \U0001f600","rules":[1,2,3]}')


def test_long_text_is_encoded_and_reads_back_exactly():
    stored = encode(RECORD * 4)
    assert isinstance(stored, bytes) and stored[0] == MARK and stored[1] == codec.CURRENT_DICTIONARY
    assert len(stored) < len((RECORD * 4).encode())
    assert decode(stored) == RECORD * 4


@given(st.text(max_size=3000))
@settings(max_examples=200, deadline=None)
def test_every_text_round_trips(text):
    assert decode(encode(text)) == text
    assert decode(pack(text)) == text
    assert decode(text.encode("utf-8")) == text  # UTF-8 never starts with 0xFF


def test_short_text_and_plain_mode_store_the_text():
    assert encode("{}") == "{}"
    assert encode(RECORD * 4, codec.PLAIN) == RECORD * 4


def test_plain_rows_read_as_themselves():
    assert decode(RECORD) == RECORD  # SQLite rows before the encoding: str
    assert decode(RECORD.encode()) == RECORD  # PostgreSQL rows converted to bytea by migration 0011
    assert decode(memoryview(RECORD.encode())) == RECORD
    assert decode(b"") == "" and decode("") == ""


def test_text_beyond_the_bound_is_stored_plain(monkeypatch):
    monkeypatch.setattr(codec, "MAX_TEXT_BYTES", 100)
    assert encode("x" * 101) == "x" * 101


def _flip(data: bytes, index: int) -> bytes:
    return data[:index] + bytes([data[index] ^ 0x01]) + data[index + 1:]


@pytest.mark.parametrize("corrupt", [
    lambda v: v[:-1],  # truncated (checksum lost)
    lambda v: v[:2],  # no frame at all
    lambda v: v[:1],  # only the mark
    lambda v: _flip(v, len(v) // 2),  # a flipped bit in the compressed data
    lambda v: _flip(v, len(v) - 2),  # a flipped bit in the checksum
    lambda v: v + b"\x00\x00\x00\x00",  # trailing bytes
    lambda v: v + v[2:],  # a second frame after the first
    lambda v: bytes([MARK, 0]) + v[2:],  # labelled "no dictionary" though it needs one
    lambda v: bytes([MARK, 200]) + v[2:],  # an unknown dictionary id
    lambda v: b"\xfe" + v[1:],  # neither the mark nor UTF-8
])
def test_corrupt_values_are_unreadable(corrupt):
    with pytest.raises(StoredValueUnreadable):
        decode(corrupt(pack(RECORD * 4)))


def test_a_dictionary_that_does_not_match_its_pinned_hash_is_refused(monkeypatch):
    value = pack(RECORD * 4)
    monkeypatch.setitem(codec.DICTIONARIES, 1, (codec.DICTIONARIES[1][0], "0" * 64))
    codec.clear_dictionaries()
    try:
        with pytest.raises(StoredValueUnreadable, match="pinned hash"):
            decode(value)
    finally:
        codec.clear_dictionaries()


def test_the_shipped_dictionary_is_the_pinned_one():
    for name, digest in codec.DICTIONARIES.values():
        assert hashlib.sha256((codec.DICTIONARY_DIR / name).read_bytes()).hexdigest() == digest


def test_another_dictionary_does_not_misread_a_value(tmp_path, monkeypatch):
    """A value written with dictionary 1 but read with another dictionary fails (its checksum or
    its block references), it is never returned as some other text."""
    other = zstandard.train_dictionary(4096, [f'{{"k":{i},"v":"{"z" * (i % 50)}"}}'.encode() for i in range(400)])
    (tmp_path / "other.zdict").write_bytes(other.as_bytes())
    value = pack(RECORD * 4)
    monkeypatch.setattr(codec, "DICTIONARY_DIR", tmp_path)
    monkeypatch.setitem(codec.DICTIONARIES, 1, ("other.zdict", hashlib.sha256(other.as_bytes()).hexdigest()))
    codec.clear_dictionaries()
    try:
        with pytest.raises(StoredValueUnreadable):
            decode(value)
    finally:
        codec.clear_dictionaries()


def test_a_decompression_bomb_is_refused_before_allocating():
    bomb = zstandard.ZstdCompressor(write_content_size=True).compress(b"\x00" * (codec.MAX_TEXT_BYTES + 1))
    assert len(bomb) < 2_000
    with pytest.raises(StoredValueUnreadable, match="bound"):
        decode(bytes([MARK, 0]) + bomb)
    # A frame that does not declare its size is refused too (it could be anything).
    stream = zstandard.ZstdCompressor(write_content_size=False).compress(b"{}" * 100)
    with pytest.raises(StoredValueUnreadable):
        decode(bytes([MARK, 0]) + stream)


def test_a_frame_of_non_utf8_bytes_is_unreadable():
    frame = zstandard.ZstdCompressor(write_content_size=True).compress(b"\xff\xfe" * 100)
    with pytest.raises(StoredValueUnreadable, match="UTF-8"):
        decode(bytes([MARK, 0]) + frame)


def test_threads_encode_and_decode_concurrently_from_a_cold_start():
    from concurrent.futures import ThreadPoolExecutor

    codec.clear_dictionaries()
    texts = [RECORD * (1 + i % 5) + str(i) for i in range(400)]

    def round_trip(text):
        return decode(encode(text)) == text

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert all(pool.map(round_trip, texts))
