"""What a reviewer is told of a hold, per channel (docs/integrations.md, "Reviewers' channels"):
an e-mail (plain text and HTML) and a Slack Block Kit message with Approve and Deny.

A notice states first what the caller asked (the request on the hold, gate.holds.request: read
from the stored request bound to the record's input_hash), then the facts a reviewer needs,
bounded as the Inbox shows them (at most `MAX_FACTS` facts, each value cut at `MAX_VALUE`
characters), the rule in words, the deadline and the Inbox link. What of the request and the
facts leaves the gate is the queue's `show` (gate.disclosure.disclose, the one rule): every
other value is `•••`, with the Inbox link to read it. Every text a caller supplied (facts, ids, the scope) is data: escaped in HTML,
sent as `plain_text` to Slack (never `mrkdwn`, so no mention or link is made of it), and written
in the plain-text e-mail as JSON (a line break in a value cannot start a line of its own). The
link never approves: it opens the hold in the Inbox after sign-in.

Sending: `send_email` speaks SMTP to the operator's server (`smtp://`, STARTTLS when the server
offers it; `smtps://`, TLS from the start; credentials from the URL), `post_slack` calls
`chat.postMessage` (`SlackAPI`). Both go through the one outbound client (gate.events.outbound:
the address checked is the address connected to, no redirect) and raise on any failure; the
caller retries.
"""

from __future__ import annotations

import html
import json
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from typing import Any, NotRequired, TypedDict
from urllib.parse import unquote, urlsplit

from gate.disclosure import DEFAULT_SHOW, MASK, Disclosure, disclose
from gate.events.outbound import Outbound
from gate.privacy.masking import Masker

MAX_FACTS = 12
MAX_VALUE = 200
MAX_SLACK_HOLDS = 10  # holds in one Slack digest message (Slack takes at most 50 blocks)
TIMEOUT_SECONDS = 10.0
APPROVE, DENY = "hold_approve", "hold_deny"  # the buttons' action_id; their value is the decision id


@dataclass(frozen=True, slots=True)
class Notice:
    """One hold as a reviewer is told of it."""

    scope: str
    decision_id: str
    queue: str
    priority: str
    deadline_at: str
    policy_id: str | None
    rule_id: str | None
    reason_code: str | None
    facts: Mapping[str, Any]
    inbox_url: str | None
    # A needs-input hold's facts the request lacked or gave in a form the rulebook refused (its
    # record's `missing_fields` and `invalid_fields`): what the reviewer must find before deciding.
    missing: tuple[str, ...] = ()
    invalid: tuple[str, ...] = ()
    # What the caller asked (gate.services.holds.hold_requests; None: not read) and what of it
    # and of the facts the destination's queue lets out (`queues.<name>.show`).
    request: Mapping[str, Any] | None = None  # a gate.holds.request.HoldRequest
    show: tuple[str, ...] = DEFAULT_SHOW
    # The scope's `notices` rule for this hold's request (gate.privacy.masking; None: no data map
    # was asked): a personal value `show` names still leaves only as that rule lets it (issue 67).
    privacy: Masker | None = None

    def disclosure(self) -> Disclosure:
        """What this notice's destination may read (gate.disclosure.disclose)."""
        return disclose(self.show, self.request, self.facts, self.privacy)


LABELS = {"question": "Question", "requested_action": "Requested action", "target_system": "Target system",
          "target_object_id": "Target object", "amount": "Amount", "currency": "Currency",
          "source_record_id": "Source record", "workflow": "Workflow", "requester": "Requested by"}
MASKED = f"Values shown as {MASK} are not sent to this channel: open the hold in the Inbox to read them."
UNSIGNED = "Request: not shown (no stored request is bound to this record's input_hash); open the Inbox."


def _cut(text: str, limit: int = MAX_VALUE) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def request_shown(disclosure: Disclosure) -> list[tuple[str, str]]:
    """The request as (label, value on one line), in the order a reviewer reads it; a masked
    value is `MASK`. Empty when the request was not read as signed (`UNSIGNED` says so)."""
    return [(LABELS[name], value if value is MASK else _cut(_printable(value if isinstance(value, str)
                                                                       else json.dumps(value))))
            for name, value in disclosure.request]


def facts_shown(facts: Mapping[str, Any] | Disclosure) -> list[tuple[str, str]]:
    """The facts as (name, value as JSON, or `MASK`), bounded; a last line says how many were
    left out. A `Disclosure`'s facts are already masked as its destination reads them."""
    items = list(facts.facts) if isinstance(facts, Disclosure) else (
        sorted(facts.items()) if isinstance(facts, Mapping) else [])
    shown = [(_cut(_printable(str(name)), 60),
              MASK if value is MASK else _cut(json.dumps(value, ensure_ascii=False, default=str)))
             for name, value in items[:MAX_FACTS]]
    if len(items) > MAX_FACTS:
        shown.append(("…", f"{len(items) - MAX_FACTS} more in the Inbox"))
    return shown


