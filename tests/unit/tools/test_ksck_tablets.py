"""ksck's tablet categories and per-replica reasons (pure), and its checksum verdicts."""

from __future__ import annotations

import dataclasses

import pytest

from nyala.client.info import ReplicaInfo, TableSummary, TabletInfo
from nyala.errors import InvalidArgument
from nyala.proto import common_pb2, consensus_pb2
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.proto import tserver_pb2 as tpb
from nyala.tools.ksck import select_tables
from nyala.tools.ksck_checksum import ReplicaChecksum, TabletChecksum, judge_checksums
from nyala.tools.ksck_tablets import LAGGING_ENTRIES, ReplicaHealth, ServerView, TabletCheck, TabletStatus, judge_tablet
from tests.unit.client.fakes import FakeCluster
from tests.unit.tools.conftest import Invoke

pytestmark = pytest.mark.timeout(30)

TABLET = "tab1"


@dataclasses.dataclass
class Replica:
    """One replica as its server and (for a follower) its leader report it."""

    uuid: str
    non_voter: bool = False
    promote: bool = False
    state: tpb.TabletStatePB = tpb.RUNNING
    leader: bool = False
    reachable: bool = True
    hosted: bool = True
    #: What the leader says about this follower.
    health: int = cpb.HEALTHY
    match_index: int = 100
    #: The leader this replica names ("" for the tablet's leader); None: the leader's uuid.
    names: str | None = None
    config: tuple[str, ...] | None = None


def judge(replicas: list[Replica], num_replicas: int = 3, maintenance: frozenset[str] = frozenset()) -> TabletCheck:
    leader = next((r.uuid for r in replicas if r.leader), "")
    committed = consensus_pb2.RaftConfigPB(opid_index=5)
    for r in replicas:
        committed.peers.add(
            permanent_uuid=r.uuid,
            member_type=consensus_pb2.NON_VOTER if r.non_voter else consensus_pb2.VOTER,
            attrs=consensus_pb2.RaftPeerAttrsPB(promote=r.promote),
        )
    views = {}
    for r in replicas:
        if not r.reachable:
            views[r.uuid] = ServerView({}, {}, "NetworkError: connection refused")
            continue
        if not r.hosted:
            views[r.uuid] = ServerView({}, {})
            continue
        status = tpb.ListTabletsResponsePB.StatusPB(tablet_id=TABLET, state=r.state)
        role = common_pb2.LEADER if r.leader else common_pb2.LEARNER if r.non_voter else common_pb2.FOLLOWER
        cstate = cpb.ConsensusStatePB(
            tablet_id=TABLET, current_term=2, leader_uuid=leader if r.names is None else r.names, role=role
        )
        if r.config is None:
            cstate.committed_config.CopyFrom(committed)
        else:
            cstate.committed_config.peers.extend(consensus_pb2.RaftPeerPB(permanent_uuid=u) for u in r.config)
        if r.leader:
            cstate.commit_index = 100
            for other in replicas:
                if other is not r:
                    cstate.peers.add(permanent_uuid=other.uuid, health=other.health, match_index=other.match_index)
        views[r.uuid] = ServerView({TABLET: status}, {TABLET: cstate})
    infos = tuple(
        ReplicaInfo(r.uuid, f"{r.uuid}:7050", "", "LEADER" if r.leader else "LEARNER" if r.non_voter else "FOLLOWER")
        for r in replicas
    )
    tablet = TabletInfo(TABLET, "", infos)
    return judge_tablet("t", tablet, views, num_replicas=num_replicas, in_maintenance=maintenance)


def healths(check: TabletCheck) -> dict[str, tuple[str, tuple[str, ...]]]:
    return {r.uuid: (r.health.value, r.reasons) for r in check.replicas}


def test_three_healthy_voters_are_healthy() -> None:
    check = judge([Replica("a", leader=True), Replica("b"), Replica("c")])
    assert check.status is TabletStatus.HEALTHY
    assert check.problems == ()
    assert all(r.health is ReplicaHealth.HEALTHY and r.reasons == () for r in check.replicas)
    assert [r.member_type for r in check.replicas] == ["VOTER"] * 3


