"""Build a golden replay corpus from decision requests: `python -m gate_cli.golden_build [REQUESTS] [OUT]`.

Each request is decided by the real `DecisionService` on a throw-away SQLite ledger (fixed
clock, sequential ids, unsigned: the corpus must not depend on anyone's keys), and the stored
row and its bound snapshot are written out exactly as stored, with the issued record, as one
fixture. The committed corpus (`gate/schemas/golden-replay/`) is built from `gate/data/golden/requests.json`;
it is regenerated only on purpose, because its records are the contract new code must replay.
"""

from __future__ import annotations

import json
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gate import vocabulary as C
from gate.adapters import default_registry
from gate.clock import FixedClock
from gate.keys.config import SigningSetup
from gate.ledger import Ledger
from gate.protocol.canonical import sha256_bytes_hex
from gate.resources import data_path, schemas_path
from gate.services.decide import Caller
from gate.services.root import decision_services

REQUESTS = data_path("golden", "requests.json")
OUT = schemas_path("golden-replay")
SCOPE = "golden_corpus"
START = datetime(2026, 11, 1, tzinfo=UTC)


class SequentialIds:
    def __init__(self, prefix: str = "golden") -> None:
        self.prefix, self.n = prefix, 0

    def decision_id(self) -> str:
        self.n += 1
        return f"dec_{self.prefix}_{self.n:04d}"

    def request_id(self) -> str:
        return f"req_{self.prefix}_{self.n + 1:04d}"


def _dump(value: Any) -> bytes:
    return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def build_corpus(items: list[dict[str, Any]], out: Path, *, adapters: Any = None,
                 id_prefix: str = "golden", keep: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Decide every `{fixture_id, description, request}` and write `out/index.json` and
    `out/fixtures/<fixture_id>.json`. Returns the index. `keep`: index entries of fixtures
    already in `out` that stay as they are (listed first); `id_prefix` keeps decision ids of
    an appended batch apart from the existing ones."""
    out = Path(out)
    (out / "fixtures").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Ledger(f"sqlite:///{tmp}/golden.db")
        ledger.upgrade()
        # The composition root's decision service, with the corpus's fixed clock and ids, no keys,
        # no decide-time confidence and no releases (every request decides inline).
        service = decision_services(ledger, SigningSetup(keyring=None, hmac_key=None, required=False),
                                    clock=FixedClock(START, step_ms=1000), ids=SequentialIds(id_prefix),
                                    adapters=adapters, confidence=False, releases=False).decisions
        caller = Caller(key_id="key_golden", scope=SCOPE, plan="golden", rate_limit=0, monthly_cap=10**9)
        entries = list(keep or [])
        for item in items:
            record = service.decide(caller, item["request"]).record
            stored = ledger.decision(SCOPE, record["decision_id"])
            snapshot = ledger.rulebook_snapshot(SCOPE, rulebook_id=record["rulebook"]["id"],
                                                version=record["rulebook"]["version"])
            if stored is None or snapshot is None:  # the decide just above stored both
                raise RuntimeError(f"decision {record['decision_id']} or its rulebook snapshot "
                                   "was not stored")
            fixture = {
                "fixture_id": item["fixture_id"],
                "description": item["description"],
                "request_text": stored.request_json,
                "snapshot": {name: snapshot[name] for name in ("rulebook_id", "version", "rulebook_hash",
                                                               "evaluator_version", "schema_hash", "registered_at")}
                | {"body": json.loads(snapshot["body_json"]), "registry": json.loads(snapshot["registry_json"])},
                "expected_record": json.loads(stored.record_json),
            }
            raw = _dump(fixture)
            path = f"fixtures/{item['fixture_id']}.json"
            (out / path).write_bytes(raw)
            entries.append({"fixture_id": item["fixture_id"], "path": path, "sha256": sha256_bytes_hex(raw),
                            "rulebook_id": record["rulebook"]["id"], "version": record["rulebook"]["version"],
                            "binding_mode": record["runtime_binding"]["binding_mode"],
                            "expected": {name: record.get(name) for name in ("verdict", "application_verdict",
                                                                              "record_hash", "policy_bundle_hash")}})
        ledger.dispose()
    index = {"corpus_version": C.GOLDEN_REPLAY_CORPUS_VERSION, "replay_label": C.HISTORICAL_REPLAY_LABEL,
             "interface_version": C.INTERFACE_VERSION, "evaluator_version": C.EVALUATOR_VERSION,
             "description": "Stored material of real decisions (canonical request text, bound rulebook snapshot) "
                            "and the record each produced. Historical replay of every fixture must give back the "
                            "expected record's verdict, evidence, record_hash and policy_bundle_hash.",
             "fixtures": entries}
    (out / "index.json").write_bytes(_dump(index))
    return index


def main(argv: list[str] | None = None) -> int:
    """`[REQUESTS] [OUT]` builds a corpus; `--append REQUESTS` decides only those requests (with
    the shipped trusted adapters) and adds them to the committed corpus, leaving every existing
    fixture byte for byte as it is (a contract is extended, never rewritten)."""
    argv = sys.argv[1:] if argv is None else argv
    adapters = default_registry(pool_size=0, plugins=False)
    if argv[:1] == ["--append"]:
        requests, out = Path(argv[1]), OUT
        items = json.loads(requests.read_text(encoding="utf-8"))
        index = json.loads((out / "index.json").read_text(encoding="utf-8"))
        new_ids = {item["fixture_id"] for item in items}
        keep = [entry for entry in index["fixtures"] if entry["fixture_id"] not in new_ids]
        index = build_corpus(items, out, adapters=adapters, id_prefix=requests.stem.replace("-", "_"), keep=keep)
    else:
        requests = Path(argv[0]) if argv else REQUESTS
        out = Path(argv[1]) if len(argv) > 1 else OUT
        index = build_corpus(json.loads(requests.read_text(encoding="utf-8")), out, adapters=adapters)
    print(f"{len(index['fixtures'])} fixtures written to {out}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
