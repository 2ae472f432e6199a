"""Errors have one root (issue 46, finding 5), and `api/errors.py` is the one table.

Every exception class of the product packages is a refusal (`gate.errors.GateError`: a stable
code, a message, body members) or a `gate.errors.Signal` (an internal turn its raiser's caller
catches at once). A code a refusal names is either one `api.errors.ERROR_TABLE` answers, or one
listed below as never reaching HTTP. No module of api/ but errors.py maps an exception type to an
HTTP status of its own.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from collections import defaultdict
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from flask import Flask

from api.errors import ERROR_TABLE
from gate.errors import CodedError, GateError, Signal

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("gate", "gate_client", "api", "gate_cli", "workbench")
SKIPPED = ("gate.ledger.migrations.versions",)  # Alembic revisions: data, not code that raises

# The exceptions outside both roots, each with why.
OUTSIDE = {
    # Raised out of the WSGI call to park a request until its hold closes (api.parking): it must
    # pass every `except Exception` between the view and the worker, so it is a BaseException.
    "api.parking.Parked",
    # An event the code built with a `data` its type's schema does not declare (gate.bodies): a
    # programming error that rolls the fact's transaction back, never a refusal a caller reads.
    "gate.bodies.EventDataInvalid",
    # Slack's `ok: false` as the transport failure it is (an OSError with Slack's code): the
    # notifier's pass retries it or, for a message that is gone, stops (gate.services.notify).
    "gate.events.notices.SlackRefused",
    # An answer that is not HTTP/1.1 within the outbound client's bounds, and a request whose path or
    # a header could split it (gate.events.http11): transport failures, `http.client.HTTPException`s
    # as `http.client`'s own were, which every outbound caller treats as a failed exchange (a
    # delivery's failed attempt, an issuer's document not fetched).
    "gate.events.http11.MalformedAnswer",
    "gate.events.http11.MalformedRequest",
}

# Codes a refusal names that ERROR_TABLE does not answer: each is met only where no HTTP answer is
# made from it (the CLI, the workbench's pages, the client library, offline checks), and the API's
# GateError handler answers any of them as the internal error it would be there.
NEVER_HTTP = {
    # gate_cli: printed with its message and the command's exit status.
    "CLI_REFUSED": "gate_cli.context.CliError",
    "CHECKPOINT_REFUSED": "gate checkpoint: not appended (exit 1)",
    "RULEBOOK_INPUT_INVALID": "gate rulebook lint/diff/flips: a file it cannot read",
    "POLICY_LAYOUT_INVALID": "gate init-policies/plan/apply: the policies folder, release.toml or --fail-on",
    "POLICY_GATE_UNREACHABLE": "gate plan/apply --gate: the remote gate gave no answer of its own",
    "VERIFY_INPUT_UNREADABLE": "gate verify / gate checkpoint: the input cannot be read",
    "VERIFY_KEY_UNAVAILABLE": "gate verify / gate checkpoint: the keys cannot be read",
    # Refused before anything serves: the configuration and what ships beside the code.
    "SETTINGS_INVALID": "gate.settings: the service refuses to start",
    "TRUSTED_ADAPTER_DEFINITION_INVALID": "an adapter refused at registration (a plugin's is logged and left out)",
    "POLICY_TABLE_INVALID": "a shipped vendor policy table that does not check",
    "POLICY_PATTERNS_INVALID": "a shipped policy pattern file that does not check",
    "REPLAY_CORPUS_INVALID": "the golden replay corpus (gate contract migration-check reports it)",
    # Offline verification and the key files: a verifier's own input, answered as failed checks.
    "VERIFY_RECORD_INVALID": "gate.verify: the thing to verify is not a JSON object",
    "VERIFY_PACKET_INVALID": "gate.packets: the packet to verify is not a JSON object",
    "VERIFY_TRUST_ANCHOR_INVALID": "operator-supplied key material that cannot be used",
    "SIGNING_KEY_INVALID": "a PEM that is not an Ed25519 key",
    "SIGNING_KEYRING_INVALID": "the keyring file (the service refuses to start; gate keys)",
    "CHECKPOINT_LOG_REFUSED": "the local checkpoint log (gate checkpoint, the chain service's witness)",
    # Raised only while a governance history is folded or checked: the service requests approval
    # for a weakening change instead of setting it, and approves the requested value itself
    # (gate.services.governance).
    "RELEASE_POLICY_APPROVAL_REQUIRED": "gate.releases.governance, history checks",
    "GOVERNANCE_APPROVAL_REQUIRED": "gate.releases.governance, history checks",
    "GOVERNANCE_APPROVAL_MISMATCH": "gate.releases.governance, history checks",
    # The hold sweeper's own step: a hold with nothing due is left as it is (HoldRules.clock_step, HoldService.sweep).
    "HOLD_NOT_DUE": "gate.services.hold_rules",
    # gate_client: its own codes for an answer it did not get.
    "TRANSPORT": "gate_client: the request failed below HTTP",
    "TIMEOUT": "gate_client: no answer in time",
    "UNEXPECTED_RESPONSE": "gate_client: an answer without the gate's error body",
    "KEY_REGISTRY_UNAVAILABLE": "gate_client: the gate's key registry could not be read",
    # The workbench: shown on its pages, printed by gate workbench, gate dry-run and gate sweep.
    "WORKBENCH_ACCESS_INVALID": "workbench.app.access",
    "WORKBENCH_OIDC_INVALID": "workbench.app.oidc",
    "WORKBENCH_PASSWORDS_INVALID": "workbench.app.passwords",
    "WORKBENCH_PERMISSION_DENIED": "a page action without the right",
    "RULE_EDIT_INVALID": "workbench.app.ruletable: a cell the table cannot write",
    "CLUSTER_UNAVAILABLE": "workbench.cluster (and the dry-run's code for it)",
    "DEMO_SEED_REFUSED": "gate demo seed",
    "NOTEBOOK_SETUP_FAILED": "scripts/notebooks",
    "DATASET_INVALID": "workbench.dataset (and the dry-run's code for it)",
    "DATASET_UNTRUSTED": "workbench.dataset.trust",
    "DATASET_STALE": "workbench.signing: a signed result over a dataset behind the ledger",
    "SIGNING_KEY_MISSING": "workbench.signing, and an event delivery that asked for an Ed25519 signature "
                           "(recorded as that delivery's failure)",
    "USAGE": "gate dry-run / gate sweep: an argument missing or out of range",
    "DRAFT_UNREADABLE": "workbench.migration",
    "DRAFT_INVALID": "workbench.migration",
    "DRAFT_RULEBOOK_MISMATCH": "workbench.migration",
    "RULEBOOK_UNKNOWN": "workbench.migration",
    "HISTORY_EMPTY": "workbench.migration",
    "SWEEP_INVALID": "workbench.migration.sweep",
    "BASELINE_INVALID": "workbench.migration.baseline",
}

# Handlers in api/ that answer a non-refusal with a status of their own, each with why.
ALLOWED_STATUS_MAPPINGS = {
    # AuthFailure is a Signal: the route names the code (each route its own *_UNAUTHORIZED), the
    # Signal whether the key is missing or invalid (401) or disabled (403).
    ("api/runtime.py", "AuthFailure"),
}
RESPONSE_MAKERS = {"error_response", "json_response", "json_text_response", "Response", "_jsonrpc"}


def _product_modules() -> list[ModuleType]:
    modules = []
    for package_name in PACKAGES:
        package = importlib.import_module(package_name)
        modules.append(package)
        for info in pkgutil.walk_packages(package.__path__, package_name + "."):
            if not info.name.startswith(SKIPPED):
                modules.append(importlib.import_module(info.name))
    return modules


MODULES = _product_modules()


def _classes_in(owner: Any, module_name: str) -> list[type]:
    found = []
    for value in vars(owner).values():
        if inspect.isclass(value) and value.__module__ == module_name and value is not owner:
            found.append(value)
            found.extend(_classes_in(value, module_name))
    return found


EXCEPTIONS = sorted({cls for module in MODULES for cls in _classes_in(module, module.__name__)
                     if issubclass(cls, BaseException)}, key=lambda cls: f"{cls.__module__}.{cls.__qualname__}")


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def test_the_walk_finds_the_exceptions_of_every_package():
    packages = {_name(cls).split(".")[0] for cls in EXCEPTIONS}
    assert packages == set(PACKAGES)
    assert len(EXCEPTIONS) >= 60


def test_every_exception_is_a_refusal_or_a_signal():
    outside = {_name(cls) for cls in EXCEPTIONS if not issubclass(cls, (GateError, Signal))}
    assert outside == OUTSIDE


def test_the_parked_request_passes_every_except_exception():
    from api.parking import Parked

    assert issubclass(Parked, BaseException) and not issubclass(Parked, Exception)


def test_no_exception_is_both_a_refusal_and_a_signal():
    assert [_name(cls) for cls in EXCEPTIONS if issubclass(cls, GateError) and issubclass(cls, Signal)] == []


def test_a_class_of_one_code_names_it():
    unnamed = [_name(cls) for cls in EXCEPTIONS
               if issubclass(cls, CodedError) and cls is not CodedError and not isinstance(getattr(cls, "CODE", None), str)]
    assert unnamed == []
    # Raised with its message alone, it carries its class's code.
    from workbench.dataset.location import DatasetError

    refused = DatasetError("no manifest")
    assert (refused.code, refused.message, refused.details, str(refused)) == ("DATASET_INVALID", "no manifest", {},
                                                                              "no manifest")


def _class_codes() -> dict[str, list[str]]:
    named = defaultdict(list)
    for cls in EXCEPTIONS:
        if issubclass(cls, GateError) and "CODE" in vars(cls):
            named[vars(cls)["CODE"]].append(_name(cls))
    return named


def test_every_class_level_code_names_one_meaning():
    shared = {code: names for code, names in _class_codes().items() if len(names) > 1}
    assert shared == {}


def _code_taking() -> dict[str, int]:
    """Name of a refusal class whose constructor takes the code → the code's position; and the one
    check of a right, `gate.principals.require`, which refuses with the code it is given."""
    from gate.principals import require

    taking = {"require": list(inspect.signature(require).parameters).index("code")}
    for cls in EXCEPTIONS:
        if issubclass(cls, GateError):
            parameters = list(inspect.signature(cls.__init__).parameters)
            if "code" in parameters:
                taking[cls.__name__] = parameters.index("code") - 1  # after self
    return taking


def _literal_codes() -> dict[str, list[str]]:
    """Every literal code a refusal is constructed with in the product's source → where."""
    taking = _code_taking()
    found = defaultdict(list)
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations/versions" in path.as_posix():
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.Call):
                    continue
                name = node.func.id if isinstance(node.func, ast.Name) else (
                    node.func.attr if isinstance(node.func, ast.Attribute) else None)
                if name not in taking:
                    continue
                position = taking[name]
                code = node.args[position] if len(node.args) > position else next(
                    (k.value for k in node.keywords if k.arg == "code"), None)
                if isinstance(code, ast.Constant) and isinstance(code.value, str):
                    found[code.value].append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_the_scan_sees_the_codes_raised_by_name():
    codes = _literal_codes()
    assert {"RELEASE_ACTION_INVALID", "EVENT_SUBSCRIPTION_INVALID", "TIMEOUT", "DRAFT_INVALID"} <= set(codes)