def rule_in_words(notice: Notice) -> str:
    """Why the action is held, in words (the default outcome has no rule)."""
    policy = notice.policy_id or "the policy"
    reason = f" (reason {notice.reason_code})" if notice.reason_code else ""
    if notice.rule_id is None:
        return f"held by {policy}'s default outcome{reason}"
    return f"held by rule {notice.rule_id} of {policy}{reason}"


def _printable(text: str) -> str:
    """A caller's text on one line: a line break or other control character is a space."""
    return "".join(c if c.isprintable() else " " for c in text)


def needs_in_words(notice: Notice) -> str | None:
    """What a needs-input hold lacks, in words (None for any other hold)."""
    parts = [f"{label} {', '.join(_cut(_printable(name), 60) for name in names[:MAX_FACTS])}"
             + (f" and {len(names) - MAX_FACTS} more" if len(names) > MAX_FACTS else "")
             for label, names in (("missing", notice.missing), ("not valid", notice.invalid)) if names]
    return "The request lacks facts: " + "; ".join(parts) + "." if parts else None


def _asked(notice: Notice) -> str | None:
    """The requested action and its target, as the destination may read them (None: not shown)."""
    shown = {name: value for name, value in notice.disclosure().request if value is not MASK}
    words = [str(shown[name]) for name in ("requested_action", "target_object_id") if name in shown]
    return " ".join(words) if words else None


def subject(notices: Sequence[Notice]) -> str:
    first = notices[0]
    if len(notices) == 1:
        return _cut(_printable(f"[gate] Review needed in {first.scope}: {_asked(first) or first.policy_id or 'held action'} "
                               f"({first.priority}, by {first.deadline_at})"), 200)
    return _cut(_printable(f"[gate] {len(notices)} held actions to review in {first.scope}, queue {first.queue}"), 200)


def _request_lines(disclosure: Disclosure) -> list[str]:
    """The request first, as the plain-text part and Slack state it (one line per member)."""
    if not disclosure.signed:
        return [UNSIGNED]
    return ["Request (as signed: the stored request bound to the record's input_hash):",
            *(f"  {label}: {value}" for label, value in request_shown(disclosure))]


def _text_part(notice: Notice) -> str:
    disclosure = notice.disclosure()
    lines = [f"Decision {notice.decision_id} in scope {json.dumps(notice.scope, ensure_ascii=False)}",
             *_request_lines(disclosure),
             f"Queue {notice.queue}, priority {notice.priority}",
             f"Why: {rule_in_words(notice)}",
             f"Decide by {notice.deadline_at}: silence expires the hold, which never approves.",
             *filter(None, [needs_in_words(notice)]),
             "Facts:"]
    lines += [f"  {json.dumps(name, ensure_ascii=False)}: {value}" for name, value in facts_shown(disclosure)]
    if disclosure.masked:
        lines.append(MASKED)
    lines.append(f"Open it in the Inbox (sign-in required; the link does not approve): {notice.inbox_url}"
                 if notice.inbox_url else "Open the workbench's Inbox to review it (GATE_WORKBENCH_URL is not set).")
    return "\n".join(lines)


def _html_request(disclosure: Disclosure) -> str:
    e = html.escape
    if not disclosure.signed:
        return f"<p><b>{e(UNSIGNED)}</b></p>"
    rows = "".join(f"<tr><th align=\"left\">{e(label)}</th><td>{e(value)}</td></tr>"
                   for label, value in request_shown(disclosure))
    return f"<p><b>Request</b> (as signed: the stored request bound to the record's input_hash)</p><table>{rows}</table>"


def _html_part(notice: Notice) -> str:
    e = html.escape
    disclosure = notice.disclosure()
    rows = "".join(f"<tr><th align=\"left\">{e(name)}</th><td><code>{e(value)}</code></td></tr>"
                   for name, value in facts_shown(disclosure))
    masked = f"<p>{e(MASKED)}</p>" if disclosure.masked else ""
    link = (f"<p><a href=\"{e(notice.inbox_url)}\">Open it in the Inbox</a> (sign-in required; the link does "
            "not approve)</p>" if notice.inbox_url else "<p>Open the workbench's Inbox to review it.</p>")
    needs = needs_in_words(notice)
    lacks = f"<p><b>{e(needs)}</b></p>" if needs else ""
    return (f"<h3>Decision {e(notice.decision_id)}</h3>{_html_request(disclosure)}"
            f"<p>Scope <b>{e(notice.scope)}</b>, queue {e(notice.queue)}, "
            f"priority {e(notice.priority)}</p><p>Why: {e(rule_in_words(notice))}</p>"
            f"<p>Decide by <b>{e(notice.deadline_at)}</b>: silence expires the hold, which never approves.</p>"
            f"{lacks}<table>{rows}</table>{masked}{link}")


