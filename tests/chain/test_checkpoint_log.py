"""`gate.chain.checkpoint_log`: the append-only witness log refuses every checkpoint that does not
extend the newest one it holds (issue 18 item 4 b)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing

import pytest

from gate.chain.checkpoint_log import (
    CheckpointLogError,
    HeldCheckpoints,
    append_checkpoint,
    extension_failures,
    latest_checkpoint,
    read_checkpoint_log,
)
from gate.chain.merkle import consistency_proof, mth

LEAVES = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(12)]
OTHER = [hashlib.sha256(f"other-{i}".encode()).hexdigest() for i in range(12)]


def checkpoint(size, leaves=LEAVES, chain_id="chain_a"):
    return {"chain_id": chain_id, "tree_size": size, "root_hash": mth(leaves[:size])}


def test_a_log_grows_only_by_extensions(tmp_path):
    log = tmp_path / "log.jsonl"
    assert read_checkpoint_log(log) == [] and latest_checkpoint([], "chain_a") is None
    assert append_checkpoint(log, checkpoint(3), None) is True
    assert append_checkpoint(log, checkpoint(3), None) is False  # already held
    assert append_checkpoint(log, checkpoint(7), consistency_proof(3, 7, LEAVES)) is True
    assert append_checkpoint(log, checkpoint(2, chain_id="chain_b"), None) is True  # chains are apart
    assert [(c["chain_id"], c["tree_size"]) for c in read_checkpoint_log(log)] == [
        ("chain_a", 3), ("chain_a", 7), ("chain_b", 2)]
    assert latest_checkpoint(read_checkpoint_log(log), "chain_a")["tree_size"] == 7


@pytest.mark.parametrize("candidate, proof, named", [
    (checkpoint(5), None, "checkpoint_log.size"),                                  # cut back
    (checkpoint(7, OTHER), [], "checkpoint_log.consistency"),                      # same size, other tree
    (checkpoint(9), None, "checkpoint_log.consistency"),                           # longer, no proof
    (checkpoint(9, LEAVES[:5] + OTHER[5:]), consistency_proof(7, 9, LEAVES[:5] + OTHER[5:]),
     "checkpoint_log.consistency"),                                                # regrown fork
    (checkpoint(9), consistency_proof(6, 9, LEAVES), "checkpoint_log.consistency"),  # proof from another size
    (checkpoint(9), ["zz"], "checkpoint_log.consistency"),                         # garbage proof
])
def test_anything_else_is_refused_and_nothing_is_written(tmp_path, candidate, proof, named):
    log = tmp_path / "log.jsonl"
    append_checkpoint(log, checkpoint(7), None)
    before = log.read_bytes()
    with pytest.raises(CheckpointLogError) as refused:
        append_checkpoint(log, candidate, proof)
    assert refused.value.details["failed_checks"] == [named]
    assert log.read_bytes() == before
    assert extension_failures(checkpoint(7), candidate["tree_size"], candidate["root_hash"], proof) == [named]


def test_older_checkpoints_are_skipped_on_request(tmp_path):
    log = tmp_path / "log.jsonl"
    append_checkpoint(log, checkpoint(7), None)
    assert append_checkpoint(log, checkpoint(5), None, skip_older=True) is False
    assert len(read_checkpoint_log(log)) == 1


@pytest.mark.parametrize("line", ["{", "[1]", json.dumps({"chain_id": "c", "tree_size": 0, "root_hash": "0" * 64}),
                                  json.dumps({"chain_id": "c", "tree_size": 1, "root_hash": "A" * 64}),
                                  json.dumps({"chain_id": "c", "tree_size": True, "root_hash": "0" * 64}),
                                  "x" * 70_000])
def test_a_log_with_a_line_that_is_not_a_checkpoint_is_refused(tmp_path, line):
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps(checkpoint(2)) + "\n" + line + "\n")
    with pytest.raises(CheckpointLogError, match="line 2"):
        read_checkpoint_log(log)
    with pytest.raises(CheckpointLogError, match="not a checkpoint"):
        append_checkpoint(log, checkpoint(3), consistency_proof(2, 3, LEAVES))
    assert log.read_text().count("\n") == 2  # nothing appended
    with pytest.raises(CheckpointLogError, match="not a checkpoint"):
        HeldCheckpoints(log).latest("chain_a")


def test_not_a_checkpoint_is_never_appended(tmp_path):
    for bad in ({}, {"chain_id": "c", "tree_size": "3", "root_hash": "0" * 64}, checkpoint(0)):
        with pytest.raises(CheckpointLogError):
            append_checkpoint(tmp_path / "log.jsonl", bad, None)
    assert not (tmp_path / "log.jsonl").exists()


def _grow(path, start, stop):
    for size in range(start, stop):
        held = latest_checkpoint(read_checkpoint_log(path), "chain_a")
        proof = consistency_proof(held["tree_size"], size, LEAVES) if held and held["tree_size"] <= size else None
        # Another writer may append a newer one between the read and the lock: refused whole.
        with contextlib.suppress(CheckpointLogError):
            append_checkpoint(path, checkpoint(size), proof, skip_older=True)


def test_concurrent_writers_leave_a_log_of_whole_consistent_lines(tmp_path):
    log = tmp_path / "log.jsonl"
    append_checkpoint(log, checkpoint(1), None)
    workers = [multiprocessing.Process(target=_grow, args=(log, 2, 12)) for _ in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    entries = read_checkpoint_log(log)  # every line parses: no interleaved writes
    sizes = [entry["tree_size"] for entry in entries]
    assert sizes == sorted(set(sizes)) and sizes[-1] == 11


def test_held_checkpoints_follow_appends_and_rewrites(tmp_path):
    log = tmp_path / "log.jsonl"
    held = HeldCheckpoints(log)
    assert held.latest("chain_a") is None
    append_checkpoint(log, checkpoint(3), None)
    append_checkpoint(log, checkpoint(1, chain_id="chain_b"), None)
    assert held.latest("chain_a")["tree_size"] == 3 and held.latest("chain_b")["tree_size"] == 1
    append_checkpoint(log, checkpoint(8), consistency_proof(3, 8, LEAVES))
    assert held.latest("chain_a")["tree_size"] == 8
    with log.open("a") as handle:
        handle.write(json.dumps(checkpoint(9))[:20])  # a line still being written is not read yet
    assert held.latest("chain_a")["tree_size"] == 8
    log.write_text(json.dumps(checkpoint(2)) + "\n")  # replaced: read again whole
    assert held.latest("chain_a")["tree_size"] == 2 and held.latest("chain_b") is None
    log.unlink()
    assert held.latest("chain_a") is None


def test_an_append_reads_back_only_to_the_chains_newest_checkpoint(tmp_path):
    log = tmp_path / "log.jsonl"
    lines = [json.dumps(checkpoint(size)) for size in range(1, 4)]
    other = [json.dumps(checkpoint(1, chain_id=f"chain_{i}")) for i in range(3000)]  # > one 64 KiB block
    log.write_text("{broken\n" + "\n".join(lines + other) + "\n")
    assert append_checkpoint(log, checkpoint(5), consistency_proof(3, 5, LEAVES)) is True
    with pytest.raises(CheckpointLogError):
        append_checkpoint(log, checkpoint(1, chain_id="chain_new"), None)  # scanning to the start meets the bad line
