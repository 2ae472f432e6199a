"""Security headers on every workbench HTTP response, with a per-response script nonce.

The workbench's pages are drawn by BokehJS and Panel from model properties sent over the
websocket; caller text (versions, actions, fact names, messages) reaches the DOM that way, and
is escaped where it is rendered (`workbench.reports.textsafe`). The Content-Security-Policy is the
second line: even if one escape were missed, an injected `<img onerror=…>`, `<script>` or
`javascript:` URL does not run.

- `script-src 'self' 'nonce-…'`: scripts only from the workbench's own origin, and inline
  scripts only where the server wrote them into the HTML page, each carrying this response's
  nonce. With a nonce present, browsers ignore `'unsafe-inline'`, so inline event handlers and
  scripts injected into the DOM are refused. No `'unsafe-eval'`.
- `style-src 'self' 'unsafe-inline'`: Bokeh and Panel set inline styles everywhere; CSS cannot
  run script in a current browser.
- `connect-src 'self'` (the websocket and Panel's requests), `img-src 'self' data:` (Bokeh's
  and Panel's icons), `font-src 'self'`, `worker-src blob:` (the code editor's syntax worker),
  `object-src 'none'`, `base-uri 'none'`, `form-action 'self'` (the sign-in form),
  `frame-ancestors 'none'` with `X-Frame-Options: DENY` (no framing, no clickjacking).
- `X-Content-Type-Options: nosniff` and `Referrer-Policy: no-referrer`, except where a handler
  asked for `same-origin` (the sign-in page, so that its form's `Origin` is sent: under
  `no-referrer` a browser sends `Origin: null`); no page sends a `Referer` to another origin.

The nonce is added to the `<script` start tags of `text/html` responses the server renders
(the Bokeh document page, Panel's sign-in and error pages). SECURITY: those pages carry no
caller text: the document page holds no document JSON (the server sends the models over the
websocket) and Panel's templates escape what they interpolate, so the nonce blesses only the
server's own scripts. Documented in docs/workbench.md ("Content-Security-Policy").
"""

from __future__ import annotations

import re
import secrets
from typing import Any

from tornado.httputil import HTTPHeaders, HTTPServerRequest
from tornado.web import OutputTransform

__all__ = ["STATIC_HEADERS", "SecurityHeaders", "content_security_policy", "tornado_settings"]

STATIC_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
_REFERRER_POLICY, _KEPT_REFERRER_POLICY = "Referrer-Policy", "same-origin"
_SCRIPT_TAG = re.compile(rb"<script(?=[\s>])", re.IGNORECASE)


def content_security_policy(nonce: str) -> str:
    """The workbench's policy for one response whose inline scripts carry `nonce`."""
    return "; ".join([
        "default-src 'none'",
        f"script-src 'self' 'nonce-{nonce}'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "worker-src blob:",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ])


class SecurityHeaders(OutputTransform):
    """A Tornado output transform: the headers above on every response, and this response's
    nonce on the inline scripts of a complete HTML body (Content-Length kept exact)."""

    def __init__(self, request: HTTPServerRequest) -> None:
        super().__init__(request)
        self.nonce = secrets.token_urlsafe(18)

    def transform_first_chunk(self, status_code: int, headers: HTTPHeaders, chunk: bytes,
                              finishing: bool) -> tuple[int, HTTPHeaders, bytes]:
        for name, value in STATIC_HEADERS.items():
            if name != _REFERRER_POLICY or headers.get(name) != _KEPT_REFERRER_POLICY:
                headers[name] = value
        headers["Content-Security-Policy"] = content_security_policy(self.nonce)
        html = headers.get("Content-Type", "").lower().startswith("text/html")
        if html and finishing and chunk:
            chunk = _SCRIPT_TAG.sub(b'<script nonce="' + self.nonce.encode("ascii") + b'"', chunk)
            if "Content-Length" in headers:
                headers["Content-Length"] = str(len(chunk))
        return status_code, headers, chunk

    def transform_chunk(self, chunk: bytes, finishing: bool) -> bytes:
        return chunk


def tornado_settings() -> dict[str, Any]:
    """The keyword arguments that put `SecurityHeaders` on a Bokeh/Panel server's application."""
    return {"transforms": [SecurityHeaders]}
