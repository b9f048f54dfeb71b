"""The test kit's bookkeeping of cut links: what each server's control file says, and when it returns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nyala.common.hostport import HostPort
from nyala.errors import InvalidArgument
from nyala.rpc.netfault import NETWORK_FAULTS_ENV, NetworkFaults, _ControlFileWatcher
from nyala.testing.minicluster import MiniCluster, MiniClusterOptions
from nyala.testing.partitions import NetworkPartitions

pytestmark = pytest.mark.timeout(60)

ADDRESSES = {
    "master-0": HostPort("127.9.9.1", 7051),
    "master-1": HostPort("127.9.9.2", 7051),
    "tserver-0": HostPort("127.9.9.10", 7050),
    "tserver-1": HostPort("127.9.9.11", 7050),
}


def kit(tmp_path: Path) -> NetworkPartitions:
    partitions = NetworkPartitions(tmp_path / "faults")
    for name, address in ADDRESSES.items():
        env = partitions.add_server(name, address)
        assert env == {NETWORK_FAULTS_ENV: str(tmp_path / "faults" / f"{name}.json")}
    return partitions


def unreachable(partitions: NetworkPartitions, name: str) -> list[str]:
    return list(json.loads(partitions.control_file(name).read_text())["unreachable"])


def nobody_running(name: str) -> bool:
    return False


def test_a_partition_cuts_both_ends_of_every_link_across_it_and_adds_up(tmp_path: Path) -> None:
    partitions = kit(tmp_path)
    partitions.partition(["master-0"], ["tserver-0", "tserver-1"], running=nobody_running, timeout_s=5)
    assert unreachable(partitions, "master-0") == ["127.9.9.10:7050", "127.9.9.11:7050"]
    assert unreachable(partitions, "tserver-0") == ["127.9.9.1:7051"]
    assert unreachable(partitions, "master-1") == []
    assert not partitions.reachable("tserver-1", "master-0")
    assert partitions.reachable("tserver-0", "tserver-1")

    partitions.partition(["tserver-0"], ["tserver-1"], running=nobody_running, timeout_s=5)
    assert unreachable(partitions, "tserver-0") == ["127.9.9.1:7051", "127.9.9.11:7050"]
    assert len(partitions.cut_links) == 3

    partitions.heal(running=nobody_running, timeout_s=5)
    assert all(unreachable(partitions, name) == [] for name in ADDRESSES)
    assert partitions.cut_links == set()


def test_bad_groups_are_refused_and_change_nothing(tmp_path: Path) -> None:
    partitions = kit(tmp_path)
    with pytest.raises(InvalidArgument, match="both sides"):
        partitions.partition(["master-0"], ["master-0", "tserver-0"], running=nobody_running, timeout_s=5)
    with pytest.raises(InvalidArgument, match="no servers named"):
        partitions.partition(["master-0"], ["tserver-9"], running=nobody_running, timeout_s=5)
    with pytest.raises(InvalidArgument, match="at least one"):
        partitions.partition([], ["tserver-0"], running=nobody_running, timeout_s=5)
    assert partitions.cut_links == set()
    assert not partitions.directory.exists()


def test_partition_returns_only_once_every_running_server_applied_the_change(tmp_path: Path) -> None:
    partitions = kit(tmp_path)
    watchers = {name: _ControlFileWatcher(NetworkFaults(), partitions.control_file(name)) for name in ADDRESSES}
    polls = 0

    def running(name: str) -> bool:
        # The servers' watchers, run only when the kit looks: it cannot return before they applied.
        nonlocal polls
        polls += 1
        if polls > len(ADDRESSES):
            watchers[name].check()
        return name != "tserver-1"  # a stopped server is not waited for

    partitions.partition(["master-0"], ["master-1"], running=running, timeout_s=10)
    assert polls > len(ADDRESSES)
    assert watchers["master-0"]._faults.unreachable == {ADDRESSES["master-1"]}
    assert watchers["master-1"]._faults.unreachable == {ADDRESSES["master-0"]}


def test_partition_names_the_servers_that_never_apply_the_change(tmp_path: Path) -> None:
    partitions = kit(tmp_path)
    with pytest.raises(AssertionError, match="master-1"):
        partitions.partition(["master-0"], ["master-1"], running=lambda name: name == "master-1", timeout_s=0.2)


def test_a_mini_cluster_without_network_faults_refuses_partitions(tmp_path: Path) -> None:
    cluster = MiniCluster(tmp_path, MiniClusterOptions(num_masters=1, num_tservers=1))
    with pytest.raises(InvalidArgument, match="network_faults=True"):
        cluster.isolate(cluster.masters[0])
    assert cluster.reachable(cluster.masters[0], cluster.tservers[0])
    assert NETWORK_FAULTS_ENV not in (cluster.masters[0].process.env or {})
    with pytest.raises(InvalidArgument, match="test clusters only"):
        MiniCluster(tmp_path, MiniClusterOptions(network_faults=True, detached=True))


def test_a_mini_cluster_with_network_faults_gives_each_server_its_own_control_file(tmp_path: Path) -> None:
    cluster = MiniCluster(tmp_path, MiniClusterOptions(num_masters=2, num_tservers=2, network_faults=True))
    files = {(s.process.env or {}).get(NETWORK_FAULTS_ENV) for s in [*cluster.masters, *cluster.tservers]}
    assert files == {str(tmp_path / "network-faults" / f"{n}.json") for n in ADDRESSES}
    # No process is running, so partition() only writes the files.
    cluster.partition([cluster.masters[0], cluster.tservers[0]])
    assert not cluster.reachable(cluster.masters[0], cluster.masters[1])
    assert cluster.reachable(cluster.masters[0], cluster.tservers[0])
    document = json.loads((tmp_path / "network-faults" / "tserver-0.json").read_text())
    assert document["unreachable"] == sorted(str(s.address) for s in [cluster.masters[1], cluster.tservers[1]])
