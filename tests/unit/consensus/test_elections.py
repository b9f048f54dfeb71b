"""Elections, named after the claims they check (Raft paper section 5.2, seed 003, Kudu)."""

from __future__ import annotations

import pytest

from nyala.consensus.core import (
    AppendRequest,
    AppendResponse,
    Heartbeat,
    LeaderState,
    Member,
    MemberType,
    RaftConfig,
    RaftCore,
    RaftOptions,
    Ready,
    Role,
    VoteRequest,
    VoteResponse,
)
from nyala.consensus.core.raft import election_rank
from nyala.errors import InvalidArgument, NotTheLeader, ServiceUnavailable

from .helpers import GROUP, Net, make_core, persisted

ABC = RaftConfig.of_voters(["a", "b", "c"])


def vote_of(rd: Ready) -> VoteResponse:
    """The single vote answer in a Ready."""
    (response,) = rd.messages
    assert isinstance(response, VoteResponse)
    return response


def vote_request(to: str, term: int, *, pre: bool = False, last: tuple[int, int] = (0, 0), ignore: bool = False):
    return VoteRequest(GROUP, "x", to, term, last[0], last[1], pre, ignore)


def test_a_follower_that_hears_nothing_starts_a_pre_election_without_raising_its_term() -> None:
    core = make_core("a")
    for _ in range(40):
        core.tick()
    assert core.role is Role.CANDIDATE
    assert core.term == 0
    assert core.vote == ""
    rd = core.ready()
    requests = [m for m in rd.messages if isinstance(m, VoteRequest)]
    assert {m.recipient for m in requests} == {"b", "c"}
    assert all(m.pre_vote and m.term == 1 for m in requests)


def ticks_until_campaign(core: RaftCore) -> int:
    ticks = 0
    while core.role is not Role.CANDIDATE:
        core.tick()
        ticks += 1
    return ticks


def test_election_timeout_is_randomized_between_one_and_one_and_a_half_timeouts() -> None:
    timeouts = {ticks_until_campaign(make_core("a", seed=seed)) for seed in range(30)}
    assert min(timeouts) >= 15
    assert max(timeouts) <= 23
    assert len(timeouts) > 3


def test_failed_elections_back_off_exponentially() -> None:
    core = make_core("a", seed=3)  # b and c never answer, so every pre-election fails
    gaps: list[int] = []
    ticks = 0
    while len(gaps) < 8:
        core.tick()
        ticks += 1
        if core.has_ready():
            rd = core.ready()
            core.advance(rd)
            if any(isinstance(m, VoteRequest) for m in rd.messages):
                gaps.append(ticks)
                ticks = 0
    assert min(gaps) >= 15
    assert max(gaps[4:]) > 23, f"the timeout range should have widened by 1.5x per failure: {gaps}"
    assert max(gaps) <= 15 + 200  # capped by leader_failure_exp_backoff_max_delta_ms


def test_pre_vote_and_vote_win_with_a_majority_then_a_no_op_opens_the_term() -> None:
    net = Net(make_core(p) for p in "abc")
    leader = net.elect("a")
    assert leader.term == 1
    assert leader.entry(1).type.name == "NO_OP"
    assert leader.leader_state is LeaderState.RUNNING  # the NO_OP committed
    assert all(c.leader_id == "a" for c in net.cores.values())


def test_the_vote_is_in_the_same_ready_as_the_response_and_must_be_synced_first() -> None:
    b = make_core("b")
    b.step(vote_request("b", 1))
    rd = b.ready()
    assert rd.hard_state is not None
    assert (rd.hard_state.term, rd.hard_state.vote) == (1, "x")
    assert rd.must_sync
    assert [type(m) for m in rd.messages] == [VoteResponse]
    assert vote_of(rd).granted


def test_a_voter_grants_one_vote_per_term() -> None:
    b = make_core("b")
    b.step(vote_request("b", 1))
    b.advance(b.ready())
    b.step(VoteRequest(GROUP, "y", "b", 1, 0, 0, False))
    response = b.ready().messages[0]
    assert isinstance(response, VoteResponse)
    assert not response.granted


