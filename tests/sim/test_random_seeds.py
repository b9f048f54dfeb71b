"""Random runs: every nemesis at once, many seeds, and proof that the checks can fail."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest

from nyala.consensus.core import Heartbeat, _replication
from nyala.consensus.core.log import RaftLog
from nyala.testing.sim import Cluster, SimOptions, replay_command, run_seed

CI_SEEDS = 300  # at least 300 seeds with every nemesis in CI
CHUNK = 25


@pytest.mark.timeout(240)
@pytest.mark.parametrize("first", range(0, CI_SEEDS, CHUNK), ids=lambda s: f"seeds{s}-{s + CHUNK - 1}")
def test_random_runs_with_every_nemesis_keep_raft_safe_live_and_linearizable(first: int) -> None:
    options = SimOptions()
    failures = []
    faults: Counter[str] = Counter()
    operations = 0
    for seed in range(first, first + CHUNK):
        result = run_seed(seed, options)
        operations += result.operations
        faults.update(k.split("-")[0] for k, v in result.actions.items() for _ in range(v))
        faults["tablet copies"] += result.tablet_copies
        faults["mid-write crashes"] += result.actions.get("crash-leader-mid-write", 0)
        if not result.ok:
            failures.append(f"seed {seed}: {result.violation}\n  replay: {replay_command(seed, options)}")
    assert not failures, "\n".join(failures)
    # The runs did attack the cluster and did serve clients (or the checks above prove little).
    for kind in ("partition", "crash", "pause", "churn", "disk", "tablet copies", "mid-write crashes"):
        assert faults[kind] > 0, f"no {kind} in seeds {first}..{first + CHUNK - 1}: {faults}"
    assert operations > 20 * CHUNK


def test_a_seed_replays_exactly_even_with_another_hash_seed() -> None:
    probe = (
        "from nyala.testing.sim import run_seed; r = run_seed(7); "
        "print(r.steps, r.messages, r.operations, r.unknown_operations, r.sim_ms, sorted(r.actions.items()))"
    )
    outputs = set()
    for hash_seed in ("1", "2"):
        env = {"PYTHONHASHSEED": hash_seed, "PATH": ""}
        run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
        assert run.returncode == 0, run.stderr
        outputs.add(run.stdout)
    assert len(outputs) == 1, outputs
    again = run_seed(7)
    assert f"{again.steps} {again.messages} {again.operations}" in outputs.pop()


def _first_violation(seeds: range) -> str | None:
    for seed in seeds:
        result = run_seed(seed)
        if not result.ok:
            return result.violation
    return None


def test_random_runs_mix_both_drivers_and_both_heartbeat_phases() -> None:
    nodes = Cluster(5, seed=3, driver="mixed", ticks="mixed").nodes.values()
    assert {n.pipelined for n in nodes} == {True, False}
    assert {n.aligned for n in nodes} == {True, False}
    assert SimOptions().driver == "mixed"
    assert SimOptions().ticks == "mixed"


def test_the_simulator_catches_votes_for_stale_logs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RaftLog, "is_up_to_date", lambda self, last_index, last_term: True)
    violation = _first_violation(range(15))
    assert violation is not None
    assert "leader completeness" in violation or "committed entry lost" in violation or "state machine" in violation


def test_the_simulator_catches_followers_committing_beyond_what_matches(monkeypatch: pytest.MonkeyPatch) -> None:
    def uncapped_heartbeats(self: _replication.ReplicationMixin) -> None:
        self._heartbeat_elapsed = 0
        self._read_round_due = False
        for peer_id in self._progress:
            self._send(Heartbeat(self.group_id, self.peer_id, peer_id, self._term, self._commit, self._read_seq))

    monkeypatch.setattr(_replication.ReplicationMixin, "_broadcast_heartbeats", uncapped_heartbeats)
    violation = _first_violation(range(40))
    assert violation is not None
    assert "state machine safety" in violation or "committed entry lost" in violation


def test_the_simulator_catches_a_leader_counting_its_own_unsynced_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    counted = _replication.ReplicationMixin._maybe_commit

    def counting_unsynced(self: _replication.ReplicationMixin) -> None:
        durable, self._durable_index = self._durable_index, self._log.last_index
        try:
            counted(self)
        finally:
            self._durable_index = durable

    monkeypatch.setattr(_replication.ReplicationMixin, "_maybe_commit", counting_unsynced)
    violation = _first_violation(range(10))
    assert violation is not None
    assert "commit without a durable majority" in violation
