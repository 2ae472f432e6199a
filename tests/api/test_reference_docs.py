"""`/docs` (Swagger UI from the installed flask-swagger-ui package, no CDN) and `/healthz`."""

from __future__ import annotations

import re

import pytest

from api.routes.reference import ASSETS, assets_dir


def test_the_reference_page_loads_only_local_assets(client):
    page = client.get("/docs")
    assert page.status_code == 200 and page.mimetype == "text/html"
    csp = page.headers["Content-Security-Policy"]
    assert "default-src 'self'" in csp and "script-src 'self'" in csp and "http" not in csp
    html = page.get_data(as_text=True)
    assert "http://" not in html and "https://" not in html  # nothing from a CDN
    references = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert {"docs/assets/swagger-ui-bundle.js", "docs/assets/swagger-ui.css", "docs/assets/gate-docs.js",
            "openapi.json", "docs.json"} <= set(references)
    for reference in references:  # relative to /docs: each one is served by this gate
        response = client.get("/" + reference)
        assert response.status_code == 200, reference
    script = client.get("/docs/assets/gate-docs.js").get_data(as_text=True)
    assert 'url: "openapi.json"' in script and "validatorUrl: null" in script and "http" not in script


def test_assets_are_the_installed_package_files(client):
    folder = assets_dir()
    assert folder is not None and "flask_swagger_ui" in str(folder)
    for name in ASSETS:
        response = client.get(f"/docs/assets/{name}")
        assert response.status_code == 200 and response.get_data() == (folder / name).read_bytes(), name
        assert response.headers["X-Content-Type-Options"] == "nosniff"
    bundle = client.get("/docs/assets/swagger-ui-bundle.js")
    assert bundle.mimetype == "text/javascript" and "max-age=86400" in bundle.headers["Cache-Control"]
    assert client.get("/docs/assets/swagger-ui.css").mimetype == "text/css"


@pytest.mark.parametrize("name", ["index.template.html", "LICENSE", "..%2F__init__.py", "swagger-ui.js.map", "x"])
def test_other_names_are_not_served(client, name):
    response = client.get(f"/docs/assets/{name}")
    assert response.status_code == 404 and response.json["error"] == "NOT_FOUND" and response.json["c"] == "unclear"


def test_healthz_is_liveness_beside_readiness(make_app, gate_env, tmp_path):
    import gate

    broken = make_app({"GATE_SIGNING_KEY_FILE": str(tmp_path / "absent.json")})
    client = broken.test_client()
    assert client.get("/api/decision/status").status_code == 503  # not ready: no signing key
    alive = client.get("/healthz")  # but alive: it reads no ledger, limiter or key
    assert alive.status_code == 200 and alive.json == {"ok": True, "status": "alive", "service_version": gate.__version__}


def test_the_routes_are_in_the_contract(client):
    paths = client.get("/openapi.json").json["paths"]
    assert {"/docs", "/docs/assets/{name}", "/healthz"} <= set(paths)
    listed = {(e["method"], e["path"]) for e in client.get("/docs.json").json["endpoints"]}
    assert ("GET", "/healthz") in listed and ("GET", "/docs") in listed


def test_asset_types_do_not_follow_the_process_wide_registry(client, monkeypatch):
    """Panel maps .js to application/javascript in `mimetypes` when it is imported; whichever
    library did so first decided the bundle's type (an order-dependent failure of the suite)."""
    import mimetypes

    monkeypatch.setattr(mimetypes, "guess_type", lambda *args, **kwargs: ("application/x-changed", None))
    assert client.get("/docs/assets/swagger-ui-bundle.js").mimetype == "text/javascript"
    assert client.get("/docs/assets/swagger-ui.css").mimetype == "text/css"
    assert client.get("/docs/assets/favicon-16x16.png").mimetype == "image/png"


def test_the_contract_documents_are_built_once_however_many_ask_first(app, monkeypatch):
    """The first requests of a busy worker used to build the OpenAPI document once per thread
    (an lru_cache lets every thread that misses it build): a second of first answers at 64
    connections. Now one thread builds each document's text; the others wait for it and all
    answer the same bytes, those of the document encoded as every JSON answer is."""
    import threading

    from api.jsonio import dumps
    from api.openapi import docs_document, openapi_document
    from api.routes import meta
    from api.routing import DOCUMENTS

    builds: list[str] = []

    def counted(build):
        def slow_build():
            builds.append(build.__name__)
            threading.Event().wait(0.05)  # a build long enough for every thread to miss the cache
            return build()

        slow_build.__name__ = build.__name__
        return slow_build

    monkeypatch.setattr(meta, "_TEXTS", {})
    for build in (openapi_document, docs_document):
        monkeypatch.setitem(app.extensions[DOCUMENTS], build.__name__, counted(build))
    start = threading.Barrier(16)
    answers: list[tuple[str, int, bytes]] = []

    def ask(path: str) -> None:
        client = app.test_client()
        start.wait()
        response = client.get(path)
        answers.append((path, response.status_code, response.get_data()))

    threads = [threading.Thread(target=ask, args=(path,)) for path in ["/openapi.json", "/docs.json"] * 8]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(builds) == ["docs_document", "openapi_document"]
    expected = {"/openapi.json": dumps(openapi_document()).encode(), "/docs.json": dumps(docs_document()).encode()}
    assert len(answers) == 16 and all(status == 200 and body == expected[path] for path, status, body in answers)