def _governance_codes() -> set[str]:
    """The governance rules' refusals, one pair per kind (release policy, any other setting):
    raised through `refusal_code`, so named by their table rather than at a call."""
    from gate.releases.governance import _CODES

    return {code for pair in _CODES.values() for code in pair}


def test_every_code_is_answered_by_the_table_or_never_reaches_http():
    named = set(_class_codes()) | set(_literal_codes()) | _governance_codes()
    unanswered = sorted(named - set(ERROR_TABLE) - set(NEVER_HTTP))
    assert unanswered == [], "add each to api.errors.ERROR_TABLE, or to NEVER_HTTP with where it is met"
    assert sorted(set(NEVER_HTTP) & set(ERROR_TABLE)) == []
    assert sorted(set(NEVER_HTTP) - named) == []  # no stale entry


def test_a_refusal_the_table_does_not_answer_is_an_internal_error_at_http():
    from api.app import _install_error_bodies
    from gate.settings import SettingsError

    app = Flask(__name__)
    _install_error_bodies(app)

    @app.get("/unlisted")
    def unlisted() -> None:
        raise SettingsError("GATE_X must be a number")

    @app.get("/listed")
    def listed() -> None:
        raise GateError("DECISION_NOT_FOUND", "no decision has this id", decision_id="d")

    client = app.test_client()
    fault = client.get("/unlisted")
    assert (fault.status_code, fault.json["error"], fault.json["message"]) == (
        500, "INTERNAL_ERROR", "internal error; nothing was approved")
    refused = client.get("/listed")
    assert (refused.status_code, refused.json) == (404, {"c": "unclear", "v": "not_found", "error": "DECISION_NOT_FOUND",
                                                         "message": "no decision has this id", "decision_id": "d"})


