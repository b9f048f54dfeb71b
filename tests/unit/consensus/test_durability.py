"""The leader appends locally in parallel with replication (Raft thesis 10.2.1).

A Ready's ``messages_before_sync`` may leave before its entries and hard state are durable;
the leader's own entries count toward commit only once ``advance()`` reported them durable.
Here nothing is durable until a test calls ``advance``.
"""

from __future__ import annotations

import pytest

from nyala.consensus.core import (
    AppendRequest,
    AppendResponse,
    EntryType,
    HardState,
    Heartbeat,
    HeartbeatResponse,
    LogEntry,
    Member,
    MemberType,
    Message,
    RaftConfig,
    RaftCore,
    RaftOptions,
    VoteRequest,
    VoteResponse,
)

from .helpers import GROUP, Net, make_core, persisted

ABC = RaftConfig.of_voters(["a", "b", "c"])
NO_PRE_VOTE = RaftOptions(raft_enable_pre_election=False)


def entry(index: int, term: int) -> LogEntry:
    return LogEntry(term, index, EntryType.WRITE, f"e{index}@{term}".encode())


def synced_answers(core: RaftCore, message: Message) -> tuple[Message, ...]:
    """Step ``message`` into a follower, sync its Ready at once and return what it sends."""
    core.step(message)
    rd = core.ready()
    assert rd.before_sync_count == 0, "a follower sends nothing before its sync"
    core.advance(rd)
    return rd.messages_after_sync


def to(peer_id: str, messages: tuple[Message, ...]) -> AppendRequest:
    return next(m for m in messages if isinstance(m, AppendRequest) and m.recipient == peer_id)


def test_a_leaders_unsynced_entry_is_not_counted_toward_commit() -> None:
    net = Net(make_core(p) for p in "abc")
    a = net.elect("a")
    index = a.propose(b"x").index
    rd = a.ready()  # the leader's write of x is in progress: not advanced
    (ack,) = synced_answers(net.cores["b"], to("b", rd.messages_before_sync))
    a.step(ack)
    assert a.durable_index == index - 1
    assert a.commit_index == index - 1, "b alone is no majority while a's own copy is not durable"
    a.advance(rd)
    assert a.commit_index == index


def test_followers_alone_commit_an_entry_the_leader_has_not_synced() -> None:
    net = Net(make_core(p) for p in "abc")
    a = net.elect("a")
    index = a.propose(b"x").index
    rd = a.ready()
    for peer_id in "bc":
        (ack,) = synced_answers(net.cores[peer_id], to(peer_id, rd.messages_before_sync))
        a.step(ack)
    assert a.commit_index == index, "a majority of durable copies, none of them the leader's"
    assert a.durable_index < index
    later = a.ready()
    # The later Ready hands x out as committed (the driver applies it once this Ready, hence
    # the earlier one holding x, is durable).  No entry follows x, so the followers learn the
    # commit index at the leader's next tick rather than from an AppendEntries of its own.
    assert [e.index for e in later.committed_entries] == [index]
    assert not [m for m in later.messages_before_sync if isinstance(m, AppendRequest)]
    with pytest.raises(Exception, match="order"):
        a.advance(later)
    a.advance(rd)
    a.advance(later)
    assert a.applied_index == index
    a.tick()
    notice = a.ready()
    assert {m.commit_index for m in notice.messages_before_sync if isinstance(m, AppendRequest)} == {index}


def test_single_voter_config_commits_only_after_the_local_fsync() -> None:
    a = make_core("a", voters=["a"])
    a.campaign()
    a.advance(a.ready())
    a.advance(a.ready())
    index = a.propose(b"x").index
    rd = a.ready()
    assert a.commit_index == index - 1
    assert not rd.committed_entries
    a.advance(rd)
    assert a.commit_index == index
    assert [e.index for e in a.ready().committed_entries] == [index]


