"""Routes declared once (api/routing.py): the app registers each route from its declaration, the
OpenAPI document and the public budgets read the same declarations, and a new route module is
found without a list to edit (docs/architecture.md, "Where a change goes": an API route)."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import textwrap
import typing
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from api.openapi import endpoints
from api.routes import route_modules, route_tables
from api.routing import Endpoint, Routes, flask_rule, given, mounted, wanted_services

ROOT = Path(__file__).resolve().parents[2]
KEYED = "keyed.<locals>.decorate.<locals>.wrapper"  # api.runtime.keyed
CHARGED = "charged.<locals>.decorate.<locals>.wrapper"  # api.costs.charged


def _decorators(view) -> list[str]:
    """The code of every function from the view inward (`functools.wraps` keeps `__wrapped__`)."""
    names = []
    while view is not None:
        names.append(view.__code__.co_qualname)
        view = getattr(view, "__wrapped__", None)
    return names


def test_every_module_of_the_routes_package_is_a_route_table():
    modules = sorted(path.stem for path in (ROOT / "api" / "routes").glob("*.py") if path.stem != "__init__")
    assert list(route_modules()) == modules
    assert [routes.name for routes in route_tables()] == modules


def test_each_declared_view_is_the_view_flask_serves(app):
    declared = mounted(app)
    names = [d.name for d in declared]
    assert len(names) == len(set(names))
    assert set(names) == {rule.endpoint for rule in app.url_map.iter_rules()} - {"static"}
    for d in declared:
        assert app.view_functions[d.name] is d.view, d.name
        rules = [rule for rule in app.url_map.iter_rules() if rule.endpoint == d.name]
        assert [rule.rule for rule in rules] == [d.rule], d.name
        assert rules[0].methods - {"HEAD", "OPTIONS"} == {e.method.upper() for e in d.endpoints}, d.name
    assert [e for d in declared for e in d.endpoints] == [e for r in route_tables() for e in r.endpoints]


def test_each_view_is_given_the_services_its_parameters_name_and_type(app):
    """A view's keyword-only parameters are its services (api.routing.given): each mounted view
    holds the one the app composed under that name, of the type the parameter states."""
    composed = app.extensions["gate"].route_services()
    for d in mounted(app):
        view = inspect.unwrap(d.view)
        hints = typing.get_type_hints(view)
        for name in wanted_services(view):
            value, hint = composed[name], hints[name]
            if typing.get_origin(hint) is Callable:
                assert callable(value), (d.name, name)
            elif getattr(hint, "_is_protocol", False):  # a Protocol (Analytics): every member it states
                members = [member for member in vars(hint) if not member.startswith("_")]
                assert members and all(callable(getattr(value, m, None)) for m in members), (d.name, name)
            elif typing.get_origin(hint) is Mapping:  # the MCP servers: a mapping, and every item of its kind
                key, item = typing.get_args(hint)
                assert isinstance(value, typing.get_origin(hint)) and value, (d.name, name)
                assert all(isinstance(k, key) and isinstance(v, item) for k, v in value.items()), (d.name, name)
            else:
                assert isinstance(value, hint), (d.name, name, hint)


def test_a_view_naming_a_service_the_app_lacks_stops_the_mount():
    def view(caller: object, *, nothing_of_the_kind: object) -> None:
        return None

    with pytest.raises(TypeError, match="nothing_of_the_kind"):
        given(view, {"events": object()})
    assert given(_view, {"events": object()}) is _view  # a view that names none is served as it is

def test_a_route_documented_with_a_key_is_keyed_and_the_others_are_not(app):
    for d in mounted(app):
        keyed = KEYED in _decorators(d.view)
        assert [e.auth for e in d.endpoints] == [keyed] * len(d.endpoints), d.name


def test_a_route_documented_as_charged_is_charged(app):
    for d in mounted(app):
        charged = CHARGED in _decorators(d.view)
        documented = {e.charged for e in d.endpoints}
        assert len(documented) == 1, d.name
        assert documented == {charged}, d.name


def test_the_document_states_each_declared_charge():
    charged = [e for e in endpoints() if e.charged]
    assert charged
    for endpoint in charged:
        assert 429 in endpoint.responses and "SVC_API_RATE_LIMITED" in endpoint.errors, endpoint.path
        assert "X-RateLimit-Cost" in endpoint.response_headers, endpoint.path


def test_a_path_names_its_url_rule():
    assert flask_rule("/api/decision/{decision_id}/verify") == "/api/decision/<decision_id>/verify"
    assert flask_rule("/schemas/{name}", {"name": "path"}) == "/schemas/<path:name>"
    assert flask_rule("/api/v1/workflows/{ticketing_system}/{workflow}") == (
        "/api/v1/workflows/<ticketing_system>/<workflow>")


def _view() -> None:
    return None


@pytest.mark.parametrize("declarations, problem", [
    ((), "at least one"),
    ((Endpoint("get", "/a", "a", False, {200: "a"}), Endpoint("post", "/b", "b", False, {200: "b"})), "one path"),
    ((Endpoint("get", "/a", "a", False, {200: "a"}), Endpoint("get", "/a", "b", False, {200: "b"})), "each method"),
    ((Endpoint("get", "/a", "a", False, {200: "a"}, budget="public"),
      Endpoint("post", "/a", "b", False, {200: "b"})), "one budget"),
    ((Endpoint("get", "/a", "a", False, {200: "a"}, budget="cheap"),), "one budget"),
    ((Endpoint("get", "/a", "a", True, {200: "a"}, budget="public"),), "keyed"),
])
def test_inconsistent_declarations_are_refused(declarations, problem):
    routes = Routes("probe", __name__)
    with pytest.raises(ValueError, match=problem):
        routes.add(_view, *declarations)
    assert routes.declared == []


PROBE = textwrap.dedent('''
    from api.errors import json_response
    from api.routing import AUTH_ERRORS, Endpoint, Routes
    from api.runtime import keyed

    routes = Routes("probe", __name__)


    @routes.route(Endpoint("get", "/api/probe/{name}", "A public route added by its module alone.", False,
                           {200: "the name"}, tags=("probe",), budget="public"))
    def look(name):
        return json_response(200, {"ok": True, "name": name})


    @routes.route(Endpoint("post", "/api/probe/{name}", "A keyed route added by its module alone.", True,
                           {200: "the name", 401: "missing or invalid key"}, errors=AUTH_ERRORS, tags=("probe",)))
    @keyed("SVC_API_UNAUTHORIZED")
    def poke(caller, name):
        return json_response(200, {"ok": True, "name": name, "scope": caller.scope})
''')

SCRIPT = textwrap.dedent('''
    import json, sys

    import api.routes
    api.routes.__path__.append(sys.argv[1])  # the probe module beside the package's own

    from gate_cli.served_app import create_app
    from gate.settings import Settings

    client = create_app(Settings.from_env()).test_client()
    look, poke = client.get("/api/probe/x"), client.post("/api/probe/x")
    spec, docs = client.get("/openapi.json").json, client.get("/docs.json").json
    print(json.dumps({"look": [look.status_code, look.json, look.headers.get("X-RateLimit-Limit")],
                      "poke": [poke.status_code, poke.json["error"]],
                      "operations": spec["paths"].get("/api/probe/{name}"),
                      "listed": [e for e in docs["endpoints"] if e["path"] == "/api/probe/{name}"]}))
''')


def test_a_new_route_module_is_served_budgeted_and_documented_by_itself(gate_env, tmp_path):
    """One file, `api/routes/probe.py`, and nothing else: the app mounts it, its public route
    counts against the client's budget, its keyed route asks for a key, and both are documented."""
    folder = tmp_path / "probe"
    folder.mkdir()
    (folder / "probe.py").write_text(PROBE, encoding="utf-8")
    env = {**os.environ, **gate_env, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(folder)], env=env, capture_output=True, text=True,
                          timeout=180, check=False)
    assert done.returncode == 0, done.stderr
    answers = json.loads(done.stdout.splitlines()[-1])
    assert answers["look"] == [200, {"ok": True, "name": "x"}, "600"]
    assert answers["poke"] == [401, "SVC_API_UNAUTHORIZED"]
    look, poke = answers["operations"]["get"], answers["operations"]["post"]
    assert look["security"] == [] and poke["security"] == [{"ApiKey": []}, {"Bearer": []}]
    assert [p["name"] for p in look["parameters"] if p["in"] == "path"] == ["name"]
    assert "SVC_API_RATE_LIMITED" in look["responses"]["429"]["x-error-codes"]  # the public budget's 429
    assert "429" not in poke["responses"]
    assert {(e["method"], e["auth"]) for e in answers["listed"]} == {("GET", "public"), ("POST", "api_key")}


