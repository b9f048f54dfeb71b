from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nyala.consensus.core import (
    ChangeKind,
    ConfigChange,
    Member,
    MemberType,
    RaftConfig,
    apply_changes,
    decode_config,
    encode_config,
)
from nyala.errors import AlreadyPresent, Corruption, InvalidArgument, NotFound
from nyala.proto import consensus_pb2

V, NV = MemberType.VOTER, MemberType.NON_VOTER
THREE = RaftConfig.of_voters(["a", "b", "c"], opid_index=7)


def test_majority_counts_voters_only() -> None:
    config = RaftConfig((Member("a", V), Member("b", V), Member("c", NV), Member("d", NV)))
    assert config.voters == ("a", "b")
    assert config.majority == 2
    assert config.is_voter("a")
    assert not config.is_voter("c")
    assert not config.is_voter("zz")


def test_one_voter_change_per_request() -> None:
    with pytest.raises(InvalidArgument, match="at most one voter"):
        apply_changes(
            THREE,
            [ConfigChange(ChangeKind.ADD_PEER, "d", V), ConfigChange(ChangeKind.REMOVE_PEER, "a")],
        )
    with pytest.raises(InvalidArgument, match="at most one voter"):
        apply_changes(
            THREE, [ConfigChange(ChangeKind.MODIFY_PEER, "a", NV), ConfigChange(ChangeKind.MODIFY_PEER, "b", NV)]
        )


def test_non_voter_changes_may_come_together_with_one_voter_change() -> None:
    new = apply_changes(
        THREE,
        [
            ConfigChange(ChangeKind.ADD_PEER, "d", NV, promote=True),
            ConfigChange(ChangeKind.ADD_PEER, "e", NV),
            ConfigChange(ChangeKind.MODIFY_PEER, "a", replace=True),
            ConfigChange(ChangeKind.REMOVE_PEER, "c"),
        ],
    )
    assert new.voters == ("a", "b")
    assert new.member("d") == Member("d", NV, promote=True)
    assert new.member("a") == Member("a", V, replace=True)
    assert new.opid_index == THREE.opid_index  # the caller sets the new entry's index


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (ConfigChange(ChangeKind.ADD_PEER, "a", V), AlreadyPresent),
        (ConfigChange(ChangeKind.ADD_PEER, "d"), InvalidArgument),  # no member type
        (ConfigChange(ChangeKind.REMOVE_PEER, "zz"), NotFound),
        (ConfigChange(ChangeKind.MODIFY_PEER, "a", V), InvalidArgument),  # changes nothing
    ],
)
def test_bad_changes_are_refused_with_a_clear_error(change: ConfigChange, error: type[Exception]) -> None:
    with pytest.raises(error):
        apply_changes(THREE, [change])


def test_the_last_voter_cannot_go() -> None:
    with pytest.raises(InvalidArgument, match="at least one voter"):
        apply_changes(RaftConfig.of_voters(["a"]), [ConfigChange(ChangeKind.REMOVE_PEER, "a")])


def test_duplicate_or_empty_peers_are_refused() -> None:
    with pytest.raises(InvalidArgument):
        RaftConfig((Member("a", V), Member("a", NV)))
    with pytest.raises(InvalidArgument):
        RaftConfig((Member("", V),))
    with pytest.raises(InvalidArgument, match="more than once"):
        apply_changes(THREE, [ConfigChange(ChangeKind.REMOVE_PEER, "a"), ConfigChange(ChangeKind.REMOVE_PEER, "a")])


def test_encoding_is_raft_config_pb() -> None:
    config = RaftConfig((Member("a", V), Member("b", NV, promote=True, replace=True)), opid_index=42)
    pb = consensus_pb2.RaftConfigPB.FromString(encode_config(config))
    assert pb.opid_index == 42
    assert [(p.permanent_uuid, p.member_type, p.attrs.promote) for p in pb.peers] == [
        ("a", consensus_pb2.VOTER, False),
        ("b", consensus_pb2.NON_VOTER, True),
    ]
    assert decode_config(pb.SerializeToString()) == config


def test_damaged_bytes_raise_corruption() -> None:
    with pytest.raises(Corruption):
        decode_config(b"\xff\xff\xff")


members = st.lists(
    st.builds(
        Member,
        st.text(alphabet="abcdefgh", min_size=1, max_size=4),
        st.sampled_from([V, NV]),
        st.booleans(),
        st.booleans(),
    ),
    max_size=7,
    unique_by=lambda m: m.peer_id,
)


@given(members, st.integers(0, 2**40), st.booleans())
def test_encoding_round_trips(ms: list[Member], index: int, unsafe: bool) -> None:
    config = RaftConfig(tuple(ms), index, unsafe)
    assert decode_config(encode_config(config)) == config
