"""Adapter definitions refused at registration, entry-point plugins, and the adapter settings."""

from __future__ import annotations

import hashlib
import shutil
import textwrap

import pytest

from gate.adapters import (
    AdapterDefinitionError,
    AdapterRegistry,
    load_adapter_file,
    plugin_adapters,
)
from gate.adapters.executor import WorkerPool
from gate.protocol.canonical import sha256_hex
from gate.settings import Settings, SettingsError
from tests.adapters.support import invocation

GOOD = '''
MANIFEST = {
    "adapter_id": "acme.fx",
    "version": "1.2.3",
    "implementation_revision": "r7",
    "description": "doubles",
    "input_schema": {"type": "object", "additionalProperties": False, "required": ["x"],
                     "properties": {"x": {"type": "number"}}},
    "output_schema": {"type": "object", "additionalProperties": False, "required": ["y"],
                      "properties": {"y": {"type": "number"}}},
}


def run(payload):
    return {"y": payload["x"] * 2}
'''


def write(tmp_path, text, name="adapter_mod.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def install_plugin(folder, package, module, text, entries, init=""):
    """A plugin distribution laid out in `folder` as pip lays one out: the package `package` (its
    `__init__.py` holding `init`, its module `module` holding `text`) and its `.dist-info`, whose
    `entry_points.txt` names `entries` in the adapters' group. Returns the `.dist-info` folder."""
    source = folder / package
    source.mkdir()
    (source / "__init__.py").write_text(init)
    write(source, text, module)
    dist = folder / f"{package}-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package.replace('_', '-')}\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[decision_gate.adapters]\n{entries}")
    return dist


def test_hashes_are_over_the_source_bytes_and_the_canonical_manifest(tmp_path):
    path = write(tmp_path, GOOD)
    adapter = load_adapter_file(path)
    assert adapter.implementation_hash == hashlib.sha256(path.read_bytes()).hexdigest()
    assert adapter.manifest_hash == sha256_hex(adapter.manifest)
    assert set(adapter.manifest) == {"manifest_version", "adapter_id", "version", "description",
                                     "implementation_revision", "implementation_hash", "input_schema",
                                     "output_schema"}
    edited = write(tmp_path, GOOD + "\n# a comment changes the implementation hash\n", "edited.py")
    changed = load_adapter_file(edited)
    assert changed.implementation_hash != adapter.implementation_hash
    assert changed.manifest_hash != adapter.manifest_hash
    registry = AdapterRegistry([adapter])
    with pytest.raises(AdapterDefinitionError, match="already registered"):
        registry.register(changed)  # same id and version, other code: must be a new version
    registry.register(adapter)  # the same content again is a no-op


@pytest.mark.parametrize("edit,message", [
    (lambda s: s.replace('"additionalProperties": False, "required": ["x"]', '"required": ["x"]'), "additionalProperties"),
    (lambda s: s.replace('"y"', '"x"'), "reuse input names"),
    (lambda s: s.replace("def run(payload)", "def other(payload)"), "def run"),
    (lambda s: s.replace('"1.2.3"', '"1.2"'), "semver"),
    (lambda s: s.replace('"acme.fx"', '"Acme"'), "adapter_id"),
    (lambda s: s.replace('"r7"', '""'), "implementation_revision"),
    (lambda s: s.replace('"description": "doubles"', '"description": "d", "handler": "x"'), "unknown keys"),
    (lambda s: s.replace('"doubles"', 'str(1)'), "literal"),
    (lambda s: s.replace('{"type": "number"}}},\n    "output', '{"type": "numbr"}}},\n    "output'), "JSON Schema"),
    (lambda s: s.replace("MANIFEST = {", "MANIFEST = {'x': 1} and {"), "literal"),
    (lambda s: s + "\ndef broken(:\n", "not valid Python"),
])
def test_bad_definitions_are_refused(tmp_path, edit, message):
    with pytest.raises(AdapterDefinitionError, match=message):
        load_adapter_file(write(tmp_path, edit(GOOD)))


def test_nested_objects_must_be_closed_too(tmp_path):
    text = GOOD.replace('"properties": {"x": {"type": "number"}}',
                        '"properties": {"x": {"type": "number"}, "h": {"type": "object", "properties": {}}}')
    with pytest.raises(AdapterDefinitionError, match="additionalProperties"):
        load_adapter_file(write(tmp_path, text))