def _plain_copy(rule):
    from werkzeug.routing import Rule

    return Rule(rule.rule, endpoint=rule.endpoint, methods=rule.methods, defaults=rule.defaults,
                strict_slashes=rule.strict_slashes, merge_slashes=rule.merge_slashes)


def test_every_rule_builds_the_url_werkzeug_builds_though_its_builder_is_compiled_late(app):
    """`api.routing.LazyBuildRule`: the app's rules compile their URL builders on first use, and
    then build what Werkzeug's own rules build, with and without members beyond the path's."""
    from werkzeug.routing import Map

    from api.routing import LazyBuildRule

    rules = [rule for rule in app.url_map.iter_rules() if rule.endpoint != "static"]
    assert len(rules) >= 80 and all(type(rule) is LazyBuildRule for rule in rules)
    assert {rule._build.__func__.__name__ for rule in rules} == {"build_once_compiled"}  # nothing compiled yet
    plain = Map([_plain_copy(rule) for rule in rules]).bind("gate.test", "/")
    lazy = app.url_map.bind("gate.test", "/")
    for rule in rules:
        values = {name: f"v {name}/é" for name in rule.arguments}
        method = sorted(rule.methods - {"HEAD", "OPTIONS"})[0]
        for extra, unknown in (({}, False), ({}, True), ({"page": "2", "q": "a b"}, True)):
            built = lazy.build(rule.endpoint, {**values, **extra}, method=method, append_unknown=unknown)
            assert built == plain.build(rule.endpoint, {**values, **extra}, method=method, append_unknown=unknown)
            assert built == lazy.build(rule.endpoint, {**values, **extra}, method=method, append_unknown=unknown)
    assert "build_once_compiled" not in {rule._build.__func__.__name__ for rule in rules}
    assert "build_once_compiled" not in {rule._build_unknown.__func__.__name__ for rule in rules}