def test_an_unreachable_or_failed_voter_makes_it_under_replicated_with_the_reason() -> None:
    down = judge([Replica("a", leader=True), Replica("b", reachable=False), Replica("c")])
    assert down.status is TabletStatus.UNDER_REPLICATED
    assert healths(down)["b"] == ("FAILED", ("unreachable: NetworkError: connection refused",))
    assert any("is UNDER_REPLICATED: 2 of 3 voters are HEALTHY" in p for p in down.problems)
    assert any("VOTER replica on b:7050 is FAILED: unreachable" in p for p in down.problems)
    failed = judge([Replica("a", leader=True), Replica("b", health=cpb.FAILED), Replica("c")])
    assert failed.status is TabletStatus.UNDER_REPLICATED
    assert healths(failed)["b"] == ("FAILED", ("failed: its leader has not heard from it for too long",))
    copy = judge([Replica("a", leader=True), Replica("b", health=cpb.FAILED_UNRECOVERABLE), Replica("c")])
    assert copy.status is TabletStatus.UNDER_REPLICATED
    assert "needs a tablet copy" in healths(copy)["b"][1][0]


def test_missing_tombstoned_and_failed_replicas_say_so() -> None:
    check = judge(
        [Replica("a", leader=True), Replica("b", hosted=False), Replica("c", state=tpb.TOMBSTONED), Replica("d"),
         Replica("e")],
        num_replicas=5,
    )  # fmt: skip
    assert healths(check)["b"] == ("FAILED", ("missing: its tablet server has no such replica",))
    assert healths(check)["c"] == ("FAILED", ("tombstoned",))
    assert check.status is TabletStatus.UNDER_REPLICATED
    assert check.replicas[1].state == "NOT_FOUND"


def test_a_non_voter_copied_or_catching_up_for_a_failed_voter_is_recovering() -> None:
    copying = judge(
        [Replica("a", leader=True), Replica("b", reachable=False), Replica("c"),
         Replica("d", non_voter=True, promote=True, state=tpb.COPYING)]
    )  # fmt: skip
    assert copying.status is TabletStatus.RECOVERING
    assert healths(copying)["d"] == ("RECOVERING", ("copying: a tablet copy is filling it",))
    assert copying.replicas[3].member_type == "NON_VOTER"
    assert any("is RECOVERING: 2 of 3 voters are HEALTHY, 1 replicas are recovering" in p for p in copying.problems)
    catching_up = judge(
        [Replica("a", leader=True), Replica("b", health=cpb.FAILED), Replica("c"),
         Replica("d", non_voter=True, promote=True)]
    )  # fmt: skip
    assert catching_up.status is TabletStatus.RECOVERING
    assert healths(catching_up)["d"] == ("RECOVERING", ("catching up: a NON_VOTER to be promoted to VOTER",))
    # Three healthy voters and a NON_VOTER being copied (a move): recovering too.
    move = judge(
        [Replica("a", leader=True), Replica("b"), Replica("c"), Replica("d", non_voter=True, state=tpb.COPYING)]
    )
    assert move.status is TabletStatus.RECOVERING
    # A failed voter with nothing replacing it.
    assert judge([Replica("a", leader=True), Replica("b", reachable=False), Replica("c")]).status is (
        TabletStatus.UNDER_REPLICATED
    )


def test_bootstrapping_and_lagging_voters_are_recovering() -> None:
    booting = judge([Replica("a", leader=True), Replica("b", state=tpb.BOOTSTRAPPING), Replica("c")])
    assert booting.status is TabletStatus.RECOVERING
    assert healths(booting)["b"] == ("RECOVERING", ("bootstrapping: replaying its log",))
    probing = judge([Replica("a", leader=True), Replica("b", health=cpb.HEALTH_UNKNOWN), Replica("c")])
    assert probing.status is TabletStatus.RECOVERING
    assert healths(probing)["b"][1] == ("lagging: its leader is still looking for the end of its log",)
    behind = judge([Replica("a", leader=True), Replica("b", match_index=100 - LAGGING_ENTRIES - 1), Replica("c")])
    assert healths(behind)["b"] == ("RECOVERING", (f"lagging: {LAGGING_ENTRIES + 1} entries behind its leader's "
                                                   "commit index",))  # fmt: skip
    close = judge([Replica("a", leader=True), Replica("b", match_index=100 - LAGGING_ENTRIES), Replica("c")])
    assert close.status is TabletStatus.HEALTHY


def test_fewer_voters_than_the_replication_factor_is_under_replicated() -> None:
    check = judge([Replica("a", leader=True), Replica("b")], num_replicas=3)
    assert check.status is TabletStatus.UNDER_REPLICATED
    assert any("2 of 3 voters are HEALTHY" in p for p in check.problems)


