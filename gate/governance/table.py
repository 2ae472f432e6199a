"""The one table of safeguard settings (issue 52; docs/releases.md, "One rule for every safeguard").

Every setting that guards production or sends records out of the gate changes through one service
(gate.services.governance) and one signed chain (gate.releases.governance). This table says, per
setting, how its whole value is read and what a change weakens: what it lets through that the value
before did not (docs/releases.md, "One rule for every safeguard"); while the scope requires
approvals (its release policy's `require_approval`), a weakening change is a request a second,
distinct holder approves.

| setting | what weakens it |
|---|---|
| `release_policy` | `require_approval`, `refuse_superseded_inline`, `require_dry_run` turned off; a longer `approval_ttl_seconds`; while the dry-run stays required, a larger `dry_run_max_age_seconds` or `dry_run_canary_percent` (gate.releases.policy.weakenings) |
| `hold_policy` | what the change lets through (issue 64): for every queue a held record reaches (its route or the default queue and their escalations; a move never reaches further), a guard that fewer or other holders, or a vote without a note, satisfy, a longer wait, or a recipient its facts did not reach; `four_eyes` turned off; a queue removed (gate.holds.policy.weakenings) |
| `event_settings` | `decision_created` turned on (gate.events.egress.weakenings) |
| `event_subscriptions` | a URL that receives an event type it did not: a new webhook endpoint, a changed URL, wider event types; none while a subscription to that URL already receives them (gate.events.egress.subscription_weakenings) |
| `privacy` | what leaves that did not (issue 67): a destination's action for personal or sensitive members loosened (drop → hash → keep), a member that leaves looser (declassified, made less sensitive, or given a looser exception), the subject key removed or moved (gate.privacy.datamap.weakenings) |
| `api_keys` | a key that gains `release`, `approve`, `resolve` or `admin`: created, enabled again, widened, or given another holder; none while no key of the scope acts on production, the scope's bootstrap (gate.releases.key_grants.grant_weakenings); the holder a grant is for never approves it (`grantees`) |
| `subject_erasure` | an act, not a setting (issue 67, item 4): every erasure that names a decision, whatever the scope requires; a second, distinct holder approves each one, and nothing stays in force after it (gate.privacy.erasure) |

Each row also names the code a caller without the permission to change it is refused with.
"""

from __future__ import annotations

from collections.abc import Mapping

from gate.events import egress
from gate.holds import policy as holds
from gate.privacy import datamap, erasure
from gate.releases.governance import RELEASE_POLICY, RELEASE_SAFEGUARD, Safeguard
from gate.releases.key_grants import KeyGrants, grant_weakenings, grantees

HOLD_POLICY = "hold_policy"
EVENT_SETTINGS = "event_settings"
API_KEYS = "api_keys"
EVENT_SUBSCRIPTIONS = egress.EVENT_SUBSCRIPTIONS
PRIVACY = "privacy"
SUBJECT_ERASURE = erasure.SUBJECT_ERASURE

SAFEGUARDS: Mapping[str, Safeguard] = {
    RELEASE_POLICY: RELEASE_SAFEGUARD,
    HOLD_POLICY: Safeguard(HOLD_POLICY, holds.HoldPolicy.from_json, holds.weakenings),
    EVENT_SETTINGS: Safeguard(EVENT_SETTINGS, egress.EventSettings.from_json, egress.weakenings),
    API_KEYS: Safeguard(API_KEYS, KeyGrants.from_json, grant_weakenings, chained=False, beneficiaries=grantees),
    EVENT_SUBSCRIPTIONS: Safeguard(EVENT_SUBSCRIPTIONS, egress.EventSubscriptions.from_json,
                                   egress.subscription_weakenings, chained=False),
    PRIVACY: Safeguard(PRIVACY, datamap.PrivacySettings.from_json, datamap.weakenings),
    SUBJECT_ERASURE: Safeguard(SUBJECT_ERASURE, erasure.Erasure.from_json, erasure.weakenings, act=True),
}


# The code a principal without the permission to change a setting is refused with (one check:
# gate.services.governance.require_permission).
DENIED: Mapping[str, str] = {
    RELEASE_POLICY: "RELEASE_PERMISSION_DENIED",
    HOLD_POLICY: "HOLD_PERMISSION_DENIED",
    EVENT_SETTINGS: "EVENTS_PERMISSION_DENIED",  # the events routes' one code (docs/events.md)
    API_KEYS: "KEYS_PERMISSION_DENIED",
    EVENT_SUBSCRIPTIONS: "EVENTS_PERMISSION_DENIED",
    PRIVACY: "PRIVACY_PERMISSION_DENIED",
    SUBJECT_ERASURE: "PRIVACY_PERMISSION_DENIED",  # the privacy routes' one code
}
