"""The gate's configuration, read from the environment (documented in README "Configuration").

Plain data: every shell (the API, the `gate` command, the workbench) reads it from here, and it
imports nothing of them. Secrets (the HMAC receipt secret) come only from the environment; signing keys only from
key files. Nothing here is logged.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypedDict
from urllib.parse import urlsplit

from gate.errors import CodedError
from gate.resources import data_path

# A trusted proxy: one address or a network (GATE_TRUSTED_PROXIES).
ProxyNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# rate_limit: decides per minute; cost_limit: cost units per minute of the costly keyed routes
# (replay, diff, counterfactuals, reports, alerts, packets, chain views: api/costs.py), a window
# of its own so that those routes cannot starve the key's decides.
DEFAULT_PLANS: dict[str, dict[str, int]] = {
    "starter": {"rate_limit": 20, "monthly_cap": 10_000, "cost_limit": 60},
    "growth": {"rate_limit": 120, "monthly_cap": 250_000, "cost_limit": 360},
    "scale": {"rate_limit": 1_200, "monthly_cap": 5_000_000, "cost_limit": 3_600},
}
# A GATE_PLANS plan without cost_limit gets this many cost units per decide of its rate_limit.
COST_UNITS_PER_DECIDE = 3


# Every variable `Settings.from_env` reads: (name, default, meaning). `gate serve --help` prints
# this table; tests check it against the variables read below and the README's table.
DEFAULT_NATS_STREAM = "GATE_EVENTS"  # the JetStream stream's name (gate/events/stream.py)

VARIABLES: tuple[tuple[str, str, str], ...] = (
    ("GATE_HOME", "./var", "folder of the embedded ledger and keyring (created on first use)"),
    ("GATE_DATABASE_URL", "sqlite:///$GATE_HOME/gate.db", "ledger URL; postgresql://user@host/db in production"),
    ("GATE_SIGNING_KEY_FILE", "$GATE_HOME/signing-keys.json", "Ed25519 keyring (gate keys signing-init)"),
    ("GATE_SIGNING_KEY_CHECK_MS", "1000", "how often each worker looks for a new keyring; 0: never"),
    ("GATE_LEDGER_GROUP_COMMIT", "auto", "decisions stored many per transaction by one writer thread per process; auto: on (SQLite and PostgreSQL)"),
    ("GATE_API_KEY_CACHE_MS", "1000", "longest a worker trusts an active API key it read (a disabled key is refused after it); 0: every request reads"),
    ("GATE_RECEIPT_HMAC_SECRET", "unset", "HMAC-SHA256 receipt secret (>= 32 characters) instead of Ed25519"),
    ("GATE_RECEIPT_HMAC_KEY_ID", "hmac-receipt-v1", "key id named in HMAC receipts"),
    ("GATE_REQUIRE_SIGNING", "true", "without a usable key, decide answers 503 and stores nothing"),
    ("GATE_REDIS_URL", "unset", "shared rate-limit windows; required for more than one worker"),
    ("GATE_PLANS", "built in", 'JSON {"plan": {"rate_limit": n, "monthly_cap": n, "cost_limit": n?}} over the defaults'),
    ("GATE_MAX_BODY_BYTES", "1048576", "larger request bodies answer 413"),
    ("GATE_MAX_PACKET_BYTES", "16777216", "body limit of POST /api/decision/packet/verify"),
    ("GATE_REQUEST_READ_TIMEOUT", "10", "seconds to send one request's head and body (else 408)"),
    ("GATE_WORKER_TIMEOUT", "30", "seconds a gate serve worker's loop may go silent before the arbiter restarts it (5-3600)"),
    ("GATE_SCHEMA_URL", "/schemas/rulebook-v1.schema.json", "rulebook_contract.schema_url in records"),
    ("GATE_POLICY_DIR", "the package's gate/data/rulebooks", "operator-published rulebooks (policy-bundles registry)"),
    ("GATE_AUTO_MIGRATE", "true", "run ledger migrations when the app starts"),
    ("GATE_DECIDE_CONFIDENCE", "true", "attach the decide-time confidence block"),
    ("GATE_POLICYCHECK_RATE_LIMIT", "600", "requests per minute per client on the policy-check routes"),
    ("GATE_PUBLIC_RATE_LIMIT", "600", "requests per minute per client on the other public routes (registries, docs)"),
    ("GATE_PUBLIC_VERIFY_RATE_LIMIT", "60", "public record and packet verifications per minute per client"),
    ("GATE_PUBLIC_VERIFY_CONCURRENCY", "1", "public verifications running at once per server process (else 503)"),
    ("GATE_CLIENT_ADDRESS_HEADER", "unset", "header (X-Forwarded-For) naming the client, from trusted proxies only"),
    ("GATE_TRUSTED_PROXIES", "unset", "comma-separated proxy addresses/networks whose address header is read"),
    ("GATE_WORKFLOW_TOKEN", "unset", "bearer token the workflow routes require when set"),
    ("GATE_CHECKPOINT_LOG", "$GATE_HOME/checkpoints.jsonl",
     "the gate's own witness log of signed chain checkpoints, outside the ledger; off: none"),
    ("GATE_CHECKPOINT_EVERY", "100", "append a chain's checkpoint to that log every N decisions; 0: on demand only"),
    ("GATE_WEBHOOK_ALLOW_HOSTS", "", "hosts inside the network a webhook may reach, by name (docs/events.md)"),
    ("GATE_OUTBOUND_ALLOW_HOSTS", "", ("hosts inside the network the operator's own URLs may name: Slack's API, "
                                       "the SMTP server, the CI issuer and its JWKS (docs/events.md)")),
    ("GATE_EVENTS_DISPATCH", "true", ("deliveries, notices, retention and sweeps in each gate serve worker "
                                      "(`gate serve --no-dispatch` turns it off; `gate dispatch` runs them beside)")),
    ("GATE_EVENTS_INTERVAL_MS", "1000", "how often a dispatcher looks for due deliveries (50-3600000)"),
    ("GATE_EVENTS_RETENTION_DAYS", "30",
     ("days an event stays replayable; older, settled events and delivery attempts (a subscription's newest "
      "200 aside) are pruned (docs/events.md); 0: keep all")),
    ("GATE_EVENTS_RETENTION_BYTES", "0",
     ("bound on the outbox's stored bytes: past it the oldest events go, delivered ones first, undelivered ones "
      "counted in /metrics and their subscriptions disabled (docs/events.md \"Retention\"); 0: no bound")),
    ("GATE_EVENTS_CONCURRENCY", "8",
     "subscriptions a dispatcher delivers at once; one scope gets at most half of them (1-64)"),
    ("GATE_EVENTS_LEASE_SECONDS", "60",
     "how long a dispatcher holds a subscription per pass; a dead one's is taken over after it (1-3600)"),
    ("GATE_NATS_URL", "", "publish every event to NATS JetStream at this server (empty: off)"),
    ("GATE_NATS_STREAM", "GATE_EVENTS", "the JetStream stream the events go to"),
    ("GATE_HOLD_SWEEP_MS", "1000", "how often each serving process expires and escalates due holds (50-3600000)"),
    ("GATE_WORKBENCH_URL", "", "the workbench app's address, ending in /workbench (checked at start): hold events then link to the Inbox (docs/holds.md)"),
    ("GATE_SMTP_URL", "", "smtp://[user:password@]host[:port] or smtps://...: the queues' e-mail (docs/integrations.md)"),
    ("GATE_SMTP_FROM", "", "the From address of the queues' e-mail"),
    ("GATE_SLACK_BOT_TOKEN", "", "the Slack app's bot token: the queues' Slack messages (docs/integrations.md)"),
    ("GATE_SLACK_API_URL", "https://slack.com/api/", "the Slack Web API's address"),
    ("GATE_SLACK_SIGNING_SECRET", "", "verifies Slack's interactions (Approve/Deny); empty: the endpoint refuses"),
    ("GATE_PRIVACY_KEY", "unset", "the key (32+ characters) personal values are hashed under, per scope (docs/privacy.md)"),
    ("GATE_PRIVACY_KEY_FILE", "$GATE_HOME/privacy.key",
     "where the privacy key is kept when GATE_PRIVACY_KEY is unset (made on first use, 0600)"),
    ("GATE_FACTS_RETENTION_DAYS", "0",
     ("days a decision's request facts and record body are kept where the scope's privacy setting states none; "
      "older, they are removed from the ledger and the outbox, every hash kept (docs/privacy.md \"Retention\"); "
      "0: keep all")),
    ("GATE_GRANTS_FILE", "", "the grants file (the workbench's --grants): Slack users' people, CI runs' roles"),
)


def variables_help() -> str:
    """The GATE_* variables as an aligned text table (for `gate serve --help`)."""
    width = max(len(name) for name, _, _ in VARIABLES)
    lines = ["configuration (environment variables; defaults in brackets):"]
    lines += [f"  {name:<{width}}  {meaning} [{default}]" for name, default, meaning in VARIABLES]
    return "\n".join(lines)


class SettingsError(CodedError, ValueError):
    """A configuration value is unusable; the service refuses to start."""

    CODE = "SETTINGS_INVALID"


@dataclass(frozen=True)
class Settings:
    home: Path
    database_url: str
    signing_key_file: Path
    hmac_secret: bytes | None = None
    hmac_key_id: str = "hmac-receipt-v1"
    require_signing: bool = True
    redis_url: str | None = None
    plans: dict[str, dict[str, int]] = field(default_factory=lambda: dict(DEFAULT_PLANS))
    max_body_bytes: int = 1_048_576
    max_packet_bytes: int = 16_777_216
    schema_url: str = "/schemas/rulebook-v1.schema.json"
    policy_dir: Path | None = None
    auto_migrate: bool = True
    request_read_timeout: float = 10.0
    # Seconds a serving worker's main loop may go without telling gunicorn's arbiter it is alive.
    worker_timeout: int = 30
    decide_confidence: bool = True
    # How often (milliseconds) each worker stats the keyring file to pick up signing-init/rotate; 0: never.
    signing_key_check_ms: int = 1000
    # How long (milliseconds) a worker may trust an active API key row it read; 0: read on every request.
    api_key_cache_ms: int = 1000
    # Group commit of decisions (gate/ledger/groupcommit.py): None = auto (on, for SQLite and PostgreSQL).
    ledger_group_commit: bool | None = None
    # Ledger connections a process keeps open between uses. `gate serve` sets one per request thread
    # and two more (the writer's, a spare); at a peak up to 10 more open, and close again on return.
    ledger_pool_size: int = 5
    # Policy checks and workflow routes (docs/policy-checks.md): per-client limit, optional bearer token.
    policycheck_rate_limit: int = 600
    workflow_token: str | None = field(default=None, repr=False)
    # Public routes (api/public_limits.py): per-client budgets, concurrent verifications per process,
    # and the client address behind trusted proxies (api/client_limits.py).
    public_rate_limit: int = 600
    public_verify_rate_limit: int = 60
    public_verify_concurrency: int = 1
    client_address_header: str | None = None
    trusted_proxies: tuple[ProxyNetwork, ...] = ()
    # Trusted adapters (docs/adapters.md): warm one-shot workers per process, memory bound, plugins.
    adapter_pool_size: int = 2
    adapter_memory_mb: int = 256
    adapter_plugins: bool = True
    # Advisory legacy modes (docs/advisory.md): on by default; an HTTP LLM advisor when configured.
    advisory_modes: bool = True
    advisor_base_url: str | None = None
    advisor_models: tuple[str, ...] = ()
    advisor_api_key: str | None = field(default=None, repr=False)
    advisor_timeout: float = 10.0
    # Operational routes (docs/operations.md): the metrics token, the vendor-source age limit.
    metrics_token: str | None = field(default=None, repr=False)
    policy_source_max_age_days: int = 180
    # Witnessed checkpoints (docs/verification.md §7.4): the gate's own log outside the ledger.
    checkpoint_log: Path | None = None
    checkpoint_every: int = 100
    # Events out (docs/events.md): hosts a webhook may reach although they resolve inside
    # (loopback, private, link-local), named by the operator; the dispatcher's pass interval and
    # its lease on a subscription (docs/events.md, "Guarantees"); how long delivered events and
    # delivery attempts are kept (days, 0 for ever: docs/events.md, "Retention").
    webhook_allow_hosts: tuple[str, ...] = ()
    # Every outbound request (gate.events.outbound): hosts the operator's own URLs (Slack's API,
    # the SMTP server, the CI issuer, the workbench's provider) may name although they resolve inside.
    outbound_allow_hosts: tuple[str, ...] = ()
    events_dispatch: bool = True
    events_interval_ms: int = 1000
    events_lease_seconds: int = 60
    events_concurrency: int = 8
    events_retention_days: int = 30
    events_retention_bytes: int = 0
    nats_url: str | None = None
    nats_stream: str = "GATE_EVENTS"
    # Held actions (docs/holds.md): how often each serving process expires and escalates due holds.
    hold_sweep_ms: int = 1000
    workbench_url: str | None = None  # where people open the workbench: hold events link to the Inbox
    # Reviewers' channels (docs/integrations.md): the operator's SMTP server, the Slack app.
    smtp_url: str | None = field(default=None, repr=False)  # may carry a password
    smtp_from: str | None = None
    slack_bot_token: str | None = field(default=None, repr=False)
    slack_api_url: str = "https://slack.com/api/"
    slack_signing_secret: str | None = field(default=None, repr=False)
    grants_file: Path | None = None
    # Privacy (docs/privacy.md): the key personal values are hashed under (per scope, derived).
    privacy_key: str | None = field(default=None, repr=False)
    privacy_key_file: Path | None = None  # None: $GATE_HOME/privacy.key
    # Days request facts and record bodies are kept where a scope states none (0: kept for ever).
    facts_retention_days: int = 0
    # CI as a principal (docs/ci-principal.md): the workload-identity issuer, the audience its tokens
    # name for this gate, the grants file whose `ci` member gives each repository@ref its roles, and
    # the claims that name the repository and the ref. All unset: no CI token is accepted.
    ci_issuer: str | None = None
    ci_audience: str | None = None
    ci_repository_claim: str = "repository"
    ci_ref_claim: str = "ref"
    # The claims the grants are bound to (ids that survive a rename or a re-creation), the event
    # that started the run (only `ci_write_events` write) and the workflow the audit names.
    ci_repository_id_claim: str = "repository_id"
    ci_owner_id_claim: str = "repository_owner_id"
    ci_event_claim: str = "event_name"
    ci_workflow_claim: str = "job_workflow_ref"
    ci_write_events: tuple[str, ...] = ("push", "workflow_dispatch")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        home = Path(env.get("GATE_HOME", "var")).resolve()
        database_url = env.get("GATE_DATABASE_URL") or f"sqlite:///{home / 'gate.db'}"
        plans = dict(DEFAULT_PLANS)
        if env.get("GATE_PLANS"):
            try:
                extra = json.loads(env["GATE_PLANS"])
                for name, limits in extra.items():
                    plans[name] = _plan(limits)
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise SettingsError(f"GATE_PLANS is not valid JSON of plan limits: {exc}") from exc
        secret = env.get("GATE_RECEIPT_HMAC_SECRET")
        if secret is not None and len(secret) < 32:
            raise SettingsError("GATE_RECEIPT_HMAC_SECRET must be at least 32 characters")
        policy_dir = env.get("GATE_POLICY_DIR")
        return cls(
            home=home,
            database_url=database_url,
            signing_key_file=Path(env.get("GATE_SIGNING_KEY_FILE") or home / "signing-keys.json"),
            hmac_secret=secret.encode("utf-8") if secret else None,
            hmac_key_id=env.get("GATE_RECEIPT_HMAC_KEY_ID", "hmac-receipt-v1"),
            require_signing=_flag(env.get("GATE_REQUIRE_SIGNING", "true"), "GATE_REQUIRE_SIGNING"),
            redis_url=env.get("GATE_REDIS_URL") or None,
            plans=plans,
            max_body_bytes=int(env.get("GATE_MAX_BODY_BYTES", "1048576")),
            max_packet_bytes=int(env.get("GATE_MAX_PACKET_BYTES", "16777216")),
            schema_url=env.get("GATE_SCHEMA_URL", "/schemas/rulebook-v1.schema.json"),
            policy_dir=Path(policy_dir) if policy_dir else _default_policy_dir(),
            auto_migrate=_flag(env.get("GATE_AUTO_MIGRATE", "true"), "GATE_AUTO_MIGRATE"),
            request_read_timeout=_seconds(env.get("GATE_REQUEST_READ_TIMEOUT", "10"), "GATE_REQUEST_READ_TIMEOUT"),
            worker_timeout=_whole(env.get("GATE_WORKER_TIMEOUT", "30"), "GATE_WORKER_TIMEOUT", 5, 3600),
            decide_confidence=_flag(env.get("GATE_DECIDE_CONFIDENCE", "true"), "GATE_DECIDE_CONFIDENCE"),
            signing_key_check_ms=_whole(env.get("GATE_SIGNING_KEY_CHECK_MS", "1000"), "GATE_SIGNING_KEY_CHECK_MS",
                                        0, 3_600_000),
            ledger_group_commit=_auto_flag(env.get("GATE_LEDGER_GROUP_COMMIT", "auto"), "GATE_LEDGER_GROUP_COMMIT"),
            api_key_cache_ms=_whole(env.get("GATE_API_KEY_CACHE_MS", "1000"), "GATE_API_KEY_CACHE_MS", 0, 60_000),
            **_policycheck_settings(env),
            **_adapter_settings(env),
            **_advisor_settings(env),
            **_operations_settings(env),
            checkpoint_log=_checkpoint_log(env.get("GATE_CHECKPOINT_LOG", ""), home),
            checkpoint_every=_whole(env.get("GATE_CHECKPOINT_EVERY", "100"), "GATE_CHECKPOINT_EVERY", 0, 1_000_000),
            webhook_allow_hosts=_hosts(env, "GATE_WEBHOOK_ALLOW_HOSTS"),
            outbound_allow_hosts=_hosts(env, "GATE_OUTBOUND_ALLOW_HOSTS"),
            events_dispatch=_flag(env.get("GATE_EVENTS_DISPATCH", "true"), "GATE_EVENTS_DISPATCH"),
            nats_url=env.get("GATE_NATS_URL") or None,
            nats_stream=env.get("GATE_NATS_STREAM", DEFAULT_NATS_STREAM),
            events_interval_ms=_whole(env.get("GATE_EVENTS_INTERVAL_MS", "1000"), "GATE_EVENTS_INTERVAL_MS",
                                      50, 3_600_000),
            hold_sweep_ms=_whole(env.get("GATE_HOLD_SWEEP_MS", "1000"), "GATE_HOLD_SWEEP_MS", 50, 3_600_000),
            workbench_url=_workbench_url(env.get("GATE_WORKBENCH_URL")),
            events_lease_seconds=_whole(env.get("GATE_EVENTS_LEASE_SECONDS", "60"), "GATE_EVENTS_LEASE_SECONDS",
                                        1, 3600),
            events_concurrency=_whole(env.get("GATE_EVENTS_CONCURRENCY", "8"), "GATE_EVENTS_CONCURRENCY", 1, 64),
            **_retention_settings(env),
            **_channel_settings(env),
            **_ci_settings(env), **_privacy_settings(env, home),
        )

    def with_(self, **changes: Any) -> Settings:
        return replace(self, **changes)


class _PrivacySettings(TypedDict):
    """The privacy key fields of `Settings`."""

    privacy_key: str | None
    privacy_key_file: Path | None
    facts_retention_days: int


def _privacy_settings(env: Mapping[str, str], home: Path) -> _PrivacySettings:
    """The privacy key's text, or its file, and the facts' retention (docs/privacy.md)."""
    return {"privacy_key": env.get("GATE_PRIVACY_KEY") or None,
            "privacy_key_file": Path(env.get("GATE_PRIVACY_KEY_FILE") or home / "privacy.key"),
            "facts_retention_days": _whole(env.get("GATE_FACTS_RETENTION_DAYS", "0"), "GATE_FACTS_RETENTION_DAYS",
                                           0, 36_500)}


def _plan(limits: Mapping[str, Any]) -> dict[str, int]:
    """One GATE_PLANS entry; `cost_limit` defaults to COST_UNITS_PER_DECIDE per decide of `rate_limit`."""
    rate_limit = int(limits["rate_limit"])
    cost_limit = int(limits.get("cost_limit", COST_UNITS_PER_DECIDE * rate_limit))
    if cost_limit < 0:
        raise ValueError("cost_limit must be >= 0")
    return {"rate_limit": rate_limit, "monthly_cap": int(limits["monthly_cap"]), "cost_limit": cost_limit}


def _flag(value: str, name: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise SettingsError(f"{name} must be true or false, not {value!r}")


def _auto_flag(value: str, name: str) -> bool | None:
    """true / false, or `auto` (None: the component decides)."""
    return None if value.strip().lower() == "auto" else _flag(value, name)


class _RetentionSettings(TypedDict):
    """The outbox retention fields of `Settings`."""

    events_retention_days: int
    events_retention_bytes: int


def _retention_settings(env: Mapping[str, str]) -> _RetentionSettings:
    """The outbox's retention: by age (days) and by stored bytes (docs/events.md "Retention")."""
    return {"events_retention_days": _whole(env.get("GATE_EVENTS_RETENTION_DAYS", "30"),
                                            "GATE_EVENTS_RETENTION_DAYS", 0, 36_500),
            "events_retention_bytes": _whole(env.get("GATE_EVENTS_RETENTION_BYTES", "0"),
                                             "GATE_EVENTS_RETENTION_BYTES", 0, 10**15)}