def test_no_leader_or_no_majority_is_unavailable() -> None:
    leaderless = judge([Replica("a"), Replica("b"), Replica("c")])
    assert leaderless.status is TabletStatus.UNAVAILABLE
    assert any("no replica leads" in p for p in leaderless.problems)
    minority = judge([Replica("a", leader=True), Replica("b", reachable=False), Replica("c", state=tpb.FAILED)])
    assert minority.status is TabletStatus.UNAVAILABLE
    assert any("1 of 3 voters are RUNNING, a majority needs 2" in p for p in minority.problems)
    # A NON_VOTER never counts toward the majority.
    learner = judge(
        [Replica("a", leader=True), Replica("b", reachable=False), Replica("c", reachable=False),
         Replica("d", non_voter=True)]
    )  # fmt: skip
    assert learner.status is TabletStatus.UNAVAILABLE


def test_disagreement_on_the_leader_or_the_config_is_a_consensus_mismatch() -> None:
    leader = judge([Replica("a", leader=True), Replica("b", names="c"), Replica("c")])
    assert leader.status is TabletStatus.CONSENSUS_MISMATCH
    assert any("replicas disagree on the leader (['a', 'c'])" in p for p in leader.problems)
    config = judge([Replica("a", leader=True), Replica("b", config=("a", "b", "x")), Replica("c")])
    assert config.status is TabletStatus.CONSENSUS_MISMATCH
    assert any("committed config of ['b:7050'] differs from the master's" in p for p in config.problems)


def test_maintenance_mode_is_a_note_on_the_replica() -> None:
    quiet = judge([Replica("a", leader=True), Replica("b"), Replica("c")], maintenance=frozenset({"b"}))
    assert quiet.status is TabletStatus.HEALTHY
    assert healths(quiet)["b"] == ("HEALTHY", ("its tablet server is in maintenance mode",))
    down = judge([Replica("a", leader=True), Replica("b", reachable=False), Replica("c")], maintenance=frozenset("b"))
    assert down.status is TabletStatus.UNDER_REPLICATED
    assert healths(down)["b"][1][1] == "its tablet server is in maintenance mode"


def test_checksum_verdicts() -> None:
    same = TabletChecksum("t", "x", 7, (ReplicaChecksum("a", "a:1", 5, 10), ReplicaChecksum("b", "b:1", 5, 10)))
    assert (same.result, judge_checksums([same])) == ("OK", [])
    differ = dataclasses.replace(same, replicas=(*same.replicas, ReplicaChecksum("c", "c:1", 6, 10)))
    assert differ.result == "MISMATCH"
    (problem,) = judge_checksums([differ])
    assert problem.startswith("tablet x of table 't': CHECKSUM MISMATCH at index 7: a:1 has 0x0000000000000005")
    assert "c:1 has 0x0000000000000006 (10 rows)" in problem
    failed = dataclasses.replace(same, replicas=(same.replicas[0], ReplicaChecksum("b", "b:1", error="TimedOut: x")))
    assert failed.result == "ERROR"
    assert judge_checksums([failed]) == ["tablet x of table 't': replica on b:1 could not be checksummed: TimedOut: x"]
    nobody = TabletChecksum("t", "x", 0, (), "no replica leads it")
    assert judge_checksums([nobody]) == ["tablet x of table 't': no checksum scan: no replica leads it"]


def test_tables_are_selected_by_name_and_unknown_ones_refused() -> None:
    summaries = [TableSummary("1", "a", 1, 3), TableSummary("2", "b", 1, 3)]
    assert [s.name for s in select_tables(summaries, None)] == ["a", "b"]
    assert [s.name for s in select_tables(summaries, ["b", " b"])] == ["b"]
    with pytest.raises(InvalidArgument, match=r"no such tables: \['nope'\] \(the cluster has \['a', 'b'\]\)"):
        select_tables(summaries, ["a", "nope"])
    with pytest.raises(InvalidArgument, match="needs table names"):
        select_tables(summaries, ["a", ""])


def test_ksck_of_an_unknown_table_is_a_clear_error(cluster: FakeCluster, nyala: Invoke) -> None:
    result = nyala("cluster", "ksck", "--tables", "nope", "--checksum-scan")
    assert result.exit_code == 1
    assert "invalid argument: no such tables: ['nope']" in result.output
