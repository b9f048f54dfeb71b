from __future__ import annotations

import pytest

from nyala.common.config import describe
from nyala.consensus.core import RaftOptions
from nyala.errors import InvalidArgument


def test_kudu_defaults_in_ticks() -> None:
    timing = RaftOptions().timing()
    assert timing.heartbeat_ticks == 5  # 500 ms at 100 ms per tick
    assert timing.election_ticks == 15  # 3 missed heartbeats
    assert timing.max_backoff_delta_ticks == 200


def test_settings_carry_kudu_names_and_help() -> None:
    names = {s.name for s in describe(RaftOptions)}
    assert {"raft_heartbeat_interval_ms", "leader_failure_max_missed_heartbeat_periods"} <= names
    assert all(s.help.endswith(".") for s in describe(RaftOptions))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"raft_tick_interval_ms": 0},
        {"raft_heartbeat_interval_ms": 50},
        {"leader_failure_max_missed_heartbeat_periods": 0.5},
        {"consensus_max_batch_size_bytes": 0},
        {"raft_max_inflight_batches": 0},
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(InvalidArgument):
        RaftOptions(**kwargs)  # type: ignore[arg-type]