@pytest.mark.parametrize(("make", "line"), [
    (lambda: __import__("gate.settings").settings.SettingsError("GATE_X is bad"), "SETTINGS_INVALID: GATE_X is bad"),
    (lambda: __import__("gate_cli.context").context.CliError("no ledger folder"), "CLI_REFUSED: no ledger folder"),
    (lambda: __import__("workbench.cluster").cluster.ClusterError("no scheduler"), "CLUSTER_UNAVAILABLE: no scheduler"),
    (lambda: GateError("LEDGER_UNAVAILABLE", "the ledger is away"), "LEDGER_UNAVAILABLE: the ledger is away"),
])
def test_the_cli_prints_any_refusal_as_its_code_and_message(make, line):
    from gate_cli.main import expected_failure

    assert expected_failure(make()) == line
    assert expected_failure(ValueError("a bug")) is None


# ---------------------------------------------------------------------------- api/: one table


def _resolve(module: ModuleType, node: ast.expr) -> list[Any]:
    """The classes an except clause names (None for what cannot be resolved statically)."""
    if isinstance(node, ast.Tuple):
        return [cls for element in node.elts for cls in _resolve(module, element)]
    try:
        return [eval(compile(ast.Expression(node), "<except>", "eval"), vars(module))]  # noqa: S307 - a name or an attribute
    except (AttributeError, NameError):
        return [None]


