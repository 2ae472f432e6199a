"""The JSON shapes the analyses' reports share, named once (docs/rulebook-analysis.md shows them).

A result on a region is a `LabelJSON` (`model.Label.to_json`); a region is a `RegionJSON`: its
constrained fields (`FieldDescription`, each with what the field `allows`), the same in words,
and a witness fact set; `InexactReason` says why a report is not exact. Fact sets (witnesses,
samples, a flip's facts) are plain JSON objects, `dict[str, JsonValue]`. The reports themselves
(`LintReportJSON`, `DiffReportJSON`, `FlipJSON`) are declared beside the code that builds them.
"""

# No `from __future__ import annotations`: the `NotRequired` member must be seen at run time
# (`__required_keys__`), which string annotations would hide on Python 3.11.
from typing import NotRequired, TypedDict

from gate.strict_json import JsonValue

__all__ = [
    "ConstantsAllowed",
    "FieldAllows",
    "FieldDescription",
    "InexactReason",
    "LabelJSON",
    "NeedleGroup",
    "NumberRange",
    "ObjectsAllowed",
    "RegionJSON",
]


class LabelJSON(TypedDict):
    """The result an evaluation gives on a region (`rule_id` null for the default outcome and
    for needs_input)."""

    status: str
    rule_id: str | None
    decision: str
    verdict: str
    action: str
    reason_code: str


class InexactReason(TypedDict):
    """Why a report is not exact: a field with too many `contains` values (`field` and the
    needle `operators`), or a condition or budget beyond the exact method (`field` null)."""

    field: str | None
    operators: list[str]
    reason: str


class NumberRange(TypedDict):
    """An interval of allowed numbers (a bound null when unbounded); `integers` when only the
    integral (true) or only the non-integral (false) members of it are meant."""

    min: float | None
    min_inclusive: bool
    max: float | None
    max_inclusive: bool
    integers: NotRequired[bool]


class NeedleGroup(TypedDict):
    """A group of other strings (or arrays): the `contains` values they hold and those they do not."""

    contains: list[object]
    not_contains: list[object]


class ConstantsAllowed(TypedDict):
    """Strings or arrays: the allowed and the excluded constants, and the other values allowed
    (all of them, `any_other`, or the groups listed in `other`)."""

    values: list[object]
    excluded: list[object]
    any_other: bool
    other: list[NeedleGroup]


class ObjectsAllowed(TypedDict):
    values: list[dict[str, JsonValue]]
    excluded: list[dict[str, JsonValue]]
    any_other: bool


class FieldAllows(TypedDict):
    """What one field of a region may be, by kind."""

    missing: bool
    null: bool
    booleans: list[bool]
    numbers: list[NumberRange]
    strings: ConstantsAllowed
    arrays: ConstantsAllowed
    objects: ObjectsAllowed


class FieldDescription(TypedDict):
    """One constrained field of a region: its path, what it allows in words, and as `allows`."""

    field: str
    text: str
    allows: FieldAllows


class RegionJSON(TypedDict):
    """A region: its constrained fields (`where`) and the same in words (`text`), both null for
    a sampled one, and a fact set inside it (`witness`)."""

    where: list[FieldDescription] | None
    text: str | None
    witness: dict[str, JsonValue]
