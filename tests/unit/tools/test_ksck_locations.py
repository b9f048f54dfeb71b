"""ksck's location checks: placement-policy warnings and slow or unreachable locations (pure)."""

from __future__ import annotations

import json

from nyala.client.info import ReplicaInfo, TabletInfo, TabletServerInfo
from nyala.placement import PlacementConstraint
from nyala.tools.ksck import (
    NO_LOCATION,
    PINGS,
    LocationCheck,
    PingResult,
    _location_checks,
    judge_constraint,
    judge_locations,
    judge_placement,
)
from tests.unit.client.fakes import FakeCluster
from tests.unit.tools.conftest import Invoke

LOCATION_OF = {"a1": "/a", "a2": "/a", "b1": "/b", "b2": "/b", "c1": "/c", "c2": "/c"}
SERVERS = {uuid: (location, True) for uuid, location in LOCATION_OF.items()}


def tablet(*uuids: str) -> TabletInfo:
    return TabletInfo("tab1", "HASH(id) 0", tuple(ReplicaInfo(u, f"{u}:7050", "", "FOLLOWER") for u in uuids))


def server(uuid: str, location: str, live: bool = True) -> TabletServerInfo:
    return TabletServerInfo(uuid, (f"{uuid}:7050",), location, live, 10, 1)


def test_a_tablet_spread_one_per_location_meets_the_policy() -> None:
    assert judge_placement("t", 3, tablet("a1", "b2", "c1"), SERVERS) is None


def test_a_majority_in_one_location_is_named_with_the_counts() -> None:
    warning = judge_placement("t", 3, tablet("a1", "a2", "c1"), SERVERS)
    assert warning is not None
    assert warning.startswith("tablet tab1 of table 't' placement policy violated in /a")
    assert "/a: 2, /c: 1" in warning
    assert "another layout would comply" in warning


def test_an_unsatisfiable_policy_is_still_a_warning() -> None:
    warning = judge_placement("t", 1, tablet("b1"), SERVERS)  # RF 1 is a majority anywhere
    assert warning is not None
    assert "no layout on this cluster's servers can comply" in warning


def test_one_location_or_none_never_warns() -> None:
    one = {"a1": ("/a", True), "a2": ("/a", True), "x": ("/a", True)}
    assert judge_placement("t", 3, tablet("a1", "a2", "x"), one) is None
    no_locations = dict.fromkeys(LOCATION_OF, (NO_LOCATION, True))
    assert judge_placement("t", 3, tablet("a1", "a2", "b1"), no_locations) is None


def test_a_location_without_a_live_server_does_not_count_during_its_outage() -> None:
    # /c is down: two locations are left, which may hold two of three replicas each, so the
    # best-effort re-replication into /a complies; once /c is back, the same layout violates.
    outage = {**SERVERS, "c1": ("/c", False), "c2": ("/c", False)}
    assert judge_placement("t", 3, tablet("a1", "a2", "b1", "c1"), outage) is None
    warning = judge_placement("t", 3, tablet("a1", "a2", "b1"), SERVERS)
    assert warning is not None
    assert "violated in /a" in warning
    assert "another layout would comply" in warning


def checks(rtts: dict[str, PingResult]) -> tuple[list[LocationCheck], list[str]]:
    servers = [server(u, loc) for u, loc in LOCATION_OF.items()]
    layouts = [[tablet("a1", "b1", "c1"), tablet("a2", "b2", "c2")]]
    locations = _location_checks(servers, layouts, rtts)
    return locations, judge_locations(locations, servers, rtts)


def test_locations_are_summarized_and_quiet_when_alike() -> None:
    locations, warnings = checks({u: PingResult(1.0 + i / 10, 0) for i, u in enumerate(LOCATION_OF)})
    assert [(c.location, c.tservers, c.live_tservers, c.replicas) for c in locations] == [
        ("/a", 2, 2, 2),
        ("/b", 2, 2, 2),
        ("/c", 2, 2, 2),
    ]
    assert warnings == []


def test_an_unreachable_slow_or_lossy_location_is_warned_about() -> None:
    rtts = {u: PingResult(1.0, 0) for u in LOCATION_OF}
    rtts["b1"] = rtts["b2"] = PingResult(None, PINGS, "NetworkError: refused")
    rtts["c1"] = rtts["c2"] = PingResult(80.0, 0)
    rtts["a2"] = PingResult(1.2, 1, "TimedOut: ping")
    _, warnings = checks(rtts)
    assert "location /b: all 2 tablet servers unreachable (b1:7050, b2:7050)" in warnings
    assert any(w.startswith("location /c: round trip 80.0 ms, much slower") for w in warnings)
    assert any(w.startswith("location /a: unreliable connection: a2:7050 lost 1 of 3 pings") for w in warnings)
    assert len(warnings) == 3


