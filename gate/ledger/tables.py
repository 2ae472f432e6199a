"""Ledger tables (SQLAlchemy Core). The Alembic migrations under `migrations/` build exactly these.

Timestamps are stored as the ISO 8601 UTC text that is hashed into records
(`2026-05-21T00:00:00.000Z`); that text sorts chronologically, so "newest first" is an
ORDER BY on it. JSON documents are stored as their canonical text, byte for byte what was hashed;
the four per-decision documents (record, request, chain link, receipt) and the outbox's events
through `AtRestText`, the compact at-rest encoding of `gate.ledger.codec`, which reads back exactly
that text.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from gate.ledger.codec import AtRestText

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "pk": "pk_%(table_name)s",
    }
)

# API keys: only the sha256 of the key is stored (SECURITY: a leaked table reveals no key).
api_keys = Table(
    "api_keys",
    metadata,
    Column("key_id", String(40), primary_key=True),
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("scope", String(120), nullable=False, index=True),
    Column("plan", String(40), nullable=False),
    Column("rate_limit", Integer, nullable=True),
    Column("monthly_cap", Integer, nullable=True),
    Column("status", String(16), nullable=False),
    Column("label", String(200), nullable=True),
    Column("created_at", String(32), nullable=False),
    Column("disabled_at", String(32), nullable=True),
    # Comma-separated release permissions beyond decide (publish, release, approve); null = decide only.
    Column("permissions", String(200), nullable=True),
    # Who the key belongs to (issue 52, gate.principals.parse_holder); null = a key created before
    # holders: its own holder, key:<key_id>.
    Column("holder", String(600), nullable=True),
)

# Monthly record usage per key; incremented in the same transaction as the record it counts.
usage_counters = Table(
    "usage_counters",
    metadata,
    Column("key_id", String(40), primary_key=True),
    Column("period", String(7), primary_key=True),
    Column("used", Integer, nullable=False),
)

# Immutable per-scope rulebook snapshots: (scope, rulebook_id, version) binds one hash forever.
rulebook_snapshots = Table(
    "rulebook_snapshots",
    metadata,
    Column("snapshot_id", Integer, primary_key=True, autoincrement=True),
    Column("scope", String(120), nullable=False),
    Column("rulebook_id", String(120), nullable=False),
    Column("version", String(80), nullable=False),
    Column("rulebook_hash", String(64), nullable=False),
    Column("evaluator_version", String(40), nullable=False),
    Column("schema_hash", String(64), nullable=False),
    Column("registered_at", String(32), nullable=False),
    Column("body_json", Text, nullable=False),
    Column("registry_json", Text, nullable=False),
    UniqueConstraint("scope", "rulebook_id", "version"),
    Index("ix_rulebook_snapshots_scope_hash", "scope", "rulebook_hash"),
)

# Decision Records: the full record and the canonical request, both as hashed.
decisions = Table(
    "decisions",
    metadata,
    Column("decision_id", String(64), primary_key=True),
    Column("scope", String(120), nullable=False),
    Column("key_id", String(40), nullable=False),
    Column("idempotency_key", String(300), nullable=True),
    Column("input_hash", String(64), nullable=False),
    Column("record_hash", String(64), nullable=False),
    Column("receipt_hash", String(64), nullable=False),
    Column("policy_bundle_hash", String(64), nullable=True),
    Column("rulebook_hash", String(64), nullable=True),
    Column("policy_id", String(120), nullable=True),
    Column("policy_version", String(80), nullable=True),
    Column("verdict", String(16), nullable=False),
    Column("created_at", String(32), nullable=False),
    Column("record_json", AtRestText, nullable=False),
    Column("request_json", AtRestText, nullable=False),
    # The row's seal (gate.chain.rowseal): hash of the columns above, and the receipt key's signature.
    # Nullable only because rows written before migration 0005 have none; verify fails them.
    Column("row_hash", String(64), nullable=True),
    Column("row_signature", Text, nullable=True),
    UniqueConstraint("scope", "idempotency_key"),
    Index("ix_decisions_scope_created", "scope", "created_at"),
    Index("ix_decisions_policy_bundle_hash", "policy_bundle_hash"),
)

# Decisions whose request and record body were removed (issue 67, items 3 and 4; migration 0024):
# by what (`cause`: retention or erasure; `cause_ref`: the retention's days, an erasure event) and
# when. The decisions row keeps every hash; `created_at` is the decision's (what ranges count by).
decision_removals = Table(
    "decision_removals",
    metadata,
    Column("decision_id", String(64), primary_key=True),
    Column("scope", String(120), nullable=False),
    Column("created_at", String(32), nullable=False),
    Column("cause", String(16), nullable=False),
    Column("cause_ref", String(200), nullable=False),
    Column("removed_at", String(32), nullable=False),
    Index("ix_decision_removals_scope_created", "scope", "created_at"),
)

# Audit chain per scope. The head row is the per-chain lock: appends take it FOR UPDATE first
# in the decide transaction, so positions are contiguous and appends serialize per chain.
chain_heads = Table(
    "chain_heads",
    metadata,
    Column("chain_id", String(80), primary_key=True),
    Column("scope", String(120), nullable=False, unique=True),
    Column("size", Integer, nullable=False),
    Column("head_link_hash", String(64), nullable=True),
    Column("merkle_root", String(64), nullable=True),
    Column("tree_peaks", Text, nullable=False),  # JSON list: RFC 6962 compact range of the tree
    Column("updated_at", String(32), nullable=False),
)

chain_links = Table(
    "chain_links",
    metadata,
    Column("chain_id", String(80), primary_key=True),
    Column("chain_position", Integer, primary_key=True),
    Column("decision_id", String(64), nullable=False, unique=True),
    Column("leaf_hash", String(64), nullable=False),
    Column("link_hash", String(64), nullable=False),
    Column("link_json", AtRestText, nullable=False),
)

# Hashes of complete aligned subtrees: (level, idx) covers leaves [idx·2^level, (idx+1)·2^level).
merkle_nodes = Table(
    "merkle_nodes",
    metadata,
    Column("chain_id", String(80), primary_key=True),
    Column("level", Integer, primary_key=True),
    Column("idx", Integer, primary_key=True),
    Column("hash", String(64), nullable=False),
)

# Signed checkpoints, one per (chain, tree size) once requested; never re-signed.
chain_checkpoints = Table(
    "chain_checkpoints",
    metadata,
    Column("chain_id", String(80), primary_key=True),
    Column("tree_size", Integer, primary_key=True),
    Column("checkpoint_json", Text, nullable=False),
)

# Lifecycle receipts (execution receipts, outcome records, CRM sync records), one table.
lifecycle_receipts = Table(
    "lifecycle_receipts",
    metadata,
    Column("receipt_id", String(64), primary_key=True),
    Column("kind", String(16), nullable=False),  # execution | outcome | crm_sync
    Column("decision_id", String(64), nullable=False),
    Column("scope", String(120), nullable=False),
    Column("idempotency_key", String(300), nullable=True),
    Column("input_hash", String(64), nullable=False),
    Column("receipt_hash", String(64), nullable=False),
    Column("reported_at", String(32), nullable=False),
    Column("receipt_json", AtRestText, nullable=False),
    # Per-decision hash chain of receipt rows (gate.chain.rowseal); null only on rows from before migration 0005.
    Column("sequence", Integer, nullable=True),
    Column("previous_row_hash", String(64), nullable=True),
    Column("row_hash", String(64), nullable=True),
    # An Outcome Record's link to the execution receipt it follows (migration 0012; null on every
    # other row): copies of the receipt's own link members, under the row seal.
    Column("execution_receipt_id", String(64), nullable=True),
    Column("execution_hash", String(64), nullable=True),
    Index("ix_lifecycle_receipts_decision", "decision_id", "kind", "reported_at"),
    # The keyset of the export's receipt stream (gate.ledger.stream.iter_receipts).
    Index("ix_lifecycle_receipts_scope_kind_reported", "scope", "kind", "reported_at", "receipt_id"),
    UniqueConstraint("decision_id", "sequence"),
)

# Per-decision head of the receipt chain: the count and newest row hash, signed with the
# receipt key. Receipt writes lock this row first, so sequences are contiguous per decision.
receipt_heads = Table(
    "receipt_heads",
    metadata,
    Column("decision_id", String(64), primary_key=True),
    Column("count", Integer, nullable=False),
    Column("head_row_hash", String(64), nullable=True),
    Column("key_id", String(120), nullable=True),
    Column("signature", Text, nullable=True),
    Column("updated_at", String(32), nullable=False),
)

# Idempotency claims for the lifecycle writes: claimed atomically (unique key) before the
# receipt is written, completed in the receipt's own transaction, removed when the write fails.
idempotency_claims = Table(
    "idempotency_claims",
    metadata,
    Column("scope", String(120), primary_key=True),
    Column("kind", String(16), primary_key=True),
    Column("idempotency_key", String(300), primary_key=True),
    Column("decision_id", String(64), nullable=False),
    Column("input_hash", String(64), nullable=False),
    Column("state", String(16), nullable=False),  # pending | done
    Column("claim_token", String(64), nullable=False),
    Column("claimed_at", String(32), nullable=False),
    Column("receipt_id", String(64), nullable=True),
)

# Operator setting per scope: does it opt in to anonymized cross-customer benchmarks?
# Revocable at any time (`gate scopes benchmarks --scope S --opt-out`); a scope without a row
# has not opted in.
scope_benchmark_settings = Table(
    "scope_benchmark_settings",
    metadata,
    Column("scope", String(120), primary_key=True),
    Column("opted_in", Integer, nullable=False),
    Column("updated_at", String(32), nullable=False),
)

# Decision confidence counters (gate.protocol.confidence): per (scope, policy_id, verdict, action,
# policy_version) the number of decisions whose latest Outcome Record is of each effectiveness
# class. The empty string in verdict/action/policy_version is the roll-up over that column
# ('' is never a stored value: verdicts are yes|no|review, actions and versions are non-empty).
# Maintained in the outcome's own transaction (gate.ledger.confidence).
confidence_counters = Table(
    "confidence_counters",
    metadata,
    Column("scope", String(120), primary_key=True),
    Column("policy_id", String(120), primary_key=True),
    Column("verdict", String(16), primary_key=True),
    Column("action", String(200), primary_key=True),
    Column("policy_version", String(80), primary_key=True),
    Column("n_success", Integer, nullable=False),
    Column("n_failure", Integer, nullable=False),
    Column("n_excluded", Integer, nullable=False),
    Column("n_open", Integer, nullable=False),
)

# The latest Outcome Record of each decision (by reported_at, then receipt_id) and its class:
# the row a newer outcome locks to move its decision from one counter class to another.
outcome_latest = Table(
    "outcome_latest",
    metadata,
    Column("decision_id", String(64), primary_key=True),
    Column("scope", String(120), nullable=False),
    Column("reported_at", String(32), nullable=False),
    Column("receipt_id", String(64), nullable=False),
    Column("effect", String(16), nullable=False),  # success | failure | excluded | open | '' (none yet)
)

# Workflow route results (api/routes/workflows.py): advisory, never decisions. One row per
# (ticketing system, idempotency key); a replay answers `response_json` byte for byte.
workflow_runs = Table(
    "workflow_runs",
    metadata,
    Column("ticketing_system", String(40), primary_key=True),
    Column("idempotency_key", String(300), primary_key=True),
    Column("request_id", String(64), nullable=False, unique=True),
    Column("workflow", String(16), nullable=False),
    Column("ticket_id", String(200), nullable=False),
    Column("input_hash", String(64), nullable=False),
    Column("created_at", String(32), nullable=False),
    Column("response_json", Text, nullable=False),
)

# Pilot intake submissions (api/routes/operations.py): one row per submission, idempotent by key;
# the confirmation token is stored only as its sha256. Contact data: read only with the metrics token.
pilot_intakes = Table(
    "pilot_intakes",
    metadata,
    Column("pilot_id", String(40), primary_key=True),
    Column("idempotency_key", String(300), nullable=False, unique=True),
    Column("input_hash", String(64), nullable=False),
    Column("company", String(200), nullable=False),
    Column("contact_name", String(200), nullable=False),
    Column("contact_email", String(254), nullable=False),
    Column("use_case", String(40), nullable=False),
    Column("monthly_decisions", Integer, nullable=False),
    Column("notes", Text, nullable=False),
    Column("status", String(16), nullable=False),  # submitted | confirmed
    Column("token_hash", String(64), nullable=False),
    Column("created_at", String(32), nullable=False),
    Column("confirmed_at", String(32), nullable=True),
    Index("ix_pilot_intakes_created", "created_at", "pilot_id"),
)

# Release events (gate.releases): per (scope, rulebook_id) a gap-free chain of signed transitions
# (publish-independent: the versions themselves are rulebook_snapshots rows). `event_json` is the
# canonical signed event, byte for byte what was hashed; the release state is the fold of the chain.
release_events = Table(
    "release_events",
    metadata,
    Column("scope", String(120), primary_key=True),
    Column("rulebook_id", String(120), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("action", String(16), nullable=False),
    Column("event_hash", String(64), nullable=False),
    Column("idempotency_key", String(300), nullable=True),
    Column("request_hash", String(64), nullable=False),
    Column("created_at", String(32), nullable=False),
    Column("event_json", Text, nullable=False),
    UniqueConstraint("scope", "rulebook_id", "idempotency_key"),
)

# One row per decision made under a release (by reference, or inline of a released id): the arm
# that decided and, while a version is in shadow, the shadow's result on the same facts. Written
# in the decision's own transaction; read by the guardrails and exported to the dataset.
release_decisions = Table(
    "release_decisions",
    metadata,
    Column("decision_id", String(64), primary_key=True),
    Column("scope", String(120), nullable=False),
    Column("rulebook_id", String(120), nullable=False),
    Column("release_seq", Integer, nullable=False),
    Column("arm", String(16), nullable=False),  # active | canary | pinned | inline
    Column("version", String(80), nullable=False),
    Column("verdict", String(16), nullable=False),
    Column("created_at", String(32), nullable=False),
    Column("shadow_version", String(80), nullable=True),
    Column("shadow_verdict", String(16), nullable=True),
    Column("shadow_reason_code", String(200), nullable=True),
    Column("shadow_matched_rule_id", String(200), nullable=True),
    Index("ix_release_decisions_rulebook", "scope", "rulebook_id", "release_seq", "arm"),
)

# A scope's release policy (`gate release policy`): approvals required for canary/activate, the
# approval lifetime, and whether an inline decide of a superseded version is refused.
release_policies = Table(
    "release_policies",
    metadata,
    Column("scope", String(120), primary_key=True),
    Column("policy_json", Text, nullable=False),
    Column("updated_at", String(32), nullable=False),
)

# The transactional outbox (gate/services/events.py, docs/events.md): one row per event, written
# in the same transaction as the fact it announces. `seq` counts per scope from 1 without gaps:
# the writer takes it from `event_sequences` under that row's lock, so commit order is seq order.
# `event_json` is stored like a record (`AtRestText`, migration 0019): a `decision.created` holds
# the whole record. Rows older than the retention are pruned (`event_retention`, docs/events.md).
event_outbox = Table(
    "event_outbox",
    metadata,
    Column("scope", String(120), primary_key=True),
    Column("seq", Integer, primary_key=True),
    # A function of (scope, seq), which the key keeps unique: no index of its own (migration 0026).
    Column("event_id", String(64), nullable=False),
    Column("event_type", String(80), nullable=False),
    Column("created_at", String(32), nullable=False),
    Column("event_json", AtRestText, nullable=False),  # the CloudEvent, canonical text: the body delivered
)

# Per scope, how far its outbox was pruned (docs/events.md, "Retention"): every event up to
# `pruned_through` (seq) is gone, the newest of them written at `pruned_through_at`. A read or
# replay of that range is refused with EVENTS_PRUNED; the pruner and a subscription that enables
# or starts from the beginning take this row's lock first, so neither misses the other's change.
event_retention = Table(
    "event_retention",
    metadata,
    Column("scope", String(120), primary_key=True),
    Column("pruned_through", Integer, nullable=False),
    Column("pruned_through_at", String(32), nullable=True),
    # The stored bytes of the scope's kept events (`gate.ledger.outbox_retention.ROW_BYTES`), counted by the
    # retention pass through `counted_through` (seq); and how many events a size bound
    # (GATE_EVENTS_RETENTION_BYTES) dropped before an active subscription or held stream had them
    # (migration 0023, docs/events.md "Retention").
    Column("counted_through", Integer, nullable=False, server_default="0"),
    Column("bytes", BigInteger, nullable=False, server_default="0"),
    Column("dropped_undelivered", BigInteger, nullable=False, server_default="0"),
)

event_sequences = Table(
    "event_sequences",
    metadata,
    Column("scope", String(120), primary_key=True),
    Column("last_seq", Integer, nullable=False),
)

# Webhook subscriptions per scope. `secret` signs deliveries (Standard Webhooks, HMAC-SHA256): it
# must be readable to sign, so it is stored as issued; `previous_secret` signs beside it until
# `previous_until` after a rotation. `cursor` is the last seq settled (delivered, or not wanted);
# a dispatcher holds `lease_owner` until `lease_until` while it delivers, so one at a time.
webhook_subscriptions = Table(
    "webhook_subscriptions",
    metadata,
    Column("subscription_id", String(40), primary_key=True),
    Column("scope", String(120), nullable=False, index=True),
    Column("url", String(2000), nullable=False),
    Column("event_types", Text, nullable=False),  # canonical JSON list of types (["*"] for every type)
    Column("secret", String(120), nullable=False),
    Column("previous_secret", String(120), nullable=True),
    Column("previous_until", String(32), nullable=True),
    Column("status", String(16), nullable=False),  # active | disabled
    Column("disabled_reason", String(400), nullable=True),
    Column("cursor", Integer, nullable=False),
    Column("attempts", Integer, nullable=False),  # failed attempts of the event after `cursor`
    Column("failing_since", String(32), nullable=True),
    Column("next_attempt_at", String(32), nullable=True),
    Column("lease_owner", String(80), nullable=True),
    Column("lease_until", String(32), nullable=True),
    Column("created_at", String(32), nullable=False),
    Column("created_by", String(600), nullable=False),
    Column("sign_ed25519", Integer, nullable=False),  # 1: deliveries also carry the gate's Ed25519 signature
    # Attempts the retention deleted (and how many of them succeeded), still counted in the
    # subscription's totals (`Outbox.attempt_totals`; migration 0020, docs/events.md "Retention").
    Column("pruned_attempts", Integer, nullable=False, server_default="0"),
    Column("pruned_succeeded", Integer, nullable=False, server_default="0"),
)

# Every delivery attempt: the receiver's status and the first bytes of its answer (shown as text).
# Attempts older than the retention are pruned, each subscription's newest `ATTEMPTS_KEPT` aside
# (gate/services/event_retention.py); their counts move to the subscription's `pruned_attempts`.
webhook_attempts = Table(
    "webhook_attempts",
    metadata,
    Column("attempt_id", Integer, primary_key=True, autoincrement=True),
    Column("subscription_id", String(40), nullable=False),
    Column("scope", String(120), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("event_id", String(64), nullable=False),
    Column("attempted_at", String(32), nullable=False),
    Column("ok", Integer, nullable=False),
    Column("status_code", Integer, nullable=True),
    Column("latency_ms", Integer, nullable=False),
    Column("excerpt", String(600), nullable=False),
    Column("replay", Integer, nullable=False),
    Index("ix_webhook_attempts_subscription", "subscription_id", "attempt_id"),
)

# Manual replays waiting to be sent (one event or a range), beside the ordered stream.
webhook_replays = Table(
    "webhook_replays",
    metadata,
    Column("subscription_id", String(40), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("requested_at", String(32), nullable=False),
)

# Where each named stream (a NATS JetStream publisher) stands in each scope's outbox.
event_stream_cursors = Table(
    "event_stream_cursors",
    metadata,
    Column("stream", String(80), primary_key=True),
    Column("scope", String(120), primary_key=True),
    Column("cursor", Integer, nullable=False),
)

# Held actions (issue 43, docs/holds.md). One row per decision whose verdict holds the action,
# written in the decide's own transaction; its state moves only with a hold event of the same
# transaction (`row_version` makes two racing resolutions give one). `approvals_json` lists the
# approving votes so far ({actor, holder, event_hash}; holder since issue 52); `facts_json` the facts a reviewer sees.
holds = Table(
    "holds",
    metadata,
    Column("decision_id", String(64), primary_key=True),
    Column("scope", String(120), nullable=False),
    Column("record_hash", String(64), nullable=False),
    Column("policy_id", String(200), nullable=True),
    Column("policy_version", String(200), nullable=True),
    Column("rule_id", String(200), nullable=True),
    Column("reason_code", String(200), nullable=True),
    Column("requested_by", String(600), nullable=False),
    Column("queue", String(64), nullable=False),
    Column("priority", String(16), nullable=False),
    Column("priority_rank", Integer, nullable=False),
    Column("opened_at", String(32), nullable=False),
    Column("deadline_at", String(32), nullable=False),
    Column("escalate_at", String(32), nullable=True),
    Column("approvals_needed", Integer, nullable=False),
    Column("require_justification", Integer, nullable=False),
    Column("four_eyes", Integer, nullable=False),
    Column("state", String(16), nullable=False),
    Column("claimed_by", String(600), nullable=True),
    Column("claimed_at", String(32), nullable=True),
    Column("approvals_json", Text, nullable=False),
    Column("resolved_at", String(32), nullable=True),
    Column("resolved_by", String(600), nullable=True),
    Column("resolution_seq", Integer, nullable=True),
    Column("row_version", Integer, nullable=False),
    Column("facts_json", Text, nullable=False),
    # The deciding key's stated holder (issue 52); null: none stated (its holder is key:<requested_by>).
    Column("requested_holder", String(600), nullable=True),
    # What the caller asked (issue 65, gate.holds.request): the summary read at open time from the
    # canonical request bound to the record's input_hash, and two of its members the Inbox searches.
    # Null on holds opened before migration 0021 (their request is read from the decision when shown).
    Column("request_json", Text, nullable=True),
    Column("target_object_id", String(200), nullable=True),
    Column("source_record_id", String(200), nullable=True),
    Index("ix_holds_scope_state_deadline", "scope", "state", "deadline_at"),
    Index("ix_holds_scope_target_object", "scope", "target_object_id"),
    Index("ix_holds_scope_source_record", "scope", "source_record_id"),
    Index("ix_holds_state_deadline", "state", "deadline_at"),
    Index("ix_holds_state_escalate", "state", "escalate_at"),
)

# The inbox's one order (issue 65): most urgent, then least time left, then decision id (0022).
Index("ix_holds_inbox_order", holds.c.scope, holds.c.state, holds.c.priority_rank.desc(), holds.c.deadline_at,
      holds.c.decision_id)

# The scope's hold chain (`hold_event_v1`, gate.holds.events): votes, expiries, escalations,
# claims, reassignments and hold-policy changes, gap-free per scope.
hold_events = Table(
    "hold_events",
    metadata,
    Column("scope", String(120), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("decision_id", String(64), nullable=True),
    Column("action", String(16), nullable=False),
    Column("event_hash", String(64), nullable=False),
    Column("created_at", String(32), nullable=False),
    Column("event_json", Text, nullable=False),
    Index("ix_hold_events_decision", "decision_id", "seq"),
    Index("ix_hold_events_scope_action", "scope", "action", "seq"),
)

# The Slack message that told a queue of a hold (docs/integrations.md, "Reviewers' channels"):
# where it is (`channel`, `ts`) and its blocks as last sent, so the dispatcher replaces the hold's
# buttons by its resolution once it closes anywhere (a digest's rows share one message; a hold
# moved to another queue has a message in each). A removal of a hold's inputs rewrites them.
slack_messages = Table(
    "slack_messages",
    metadata,
    Column("scope", String(120), primary_key=True),
    Column("decision_id", String(64), primary_key=True),
    Column("channel", String(40), primary_key=True),
    Column("ts", String(40), primary_key=True),
    Column("blocks_json", Text, nullable=False),
    # 1 when the blocks were rewritten by a removal of inputs and Slack still shows the old ones
    # (migration 0025): the notifier's Slack pass sends them and clears it.
    Column("stale", Integer, nullable=False, server_default="0"),
    Index("ix_slack_messages_message", "channel", "ts"),
)

# Per-scope event settings (docs/events.md, "Opt-in events"): `decision.created` for every
# decision, and the schedule of the scope's anomaly report whose findings become events.
event_settings = Table(
    "event_settings",
    metadata,
    Column("scope", String(120), primary_key=True),
    Column("decision_created", Integer, nullable=False),
    Column("anomaly_every_seconds", Integer, nullable=True),
    Column("anomaly_next_at", String(32), nullable=True),
    Column("updated_at", String(32), nullable=False),
    Column("updated_by", String(600), nullable=False),
)

# The anomalies a scope's scheduled report has announced and not yet seen cleared: one
# `anomaly.detected` per anomaly until it is gone from the report (`anomaly.cleared`).
anomaly_alerts = Table(
    "anomaly_alerts",
    metadata,
    Column("scope", String(120), primary_key=True),
    Column("anomaly_key", String(64), primary_key=True),
    Column("first_seen", String(32), nullable=False),
    Column("last_seen", String(32), nullable=False),
    Column("summary_json", Text, nullable=False),
)
