"""Log replication and commitment (Raft paper 5.3 and 5.4), and the Ready contract."""

from __future__ import annotations

import pytest

from nyala.consensus.core import (
    ENTRY_OVERHEAD_BYTES,
    AppendRequest,
    AppendResponse,
    EntryType,
    HardState,
    Heartbeat,
    LogEntry,
    Member,
    MemberType,
    OpId,
    PeerHealth,
    PersistentState,
    RaftConfig,
    RaftOptions,
    Role,
)
from nyala.consensus.core.progress import Progress, ProgressState
from nyala.errors import IllegalState, InvalidArgument, NotTheLeader, ServiceUnavailable

from .helpers import GROUP, Net, make_core, persisted

ABC = RaftConfig.of_voters(["a", "b", "c"])


def entry(index: int, term: int, payload: bytes = b"") -> LogEntry:
    return LogEntry(term, index, EntryType.WRITE, payload or f"e{index}@{term}".encode())


def test_committed_entries_reach_every_replica_in_order() -> None:
    net = Net(make_core(p) for p in "abc")
    leader = net.elect("a")
    ids = [leader.propose(f"w{i}".encode()) for i in range(5)]
    net.stabilize()
    net.notify_commit("a")
    assert [i.index for i in ids] == [2, 3, 4, 5, 6]
    for peer_id in "abc":
        payloads = [e.payload for e in net.applied[peer_id] if e.type is EntryType.WRITE]
        assert payloads == [f"w{i}".encode() for i in range(5)], peer_id


def test_a_follower_rejects_entries_whose_predecessor_it_lacks_and_hints_where_to_resume() -> None:
    b = make_core("b", state=persisted(ABC, [(1, 1), (2, 1), (3, 1), (4, 2), (5, 2)], term=2))
    b.step(AppendRequest(GROUP, "a", "b", 4, 7, 3, (entry(8, 4),), 0))
    response = b.ready().messages[0]
    assert isinstance(response, AppendResponse)
    assert not response.success
    assert (response.index, response.hint_index, response.hint_term) == (7, 5, 2)


def test_fast_backtracking_skips_a_whole_conflicting_term_in_one_round_trip() -> None:
    # Follower b has a long tail of term 2 the term-3 leader never had.
    leader_log = [(1, 1), (2, 1), (3, 3), (4, 3)]
    b_log = [(1, 1), (2, 1)] + [(i, 2) for i in range(3, 40)]
    a = make_core("a", state=persisted(ABC, leader_log, term=3))
    b = make_core("b", state=persisted(ABC, b_log, term=2))
    c = make_core("c", state=persisted(ABC, leader_log, term=3))
    net = Net([a, b, c])
    net.elect("a")
    rejections = [m for rd in net.readies["b"] for m in rd.messages if isinstance(m, AppendResponse) and not m.success]
    assert len(rejections) <= 2, "one or two round trips, not one per entry"
    assert [b.term_at(i) for i in range(1, 6)] == [1, 1, 3, 3, 4]
    assert b.last_index == a.last_index


def test_conflicting_uncommitted_entries_are_replaced() -> None:
    b = make_core("b", state=persisted(ABC, [(1, 1), (2, 2), (3, 2)], term=2, commit=1))
    b.step(AppendRequest(GROUP, "a", "b", 3, 1, 1, (entry(2, 3),), 1))
    rd = b.ready()
    assert [(e.index, e.term) for e in rd.entries] == [(2, 3)]  # the driver overwrites from index 2
    assert b.last_index == 2
    assert b.term_at(2) == 3


def test_a_leader_never_overwrites_committed_entries() -> None:
    b = make_core("b", state=persisted(ABC, [(1, 1), (2, 2)], term=2, commit=2))
    b.step(AppendRequest(GROUP, "a", "b", 3, 2, 2, (entry(3, 3),), 2))
    assert b.last_index == 3
    # A request below the commit index is answered with the commit index, never applied.
    b.step(AppendRequest(GROUP, "a", "b", 3, 1, 1, (entry(2, 3),), 2))
    assert b.term_at(2) == 2
    responses = [m for m in b.ready().messages if isinstance(m, AppendResponse)]
    assert responses[-1].success
    assert responses[-1].index == 2