def test_entry_point_plugins_are_found_without_importing_them(tmp_path, monkeypatch):
    install_plugin(tmp_path, "acme_adapters", "fx.py",
                   GOOD + "\nraise SystemExit('a plugin module must never run in the gate process')\n",
                   "fx = acme_adapters.fx\nbroken = acme_adapters.nope\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = {a.adapter_id: a for a in plugin_adapters()}
    assert found["acme.fx"].origin == "plugin" and found["acme.fx"].module_name == "acme_adapters.fx"
    registry = AdapterRegistry(found.values(), pool=WorkerPool(size=0))
    adapter = found["acme.fx"]
    with pytest.raises(Exception) as caught:  # the module's last line raises when the worker runs it
        registry.run(invocation(adapter, {"x": 2}))
    assert getattr(caught.value, "code", None) == "TRUSTED_ADAPTER_OUTPUT_INVALID"


def test_a_plugin_installed_into_a_folder_already_searched_is_found_by_the_next_read(tmp_path, monkeypatch):
    """The entry points are read once per state of the search path (`_entry_points`): a
    distribution installed into a folder already on the path, after a read, changes that state."""
    monkeypatch.syspath_prepend(str(tmp_path))
    assert not [a for a in plugin_adapters() if a.module_name == "delta_adapters.fx"]
    dist = install_plugin(tmp_path, "delta_adapters", "fx.py", GOOD.replace("acme.fx", "delta.fx"),
                          "fx = delta_adapters.fx\n")
    assert [a.adapter_id for a in plugin_adapters() if a.module_name == "delta_adapters.fx"] == ["delta.fx"]
    shutil.rmtree(dist)  # uninstalled: gone from the next read
    assert not [a for a in plugin_adapters() if a.module_name == "delta_adapters.fx"]


def test_plugin_adapter_runs_in_its_worker_and_can_import_its_package(tmp_path, monkeypatch):
    install_plugin(tmp_path, "beta_adapters", "triple.py", GOOD.replace('payload["x"] * 2', 'payload["x"] * FACTOR').replace(
        "def run(payload):", "from beta_adapters import FACTOR\n\n\ndef run(payload):"),
        "triple = beta_adapters.triple\n", init="FACTOR = 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    adapter = next(a for a in plugin_adapters() if a.module_name == "beta_adapters.triple")
    registry = AdapterRegistry([adapter], pool=WorkerPool(size=0))
    assert registry.run(invocation(adapter, {"x": 2})).output == {"y": 6}


def test_the_app_can_leave_plugins_out(make_app, tmp_path, monkeypatch):
    install_plugin(tmp_path, "gamma_adapters", "fx.py", GOOD.replace("acme.fx", "gamma.fx"), "fx = gamma_adapters.fx\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with_plugins = make_app().test_client().get("/api/decision/adapters?adapter_id=gamma.fx")
    assert with_plugins.status_code == 200 and with_plugins.json["adapters"][0]["origin"] == "plugin"
    without = make_app({"GATE_ADAPTER_PLUGINS": "false"}).test_client().get("/api/decision/adapters?adapter_id=gamma.fx")
    assert without.status_code == 404


@pytest.mark.parametrize("name,value", [
    ("GATE_ADAPTER_POOL_SIZE", "-1"), ("GATE_ADAPTER_POOL_SIZE", "17"), ("GATE_ADAPTER_POOL_SIZE", "two"),
    ("GATE_ADAPTER_MEMORY_MB", "63"), ("GATE_ADAPTER_MEMORY_MB", "4097"), ("GATE_ADAPTER_PLUGINS", "maybe"),
])
def test_unusable_adapter_settings_refuse_to_start(tmp_path, name, value):
    with pytest.raises(SettingsError, match=name):
        Settings.from_env({"GATE_HOME": str(tmp_path), name: value})


def test_adapter_settings_defaults_and_values(tmp_path, make_app):
    defaults = Settings.from_env({"GATE_HOME": str(tmp_path)})
    assert (defaults.adapter_pool_size, defaults.adapter_memory_mb, defaults.adapter_plugins) == (2, 256, True)
    app = make_app({"GATE_ADAPTER_POOL_SIZE": "0", "GATE_ADAPTER_MEMORY_MB": "128"})
    pool = app.extensions["gate"].service.adapters.pool
    assert (pool.size, pool.memory_mb) == (0, 128)
    manifest = app.test_client().get("/api/decision/adapters?adapter_id=refund_window&version=1.0.0").json
    assert manifest["adapter"]["execution"]["memory_limit_mb"] == 128