def _own_status(call: ast.Call) -> bool:
    """A response made with a status of its own (not the table's): a literal 4xx/5xx, or `status=`."""
    name = call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", None)
    if name not in RESPONSE_MAKERS:
        return False
    first = call.args[0] if call.args else None
    literal = isinstance(first, ast.Constant) and isinstance(first.value, int) and first.value >= 400
    return literal or any(k.arg == "status" for k in call.keywords)


def _status_tuple(node: ast.AST) -> bool:
    """`return 4xx, body`: a status the handler states itself (api.mcp's shape)."""
    return (isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple) and bool(node.value.elts)
            and isinstance(node.value.elts[0], ast.Constant) and isinstance(node.value.elts[0].value, int)
            and node.value.elts[0].value >= 400)


def _maps_a_status(module: ModuleType, handler: ast.ExceptHandler) -> bool:
    """True when `handler` catches something other than a refusal and answers it with a status
    of its own (a refusal's code names its status in the table)."""
    if handler.type is None:
        return False
    caught = _resolve(module, handler.type)
    if all(inspect.isclass(cls) and issubclass(cls, GateError) for cls in caught):
        return False
    return any((isinstance(node, ast.Call) and _own_status(node)) or _status_tuple(node) for node in ast.walk(handler))


def _second_mappings() -> set[tuple[str, str]]:
    found = set()
    for module in MODULES:
        path = Path(module.__file__ or "")
        if not module.__name__.startswith("api.") or path.name == "errors.py":
            continue
        for handler in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(handler, ast.ExceptHandler) and _maps_a_status(module, handler):
                found.add((path.relative_to(ROOT).as_posix(), ast.unparse(handler.type)))
    return found


def test_api_maps_no_exception_to_a_status_outside_the_table():
    assert _second_mappings() == ALLOWED_STATUS_MAPPINGS