def test_a_follower_commits_no_further_than_the_leader_proved_it_matches() -> None:
    b = make_core("b", state=persisted(ABC, [(1, 1), (2, 1), (3, 1)], term=1))
    b.step(AppendRequest(GROUP, "a", "b", 1, 1, 1, (), 3))  # proves only index 1 matches
    assert b.commit_index == 1


def test_only_entries_of_the_current_term_are_committed_by_counting() -> None:
    # Raft section 5.4.2 / Figure 8: entry 2 of term 2 sits on a majority but must not commit
    # until an entry of the leader's own term does.
    c = make_core("c", state=persisted(ABC, [(1, 1), (2, 2)], term=2))
    a = make_core("a", state=persisted(ABC, [(1, 1)], term=2))
    b = make_core("b", state=persisted(ABC, [(1, 1)], term=2))
    net = Net([a, b, c])
    c.campaign()
    while not c.is_leader:
        assert net.deliver(keep=lambda m: not isinstance(m, AppendRequest))
    net.outbox = []
    assert c.term == 3
    assert c.last_index == 3
    a.step(AppendRequest(GROUP, "c", "a", 3, 1, 1, (c.entry(2),), 0))
    net.deliver(keep=lambda m: isinstance(m, AppendResponse))
    assert c.commit_index == 0, "entry 2@2 is on a majority but belongs to an older term"
    net.stabilize()
    assert c.commit_index == 3
    net.notify_commit("c")
    assert a.commit_index == 3


def test_acknowledgements_of_non_voters_never_count() -> None:
    config = RaftConfig(
        (
            Member("a", MemberType.VOTER),
            Member("b", MemberType.VOTER),
            Member("c", MemberType.VOTER),
            Member("l", MemberType.NON_VOTER),
        )
    )
    cores = [make_core(p, config=config) for p in ("a", "b", "c", "l")]
    net = Net(cores)
    leader = net.elect("a")
    net.cut = {"b", "c"}
    index = leader.propose(b"w").index
    net.stabilize()
    assert cores[3].last_index == index, "the learner has the entry"
    assert leader.commit_index < index, "but its acknowledgement alone must not commit it"
    net.cut = set()
    for _ in range(10):  # the lost batches are sent again after a heartbeat period
        leader.tick()
        net.deliver()
    assert leader.commit_index == index


def test_batches_are_limited_in_bytes_and_in_flight_batches_are_bounded() -> None:
    options = RaftOptions(consensus_max_batch_size_bytes=2 * (100 + ENTRY_OVERHEAD_BYTES), raft_max_inflight_batches=3)
    cores = [make_core(p, options=options) for p in "abc"]
    net = Net(cores)
    leader = net.elect("a")
    for i in range(20):
        leader.propose(bytes([i]) * 100)
    appends = [m for m in net.sent(AppendRequest) if m.recipient == "b"]
    assert [len(m.entries) for m in appends] == [2, 2, 2], "three batches of two entries, then wait"
    net.stabilize()
    assert cores[1].last_index == leader.last_index == 21


def test_lost_acknowledgements_fall_back_to_probing() -> None:
    cores = [make_core(p) for p in "abc"]
    net = Net(cores)
    leader = net.elect("a")
    leader.propose(b"w")
    net.deliver(keep=lambda m: not isinstance(m, AppendResponse))  # every answer is lost
    assert leader.commit_index == 1
    for _ in range(16):
        leader.tick()
    net.stabilize()
    assert leader.commit_index == 2
    net.notify_commit("a")
    assert cores[1].commit_index == 2


def test_a_proposal_lost_to_a_new_leader_comes_back_with_another_term() -> None:
    net = Net(make_core(p) for p in "abc")
    a = net.elect("a")
    lost = a.propose(b"only-on-a")
    net.outbox = []
    net.collect()
    net.outbox = []  # a's appends never leave
    net.cut = {"a"}
    for _ in range(60):
        net.tick("b")
        net.tick("c")
        net.deliver()
    assert net.cores["b"].is_leader or net.cores["c"].is_leader
    net.cut = set()
    for _ in range(10):
        for peer_id in "abc":
            net.tick(peer_id)
        net.deliver()
    assert a.role is Role.FOLLOWER
    assert a.term_at(lost.index) != lost.term


