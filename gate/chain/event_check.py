"""What an offline check of a signed event chain finds (`EventChainCheck`), the one shape the chain
verifiers share: the hold chain (`gate.holds.history.HoldHistoryCheck`), a release history
(`gate.releases.events.HistoryCheck`), the key chain (`gate.releases.key_grants.GrantsCheck`) and
the governance chain (`gate.releases.governance.GovernanceCheck`). Each adds only what its chain
states beyond the verdict (closed holds, the release state, the grants, the policies in force).
The decisions' audit chain is checked link by link, with a named failure per link and check, by
`gate.chain.links.verify_links` (`ChainCheck`): another kind of chain and another answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from gate.keys.anchors import TrustAnchors

__all__ = ["EventChainCheck", "EventChainCheckJSON", "keys_given"]


class EventChainCheckJSON(TypedDict):
    """`EventChainCheck` as JSON: the members every chain verifier's JSON begins with."""

    verified: bool
    valid: bool
    signatures_checked: bool
    events: int
    problems: list[str]


def keys_given(anchors: TrustAnchors | None) -> bool:
    """Whether `anchors` hold a trusted key, so a check with them proves who signed (None or
    empty: integrity only; a signature is then never proven, however it is named)."""
    return anchors is not None and not anchors.empty


@dataclass(frozen=True, slots=True, kw_only=True)
class EventChainCheck:
    """One verdict on a signed chain, checked offline: `valid` (every event's seq, scope, link,
    hash and form, the chain's own rules, and each signature when keys were given),
    `signatures_checked` (a trusted key was given: `keys_given`), how many `events` the chain
    holds and its `problems` (the verifiers stop at the first; empty when valid). `verified` is
    valid with its signatures checked: integrity and authenticity both.

    Not a `gate.verify.result.CheckResult`: a record's verification (the specification's
    verification result) is many named checks, each True, False or not applicable, merged step by
    step into `checks` and `failed_checks`. A chain check is one verdict over the whole chain, with
    the reasons it fails as text; no caller merges one into a record's result (a packet checks its
    hold events with `gate.packets.hold_checks`, named checks of its own), so there is no
    conversion between the two. Frozen and keyword-only: each chain's subclass adds its members."""

    valid: bool
    signatures_checked: bool
    events: int
    problems: tuple[str, ...] = ()

    @property
    def verified(self) -> bool:
        return self.valid and self.signatures_checked

    @property
    def problem(self) -> str | None:
        """The first problem, or None."""
        return self.problems[0] if self.problems else None

    def to_json(self) -> EventChainCheckJSON:
        """The members every chain check states; a subclass's `to_json` extends it (calling
        `EventChainCheck.to_json(self)`: a slotted dataclass has no zero-argument `super()`)."""
        return {"verified": self.verified, "valid": self.valid, "signatures_checked": self.signatures_checked,
                "events": self.events, "problems": list(self.problems)}