def test_only_a_leaders_appends_and_heartbeats_leave_before_the_sync() -> None:
    net = Net(make_core(p) for p in "abc")
    a = net.elect("a")
    a.propose(b"x")
    for _ in range(5):  # one heartbeat period
        a.tick()
    rd = a.ready()
    assert {type(m) for m in rd.messages_before_sync} == {AppendRequest, Heartbeat}
    assert rd.messages_after_sync == ()
    for peer_id in "bc":
        follower = net.cores[peer_id]
        for m in rd.messages_before_sync:
            if m.recipient == peer_id:
                follower.step(m)
        answers = follower.ready()
        assert answers.before_sync_count == 0
        assert {type(m) for m in answers.messages_after_sync} == {AppendResponse, HeartbeatResponse}


def test_vote_requests_and_votes_wait_for_the_sync() -> None:
    b = make_core("b", options=NO_PRE_VOTE)
    c = make_core("c", options=NO_PRE_VOTE)
    b.campaign()
    rd = b.ready()
    assert rd.hard_state == HardState(1, "b", 0)
    assert rd.before_sync_count == 0
    request = next(m for m in rd.messages_after_sync if isinstance(m, VoteRequest) and m.recipient == "c")
    c.step(request)
    answer = c.ready()
    assert answer.hard_state == HardState(1, "b", 0)
    assert answer.before_sync_count == 0
    assert [type(m) for m in answer.messages_after_sync] == [VoteResponse]


def test_a_new_leader_holds_its_appends_until_its_term_is_durable() -> None:
    # One voter wins at once, in the Ready that raises its term.  Were the append to the
    # learner sent before that term is durable, a crash could let this replica lead the same
    # term again and send the learner a different entry at the same index.
    config = RaftConfig((Member("a", MemberType.VOTER), Member("l", MemberType.NON_VOTER)))
    a = make_core("a", config=config)
    learner = make_core("l", config=config)
    a.campaign()
    first = a.ready()
    assert first.hard_state is not None
    assert first.hard_state.term == 1
    assert first.before_sync_count == 0
    (probe,) = first.messages_after_sync
    assert isinstance(probe, AppendRequest)
    a.advance(first)
    for answer in synced_answers(learner, probe):
        a.step(answer)
    a.advance(a.ready())
    a.propose(b"x")
    rd = a.ready()
    assert [type(m) for m in rd.messages_before_sync] == [AppendRequest], "now the term is durable"


def test_the_durable_index_never_covers_entries_a_new_leader_replaced() -> None:
    b = make_core("b", state=persisted(ABC, [(1, 1)], term=1))
    b.step(AppendRequest(GROUP, "a", "b", 1, 1, 1, (entry(2, 1), entry(3, 1)), 0))
    first = b.ready()
    b.step(AppendRequest(GROUP, "c", "b", 2, 1, 1, (entry(2, 2),), 0))  # replaces 2..3
    second = b.ready()
    assert b.durable_index == 1
    b.advance(first)
    assert b.durable_index == 1, "the disk now holds 2@1 and 3@1, which the log no longer has"
    b.advance(second)
    assert b.durable_index == 2


def test_a_restarted_replica_counts_its_whole_persisted_log_as_durable() -> None:
    a = make_core("a", state=persisted(ABC, [(1, 1), (2, 1), (3, 1)], term=1))
    assert a.durable_index == 3


def test_a_persisted_commit_index_never_covers_entries_not_yet_durable() -> None:
    # b holds 2@1 and 3@1, which the leader of term 2 replaces while committing through 3.
    b = make_core("b", state=persisted(ABC, [(1, 1), (2, 1), (3, 1)], term=1, commit=1))
    b.step(AppendRequest(GROUP, "a", "b", 2, 1, 1, (entry(2, 2), entry(3, 2)), 3))
    rd = b.ready()
    assert b.commit_index == 3
    assert rd.hard_state == HardState(2, "", 1), "commit 3 would cover entries only this Ready writes"
    # A torn write keeps that hard state but not the entries: the restarted replica must not
    # take the stale 2@1 and 3@1 still on its disk for committed entries.
    restarted = make_core("b", state=persisted(ABC, [(1, 1), (2, 1), (3, 1)], term=2, commit=1))
    assert restarted.commit_index == 1
    assert [e.index for e in restarted.ready().committed_entries] == [1]
    b.advance(rd)
    later = b.ready()
    assert later.hard_state == HardState(2, "", 3)
    assert not later.must_sync
