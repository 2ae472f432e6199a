"""Contract artifacts: `/schemas/…` (served byte for byte), `/openapi.json` and `/docs.json`."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any

from flask import Response, current_app

from api.errors import json_text_response
from api.jsonio import dumps
from api.routing import DOCUMENTS, Endpoint, Routes
from gate.errors import GateError
from gate.resources import schemas_dir

routes = Routes("meta", __name__)

# At most two folder levels (conformance/fixtures/x.json); every segment a plain lowercase name.
_SCHEMA_NAME = re.compile(r"^(?:[a-z0-9][a-z0-9_-]*/){0,2}[a-z0-9][a-z0-9._-]*\.json$")

# The contract documents' JSON text, built and encoded once per process by one thread. An
# lru_cache alone lets every thread that misses it build: at a worker's first requests under
# load, eight threads built the 0.12 s OpenAPI document side by side and the first answers
# waited about a second; and encoding the 290 KB document took 2 ms of every request.
_TEXTS: dict[str, str] = {}
_TEXTS_BUILT = threading.Lock()


def _document_text(build: Callable[[], Any]) -> str:
    text = _TEXTS.get(build.__name__)
    if text is None:
        with _TEXTS_BUILT:
            text = _TEXTS.get(build.__name__)
            if text is None:
                text = _TEXTS[build.__name__] = dumps(build())
    return text


@routes.route(Endpoint(
    "get", "/schemas/{name}", "Public contract schemas, served byte for byte (Rulebook v1 …).",
    False, {200: "JSON Schema", 404: "unknown schema"}, errors=("NOT_FOUND",), tags=("contract",), budget="public",
), converters={"name": "path"})
def schema(name: str) -> Response:
    """Contract artifacts (`gate/schemas/`: JSON Schemas, conformance index and fixtures, golden replay
    corpus), served byte for byte."""
    # SECURITY: only plain names inside the schemas folder (no `..`, no absolute or hidden paths),
    # checked by pattern and again after resolving symlinks.
    root = schemas_dir().resolve()
    path = (root / name).resolve() if _SCHEMA_NAME.fullmatch(name) and ".." not in name else None
    if path is None or root not in path.parents or not path.is_file():
        raise GateError("NOT_FOUND", f"no schema named {name}")
    mimetype = "application/schema+json" if name.endswith(".schema.json") else "application/json"
    return Response(path.read_bytes(), status=200, mimetype=mimetype)


@routes.route(Endpoint("get", "/openapi.json", "This OpenAPI 3.1 document.", False, {200: "OpenAPI"},
                       tags=("contract",), budget="public"))
def openapi() -> Response:
    return json_text_response(200, _document_text(current_app.extensions[DOCUMENTS]["openapi_document"]))


@routes.route(Endpoint("get", "/docs.json", "Endpoints, schemas, limits and error codes.", False, {200: "docs"},
                       tags=("contract",), budget="public"))
def docs() -> Response:
    return json_text_response(200, _document_text(current_app.extensions[DOCUMENTS]["docs_document"]))