def test_heartbeats_carry_a_commit_index_capped_at_the_followers_match() -> None:
    net = Net(make_core(p) for p in "abc")
    leader = net.elect("a")
    net.cut = {"c"}
    leader.propose(b"w")
    net.stabilize()
    net.cut = set()
    for _ in range(5):
        leader.tick()
    beats = {m.recipient: m for m in net.sent(Heartbeat)}
    assert beats["b"].commit_index == 2
    assert beats["c"].commit_index == 1


def test_readies_may_be_pipelined_but_are_advanced_in_the_order_they_were_taken() -> None:
    b = make_core("b", state=persisted(ABC, [(1, 1)], term=1))
    b.step(AppendRequest(GROUP, "a", "b", 1, 1, 1, (entry(2, 1),), 0))
    first = b.ready()
    b.step(AppendRequest(GROUP, "a", "b", 1, 2, 1, (entry(3, 1),), 0))
    second = b.ready()  # before the first is durable: allowed
    assert [e.index for e in first.entries] == [2]
    assert [e.index for e in second.entries] == [3]
    with pytest.raises(IllegalState, match="order"):
        b.advance(second)
    b.advance(first)
    b.advance(second)
    with pytest.raises(IllegalState, match="without an outstanding"):
        b.advance(second)
    assert b.durable_index == 3


def test_persist_then_apply_contract_fields() -> None:
    a = make_core("a", voters=["a"])
    a.campaign()
    rd = a.ready()
    assert rd.hard_state == HardState(1, "a", 0)
    assert [e.type for e in rd.entries] == [EntryType.NO_OP]
    assert rd.committed_entries == (), "a single voter commits only after its own sync"
    assert rd.must_sync
    assert rd.soft_state is not None
    assert rd.soft_state.role is Role.LEADER
    a.advance(rd)
    rd = a.ready()
    assert rd.hard_state == HardState(1, "a", 1)
    assert [e.type for e in rd.committed_entries] == [EntryType.NO_OP]
    assert not rd.must_sync, "a new commit index alone needs no sync"
    a.advance(rd)
    assert a.applied_index == 1
    assert not a.has_ready()


def test_proposals_are_bytes_within_the_batch_size() -> None:
    a = make_core("a", voters=["a"], options=RaftOptions(consensus_max_batch_size_bytes=10))
    a.campaign()
    with pytest.raises(InvalidArgument):
        a.propose("text")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        a.propose(b"x" * 11)
    assert a.last_index == 1


def test_a_restarted_replica_reloads_its_log_term_vote_and_committed_config() -> None:
    net = Net(make_core(p) for p in "abc")
    leader = net.elect("a")
    for i in range(3):
        leader.propose(bytes([i]))
    net.stabilize()
    net.notify_commit("a")
    b = net.cores["b"]
    hard = HardState(b.term, b.vote, b.commit_index)
    log = tuple(b.entry(i) for i in range(1, b.last_index + 1))
    restarted = make_core("b", state=PersistentState(hard, b.committed_config, OpId(0, 0), log, 2))
    assert (restarted.term, restarted.vote, restarted.last_index) == (b.term, b.vote, 4)
    rd = restarted.ready()
    assert [e.index for e in rd.committed_entries] == [3, 4], "entries after the applied index are re-applied"


def test_a_torn_write_that_kept_newer_entries_than_the_term_is_repaired_on_restart() -> None:
    state = persisted(ABC, [(1, 1), (2, 3)], term=2, vote="c", commit=9)
    core = make_core("b", state=state)
    assert (core.term, core.vote) == (3, "")  # the vote belonged to term 2
    assert core.commit_index == 2  # commit is only a hint: clamped to the log


def test_a_corrupt_persisted_log_is_refused() -> None:
    bad = PersistentState(HardState(1), ABC, OpId(0, 0), (entry(1, 1), entry(3, 1)), 0)
    with pytest.raises(Exception, match="jumps"):
        make_core("b", state=bad)


