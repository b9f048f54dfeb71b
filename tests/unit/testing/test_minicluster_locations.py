"""MiniCluster's locations: their spelling, the addresses they get, and the mapping script (no processes)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from nyala.errors import InvalidArgument, NotFound
from nyala.testing.minicluster import MiniCluster, MiniClusterOptions, parse_locations


def test_locations_are_spelled_in_several_ways() -> None:
    expected = (("/dc1/r1", 2), ("/dc1/r2", 1))
    assert parse_locations({"/dc1/r1": 2, "/dc1/r2": 1}) == expected
    assert parse_locations(["/dc1/r1:2", "/dc1/r2:1"]) == expected
    assert parse_locations([("/dc1/r1", 2), ("/dc1/r2", 1)]) == expected
    assert parse_locations("/dc1/r1:2, /dc1/r2:1") == expected


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("dc1:2", "must begin with '/'"),
        ("/dc1", "LOCATION:COUNT"),
        ("/dc1:x", "LOCATION:COUNT"),
        ("/dc1:0", "1 to 100 tablet servers"),
        ("/dc1:1,/dc1:2", "given twice"),
        ("", "no locations"),
    ],
)
def test_bad_locations_are_refused(spec: str, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        parse_locations(spec)


def test_each_location_shares_one_address_and_the_script_maps_it(tmp_path: Path) -> None:
    options = MiniClusterOptions(num_masters=1, ip_block=(7, 8))
    mc = MiniCluster(tmp_path, options, locations={"/a": 2, "/b": 1}, client_location="/b")
    assert [str(t.address) for t in mc.tservers] == ["127.7.8.10:7050", "127.7.8.10:7051", "127.7.8.11:7050"]
    assert [t.location for t in mc.tservers] == ["/a", "/a", "/b"]
    assert mc.tservers_in("/b") == [mc.tservers[2]]
    with pytest.raises(NotFound, match="no location '/c'"):
        mc.tservers_in("/c")
    assert "--location-mapping-cmd" in mc.masters[0].process.argv
    mc.map_host("127.9.9.9", "/c/d")
    ask = subprocess.run(
        [str(mc.mapping_script), "127.7.8.11", "127.0.0.1", "127.7.8.10", "127.9.9.9"], capture_output=True, text=True
    )
    assert ask.stdout.split() == ["/b", "/b", "/a", "/c/d"]
    refused = subprocess.run([str(mc.mapping_script), "127.7.8.12"], capture_output=True, text=True)
    assert refused.returncode == 1
    assert "no location for host 127.7.8.12" in refused.stderr
    with pytest.raises(InvalidArgument, match="needs one of the locations"):
        mc.add_tserver()


def test_locations_survive_save_and_load(tmp_path: Path) -> None:
    mc = MiniCluster(tmp_path, MiniClusterOptions(ip_block=(7, 8)), locations="/a:1,/b:2", client_location="/a")
    tmp_path.mkdir(exist_ok=True)
    mc.save()
    again = MiniCluster.load(tmp_path)
    assert again.options.locations == (("/a", 1), ("/b", 2))
    assert again.options.client_location == "/a"
    assert [t.address for t in again.tservers] == [t.address for t in mc.tservers]


def test_a_new_location_is_checked_before_any_server_starts(tmp_path: Path) -> None:
    mc = MiniCluster(tmp_path, MiniClusterOptions(ip_block=(7, 8)), locations={"/a": 1})
    with pytest.raises(InvalidArgument, match="already has location /a"):
        mc.add_location("/a", 1)
    with pytest.raises(InvalidArgument, match="must begin with '/'"):
        mc.add_location("b", 1)
    with pytest.raises(InvalidArgument, match="1 to 100 tablet servers"):
        mc.add_location("/b", 0)
    assert mc.locations == ["/a"]
    assert len(mc.tservers) == 1
    with pytest.raises(InvalidArgument, match="has no locations"):
        MiniCluster(tmp_path / "plain", MiniClusterOptions(ip_block=(7, 9))).add_location("/b", 1)