PROBE = """
from api.errors import error_response, json_response
from gate.errors import GateError
def view(call, stated):
    try:
        return call()
    except GateError as refused:
        return error_response(refused.code, refused.message)
    except KeyError:
        return error_response("NOT_FOUND", "not here")
    except ValueError:
        return json_response(400, {"error": "BAD"})
    except LookupError:
        return error_response("NOT_FOUND", "not here", status=stated)
    except TypeError:
        return 422, {"error": "BAD"}
"""


def test_the_scan_tells_a_second_mapping_from_the_tables():
    """The check fails on what it guards: a non-refusal answered with a status of its own."""
    module = ModuleType("api.probe")
    exec(compile(PROBE, "probe", "exec"), vars(module))  # noqa: S102 - the fixed probe above
    handlers = [node for node in ast.walk(ast.parse(PROBE)) if isinstance(node, ast.ExceptHandler)]
    assert [_maps_a_status(module, handler) for handler in handlers] == [False, False, True, True, True]


def test_the_app_registers_error_handlers_for_refusals_only(app):
    """An error handler maps a type too: the app's three (HTTP errors, refusals, faults), and
    refusals that add to their table answer (VerificationBusy's Retry-After)."""
    from werkzeug.exceptions import HTTPException

    from api.public_limits import VerificationBusy

    registered = {cls for by_code in app.error_handler_spec.values() for handlers in by_code.values()
                  for cls in handlers}
    assert {HTTPException, GateError, Exception, VerificationBusy} <= registered
    assert [cls for cls in registered if cls not in (HTTPException, Exception) and not issubclass(cls, GateError)] == []
    assert VerificationBusy().code in ERROR_TABLE


def _route_refusal_faults(module: ModuleType, source: str) -> list[str]:
    """What in a route module refuses other than by raising to the one translator: a use of
    `error_response` (or a `_refused` helper), or an `except` of a GateError class."""
    faults = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name) and node.id in ("error_response", "_refused"):
            faults.append(f"line {node.lineno}: {node.id}")
        elif isinstance(node, ast.alias) and node.name == "error_response":
            faults.append("imports error_response")
        elif isinstance(node, ast.FunctionDef) and node.name == "_refused":
            faults.append(f"line {node.lineno}: def _refused")
        elif isinstance(node, ast.ExceptHandler) and node.type is not None:
            caught = eval(ast.unparse(node.type), vars(module))  # noqa: S307 - names of the module itself
            for cls in caught if isinstance(caught, tuple) else (caught,):
                if issubclass(cls, GateError):
                    faults.append(f"line {node.lineno}: except {cls.__name__}")
    return faults


def test_the_routes_refuse_only_by_raising_to_the_one_translator():
    """The app's GateError handler (`api.errors.refusal`) is the only translator of the routes'
    refusals (issue 66, item 2): no route module answers one itself (`error_response`) or catches
    a GateError, of any class (a refusal to log or to answer in JSON-RPC lives in a service or
    in `api.mcp_http`)."""
    faults = {}
    for path in sorted((ROOT / "api" / "routes").glob("*.py")):
        module = importlib.import_module(f"api.routes.{path.stem}")
        found = _route_refusal_faults(module, path.read_text(encoding="utf-8"))
        if found:
            faults[path.name] = found
    assert faults == {}


ROUTE_PROBE = """
from api.errors import error_response
from gate.errors import GateError, LedgerUnavailable
def view(call):
    try:
        return call()
    except (KeyError, LedgerUnavailable):
        return error_response("NOT_FOUND", "not here")
    except ValueError:
        raise GateError("REQUEST_INVALID", "bad") from None
"""


def test_the_route_scan_finds_a_second_way_to_refuse():
    """The check fails on what it guards: an answered refusal and a caught GateError subclass."""
    module = ModuleType("api.routes.probe")
    exec(compile(ROUTE_PROBE, "probe", "exec"), vars(module))  # noqa: S102 - the fixed probe above
    assert _route_refusal_faults(module, ROUTE_PROBE) == [
        "imports error_response", "line 7: except LedgerUnavailable", "line 8: error_response"]