def test_compaction_turns_a_lagging_follower_into_a_tablet_copy_target() -> None:
    net = Net(make_core(p) for p in "abc")
    leader = net.elect("a")
    net.cut = {"c"}
    for i in range(10):
        leader.propose(bytes([i]))
    net.stabilize()
    leader.compact(8)
    with pytest.raises(InvalidArgument):
        leader.compact(leader.applied_index + 1)
    net.cut = set()
    for _ in range(20):
        leader.tick()
        net.deliver()
    targets = [t for rd in net.readies["a"] for t in rd.tablet_copy_targets]
    assert targets == ["c"]
    # The driver copies the tablet: c restarts from a's state at index 8.
    c = make_core("c", state=PersistentState(HardState(leader.term), leader.committed_config, OpId(1, 8), (), 8))
    net.cores["c"] = c
    for _ in range(10):
        leader.tick()
        net.deliver()
    net.stabilize()
    assert c.last_index == leader.last_index
    assert c.commit_index == leader.commit_index


def test_a_leader_reports_a_follower_silent_for_the_failure_timeout_as_failed_until_it_answers() -> None:
    options = RaftOptions(raft_tick_interval_ms=100, follower_unavailable_considered_failed_sec=2.0)
    net = Net(make_core(p, options=options) for p in "abc")
    leader = net.elect("a")
    net.stabilize()

    def health() -> dict[str, PeerHealth]:
        return {p.peer_id: p.health for p in leader.peer_progress()}

    assert health() == {"b": PeerHealth.HEALTHY, "c": PeerHealth.HEALTHY}
    leader.take_health_changed()
    net.cut = {"c"}
    for _ in range(19):  # 1.9 s: not yet (probing for its log's end, it is UNKNOWN meanwhile)
        leader.tick()
        net.deliver()
    assert health()["b"] is PeerHealth.HEALTHY
    assert health()["c"] is not PeerHealth.FAILED
    assert not leader.take_health_changed()
    leader.tick()
    net.deliver()
    assert health() == {"b": PeerHealth.HEALTHY, "c": PeerHealth.FAILED}
    assert leader.take_health_changed()  # the driver reports it at once
    assert not leader.take_health_changed()
    net.cut = set()
    for _ in range(10):  # its next heartbeat answer clears it
        leader.tick()
        net.deliver()
    assert health() == {"b": PeerHealth.HEALTHY, "c": PeerHealth.HEALTHY}
    assert leader.take_health_changed()


def test_a_follower_behind_the_compacted_log_is_unrecoverable_once_copies_have_not_helped_for_the_timeout() -> None:
    options = RaftOptions(raft_tick_interval_ms=100, follower_unavailable_considered_failed_sec=2.0)
    net = Net(make_core(p, options=options) for p in "abc")
    leader = net.elect("a")
    net.cut = {"c"}
    for i in range(10):
        leader.propose(bytes([i]))
    net.stabilize()
    leader.compact(8)
    net.cut = set()
    for _ in range(5):
        leader.tick()
        net.deliver()
    assert {p.peer_id: p.health for p in leader.peer_progress()}["c"] is PeerHealth.UNKNOWN  # being copied
    for _ in range(20):
        leader.tick()
        net.deliver()
    assert {p.peer_id: p.health for p in leader.peer_progress()}["c"] is PeerHealth.FAILED_UNRECOVERABLE


def test_a_peer_whose_server_answers_without_the_group_is_not_failed() -> None:
    options = RaftOptions(raft_tick_interval_ms=100, follower_unavailable_considered_failed_sec=1.0)
    net = Net(make_core(p, options=options) for p in "abc")
    leader = net.elect("a")
    net.stabilize()
    net.cut = {"c"}
    for _ in range(30):
        leader.tick()
        net.deliver()
        leader.note_contact("c")  # its server says "no such tablet": a copy is on its way
    assert {p.peer_id: p.health for p in leader.peer_progress()}["c"] is not PeerHealth.FAILED


