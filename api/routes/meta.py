"""Contract artifacts: `/schemas/…` (served byte for byte), `/openapi.json` and `/docs.json`."""

from __future__ import annotations

import re

from flask import Blueprint, Response

from api.errors import error_response, json_response
from api.openapi import docs_document, openapi_document
from gate.rulebook import SCHEMA_PATH

bp = Blueprint("meta", __name__)

# At most two folder levels (conformance/fixtures/x.json); every segment a plain lowercase name.
_SCHEMA_NAME = re.compile(r"^(?:[a-z0-9][a-z0-9_-]*/){0,2}[a-z0-9][a-z0-9._-]*\.json$")


@bp.get("/schemas/<path:name>")
def schema(name: str):
    """Contract artifacts (`schemas/`: JSON Schemas, conformance index and fixtures, golden replay
    corpus), served byte for byte."""
    # SECURITY: only plain names inside the schemas folder (no `..`, no absolute or hidden paths),
    # checked by pattern and again after resolving symlinks.
    root = SCHEMA_PATH.parent.resolve()
    path = (root / name).resolve() if _SCHEMA_NAME.fullmatch(name) and ".." not in name else None
    if path is None or root not in path.parents or not path.is_file():
        return error_response("NOT_FOUND", f"no schema named {name}")
    mimetype = "application/schema+json" if name.endswith(".schema.json") else "application/json"
    return Response(path.read_bytes(), status=200, mimetype=mimetype)


@bp.get("/openapi.json")
def openapi():
    return json_response(200, openapi_document())


@bp.get("/docs.json")
def docs():
    return json_response(200, docs_document())