def test_jitter_below_the_floor_is_not_slow() -> None:
    rtts = {u: PingResult(0.5, 0) for u in LOCATION_OF}
    rtts["c1"] = rtts["c2"] = PingResult(15.0, 0)  # 30x, but only 14.5 ms more
    assert checks(rtts)[1] == []


def test_tserver_list_takes_kudu_column_names(cluster: FakeCluster, nyala: Invoke) -> None:
    result = nyala("tserver", "list", "--format", "json", "--columns", "uuid,rpc-addresses,location")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert len(rows) == 3
    assert all(set(r) == {"uuid", "rpc_addresses", "location"} for r in rows)


def test_ksck_json_has_locations_round_trips_and_warnings(cluster: FakeCluster, nyala: Invoke) -> None:
    report = json.loads(nyala("cluster", "ksck", "--format", "json").stdout)
    assert report["warnings"] == []
    assert [loc["location"] for loc in report["locations"]] == [NO_LOCATION]
    assert report["locations"][0]["tservers"] == 3
    assert len(report["rtt_ms"]) == 3
    assert all(v is not None and v >= 0 for v in report["rtt_ms"].values())


def test_a_table_policy_is_checked_one_level_down_and_said_once_when_it_cannot_be_met() -> None:
    location_of = {"e1": "/eu/r1", "e2": "/eu/r2", "e3": "/eu/r3", "e4": "/eu/r1", "u1": "/us"}
    live = {"/eu/r1": 2, "/eu/r2": 1, "/eu/r3": 1, "/us": 1}
    eu = PlacementConstraint.of(["/eu"], leader_location="/eu/r2")
    unmet: set[PlacementConstraint] = set()

    def led_by(leader: str, *uuids: str) -> TabletInfo:
        replicas = tuple(ReplicaInfo(u, f"{u}:7050", "", "LEADER" if u == leader else "FOLLOWER") for u in uuids)
        return TabletInfo("tab1", "HASH(id) 0", replicas)

    assert judge_constraint("t", 3, led_by("e2", "e1", "e2", "e3"), eu, location_of, live, unmet) is None
    outside = judge_constraint("t", 3, led_by("e2", "e1", "e2", "u1"), eu, location_of, live, unmet)
    assert outside is not None
    assert "outside the table's locations, in /us" in outside
    crowded = judge_constraint("t", 3, led_by("e2", "e1", "e4", "e2"), eu, location_of, live, unmet)
    assert crowded is not None
    assert "violated in /eu/r1" in crowded
    misled = judge_constraint("t", 3, led_by("e1", "e1", "e2", "e3"), eu, location_of, live, unmet)
    assert misled is not None
    assert "leader outside /eu/r2" in misled
    asia = PlacementConstraint.of(["/asia"])
    first = judge_constraint("t", 3, led_by("", "e1"), asia, location_of, live, unmet)
    assert first is not None
    assert "only 0 live tablet server(s) in /asia" in first
    assert judge_constraint("t", 3, led_by("", "e2"), asia, location_of, live, unmet) is None  # said once


def test_a_leader_location_alone_adds_only_the_leader_check() -> None:
    location_of = {"a1": "/a", "a2": "/a", "b1": "/b"}
    live = {"/a": 2, "/b": 1}
    constraint = PlacementConstraint.of([], leader_location="/b")
    crowded = TabletInfo("tab1", "", (ReplicaInfo("a1", "", "", "LEADER"), ReplicaInfo("a2", "", "", "FOLLOWER")))
    warning = judge_constraint("t", 2, crowded, constraint, location_of, live, set())
    assert warning == "tablet tab1 of table 't' breaks its placement policy: leader outside /b"
    led = TabletInfo("tab1", "", (ReplicaInfo("a1", "", "", "FOLLOWER"), ReplicaInfo("b1", "", "", "LEADER")))
    assert judge_constraint("t", 2, led, constraint, location_of, live, set()) is None


def test_an_even_replication_factor_must_be_split_evenly_over_two_locations() -> None:
    two = {"e1": ("/east", True), "e2": ("/east", True), "e3": ("/east", True), "w1": ("/west", True)}
    two |= {"w2": ("/west", True), "w3": ("/west", True)}
    assert judge_placement("t", 4, tablet("e1", "e2", "w1", "w2"), two) is None
    warning = judge_placement("t", 4, tablet("e1", "e2", "e3", "w1"), two)
    assert warning is not None
    assert "violated in /east (/east: 3, /west: 1; at most 2 of 4 replicas per location" in warning
    assert "another layout would comply" in warning