def test_answers_count_only_up_while_a_cut_off_peer_stays_silent() -> None:
    """``PeerProgress.answers`` tells an answer heard after a moment from one before it, which
    a low ``silent_ticks`` cannot (RemoveMaster relies on it)."""
    net = Net(make_core(p) for p in "abc")
    leader = net.elect("a")
    net.stabilize()

    def answers() -> dict[str, int]:
        return {p.peer_id: p.answers for p in leader.peer_progress()}

    before = answers()
    assert before["b"] > 0
    assert before["c"] > 0
    net.cut = {"c"}
    for _ in range(10):  # two heartbeat periods
        leader.tick()
        net.deliver()
    after = answers()
    assert after["b"] > before["b"], "a live peer answers the heartbeats"
    assert after["c"] == before["c"], "a cut-off peer adds nothing"


def test_read_index_waits_for_a_heartbeat_round_from_a_majority() -> None:
    net = Net(make_core(p) for p in "abc")
    leader = net.elect("a")
    leader.propose(b"w")
    net.stabilize()
    leader.read_index(7)
    rd_states = []
    net.collect()
    assert not any(rd.read_states for rd in net.readies["a"])
    net.stabilize()
    rd_states = [s for rd in net.readies["a"] for s in rd.read_states]
    assert [(s.request_id, s.index) for s in rd_states] == [(7, 2)]


def test_read_index_is_refused_off_the_leader_and_dropped_when_leadership_ends() -> None:
    net = Net(make_core(p) for p in "abc")
    leader = net.elect("a")
    with pytest.raises(NotTheLeader):
        net.cores["b"].read_index(1)
    leader.read_index(9)
    leader.step_down()
    net.collect()
    assert [r for rd in net.readies["a"] for r in rd.dropped_reads] == [9]


def test_read_index_needs_a_running_leader() -> None:
    net = Net(make_core(p) for p in "abc")
    a = net.cores["a"]
    a.campaign()
    while not a.is_leader:
        assert net.deliver()
    with pytest.raises(ServiceUnavailable):
        a.read_index(1)


def test_a_commit_notice_waits_for_the_tick_and_then_for_room_in_the_followers_window() -> None:
    options = RaftOptions(raft_max_inflight_batches=1)
    net = Net(make_core(p, options=options) for p in "abc")
    a = net.elect("a")
    net.notify_commit("a")
    x = a.propose(b"x").index
    net.collect()
    for m in net.outbox:  # b and c store x ...
        net.cores[m.recipient].step(m)
    net.outbox = []
    net.collect()
    held = [m for m in net.outbox if m.sender == "c"]  # ... but only b's answer reaches a
    net.outbox = [m for m in net.outbox if m.sender != "c"]
    net.deliver()
    assert a.commit_index == x
    assert not net.sent(AppendRequest), "no AppendEntries with only the commit index before the tick"
    net.tick("a")
    notices = [(m.recipient, m.commit_index) for m in net.sent(AppendRequest)]
    assert notices == [("b", x)], "c's window is full: its notice waits"
    net.outbox = []
    for m in held:
        a.step(m)
    assert [(m.recipient, m.commit_index) for m in net.sent(AppendRequest)] == [("c", x)], "room: sent, no tick needed"


def test_a_heartbeat_carrying_the_commit_index_is_the_notice() -> None:
    options = RaftOptions(raft_heartbeat_interval_ms=100, raft_tick_interval_ms=100)
    net = Net(make_core(p, options=options) for p in "abc")
    a = net.elect("a")
    assert net.cores["b"].commit_index < a.commit_index, "b has not been told yet"
    net.outbox = []
    net.tick("a")  # every tick is a heartbeat tick here
    assert net.sent(Heartbeat)
    assert not net.sent(AppendRequest), "the heartbeats carry the commit index: no AppendEntries besides"


def test_a_probe_refused_at_the_match_index_forgets_what_the_peer_acknowledged() -> None:
    progress = Progress(1)
    progress.acknowledge(11)
    progress.become_replicate()
    assert not progress.reject(11, 6)  # in REPLICATE, a refusal at or below match is stale
    assert progress.match == 11
    progress.become_probe()
    assert progress.next == 12
    assert not progress.reject(9, 6)  # not the probe in flight: stale
    # The probe at match itself refused: the peer's log was replaced by an older one.
    assert progress.reject(11, 6)
    assert (progress.match, progress.next, progress.state) == (0, 7, ProgressState.PROBE)
    progress.acknowledge(6)
    assert progress.match == 6
