"""`AdvisoryService.decide`: the advisory modes as a use case, stored like every decision.

prepare (fail-closed checks) → input hash → idempotency fast path (the same replay and conflict
rules as rulebook mode: the steps of `gate.services.pipeline`, shared with `DecisionService`) → ask the advisors → combine → build and
seal the record → store it atomically with its chain link, row seal and monthly-cap charge.

The panel: `single` and `runtime` ask one advisor (the first configured HTTP model, else the
offline policy-pattern advisor); `multi` asks the offline advisor and every configured HTTP model
(at least two advisors, else 503 `ADVISOR_UNAVAILABLE`). A failed advisor on a one-advisor path,
or every advisor failing in `multi`, is 502 `ADVISOR_UPSTREAM_FAILED`: nothing is stored.

`evaluate(request)` runs the same panel over a stored request without writing: what a
current-mode replay of an advisory decision compares against (the stored `request_json` is the
canonical request, and the record names the panel by `policy_hash` and each advisor's lineage).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gate.advisory.advisors import (
    MULTI_RULE,
    SINGLE_RULE,
    AdvisoryQuestion,
    Combined,
    PatternRulebookAdvisor,
    Vote,
    combine,
)
from gate.advisory.record import (
    ADVISORY_VERSION,
    GENERAL_POLICY,
    POLICY_PREFIX,
    build_advisory_record,
)
from gate.advisory.request import AdvisoryRequest, prepare_advisory_request
from gate.errors import GateError
from gate.protocol.decision_record import DecisionRecord
from gate.rulebook.patterns import PatternRegistry, load_patterns
from gate.services.pipeline import Caller, Claim, DecideResult, DecisionPipeline, fingerprint


@dataclass(frozen=True)
class AdvisoryOutcome:
    """The panel's answer to one request (pure; nothing stored)."""

    prepared: AdvisoryRequest
    identities: list[dict[str, Any]]
    votes: list[Vote]
    combined: Combined
    policy_id: str
    policy_version: str


class AdvisoryService:
    def __init__(self, http_advisors: Sequence[Any] = (), patterns: PatternRegistry | None = None) -> None:
        self.patterns = patterns or load_patterns()
        self.offline = PatternRulebookAdvisor(self.patterns)
        self.http_advisors = list(http_advisors)

    def panel(self, mode: str) -> tuple[list[Any], str]:
        if mode == "multi":
            advisors = [self.offline, *self.http_advisors]
            if len(advisors) < 2:
                raise GateError("ADVISOR_UNAVAILABLE", "mode 'multi' needs at least two independent advisors; "
                                "configure GATE_ADVISOR_BASE_URL and GATE_ADVISOR_MODEL (the offline policy-pattern "
                                "advisor is the other one)", mode=mode, advisors=[a.advisor_id for a in advisors])
            return advisors, MULTI_RULE
        return [self.http_advisors[0] if self.http_advisors else self.offline], SINGLE_RULE

    def describe(self) -> dict[str, Any]:
        """Public panel metadata for `/api/runtime-config` (no URLs with credentials, no keys)."""
        return {
            "advisory_version": ADVISORY_VERSION,
            "offline_advisor": self.offline.advisor_id,
            "http_advisors": [{"advisor_id": a.advisor_id, "model": a.model, "provider": a.provider}
                              for a in self.http_advisors],
            "single_advisor": self.panel("single")[0][0].advisor_id,
            "multi_available": len(self.http_advisors) >= 1,
        }

    def evaluate(self, body: Any) -> AdvisoryOutcome:
        return self._evaluate(prepare_advisory_request(body, self.patterns))

    def _evaluate(self, prepared: AdvisoryRequest) -> AdvisoryOutcome:
        advisors, rule = self.panel(prepared.mode)
        question = AdvisoryQuestion(prepared.mode, prepared.question, prepared.context, prepared.facts,
                                    prepared.pattern)
        identities = [advisor.identity(question) for advisor in advisors]
        votes = [advisor.advise(question) for advisor in advisors]
        failed = [vote for vote in votes if vote.status != "ok"]
        if len(failed) == len(votes):
            # SECURITY: no advisor answered: refuse (502) rather than record a guess.
            first = failed[0]
            raise GateError("ADVISOR_UPSTREAM_FAILED", f"advisor {first.advisor_id} failed: {first.rationale}",
                            advisor_id=first.advisor_id, advisor_error=first.error)
        pattern = prepared.pattern
        policy_id = POLICY_PREFIX + pattern.policy_id if pattern is not None else GENERAL_POLICY
        policy_version = pattern.body["recommended_policy_version"] if pattern is not None else ADVISORY_VERSION
        return AdvisoryOutcome(prepared, identities, votes, combine(rule, votes), policy_id, policy_version)

    def decide(self, pipeline: DecisionPipeline, caller: Caller, body: Any, *, idempotency_key: str | None,
               request_id: str | None) -> DecideResult:
        """Called by `DecisionService.decide` for advisory bodies, with its shared pipeline."""
        prepared = prepare_advisory_request(body, self.patterns)
        claim = Claim(caller, idempotency_key, fingerprint(prepared.request))
        replayed = pipeline.replay_known(claim)
        if replayed is not None:
            return replayed
        receipt_signer = pipeline.receipt_signer()
        outcome = self._evaluate(prepared)
        pattern = prepared.pattern
        stamp = pipeline.stamp(claim, request_id)
        record = DecisionRecord.built(build_advisory_record(
            decision_id=stamp.decision_id,
            request_id=stamp.request_id,
            idempotency_key=stamp.idempotency_key,
            created_at=stamp.created_at,
            input_hash=stamp.input_hash,
            mode=prepared.mode,
            question=prepared.question,
            context=prepared.context,
            facts=prepared.facts,
            pattern_id=pattern.pattern_id if pattern is not None else None,
            policy_id=outcome.policy_id,
            policy_version=outcome.policy_version,
            identities=outcome.identities,
            votes=outcome.votes,
            combined=outcome.combined,
            receipt_signer=receipt_signer,
        ))
        return pipeline.store(claim, record, rulebook_hash=record["policy_hash"], receipt_signer=receipt_signer,
                              facts=prepared.facts)


__all__ = ["AdvisoryOutcome", "AdvisoryService"]
