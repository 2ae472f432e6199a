"""Routes declared once: each route's `Endpoint` sits on its handler, in its module of `api/routes/`.

`Routes.route` (or `Routes.add`, for views made in a loop) takes the route's declarations, one
`Endpoint` per method, and registers the view with Flask under the URL rule its path names. The
same declarations are all the rest reads: the OpenAPI document and /docs.json (`api.openapi`),
the charged routes' 429 and cost headers in that document, and the public routes' per-client
budgets (`api.public_limits`). `api.routes.route_tables` finds every route module; nothing
else lists routes. tests/test_openapi.py holds the app's URL rules and the document equal.

A view receives the services it uses, never a locator: the keyword-only parameters of the
innermost view (`def subscriptions(caller, *, events: EventService, settings: Settings)`) name
them, and `Routes.mount` hands each the one the app composed under that name, once, when the app
mounts the route (`api.runtime.GateRuntime.route_services`). A view that names a service the app
does not compose stops the app at start-up. Only the cross-cutting decorators (`keyed`,
`charged`, the public budgets) read the authenticator and the limiter through the app; a route that
reports or uses the limiter (the decide, readiness, runtime config) takes `current_limiter`, which
reads it per request, since a test or an operator may swap it while the app runs. No route calls
`api.runtime.runtime()` (tests/test_architecture.py).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cache, wraps
from typing import Any, TypeVar

from flask import Blueprint, Flask
from werkzeug.routing import Rule

from api.openapi_params import ParameterSchema

View = TypeVar("View", bound=Callable[..., Any])
# (name, type, description[, schema]): the schema states the route's own check (api.openapi_params)
QueryParameter = tuple[str, str, str] | tuple[str, str, str, ParameterSchema]

BUDGETS = ("public", "verify")  # a public route's per-client budget (api.public_limits)
_PATH_PARAMETER = re.compile(r"\{(\w+)\}")
_MOUNTED = "gate.routes"
# The builders of /openapi.json and /docs.json by name (`openapi_document`, `docs_document`), in the
# app's extensions: api.app sets them, api.routes.meta serves them. No route module imports
# api.openapi, which discovers the route modules (no circle through route discovery).
DOCUMENTS = "gate.contract_documents"

# The vocabulary of the declarations: shared error lists, header lists and their descriptions.
RATE_HEADERS = ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset")
DECIDE_HEADERS = (
    "x-decision-id",
    "x-decision-record-hash",
    "x-decision-receipt-hash",
    "x-decision-confidence-score",
    "x-decision-confidence-level",
    "x-decision-confidence-hash",
    "x-idempotency-status",
    "x-decision-verify-url",
    "x-decision-receipt-signature",
    "X-Usage-Monthly-Remaining",
    "Preference-Applied",
    *RATE_HEADERS,
)
REQUEST_HEADERS = {
    "x-api-key": "API key (server-side only). `Authorization: Bearer <key>` is accepted too.",
    "x-idempotency-key": "Retry handle, 1–300 visible ASCII characters.",
    "x-request-id": "Optional caller trace id (1–160 of A–Z a–z 0–9 . _ : -); becomes the record's request_id.",
    "Prefer": "`return=minimal|standard|full` chooses the response view.",
    "x-decision-response-view": "`minimal`, `standard` or `full` (400 when anything else).",
    "x-gate-scope": "A CI principal's scope (docs/ci-principal.md): the scope a CI workload-identity token acts "
                    "in, needed when its grants name several; ignored for an API key (its scope is its own).",
}
WORKFLOW_REQUEST_HEADERS = {
    "Idempotency-Key": "Workflow routes: overrides the default per-ticket key (1–300 visible ASCII characters).",
    "x-idempotency-key": "Workflow routes: same as Idempotency-Key (both may be sent only with one value).",
    "Authorization": "Workflow routes: `Bearer <GATE_WORKFLOW_TOKEN>` when that setting is configured.",
}
OPERATIONS_REQUEST_HEADERS = {
    "x-metrics-token": "Proof metrics, pilot export and (when GATE_METRICS_TOKEN is set) /metrics: the metrics "
                       "token (`Authorization: Bearer <token>` is accepted too), compared in constant time.",
}
AUTH_ERRORS = ("SVC_API_UNAUTHORIZED",)
BODY_ERRORS = (
    "JSON_INVALID", "JSON_NON_FINITE_NUMBER", "JSON_DUPLICATE_KEY", "JSON_UNSAFE_INTEGER",
    "JSON_TOO_DEEP", "REQUEST_INVALID", "REQUEST_TOO_LARGE", "UNSUPPORTED_MEDIA_TYPE",
)
MEDIA = "body not sent as application/json (or +json) in UTF-8"


@dataclass(frozen=True)
class Endpoint:
    """One route and method as the OpenAPI document states it, with its limits."""

    method: str
    path: str  # the OpenAPI template: `{name}` for a path parameter
    summary: str
    auth: bool  # an API key is required (the view is `api.runtime.keyed`)
    responses: dict[int, str]
    errors: tuple[str, ...] = ()
    query: tuple[QueryParameter, ...] = ()
    request_body: str | None = None  # a component schema of api.openapi
    response_headers: tuple[str, ...] = ()
    request_headers: tuple[str, ...] = ()
    tags: tuple[str, ...] = field(default_factory=tuple)
    error_schema: str = "ErrorBody"  # JsonRpcError on the MCP endpoints
    charged: bool = False  # documented as charged to the key's cost window (api.costs)
    budget: str | None = None  # a public route's per-client budget: "public" or "verify"


@dataclass(frozen=True)
class Declared:
    """One view as registered: its Flask endpoint name, URL rule and the endpoints it serves.
    Declared by its module, `view` is the module's function; mounted on an app, it is that function
    given its services (`Routes.mount`)."""

    name: str
    rule: str
    view: Callable[..., Any]
    endpoints: tuple[Endpoint, ...]

    @property
    def blueprint(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def endpoint(self) -> str:
        return self.name.split(".", 1)[1]

    @property
    def budget(self) -> str | None:
        return self.endpoints[0].budget


class LazyBuildRule(Rule):
    """A URL rule whose URL builders are compiled when a URL is first built from it, not when the
    rule is added. Werkzeug compiles two builders per rule (generated source, `compile`, `exec`):
    about half of an app's build, for the 88 rules, while the API builds no URL on any request.
    The builder compiled late is the one Werkzeug compiles early: the same method on the same rule
    (`tests/api/test_routing.py` builds every rule's URL both ways)."""

    def _compile_builder(self, append_unknown: bool = True) -> Callable[..., tuple[str, str]]:
        compile_now = super()._compile_builder
        attribute = "_build_unknown" if append_unknown else "_build"

        def build_once_compiled(rule: Rule, **values: Any) -> tuple[str, str]:
            builder = compile_now(append_unknown).__get__(rule, None)
            setattr(rule, attribute, builder)  # the next build calls Werkzeug's own builder
            result: tuple[str, str] = builder(**values)
            return result

        return build_once_compiled


def flask_rule(path: str, converters: dict[str, str] | None = None) -> str:
    """The URL rule of an OpenAPI path: `{name}` becomes `<name>` (or `<converter:name>`)."""
    def parameter(match: re.Match[str]) -> str:
        name = match.group(1)
        converter = (converters or {}).get(name)
        return f"<{converter}:{name}>" if converter else f"<{name}>"

    return _PATH_PARAMETER.sub(parameter, path)


def path_parameters(path: str) -> list[str]:
    """The names of an OpenAPI path's parameters, in order."""
    return _PATH_PARAMETER.findall(path)


@cache
def wanted_services(view: Callable[..., Any]) -> tuple[str, ...]:
    """The names of the services a view takes: the keyword-only parameters of the innermost view
    (`inspect.signature` follows the decorators' `__wrapped__`). Read once per view and process:
    the views are the route modules' own functions, and every app mounted them anew (2 ms an app)."""
    parameters = inspect.signature(view).parameters.values()
    return tuple(p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY)


def given(view: Callable[..., Any], services: Mapping[str, object]) -> Callable[..., Any]:
    """`view` with the services it names bound once (the view itself when it names none). A name
    the app does not compose is a TypeError when the app mounts the route, not on a request."""
    names = wanted_services(view)
    if not names:
        return view
    missing = [name for name in names if name not in services]
    if missing:
        raise TypeError(f"{view.__module__}.{view.__name__} takes {missing}, which the app does not compose")
    bound = {name: services[name] for name in names}

    @wraps(view)
    def with_services(*args: Any, **kwargs: Any) -> Any:
        return view(*args, **kwargs, **bound)

    return with_services


def _checked(endpoints: tuple[Endpoint, ...]) -> tuple[Endpoint, ...]:
    """One view's endpoints: at least one, one path, one per method, one budget."""
    if not endpoints:
        raise ValueError("a route needs at least one Endpoint")
    path, budget = endpoints[0].path, endpoints[0].budget
    methods = [endpoint.method for endpoint in endpoints]
    if any(endpoint.path != path for endpoint in endpoints) or len(set(methods)) != len(methods):
        raise ValueError(f"one view serves one path, each method once: {path} {methods}")
    if any(endpoint.budget != budget for endpoint in endpoints) or budget not in (None, *BUDGETS):
        raise ValueError(f"{path}: one budget per view, one of {BUDGETS} (or none)")
    if budget is not None and any(endpoint.auth for endpoint in endpoints):
        raise ValueError(f"{path}: a keyed route counts against its key, not a public budget")
    return endpoints


class Routes:
    """A route module's routes: its blueprint (and any others it names), each view declared with
    its endpoints, and what runs when the app mounts them. The blueprints are made per app, at
    `mount`, each view given the services that app composed."""

    def __init__(self, name: str, import_name: str) -> None:
        self.name = name
        self._import_name = import_name
        self._blueprints: list[str] = [name]
        self.declared: list[Declared] = []

    @property
    def endpoints(self) -> tuple[Endpoint, ...]:
        return tuple(endpoint for declared in self.declared for endpoint in declared.endpoints)

    def route(self, *endpoints: Endpoint, name: str | None = None, converters: dict[str, str] | None = None,
              blueprint: str | None = None) -> Callable[[View], View]:
        """Decorate a view: register it for `endpoints` (one per method of one path)."""
        def register(view: View) -> View:
            self.add(view, *endpoints, name=name, converters=converters, blueprint=blueprint)
            return view

        return register

    def add(self, view: Callable[..., Any], *endpoints: Endpoint, name: str | None = None,
            converters: dict[str, str] | None = None, blueprint: str | None = None) -> None:
        """Declare `view` for `endpoints` under the endpoint name `name` (default: the view's
        name) of this module's blueprint, or of the blueprint `blueprint` (made on first use)."""
        endpoints = _checked(endpoints)
        blueprint = blueprint or self.name
        if blueprint not in self._blueprints:
            self._blueprints.append(blueprint)
        rule, name = flask_rule(endpoints[0].path, converters), name or view.__name__
        self.declared.append(Declared(f"{blueprint}.{name}", rule, view, endpoints))

    def mount(self, app: Flask, services: Mapping[str, object]) -> None:
        """Register the module's blueprints (in the order they were made), each view given the
        services it names from `services` (`given`)."""
        blueprints = {name: Blueprint(name, self._import_name) for name in self._blueprints}
        mounted = [replace(declared, view=given(declared.view, services)) for declared in self.declared]
        for declared in mounted:
            blueprints[declared.blueprint].add_url_rule(
                declared.rule, declared.endpoint, declared.view,
                methods=[endpoint.method.upper() for endpoint in declared.endpoints])
        for blueprint in blueprints.values():
            app.register_blueprint(blueprint)
        app.extensions.setdefault(_MOUNTED, []).extend(mounted)


def mounted(app: Flask) -> list[Declared]:
    """Every view the app mounted through `Routes`, in mount order."""
    declared: list[Declared] = app.extensions.get(_MOUNTED, [])
    return declared


__all__ = [
    "AUTH_ERRORS",
    "BODY_ERRORS",
    "BUDGETS",
    "DECIDE_HEADERS",
    "DOCUMENTS",
    "MEDIA",
    "OPERATIONS_REQUEST_HEADERS",
    "RATE_HEADERS",
    "REQUEST_HEADERS",
    "WORKFLOW_REQUEST_HEADERS",
    "Declared",
    "Endpoint",
    "Routes",
    "flask_rule",
    "given",
    "mounted",
    "path_parameters",
    "wanted_services",
]