def email_message(sender: str, recipients: Sequence[str], notices: Sequence[Notice]) -> EmailMessage:
    """One message for one hold or a digest of several (plain text and HTML)."""
    message = EmailMessage()
    message["Subject"] = subject(notices)
    message["From"] = sender
    message["To"] = ", ".join(recipients)
    message["Date"] = formatdate(localtime=False)
    message["Message-ID"] = make_msgid(domain=sender.rpartition("@")[2])
    message["Auto-Submitted"] = "auto-generated"
    separator = "\n\n" + "-" * 40 + "\n\n"
    message.set_content(separator.join(_text_part(n) for n in notices))
    message.add_alternative("<html><body>" + "<hr>".join(_html_part(n) for n in notices) + "</body></html>",
                            subtype="html")
    return message


def send_email(url: str, message: EmailMessage, timeout: float = TIMEOUT_SECONDS,
               outbound: Outbound | None = None) -> None:
    """Deliver through the operator's server; raises (OSError, smtplib.SMTPException) on failure."""
    parts = urlsplit(url)
    user, password = parts.username, parts.password
    context = ssl.create_default_context()
    client = (outbound or Outbound()).smtp(url, timeout, context)
    with client:
        client.ehlo()
        if parts.scheme == "smtp" and client.has_extn("starttls"):
            client.starttls(context=context)
            client.ehlo()
        if user is not None:
            client.login(unquote(user), unquote(password or ""))
        client.send_message(message)


class PlainText(TypedDict):
    """A Block Kit `plain_text` object (never `mrkdwn`: a caller's text makes no mention or link)."""

    type: str
    text: str
    emoji: bool


class Button(TypedDict):
    """A hold's button: Approve and Deny carry the decision id (`value`), Open in the Inbox its `url`."""

    type: str
    action_id: str
    value: NotRequired[str]
    style: NotRequired[str]
    url: NotRequired[str]
    text: PlainText


class SectionBlock(TypedDict):
    type: str
    text: PlainText


class ActionsBlock(TypedDict):
    type: str
    block_id: str
    elements: list[Button]


class ContextBlock(TypedDict):
    type: str
    elements: list[PlainText]


SlackBlock = SectionBlock | ActionsBlock | ContextBlock  # what `slack_blocks` writes


def _plain(text: str, limit: int = 3000) -> PlainText:
    return {"type": "plain_text", "text": _cut(text, limit), "emoji": False}


def slack_blocks(notices: Sequence[Notice]) -> list[SlackBlock]:
    """A section per hold with its facts, and its Approve and Deny buttons (value: the decision id)."""
    blocks: list[SlackBlock] = []
    for notice in notices[:MAX_SLACK_HOLDS]:
        disclosure = notice.disclosure()
        facts = "\n".join([*filter(None, [needs_in_words(notice)]),
                           *(f"{name}: {value}" for name, value in facts_shown(disclosure)),
                           *([MASKED] if disclosure.masked else [])])
        asked = "\n".join(_request_lines(disclosure))
        blocks.append({"type": "section", "text": _plain(
            f"{asked}\nReview needed in {notice.scope} (queue {notice.queue}, {notice.priority}): decision "
            f"{notice.decision_id}, {rule_in_words(notice)}. Decide by {notice.deadline_at}; silence never "
            f"approves.\n{facts}")})
        elements: list[Button] = [
            {"type": "button", "action_id": APPROVE, "value": notice.decision_id, "style": "primary",
             "text": _plain("Approve")},
            {"type": "button", "action_id": DENY, "value": notice.decision_id, "style": "danger",
             "text": _plain("Deny")}]
        if notice.inbox_url:
            elements.append({"type": "button", "action_id": "hold_open", "url": notice.inbox_url,
                             "text": _plain("Open in the Inbox")})
        blocks.append({"type": "actions", "block_id": f"hold:{notice.decision_id}"[:255], "elements": elements})
    if len(notices) > MAX_SLACK_HOLDS:
        blocks.append({"type": "context", "elements": [_plain(f"{len(notices) - MAX_SLACK_HOLDS} more in the Inbox")]})
    return blocks


class SlackRefused(OSError):
    """Slack answered `ok: false`; `response["error"]` is its code (as slack_sdk's errors carry
    it), which tells a message that is gone (gate.services.notify.GONE) from a failure to retry."""

    def __init__(self, method: str, error: object) -> None:
        super().__init__(f"Slack refused {method}: {str(error)[:100]}")
        self.response = {"error": error if isinstance(error, str) else None}


