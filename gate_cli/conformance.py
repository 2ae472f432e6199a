"""`gate conformance --endpoint URL [--api-key KEY] [--json]`: the published conformance fixtures
(`gate/schemas/conformance/`) against any compatible Decision Gate endpoint.

Each fixture's request is posted twice to `POST {endpoint}/api/decide`. A fixture passes when
both responses give the same semantic result (`semantic_result`: status code and the decision
or refusal members, not ids, times or signatures) and that result matches the fixture's
`expect` (every expected member equal; objects compared member by member, arrays exactly).

A fixture that `requires` an adapter gets the adapter's manifest hash from the endpoint's public
registry (`GET /api/decision/adapters`); when the endpoint lists no such adapter the fixture is
`skipped` with the reason. Exit status: 0 only when every fixture passed, 1 when any failed,
3 when none failed but some were skipped (the run is incomplete, never a pass).
"""

from __future__ import annotations

import copy
import json
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import NotRequired, TypedDict

from gate.protocol.canonical import sha256_bytes_hex
from gate.resources import schemas_path
from gate.strict_json import JsonValue

FIXTURES = schemas_path("conformance")
REGISTRY_PLACEHOLDER = "$registry"
SEMANTIC_MEMBERS = (
    "status", "c", "v", "verdict", "application_verdict", "action", "reason_code", "matched_rule_id", "evidence",
    "missing_fields", "invalid_fields", "evaluator_version", "rulebook", "runtime_binding", "policy_bundle_hash",
    "adapter_facts", "error", "forbidden_fields", "binding_mode", "inferred_binding_mode", "supported_binding_modes",
)
ADAPTER_LINEAGE = ("adapter_id", "version", "implementation_hash", "manifest_hash", "input_hash", "output_hash")
EXIT_PASSED, EXIT_FAILED, EXIT_INCOMPLETE = 0, 1, 3

Transport = Callable[[str, str, object], tuple[int, object]]  # (method, path, body) -> (status, json body)


class IndexEntry(TypedDict):
    """One fixture as the index names it: its file and the sha256 of the file's bytes."""

    fixture_id: str
    path: str
    sha256: str
    covers: list[str]
    requires: Requirements


class ConformanceIndex(TypedDict):
    """`gate/schemas/conformance/index.json`."""

    conformance_index_version: str
    interface_version: str
    protocol: str
    endpoint: str
    runs_per_fixture: int
    semantic_result: str
    coverage: list[str]
    runner: str
    fixtures: list[IndexEntry]


class AdapterRef(TypedDict):
    adapter_id: str
    version: str


class Requirements(TypedDict, total=False):
    """What a fixture needs of the endpoint: a trusted adapter it must list."""

    adapter: AdapterRef


class PublishedAdapter(AdapterRef):
    manifest_hash: str


class SemanticResult(TypedDict):
    """The status and the decision or refusal members of one answer (`semantic_result`)."""

    http_status: int
    body: dict[str, JsonValue] | None


class Expectation(TypedDict):
    http_status: int
    body: NotRequired[dict[str, JsonValue]]


class Fixture(TypedDict):
    """One fixture file: the request to post and the semantic result it must give."""

    fixture_id: str
    title: str
    covers: list[str]
    request: dict[str, JsonValue]
    expect: Expectation
    requires: NotRequired[Requirements]
    note: NotRequired[str]


class FixtureResult(TypedDict):
    """One fixture in the report: passed, failed (with its problems) or skipped (with the reason)."""

    fixture_id: str
    covers: list[str]
    result: str
    reason: NotRequired[str]
    problems: NotRequired[list[str]]
    semantic_result: NotRequired[SemanticResult]


class ConformanceReport(TypedDict):
    ok: bool
    conformance_index_version: str
    passed: int
    failed: int
    skipped: int
    fixtures: list[FixtureResult]


def http_transport(endpoint: str, api_key: str | None, timeout: float = 30) -> Transport:
    """A transport over urllib: JSON in, JSON out; network errors are raised as OSError."""
    base = endpoint.rstrip("/")

    def send(method: str, path: str, body: object) -> tuple[int, object]:
        headers = {"content-type": "application/json", "accept": "application/json"}
        if api_key:
            headers["x-api-key"] = api_key
        data = json.dumps(body).encode("utf-8") if body is not None else None
        # The operator names the gate to test (--url); its answers are only read as JSON.
        request = urllib.request.Request(base + path, data=data, method=method, headers=headers)  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - operator-chosen URL
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, raw = error.code, error.read()
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, None

    return send


def load_fixtures(directory: Path = FIXTURES) -> tuple[ConformanceIndex, list[Fixture]]:
    """The index and its fixtures; a fixture whose bytes do not match the index's sha256 is an error."""
    index: ConformanceIndex = json.loads((directory / "index.json").read_text(encoding="utf-8"))
    fixtures: list[Fixture] = []
    for entry in index["fixtures"]:
        raw = (directory / entry["path"]).read_bytes()
        if sha256_bytes_hex(raw) != entry["sha256"]:
            raise ValueError(f"conformance fixture {entry['path']} does not match its sha256 in the index")
        fixtures.append(json.loads(raw))
    return index, fixtures