def test_a_candidate_with_a_shorter_or_older_log_gets_no_vote() -> None:
    b = make_core("b", state=persisted(ABC, [(1, 1), (2, 2)], term=2))
    b.step(vote_request("b", 3, last=(5, 1)))  # longer, but older last term
    assert not vote_of(b.ready()).granted
    b2 = make_core("b", state=persisted(ABC, [(1, 1), (2, 2)], term=2))
    b2.step(vote_request("b", 3, last=(1, 2)))  # same last term, shorter
    assert not vote_of(b2.ready()).granted


def test_a_replica_that_heard_from_a_leader_within_the_election_timeout_refuses_to_vote() -> None:
    # Seed 003: this keeps removed or partitioned servers from disrupting a working leader.
    b = make_core("b")
    b.step(Heartbeat(GROUP, "a", "b", 1, 0, 0))
    b.advance(b.ready())
    for pre in (True, False):
        b.step(vote_request("b", 2, pre=pre, last=(9, 9)))
        rd = b.ready()
        b.advance(rd)
        assert not vote_of(rd).granted
    assert b.term == 1, "a refused vote request must not raise the term"
    for _ in range(15):
        b.tick()
    b.advance(b.ready())  # b's own failure detector fired too: it is in a pre-election
    b.step(vote_request("b", 2, pre=True, last=(9, 9)))
    assert vote_of(b.ready()).granted


def test_a_follower_presumes_its_leader_failed_exactly_one_timeout_after_its_last_message() -> None:
    # Kudu snoozes the failure detector by MinimumElectionTimeout(), without jitter, on every
    # heartbeat; the random spread is for the backoff after elections and granted votes.
    for seed in range(20):
        b = make_core("b", seed=seed)
        b.step(Heartbeat(GROUP, "a", "b", 1, 0, 0))
        b.advance(b.ready())
        for _ in range(7):
            b.tick()
        b.step(Heartbeat(GROUP, "a", "b", 1, 0, 0))
        b.advance(b.ready())
        ticks = ticks_until_campaign(b)
        assert ticks == 15, f"seed {seed}: campaigned {ticks} ticks after the last heartbeat"


def lost_leader(entries: dict[str, list[tuple[int, int]]] | None = None) -> Net:
    """b and c heard leader a of term 1, which then died (it is not in the Net)."""
    peers = "bc"
    entries = entries or {}
    config = RaftConfig.of_voters(["a", *peers])
    net = Net(make_core(p, config=config, state=persisted(config, entries.get(p, ()), term=1)) for p in peers)
    for p in peers:
        net.cores[p].step(Heartbeat(GROUP, "a", p, 1, 0, 0))
    net.collect()
    net.outbox.clear()  # the answers to the dead leader
    return net


def test_followers_that_time_out_together_do_not_split_the_vote() -> None:
    # Both time out in the same instant and ask each other: without a tie-break each would
    # grant the other's pre-vote, vote for itself, and wait out a backoff of 1.5 to 2.25 s.
    net = lost_leader()
    net.tick("b", 15)
    net.tick("c", 15)
    assert net.cores["b"].role is net.cores["c"].role is Role.CANDIDATE
    net.stabilize()
    leaders = [p for p, c in net.cores.items() if c.role is Role.LEADER]
    expected = max("bc", key=lambda p: election_rank(GROUP, p))
    assert leaders == [expected]
    assert {c.term for c in net.cores.values()} == {2}, "one real election, not a split one"


HIGH, LOW = sorted("bc", key=lambda p: election_rank(GROUP, p), reverse=True)


def test_a_follower_that_refused_a_pre_vote_for_a_live_leader_grants_it_when_the_leader_goes_silent() -> None:
    net = lost_leader()
    net.tick(HIGH, 15)  # its tick comes first; LOW still counts a as live and refuses
    net.deliver()
    assert net.cores[HIGH].role is Role.CANDIDATE
    assert net.cores[HIGH].term == 1
    before = len(net.outbox)  # LOW's refusal is still on its way
    net.tick(LOW, 15)
    sent = net.outbox[before:]
    assert [(m.recipient, m.pre_vote, m.granted) for m in sent if isinstance(m, VoteResponse)] == [(HIGH, True, True)]
    assert not any(isinstance(m, VoteRequest) for m in sent), "LOW stands aside"
    assert net.cores[LOW].role is Role.FOLLOWER
    net.stabilize()
    assert {p: c.role for p, c in net.cores.items()} == {LOW: Role.FOLLOWER, HIGH: Role.LEADER}
    assert net.cores[HIGH].term == 2


