"""Contract artifacts: `/schemas/…` (served byte for byte), `/openapi.json` and `/docs.json`."""

from __future__ import annotations

import re

from flask import Blueprint, Response

from api.errors import error_response, json_response
from api.openapi import docs_document, openapi_document
from gate.rulebook import SCHEMA_PATH

bp = Blueprint("meta", __name__)

_SCHEMA_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]*\.json$")


@bp.get("/schemas/<name>")
def schema(name: str):
    # SECURITY: only plain file names inside the schemas folder; no path traversal.
    path = SCHEMA_PATH.parent / name
    if not _SCHEMA_NAME.fullmatch(name) or not path.is_file():
        return error_response("NOT_FOUND", f"no schema named {name}")
    return Response(path.read_bytes(), status=200, mimetype="application/schema+json")


@bp.get("/openapi.json")
def openapi():
    return json_response(200, openapi_document())


@bp.get("/docs.json")
def docs():
    return json_response(200, docs_document())
