"""MasterPeers at restart: which --master-addresses are accepted once masters changed online,
and the sys catalog's address book entries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nyala.catalog import master_mutation, state_from_entries
from nyala.common.hostport import HostPort, parse_address
from nyala.errors import InvalidArgument
from nyala.master.peers import MASTERS_FILE, MasterPeers
from nyala.proto import master_pb2 as mpb

A, B, C, D = (parse_address(f"127.0.0.1:{7051 + i}") for i in range(4))


def remembered(tmp_path: Path, members: dict[str, HostPort], created_with: list[HostPort]) -> None:
    peers = MasterPeers("a", A, list(created_with), tmp_path)
    peers.set_members(members)
    peers.save()


def peers_with(tmp_path: Path, flags: list[HostPort]) -> MasterPeers:
    peers = MasterPeers("a", A, flags, tmp_path)
    assert peers.load()
    return peers


def test_the_remembered_members_rule_at_a_restart(tmp_path: Path) -> None:
    remembered(tmp_path, {"a": A, "b": B, "d": D}, [A])
    for flags in ([A, B, D], [A], [A, B]):  # the new set, the set it was created with, a subset
        peers = peers_with(tmp_path, flags)
        assert peers.by_uuid == {"a": A, "b": B, "d": D}
        assert set(peers.addresses) == {A, B, D}


def test_a_restart_with_masters_it_never_knew_is_refused(tmp_path: Path) -> None:
    remembered(tmp_path, {"a": A, "b": B}, [A, B])
    with pytest.raises(InvalidArgument, match="nyala master add"):
        peers_with(tmp_path, [A, C])


def test_the_first_file_format_still_loads(tmp_path: Path) -> None:
    (tmp_path / MASTERS_FILE).write_text(json.dumps({"a": str(A), "b": str(B)}))
    assert peers_with(tmp_path, [A, B]).by_uuid == {"a": A, "b": B}


def test_the_catalog_keeps_the_masters_address_book() -> None:
    state = state_from_entries([master_mutation("a", "h1", 1), master_mutation("b", "h2", 2)])
    state.apply(mpb.CatalogWritePB(mutations=[master_mutation("b", "h2", 2, removed=True)]))
    assert {u: (e.address.host, e.address.port, e.removed) for u, e in state.masters.items()} == {
        "a": ("h1", 1, False),
        "b": ("h2", 2, True),
    }
    state.apply(mpb.CatalogWritePB(mutations=[mpb.CatalogMutationPB(entry_type=mpb.MASTER_ENTRY, entry_id="a")]))
    assert set(state.masters) == {"b"}