def test_with_equal_logs_the_rank_not_the_tick_phase_picks_the_new_leader() -> None:
    # Every replica of a process ticks together: if the first to time out always won, one
    # survivor would take over every tablet a failed server led.
    net = lost_leader()
    net.tick(LOW, 15)
    net.deliver()  # HIGH refuses: a is live for it
    before = len(net.outbox)
    net.tick(HIGH, 15)
    sent = net.outbox[before:]
    assert not any(isinstance(m, VoteResponse) for m in sent), "no late grant to a lower rank"
    assert any(isinstance(m, VoteRequest) for m in sent)
    net.stabilize()
    assert {p: c.role for p, c in net.cores.items()} == {LOW: Role.FOLLOWER, HIGH: Role.LEADER}
    assert net.cores[HIGH].term == 2, "one real election"


def test_a_late_pre_vote_goes_only_to_a_candidate_with_an_up_to_date_log() -> None:
    net = lost_leader(entries={"b": [(1, 1), (2, 1)], "c": [(1, 1)]})
    net.tick("c", 15)
    net.deliver()
    before = len(net.outbox)  # b's refusal of c is still on its way
    net.tick("b", 15)
    sent = net.outbox[before:]
    assert not any(isinstance(m, VoteResponse) for m in sent)
    assert {m.recipient for m in sent if isinstance(m, VoteRequest)} == {"a", "c"}
    net.stabilize()
    assert net.cores["b"].role is Role.LEADER, "c refused to go first, so it grants b's pre-vote"


def test_a_refusal_for_a_live_leader_is_forgotten_when_the_leader_is_heard_again() -> None:
    net = lost_leader()
    net.tick("c", 15)
    net.deliver()  # b refuses c: a is live
    net.cores["b"].step(Heartbeat(GROUP, "a", "b", 1, 0, 0))  # and a is: c was cut off, not a
    net.collect()
    net.outbox.clear()
    before = len(net.outbox)  # b's refusal of c is still on its way
    net.tick("b", 15)
    sent = net.outbox[before:]
    assert not any(isinstance(m, VoteResponse) for m in sent)
    assert any(isinstance(m, VoteRequest) for m in sent), "b campaigns on its own"


def test_a_granted_vote_restarts_the_timeout_with_the_random_backoff() -> None:
    timeouts = set()
    for seed in range(30):
        b = make_core("b", seed=seed)
        b.step(vote_request("b", 1))
        rd = b.ready()
        assert vote_of(rd).granted
        b.advance(rd)
        timeouts.add(ticks_until_campaign(b))
    assert min(timeouts) >= 15
    assert max(timeouts) <= 23
    assert len(timeouts) > 3, "voters must not all campaign at the same moment after a failed election"


def test_a_transfer_target_is_voted_for_despite_a_live_leader() -> None:
    b = make_core("b")
    b.step(Heartbeat(GROUP, "a", "b", 1, 0, 0))
    b.advance(b.ready())
    b.step(vote_request("b", 2, last=(1, 1), ignore=True))
    rd = b.ready()
    assert vote_of(rd).granted
    assert b.term == 2


def test_a_pre_vote_changes_nothing_on_the_voter() -> None:
    b = make_core("b", state=persisted(ABC, term=4, vote="c"))
    b.step(vote_request("b", 5, pre=True, last=(3, 4)))
    rd = b.ready()
    assert vote_of(rd).granted
    assert vote_of(rd).term == 5
    assert (b.term, b.vote) == (4, "c")
    assert rd.hard_state is None


def test_a_follower_adopts_a_higher_term_from_any_message() -> None:
    b = make_core("b", state=persisted(ABC, term=1, vote="b"))
    b.step(AppendRequest(GROUP, "c", "b", 3, 0, 0, (), 0))
    assert (b.term, b.vote, b.leader_id) == (3, "", "c")