def semantic_result(status: int, body: object) -> SemanticResult:
    """What must be identical across runs and match `expect`: no ids, times, hashes of ids or signatures."""
    if not isinstance(body, dict):
        return {"http_status": status, "body": None}
    semantic: dict[str, JsonValue] = {name: body[name] for name in SEMANTIC_MEMBERS if name in body}
    if isinstance(body.get("trusted_adapter"), dict):
        semantic["trusted_adapter"] = {k: body["trusted_adapter"].get(k) for k in ADAPTER_LINEAGE}
    if isinstance(body.get("errors"), list):
        semantic["errors"] = [{"field": e.get("field"), "code": e.get("code")} for e in body["errors"]
                              if isinstance(e, dict)]
    return {"http_status": status, "body": semantic}


def _matches(expected: object, actual: object) -> bool:
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and _matches(v, actual[k]) for k, v in expected.items())
    return bool(expected == actual)  # JSON values: their == is a bool


def _mismatches(expected: Expectation, actual: SemanticResult) -> list[str]:
    problems = []
    if expected.get("http_status") != actual.get("http_status"):
        problems.append(f"http_status: expected {expected.get('http_status')}, got {actual.get('http_status')}")
    body = actual.get("body") or {}
    for name, value in (expected.get("body") or {}).items():
        if name not in body:
            problems.append(f"{name}: missing")
        elif not _matches(value, body[name]):
            problems.append(f"{name}: expected {json.dumps(value)}, got {json.dumps(body[name])}")
    return problems


def _published_adapters(send: Transport) -> list[PublishedAdapter] | None:
    """Every `{adapter_id, version, manifest_hash}` object the endpoint's adapter registry lists."""
    try:
        status, body = send("GET", "/api/decision/adapters", None)
    except OSError:
        return None
    if status != 200:
        return None
    found: list[PublishedAdapter] = []
    stack = [body]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            if all(isinstance(value.get(k), str) for k in ("adapter_id", "version", "manifest_hash")):
                found.append({"adapter_id": value["adapter_id"], "version": value["version"],
                              "manifest_hash": value["manifest_hash"]})
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return found


def _prepare(fixture: Fixture,
             adapters: list[PublishedAdapter] | None) -> tuple[dict[str, JsonValue] | None, str | None]:
    request = copy.deepcopy(fixture["request"])
    needed = (fixture.get("requires") or {}).get("adapter")
    if not needed:
        return request, None
    match = next((a for a in adapters or [] if a["adapter_id"] == needed["adapter_id"]
                  and a["version"] == needed["version"]), None)
    if match is None:
        return None, (f"requires the trusted adapter {needed['adapter_id']}@{needed['version']}, which the endpoint "
                      "does not list at GET /api/decision/adapters")
    adapter = request.get("adapter")
    if isinstance(adapter, dict) and adapter.get("manifest_hash") == REGISTRY_PLACEHOLDER:
        adapter["manifest_hash"] = match["manifest_hash"]
    return request, None


def _entry(fixture: Fixture, result: str) -> FixtureResult:
    return {"fixture_id": fixture["fixture_id"], "covers": fixture["covers"], "result": result}


def run_conformance(send: Transport, directory: Path = FIXTURES) -> ConformanceReport:
    """Run every fixture twice; the report `{ok, passed, failed, skipped, fixtures[]}`."""
    index, fixtures = load_fixtures(directory)
    adapters = _published_adapters(send) if any(f.get("requires") for f in fixtures) else []
    results: list[FixtureResult] = []
    for fixture in fixtures:
        request, skip = _prepare(fixture, adapters)
        if skip:
            skipped = _entry(fixture, "skipped")
            skipped["reason"] = skip
            results.append(skipped)
            continue
        runs = []
        try:
            for _ in range(2):
                runs.append(semantic_result(*send("POST", "/api/decide", request)))
        except OSError as exc:
            unreachable = _entry(fixture, "failed")
            unreachable["problems"] = [f"endpoint unreachable: {exc}"]
            results.append(unreachable)
            continue
        problems = _mismatches(fixture["expect"], runs[0])
        if runs[0] != runs[1]:
            problems.append("the two runs gave different semantic results")
        ran = _entry(fixture, "failed" if problems else "passed")
        ran["problems"], ran["semantic_result"] = problems, runs[0]
        results.append(ran)
    counts = {kind: sum(r["result"] == kind for r in results) for kind in ("passed", "failed", "skipped")}
    return {"ok": counts["passed"] == len(results), "conformance_index_version": index["conformance_index_version"],
            "passed": counts["passed"], "failed": counts["failed"], "skipped": counts["skipped"], "fixtures": results}


def exit_code(report: ConformanceReport) -> int:
    if report["failed"]:
        return EXIT_FAILED
    return EXIT_INCOMPLETE if report["skipped"] else EXIT_PASSED


def render(report: ConformanceReport) -> str:
    lines = []
    for r in report["fixtures"]:
        lines.append(f"{r['result'].upper():8} {r['fixture_id']}")
        for problem in r.get("problems", []):
            lines.append(f"         {problem}")
        if r.get("reason"):
            lines.append(f"         {r['reason']}")
    lines.append(f"{report['passed']} passed, {report['failed']} failed, {report['skipped']} skipped")
    return "\n".join(lines)