class SlackAPI:
    """Slack's Web API methods the gate calls (`chat.postMessage`, `chat.update`), as JSON posts
    through the one outbound client; OSError (or TargetRefused) unless Slack answers 200 with `ok`."""

    def __init__(self, token: str, base_url: str, outbound: Outbound) -> None:
        self.base_url = base_url if base_url.endswith("/") else base_url + "/"
        self._token, self.outbound = token, outbound

    def call(self, method: str, **payload: Any) -> dict[str, Any]:
        answer = self.outbound.request(
            "POST", self.base_url + method, json.dumps(payload).encode("utf-8"),
            {"Authorization": f"Bearer {self._token}", "Content-Type": "application/json; charset=utf-8"},
            timeout=TIMEOUT_SECONDS)
        if answer.status != 200:
            raise OSError(f"Slack answered {answer.status} to {method}")
        try:
            document = json.loads(answer.body)
        except ValueError:
            raise OSError(f"Slack's answer to {method} is not JSON") from None
        if not isinstance(document, dict) or document.get("ok") is not True:
            error = document.get("error") if isinstance(document, dict) else None
            raise SlackRefused(method, error)
        return document

    def chat_postMessage(self, **payload: Any) -> dict[str, Any]:
        return self.call("chat.postMessage", **payload)

    def chat_update(self, **payload: Any) -> dict[str, Any]:
        return self.call("chat.update", **payload)


def slack_client(token: str, base_url: str, outbound: Outbound | None = None) -> SlackAPI:
    return SlackAPI(token, base_url, outbound or Outbound())


def post_slack(client: Any, channel: str, notices: Sequence[Notice]) -> tuple[str | None, str | None,
                                                                             list[SlackBlock]]:
    """`chat.postMessage`; the message's channel id and `ts` as Slack answered, and its blocks.
    Raises OSError (or TargetRefused) on failure."""
    first = notices[0]
    text = (f"Review needed in {first.scope}: decision {first.decision_id}" if len(notices) == 1
            else f"{len(notices)} held actions to review in {first.scope}")
    blocks = slack_blocks(notices)
    answer = client.chat_postMessage(channel=channel, text=_cut(text, 300), blocks=blocks)
    where, ts = answer.get("channel"), answer.get("ts")
    return (where if isinstance(where, str) else None), (ts if isinstance(ts, str) else None), blocks


def resolved_blocks(decision_id: str, state: str, by: str,
                    blocks: Sequence[Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
    """What a hold's Slack message becomes once a vote of it was taken (`chat.update`): the
    message as it was (`blocks`, from the interaction) with this hold's buttons replaced by how
    it stands, so a digest keeps the other holds' buttons; or one line when the blocks are unknown."""
    told = {"type": "context", "elements": [_plain(f"Decision {decision_id}: {state} (by {by}).")]}
    mine = f"hold:{decision_id}"[:255]
    if blocks and any(b.get("block_id") == mine for b in blocks):
        return [told if b.get("block_id") == mine else dict(b) for b in blocks]
    return [{"type": "section", "text": _plain(f"Decision {decision_id}: {state} (by {by}).")}]


def removed_blocks(removed: Mapping[str, str], blocks: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]] | None:
    """A Slack message's blocks once the inputs of the holds in `removed` (decision id → cause)
    were removed (issue 67; docs/privacy.md): each such hold's section (its facts) and the block
    after it (its buttons, or how it closed) become one line saying so, the other holds' blocks of
    a digest kept; None when the message shows none of them (so nothing to change)."""
    out: list[dict[str, Any]] = []
    changed = False
    for index, block in enumerate(blocks):
        following = blocks[index + 1] if index + 1 < len(blocks) else None
        mine = _hold_of(following) if block.get("type") == "section" and "block_id" not in block else None
        if mine is not None and mine in removed:
            out.append({"type": "section", "block_id": f"removed:{mine}"[:255],
                        "text": _plain(f"Decision {mine}: inputs removed ({removed[mine]}).")})
            changed = True
        elif out and str(out[-1].get("block_id", "")).startswith("removed:") and _hold_of(block) in removed:
            continue  # the buttons (or resolution) of a hold just replaced
        else:
            out.append(dict(block))
    return out if changed else None


def _hold_of(block: Mapping[str, Any] | None) -> str | None:
    """The decision id of a hold's second block: its buttons (`hold:<id>`) or, once it closed, the
    line `resolved_blocks` put there."""
    if block is None:
        return None
    block_id = str(block.get("block_id", ""))
    if block_id.startswith("hold:"):
        return block_id[len("hold:"):]
    elements = block.get("elements") if block.get("type") == "context" else None
    text = elements[0].get("text", "") if isinstance(elements, list) and elements and isinstance(elements[0], dict) else ""
    if isinstance(text, str) and text.startswith("Decision ") and ": " in text:
        return text[len("Decision "):text.index(": ")]
    return None