def test_stale_leaders_learn_the_newer_term_from_the_answer() -> None:
    b = make_core("b", state=persisted(ABC, term=5))
    b.step(AppendRequest(GROUP, "a", "b", 3, 0, 0, (), 0))
    response = b.ready().messages[0]
    assert isinstance(response, AppendResponse)
    assert response.term == 5
    assert not response.success


def test_non_voters_never_campaign() -> None:
    config = RaftConfig((Member("a", MemberType.VOTER), Member("l", MemberType.NON_VOTER)))
    learner = make_core("l", config=config)
    outsider = make_core("z", config=config)
    for _ in range(200):
        learner.tick()
        outsider.tick()
    assert learner.role is Role.LEARNER
    assert outsider.role is Role.NON_PARTICIPANT
    assert not learner.has_ready() or not learner.ready().messages
    with pytest.raises(Exception, match="not a voter"):
        learner.campaign()


def test_votes_from_non_voters_do_not_count() -> None:
    # YugabyteDB lost acknowledged writes by counting NON_VOTER votes (Jepsen 2019).
    config = RaftConfig(
        (
            Member("a", MemberType.VOTER),
            Member("b", MemberType.VOTER),
            Member("c", MemberType.VOTER),
            *tuple(Member(p, MemberType.NON_VOTER) for p in ("l1", "l2")),
        )
    )
    a = make_core("a", config=config, options=RaftOptions(raft_enable_pre_election=False))
    a.campaign()
    a.advance(a.ready())
    for learner in ("l1", "l2"):
        a.step(VoteResponse(GROUP, learner, "a", 1, False, True))
    assert a.role is Role.CANDIDATE
    a.step(VoteResponse(GROUP, "b", "a", 1, False, True))
    assert a.is_leader


def test_a_majority_of_rejections_ends_the_election() -> None:
    a = make_core("a", options=RaftOptions(raft_enable_pre_election=False))
    a.campaign()
    a.advance(a.ready())
    a.step(VoteResponse(GROUP, "b", "a", 1, False, False))
    a.step(VoteResponse(GROUP, "c", "a", 1, False, False))
    assert a.role is Role.FOLLOWER
    assert a.term == 1


def test_a_single_voter_elects_itself_at_once_and_runs_once_its_no_op_is_durable() -> None:
    a = make_core("a", voters=["a"])
    a.campaign()
    assert a.is_leader
    assert (a.commit_index, a.leader_state) == (0, LeaderState.CONFIGURING)  # its NO_OP is not synced yet
    a.advance(a.ready())
    assert a.commit_index == 1
    assert a.leader_state is LeaderState.RUNNING


def test_new_leaders_refuse_writes_until_their_no_op_commits() -> None:
    net = Net(make_core(p) for p in "abc")
    a = net.cores["a"]
    a.campaign()
    while not a.is_leader:  # one hop at a time: pre-votes, answers, votes, answers
        assert net.deliver()
    assert a.is_leader
    assert a.leader_state is LeaderState.CONFIGURING
    with pytest.raises(ServiceUnavailable, match="CONFIGURING"):
        a.propose(b"w")
    net.stabilize()
    assert a.propose(b"w").index == 2, "RUNNING once the NO_OP committed"


def test_followers_refuse_writes_with_a_leader_hint() -> None:
    net = Net(make_core(p) for p in "abc")
    net.elect("a")
    with pytest.raises(NotTheLeader) as info:
        net.cores["b"].propose(b"w")
    assert info.value.leader_hint == "a"


def test_a_leader_that_loses_its_majority_steps_down() -> None:
    net = Net(make_core(p) for p in "abc")
    a = net.elect("a")
    net.cut = {"b", "c"}
    for _ in range(40):
        a.tick()
        net.deliver()
    assert a.role is Role.FOLLOWER
    assert a.term == 1


def test_messages_for_another_group_or_replica_are_refused_and_change_nothing() -> None:
    b = make_core("b")
    with pytest.raises(InvalidArgument):
        b.step(VoteRequest("other", "x", "b", 5, 0, 0, False))
    with pytest.raises(InvalidArgument):
        b.step(VoteRequest(GROUP, "x", "c", 5, 0, 0, False))
    assert b.term == 0
    assert not b.ready().messages