def _whole(value: str, name: str, low: int, high: int) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        number = low - 1
    if not low <= number <= high:
        raise SettingsError(f"{name} must be a whole number from {low} to {high}, not {value!r}")
    return number


def _hosts(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    """A comma-separated list of host names or literal addresses."""
    return tuple(h.strip() for h in env.get(name, "").split(",") if h.strip())


def _http_url(value: str | None, name: str) -> str | None:
    """An http(s) address of at most 500 printable characters, or None when unset."""
    if not value:
        return None
    if not value.startswith(("http://", "https://")) or len(value) > 500 or not value.isprintable() or " " in value:
        raise SettingsError(f"{name} must be an http:// or https:// address")
    return value


def _workbench_url(value: str | None) -> str | None:
    """The workbench app's own address (`https://host/workbench`, behind any path prefix), checked at
    start: the Inbox links of hold events and notices are this address plus a query, so an address
    without the app's path would land every link on the workbench's scope picker."""
    url = _http_url(value, "GATE_WORKBENCH_URL")
    if url is not None:
        parts = urlsplit(url)
        if parts.query or parts.fragment or not parts.path.rstrip("/").endswith("/workbench"):
            raise SettingsError("GATE_WORKBENCH_URL must be the workbench app's address, ending in /workbench "
                                f"(for example {parts.scheme}://{parts.netloc}/workbench), with no query")
    return url


class _ChannelSettings(TypedDict):
    """The reviewers' channels' fields of `Settings`."""

    smtp_url: str | None
    smtp_from: str | None
    slack_bot_token: str | None
    slack_api_url: str
    slack_signing_secret: str | None
    grants_file: Path | None


def _channel_settings(env: Mapping[str, str]) -> _ChannelSettings:
    """The reviewers' channels: an smtp:// or smtps:// server and its From address (both or
    neither), the Slack bot token, API address and signing secret, the grants file."""
    smtp_url, smtp_from = env.get("GATE_SMTP_URL") or None, env.get("GATE_SMTP_FROM") or None
    if smtp_url is not None:
        parts = urlsplit(smtp_url)
        try:
            parts.port  # noqa: B018 - a port that is not a number raises here
        except ValueError:
            parts = urlsplit("x:")
        if parts.scheme not in ("smtp", "smtps") or not parts.hostname or not smtp_url.isprintable():
            raise SettingsError("GATE_SMTP_URL must be smtp://[user:password@]host[:port] or smtps://...")
        if smtp_from is None:
            raise SettingsError("GATE_SMTP_URL needs GATE_SMTP_FROM, the address the e-mail comes from")
    if smtp_from is not None and (len(smtp_from) > 254 or not re.fullmatch(r"[^@\s<>\"(),;:]+@[^@\s<>\"(),;:]+",
                                                                          smtp_from)):
        raise SettingsError("GATE_SMTP_FROM must be one e-mail address (name@domain)")
    grants = env.get("GATE_GRANTS_FILE") or None
    return {"smtp_url": smtp_url, "smtp_from": smtp_from,
            "slack_bot_token": env.get("GATE_SLACK_BOT_TOKEN") or None,
            "slack_api_url": _http_url(env.get("GATE_SLACK_API_URL"), "GATE_SLACK_API_URL") or "https://slack.com/api/",
            "slack_signing_secret": env.get("GATE_SLACK_SIGNING_SECRET") or None,
            "grants_file": Path(grants) if grants else None}


def _seconds(value: str, name: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds <= 600:  # also refuses NaN
        raise SettingsError(f"{name} must be a number of seconds in (0, 600], not {value!r}")
    return seconds


def _default_policy_dir() -> Path | None:
    candidate = data_path("rulebooks")
    return candidate if candidate.is_dir() else None


class _ProxySettings(TypedDict):
    """Whose address header names the client: `Settings.client_address_header` and `trusted_proxies`."""

    client_address_header: str | None
    trusted_proxies: tuple[ProxyNetwork, ...]


class _PolicycheckSettings(_ProxySettings):
    """The public routes' fields of `Settings`: their rate limits, the workflow token, the proxies."""

    policycheck_rate_limit: int
    workflow_token: str | None
    public_rate_limit: int
    public_verify_rate_limit: int
    public_verify_concurrency: int


def _policycheck_settings(env: Mapping[str, str]) -> _PolicycheckSettings:
    """`GATE_POLICYCHECK_RATE_LIMIT` (requests per client per minute) and `GATE_WORKFLOW_TOKEN`."""
    try:
        limit = int(env.get("GATE_POLICYCHECK_RATE_LIMIT", "600"))
    except ValueError:
        limit = 0
    if not 1 <= limit <= 1_000_000:
        raise SettingsError("GATE_POLICYCHECK_RATE_LIMIT must be a whole number of requests from 1 to 1000000")
    token = env.get("GATE_WORKFLOW_TOKEN") or None
    if token is not None and (len(token) < 16 or not token.isascii() or not token.isprintable() or " " in token):
        raise SettingsError("GATE_WORKFLOW_TOKEN must be at least 16 visible ASCII characters")
    return {"policycheck_rate_limit": limit, "workflow_token": token,
            "public_rate_limit": _whole(env.get("GATE_PUBLIC_RATE_LIMIT", "600"), "GATE_PUBLIC_RATE_LIMIT",
                                        1, 1_000_000),
            "public_verify_rate_limit": _whole(env.get("GATE_PUBLIC_VERIFY_RATE_LIMIT", "60"),
                                               "GATE_PUBLIC_VERIFY_RATE_LIMIT", 1, 1_000_000),
            "public_verify_concurrency": _whole(env.get("GATE_PUBLIC_VERIFY_CONCURRENCY", "1"),
                                                "GATE_PUBLIC_VERIFY_CONCURRENCY", 1, 64),
            **_proxy_settings(env.get("GATE_CLIENT_ADDRESS_HEADER"), env.get("GATE_TRUSTED_PROXIES"))}


def _proxy_settings(header: str | None, proxies: str | None) -> _ProxySettings:
    """`GATE_CLIENT_ADDRESS_HEADER` and `GATE_TRUSTED_PROXIES`: both or neither."""
    header = (header or "").strip() or None
    names = [item.strip() for item in (proxies or "").split(",") if item.strip()]
    if bool(header) != bool(names):
        raise SettingsError("set GATE_CLIENT_ADDRESS_HEADER and GATE_TRUSTED_PROXIES together, or neither")
    if header is not None and not re.fullmatch(r"[A-Za-z0-9-]{1,64}", header):
        raise SettingsError("GATE_CLIENT_ADDRESS_HEADER must be a header name (letters, digits and -)")
    try:
        networks = tuple(ipaddress.ip_network(name, strict=False) for name in names)
    except ValueError as exc:
        raise SettingsError(f"GATE_TRUSTED_PROXIES must list IP addresses or networks: {exc}") from None
    return {"client_address_header": header, "trusted_proxies": networks}


class _AdapterSettings(TypedDict):
    """The adapter workers' fields of `Settings`."""

    adapter_pool_size: int
    adapter_memory_mb: int
    adapter_plugins: bool


def _adapter_settings(env: Mapping[str, str]) -> _AdapterSettings:
    """`GATE_ADAPTER_POOL_SIZE` (0-16 warm workers, 0 = start each cold), `GATE_ADAPTER_MEMORY_MB`
    (64-4096 MiB address space per worker) and `GATE_ADAPTER_PLUGINS` (load entry-point plugins)."""
    return {"adapter_pool_size": _whole(env.get("GATE_ADAPTER_POOL_SIZE", "2"), "GATE_ADAPTER_POOL_SIZE", 0, 16),
            "adapter_memory_mb": _whole(env.get("GATE_ADAPTER_MEMORY_MB", "256"), "GATE_ADAPTER_MEMORY_MB", 64, 4096),
            "adapter_plugins": _flag(env.get("GATE_ADAPTER_PLUGINS", "true"), "GATE_ADAPTER_PLUGINS")}


class _AdvisorSettings(TypedDict):
    """The advisory modes' fields of `Settings`."""

    advisory_modes: bool
    advisor_base_url: str | None
    advisor_models: tuple[str, ...]
    advisor_api_key: str | None
    advisor_timeout: float


def _advisor_settings(env: Mapping[str, str]) -> _AdvisorSettings:
    """`GATE_ADVISORY_MODES`, `GATE_ADVISOR_BASE_URL`, `GATE_ADVISOR_MODEL` (one model, or several
    separated by commas for `multi`), `GATE_ADVISOR_API_KEY` or `GATE_ADVISOR_API_KEY_FILE` (never
    both; never logged), `GATE_ADVISOR_TIMEOUT` (seconds per advisor request, connect to last byte, default 10)."""
    base_url = (env.get("GATE_ADVISOR_BASE_URL") or "").strip() or None
    models = tuple(m.strip() for m in (env.get("GATE_ADVISOR_MODEL") or "").split(",") if m.strip())
    if base_url is not None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password \
                or parts.query or parts.fragment:
            raise SettingsError("GATE_ADVISOR_BASE_URL must be an http(s) URL with a host and no credentials, "
                                "query or fragment")
        if not models:
            raise SettingsError("GATE_ADVISOR_MODEL is required with GATE_ADVISOR_BASE_URL")
    elif models:
        raise SettingsError("GATE_ADVISOR_MODEL needs GATE_ADVISOR_BASE_URL")
    if len(set(models)) != len(models) or len(models) > 8 or any(len(m) > 120 or not m.isprintable() for m in models):
        raise SettingsError("GATE_ADVISOR_MODEL must list at most 8 distinct printable model names")
    key, key_file = env.get("GATE_ADVISOR_API_KEY") or None, env.get("GATE_ADVISOR_API_KEY_FILE") or None
    if key and key_file:
        raise SettingsError("set GATE_ADVISOR_API_KEY or GATE_ADVISOR_API_KEY_FILE, not both")
    if key_file:
        try:
            key = Path(key_file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise SettingsError(f"GATE_ADVISOR_API_KEY_FILE is unreadable: {type(exc).__name__}") from None
    if key is not None and (not key or not key.isascii() or not key.isprintable() or " " in key):
        raise SettingsError("the advisor API key must be visible ASCII characters")
    timeout = env.get("GATE_ADVISOR_TIMEOUT", "10")
    try:
        seconds = float(timeout)
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds <= 120:
        raise SettingsError(f"GATE_ADVISOR_TIMEOUT must be a number of seconds in (0, 120], not {timeout!r}")
    return {"advisory_modes": _flag(env.get("GATE_ADVISORY_MODES", "true"), "GATE_ADVISORY_MODES"),
            "advisor_base_url": base_url, "advisor_models": models, "advisor_api_key": key,
            "advisor_timeout": seconds}


class _CiSettings(TypedDict):
    """The CI runs' fields of `Settings`: the OIDC issuer and audience, and the claims read."""

    ci_issuer: str | None
    ci_audience: str | None
    ci_repository_claim: str
    ci_ref_claim: str
    ci_repository_id_claim: str
    ci_owner_id_claim: str
    ci_event_claim: str
    ci_workflow_claim: str
    ci_write_events: tuple[str, ...]


def _ci_settings(env: Mapping[str, str]) -> _CiSettings:
    """`GATE_CI_ISSUER` (https, or http on loopback: checked again at discovery),
    `GATE_CI_AUDIENCE` and `GATE_GRANTS_FILE` (the one grants file, whose `ci` member it reads at start
    and when it changes), the first two together or neither; `GATE_CI_REPOSITORY_CLAIM` and `GATE_CI_REF_CLAIM` (claim names, defaults
    `repository` and `ref`, GitHub Actions' names); `GATE_CI_REPOSITORY_ID_CLAIM`, `GATE_CI_OWNER_ID_CLAIM`,
    `GATE_CI_EVENT_CLAIM`, `GATE_CI_WORKFLOW_CLAIM` (defaults `repository_id`, `repository_owner_id`,
    `event_name`, `job_workflow_ref`) and `GATE_CI_WRITE_EVENTS` (default `push,workflow_dispatch`)."""
    issuer = _http_url((env.get("GATE_CI_ISSUER") or "").strip() or None, "GATE_CI_ISSUER")
    audience = (env.get("GATE_CI_AUDIENCE") or "").strip() or None
    grants = (env.get("GATE_GRANTS_FILE") or "").strip() or None
    if (issuer is None and audience is not None) or (issuer is not None and (audience is None or grants is None)):
        raise SettingsError("set GATE_CI_ISSUER and GATE_CI_AUDIENCE together, with GATE_GRANTS_FILE (whose ci "
                            "member gives CI runs their roles), or neither")
    if audience is not None and (len(audience) > 500 or not audience.isprintable()):
        raise SettingsError("GATE_CI_AUDIENCE must be at most 500 printable characters")
    return {"ci_issuer": issuer, "ci_audience": audience,
            "ci_repository_claim": _claim_name(env, "GATE_CI_REPOSITORY_CLAIM", "repository"),
            "ci_ref_claim": _claim_name(env, "GATE_CI_REF_CLAIM", "ref"),
            "ci_repository_id_claim": _claim_name(env, "GATE_CI_REPOSITORY_ID_CLAIM", "repository_id"),
            "ci_owner_id_claim": _claim_name(env, "GATE_CI_OWNER_ID_CLAIM", "repository_owner_id"),
            "ci_event_claim": _claim_name(env, "GATE_CI_EVENT_CLAIM", "event_name"),
            "ci_workflow_claim": _claim_name(env, "GATE_CI_WORKFLOW_CLAIM", "job_workflow_ref"),
            "ci_write_events": _write_events(env)}


def _write_events(env: Mapping[str, str]) -> tuple[str, ...]:
    """`GATE_CI_WRITE_EVENTS`: the comma-separated events whose runs may hold more than viewer."""
    raw = env.get("GATE_CI_WRITE_EVENTS") or "push,workflow_dispatch"
    events = tuple(sorted({part.strip() for part in raw.split(",") if part.strip()}))
    if not events or not all(re.fullmatch(r"[A-Za-z0-9_.:-]{1,64}", event) for event in events):
        raise SettingsError("GATE_CI_WRITE_EVENTS must list event names (push,workflow_dispatch)")
    return events


def _claim_name(env: Mapping[str, str], name: str, default: str) -> str:
    value = (env.get(name) or default).strip()
    if not re.fullmatch(r"[A-Za-z0-9_.:-]{1,64}", value):
        raise SettingsError(f"{name} must be a claim name (letters, digits, '_', '.', ':', '-')")
    return value


def _checkpoint_log(location: str, home: Path) -> Path | None:
    """`GATE_CHECKPOINT_LOG`: a file path (default `checkpoints.jsonl` under GATE_HOME); `off`: no log."""
    location = location.strip()
    if location.lower() == "off":
        return None
    return Path(location).resolve() if location else home / "checkpoints.jsonl"


class _OperationsSettings(TypedDict):
    """The operator's fields of `Settings`: the metrics token and the policy sources' age limit."""

    metrics_token: str | None
    policy_source_max_age_days: int


def _operations_settings(env: Mapping[str, str]) -> _OperationsSettings:
    """`GATE_METRICS_TOKEN` or `GATE_METRICS_TOKEN_FILE` (≥ 16 visible ASCII characters; never
    both; never logged) and `GATE_POLICY_SOURCE_MAX_AGE_DAYS` (1–3650, default 180)."""
    token, token_file = env.get("GATE_METRICS_TOKEN") or None, env.get("GATE_METRICS_TOKEN_FILE") or None
    if token and token_file:
        raise SettingsError("set GATE_METRICS_TOKEN or GATE_METRICS_TOKEN_FILE, not both")
    if token_file:
        try:
            token = Path(token_file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise SettingsError(f"GATE_METRICS_TOKEN_FILE is unreadable: {type(exc).__name__}") from None
    if token is not None and (len(token) < 16 or not token.isascii() or not token.isprintable() or " " in token):
        raise SettingsError("the metrics token must be at least 16 visible ASCII characters")
    age = env.get("GATE_POLICY_SOURCE_MAX_AGE_DAYS", "180")
    if not age.isascii() or not age.isdigit() or not 1 <= int(age) <= 3650:
        raise SettingsError("GATE_POLICY_SOURCE_MAX_AGE_DAYS must be a whole number of days from 1 to 3650")
    return {"metrics_token": token, "policy_source_max_age_days": int(age)}
