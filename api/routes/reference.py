"""`/docs`: the interactive API reference, and `/healthz`: liveness.

`/docs` renders `/openapi.json` with Swagger UI. Its script and style files come from the
`flask-swagger-ui` package installed with the server extras (served under `/docs/assets/`), never
from a CDN: the page's Content-Security-Policy allows this origin only, and the UI's online
validator badge is switched off, so the reference works on a machine without internet access.
`/healthz` answers 200 while the process can serve requests; it reads no ledger, limiter or key
(readiness is `/api/decision/status`).
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path

from flask import Response, send_file

from api.errors import json_response
from api.routing import Endpoint, Routes
from gate import __version__
from gate.errors import GateError

routes = Routes("reference", __name__)
ASSET_TYPES = {".js": "text/javascript", ".css": "text/css", ".png": "image/png"}

# The asset files the page loads, by name (no path from the request ever reaches the file system).
ASSETS = ("swagger-ui.css", "swagger-ui-bundle.js", "favicon-32x32.png", "favicon-16x16.png")
INIT_SCRIPT = "gate-docs.js"
ASSET_MAX_AGE = 86_400

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)

# Relative URLs: the page lives at /docs, so these resolve under the same prefix a proxy gives it.
_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Decision Gate API reference</title>
  <link rel="stylesheet" href="docs/assets/swagger-ui.css">
  <link rel="icon" type="image/png" href="docs/assets/favicon-32x32.png" sizes="32x32">
</head>
<body>
  <noscript>This reference needs JavaScript. The same contract as JSON: <a href="openapi.json">openapi.json</a>,
  <a href="docs.json">docs.json</a>.</noscript>
  <div id="swagger-ui" data-version="{version}"></div>
  <script src="docs/assets/swagger-ui-bundle.js"></script>
  <script src="docs/assets/gate-docs.js"></script>
</body>
</html>
"""

# validatorUrl null: Swagger UI would otherwise load a badge image from an outside validator.
_INIT = """window.addEventListener("load", function () {
  window.ui = SwaggerUIBundle({
    url: "openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout"
  });
});
"""


@lru_cache(maxsize=1)
def assets_dir() -> Path | None:
    """The Swagger UI distribution inside the installed `flask-swagger-ui` package, or None."""
    spec = importlib.util.find_spec("flask_swagger_ui")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "dist"
    return folder if (folder / "swagger-ui-bundle.js").is_file() else None


def _missing_assets() -> GateError:
    return GateError("NOT_FOUND", "the API reference assets are not installed "
                                       "(pip install 'decision-gate[server]'); /openapi.json has the same contract")


@routes.route(Endpoint(
    "get", "/docs", "Interactive API reference (Swagger UI over /openapi.json), from assets installed with "
    "the server; no CDN.", False, {200: "HTML page", 404: "reference assets not installed"},
    errors=("NOT_FOUND",), response_headers=("Content-Security-Policy", "X-Content-Type-Options"),
    tags=("contract",), budget="public"))
def page() -> Response:
    if assets_dir() is None:
        raise _missing_assets()
    response = Response(_PAGE.replace("{version}", __version__), status=200, mimetype="text/html")
    response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


@routes.route(Endpoint(
    "get", "/docs/assets/{name}", "A script, style or icon file of the API reference page (fixed list).",
    False, {200: "asset file", 404: "no such asset"}, errors=("NOT_FOUND",), tags=("contract",), budget="public"))
def asset(name: str) -> Response:
    if name == INIT_SCRIPT:
        response = Response(_INIT, status=200, mimetype="text/javascript")
    else:
        folder = assets_dir()
        if name not in ASSETS:
            raise GateError("NOT_FOUND", f"no API reference asset named {name}")
        if folder is None:
            raise _missing_assets()
        # The media type by suffix from our own table: the process-wide `mimetypes` registry is
        # changed by other libraries (Panel maps .js to application/javascript on import).
        response = send_file(folder / name, mimetype=ASSET_TYPES.get(Path(name).suffix, "application/octet-stream"),
                             max_age=ASSET_MAX_AGE, conditional=True)
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


@routes.route(Endpoint(
    "get", "/healthz", "Liveness: 200 while the process serves requests; reads no ledger, limiter or key "
    "(readiness is /api/decision/status).", False, {200: "alive"}, tags=("registries",), budget="public"))
def healthz() -> Response:
    return json_response(200, {"ok": True, "status": "alive", "service_version": __version__})
