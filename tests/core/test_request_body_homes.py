"""Where each request body of the OpenAPI document comes from (issue 66, item 1): a schema file of
`gate/bodies/`, served as `bodies.openapi_schema` gives it. A new body added to a route as a dict in
`api/openapi.py` (or made in code anywhere) fails here unless `DERIVED` names it, which it no longer
does for any body; a derived body moved to a file without leaving that list fails too.
"""

from __future__ import annotations

import re
from importlib import resources

from api.openapi import SCHEMAS, endpoints, openapi_document
from gate import bodies
from gate.replay.historical import REPLAY_MODES
from gate.replay.whatif import MAX_SCENARIOS
from gate.vocabulary import MAX_SAFE_INTEGER, RULEBOOK_SCHEMA_PATH, VIEWS

# Request bodies whose schema is still written in code, by component, with the code it is derived
# from: none since the receipts', the pilot's, the workflow's and the policy checks' moved to files,
# each now checked by its file alone (tests/core/test_receipt_body_schemas.py,
# test_check_body_schemas.py). Left empty: a body written in code again fails the first test below.
DERIVED: dict[str, str] = {}
# Components made from a body file by a rule stated beside them in api/openapi.py.
FROM_A_FILE = {"ReleasePolicyPatch": "release-policy", "ReleasePolicyApproval": "setting-approval"}


def _files() -> dict[str, str]:
    """title → file name of every request body schema in gate/bodies/ (event data excepted)."""
    names = [entry.name.removesuffix(".schema.json") for entry in resources.files("gate.bodies").iterdir()
             if entry.name.endswith(".schema.json") and entry.name != f"{bodies.EVENT_DATA}.schema.json"]
    return {bodies.schema(name)["title"]: name for name in names}


def _request_bodies() -> set[str]:
    """The component of every route's request body, as the served document names it."""
    named = {endpoint.request_body for endpoint in endpoints() if endpoint.request_body is not None}
    served = set()
    for operations in openapi_document()["paths"].values():
        for operation in operations.values():
            content = operation.get("requestBody", {}).get("content", {})
            for media in content.values():
                reference = media.get("schema", {}).get("$ref", "")
                if reference:
                    served.add(reference.rsplit("/", 1)[1])
    assert named == served, named ^ served
    return named


def test_every_request_body_is_a_file_of_gate_bodies_or_a_named_derivation():
    files = _files()
    for component in sorted(_request_bodies()):
        if component in DERIVED:
            continue
        name = FROM_A_FILE.get(component) or files.get(component)
        assert name is not None, f"{component}: not a gate/bodies file"
        served = dict(SCHEMAS[component])
        if component not in FROM_A_FILE:
            assert served == bodies.openapi_schema(name), component


def test_every_body_file_is_some_route_s_request_body():
    assert set(_files()) <= _request_bodies() | {"SettingApproval"}


def test_the_derived_list_names_only_bodies_still_written_in_code():
    files = _files()
    assert not set(DERIVED) & set(files)
    assert set(DERIVED) <= _request_bodies()
    assert len(_request_bodies() - set(DERIVED)) >= 21


def test_the_constants_the_moved_schemas_state_are_the_code_s():
    assert bodies.schema("replay")["properties"]["replay_mode"]["enum"] == list(REPLAY_MODES)
    for name in ("replay", "diff", "counterfactuals"):
        assert bodies.schema(name)["properties"]["response_view"]["enum"] == list(VIEWS)
    assert bodies.schema("counterfactuals")["properties"]["scenarios"]["maxItems"] == MAX_SCENARIOS
    identifier = bodies.schema("jsonrpc-message")["properties"]["id"]["oneOf"][1]
    assert (identifier["minimum"], identifier["maximum"]) == (-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)
    assert RULEBOOK_SCHEMA_PATH in bodies.schema("rulebook-publish")["description"]
    ticket = bodies.schema("workflow")["properties"]["ticket_id"]["oneOf"][1]
    assert (ticket["minimum"], ticket["maximum"]) == (0, MAX_SAFE_INTEGER)


# Bodies checked by hand beside their file: the decide body alone, since the receipts' three moved
# to their schema alone (issue 66, item 1), after the policy checks' four, the workflow's and the
# pilot's two (`gate.bodies.problems`). The decide's checks (gate.protocol.requests,
# gate.advisory.request, the adapter's invocation and the release reference) answer the spec's
# codes in the spec's order, one refusal each, and tests/core/test_decide_schema.py holds its file
# to accept exactly what they accept; moving them is what is left of item 1. The list only
# shrinks: a file that stops saying so, or a new body checked by hand, fails here.
HAND_CHECKED = {"decide"}
_SAYS_HAND = re.compile(r"Checked by hand|checks are hand-written")


def test_the_bodies_still_checked_by_hand_say_so_and_only_they():
    said = {name for name in _files().values() if _SAYS_HAND.search(bodies.schema(name)["description"])}
    assert said == HAND_CHECKED


def test_no_module_holds_a_receipt_field_check_of_its_own():
    """The receipts' member checks (`gate.receipts.fields`) are gone: the schemas are their home."""
    from importlib.util import find_spec

    assert find_spec("gate.receipts.fields") is None
