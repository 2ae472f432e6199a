"""Collation keys of ASCII text, without the collation tables.

Almost every object key the gate writes is ASCII (the records' and packets' own members, and most
fact names). Their keys need only ASCII's 128 collation elements, stated below, so a process that
writes canonical JSON does not build `gate.protocol.collation`'s tables over 196,608 code points
(0.6–0.8 s, with `pyuca`'s own table) until it meets its first key with another character: `gate
verify` of a record, `gate plan`, a dry-run's result. `gate.protocol.canonical` reads keys here
first; a server still builds the whole table at boot (`api.app`), not at its first decide.

Source of the weights: the Default Unicode Collation Element Table of UCA 9.0.0, as `pyuca` 1.2
ships it (`allkeys-9.0.0.txt`, `Collator_9_0_0`), the table the canonical order uses (reference
facts §1). Every ASCII character there has exactly one element: the control characters other than
TAB, LF, VT, FF and CR (and DEL) are completely ignorable `[.0000.0000.0000]`; every other has
secondary 0x0020 and tertiary 0x0008 for the capital letters, 0x0002 for the rest. No ASCII
character continues a contraction (`L`/`l` start one only with U+00B7 or U+0387), so each
character's element is its own. `gate.protocol.collation` checks this table against `pyuca`'s
at import, and tests/core/test_collation.py every ASCII key against `pyuca`'s sort key.
"""

from __future__ import annotations

__all__ = ["PRIMARIES", "ascii_element", "ascii_key"]

# The primary weight of each ASCII code point (0 where the character is ignorable).
PRIMARIES: tuple[int, ...] = (
    0x0000, 0x0000, 0x0000, 0x0000, 0x0000, 0x0000, 0x0000, 0x0000,  # NUL .. BEL
    0x0000, 0x0201, 0x0202, 0x0203, 0x0204, 0x0205, 0x0000, 0x0000,  # BS, TAB, LF, VT, FF, CR, SO, SI
    0x0000, 0x0000, 0x0000, 0x0000, 0x0000, 0x0000, 0x0000, 0x0000,  # DLE .. ETB
    0x0000, 0x0000, 0x0000, 0x0000, 0x0000, 0x0000, 0x0000, 0x0000,  # CAN .. US
    0x0209, 0x0260, 0x030C, 0x0398, 0x1C12, 0x0399, 0x0396, 0x0305,  # space ! " # $ % & '
    0x0317, 0x0318, 0x038F, 0x0616, 0x0222, 0x020D, 0x0277, 0x0394,  # ( ) * + , - . /
    0x1C3D, 0x1C3E, 0x1C3F, 0x1C40, 0x1C41, 0x1C42, 0x1C43, 0x1C44,  # 0 .. 7
    0x1C45, 0x1C46, 0x0239, 0x0234, 0x061A, 0x061B, 0x061C, 0x0266,  # 8 9 : ; < = > ?
    0x038E, 0x1C47, 0x1C60, 0x1C7A, 0x1C8F, 0x1CAA, 0x1CE5, 0x1CF4,  # @ A .. G
    0x1D18, 0x1D32, 0x1D4C, 0x1D65, 0x1D77, 0x1DAA, 0x1DB9, 0x1DDD,  # H .. O
    0x1E0C, 0x1E21, 0x1E33, 0x1E71, 0x1E95, 0x1EB5, 0x1EE3, 0x1EF5,  # P .. W
    0x1EFF, 0x1F0B, 0x1F21, 0x0319, 0x0395, 0x031A, 0x0485, 0x020B,  # X Y Z [ \ ] ^ _
    0x0482, 0x1C47, 0x1C60, 0x1C7A, 0x1C8F, 0x1CAA, 0x1CE5, 0x1CF4,  # ` a .. g
    0x1D18, 0x1D32, 0x1D4C, 0x1D65, 0x1D77, 0x1DAA, 0x1DB9, 0x1DDD,  # h .. o
    0x1E0C, 0x1E21, 0x1E33, 0x1E71, 0x1E95, 0x1EB5, 0x1EE3, 0x1EF5,  # p .. w
    0x1EFF, 0x1F0B, 0x1F21, 0x031B, 0x061E, 0x031C, 0x0620, 0x0000,  # x y z { | } ~ DEL
)
_SECONDARY = 0x20
_TERTIARY_CAPITAL, _TERTIARY_OTHER = 0x08, 0x02


def ascii_element(codepoint: int) -> tuple[int, int, int]:
    """The one collation element (primary, secondary, tertiary) of ASCII `codepoint`; (0, 0, 0)
    for an ignorable one."""
    primary = PRIMARIES[codepoint]
    if not primary:
        return 0, 0, 0
    return primary, _SECONDARY, _TERTIARY_CAPITAL if 0x41 <= codepoint <= 0x5A else _TERTIARY_OTHER


def _byte_table(level: int) -> bytes:
    """`bytes.translate` table of one byte of a weight: 0 the primary's high byte, 1 its low byte,
    2 the tertiary (below 256, as every secondary is 0x20)."""
    weights = [ascii_element(byte) for byte in range(128)]
    if level == 2:
        return bytes(element[2] for element in weights) + bytes(128)
    return bytes((element[0] >> 8) if level == 0 else element[0] & 0xFF for element in weights) + bytes(128)


# Primaries are 0 or in [0x100, 0xD800), so each is one UTF-16 code unit written as two bytes, and
# never a surrogate: checked here, at import, as each fast path's assumption.
if not all(primary == 0 or 0x100 <= primary < 0xD800 for primary in PRIMARIES) or len(PRIMARIES) != 128:
    raise AssertionError("ASCII collation table: a primary outside [0x100, 0xD800)")
_IGNORABLE = bytes(codepoint for codepoint in range(128) if not PRIMARIES[codepoint])
_PRIMARY_HIGH = _byte_table(0)
_PRIMARY_LOW = _byte_table(1)
_TERTIARY = _byte_table(2)


def ascii_key(text: str) -> tuple[str, str, str]:
    """The key `gate.protocol.collation.collation_key` gives ASCII `text` ((primary, secondary,
    tertiary) as strings of weights), by `bytes.translate` alone: the ignorable characters
    dropped, the primary as UTF-16 code units built from a high-byte and a low-byte table, the
    secondary all 0x20, the tertiary as Latin-1. Raises `UnicodeEncodeError` for text that is not
    ASCII."""
    data = text.encode("ascii").translate(None, _IGNORABLE)
    units = bytearray(2 * len(data))
    units[0::2] = data.translate(_PRIMARY_HIGH)
    units[1::2] = data.translate(_PRIMARY_LOW)
    return units.decode("utf-16-be"), "\x20" * len(data), data.translate(_TERTIARY).decode("latin-1")
