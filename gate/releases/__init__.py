"""Policy releases: which published rulebook version production runs (docs/releases.md).

`model` is the pure state machine (actions, approvals, the canary arm of a subject), `events` the
signed, chained release events and their offline verification, `guardrails` the sequential tests
that halt a canary on their own.
"""
