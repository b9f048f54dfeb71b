"""The fields of a replica, declared once for :class:`RaftCore` and its two mixins.

The mixins (``_replication.py``, ``_membership.py``) and ``raft.py`` each implement one part
of the state machine against these fields; the methods one part calls in another are
declared here so each file type-checks on its own.
"""

from __future__ import annotations

import enum
from collections import deque
from typing import TYPE_CHECKING

from nyala.consensus.core.config import RaftConfig
from nyala.consensus.core.log import RaftLog
from nyala.consensus.core.messages import Message, VoteRequest
from nyala.consensus.core.options import RaftOptions, TickTiming
from nyala.consensus.core.progress import Progress
from nyala.consensus.core.ready import ReadState, Ready, SoftState
from nyala.consensus.core.types import EntryType, HardState, LeaderState, OpId

if TYPE_CHECKING:
    from random import Random


class Phase(enum.Enum):
    """Where the replica is in the election cycle (the role adds the member type)."""

    FOLLOWER = 0
    CANDIDATE = 1
    LEADER = 2


class CoreState:
    """Field declarations and the cross-part method signatures."""

    group_id: str
    peer_id: str
    _options: RaftOptions
    _timing: TickTiming
    _rng: Random
    _log: RaftLog

    # persistent (hard) state and its high-water marks
    _term: int
    _vote: str
    _commit: int
    _applied: int  # confirmed applied by advance()
    _handed_out: int  # highest committed index handed to the driver
    _unstable_from: int  # first index not yet handed to the driver for persistence
    _last_hard: HardState
    # What the driver has confirmed durable (advance()): the log matches the disk up to
    # _durable_index, and the hard state on disk has term _durable_term.
    _durable_index: int
    _durable_term: int

    # configs: the committed one plus CHANGE_CONFIG entries appended after it, oldest first
    _committed_config: RaftConfig
    _pending_configs: list[RaftConfig]

    # election state
    _phase: Phase
    _pre_election: bool
    _leader_id: str
    _leader_contact_ticks: int
    _failed_elections: int
    _votes: dict[str, bool]
    _refused_pre_votes: dict[str, VoteRequest]  # refused for a live leader, by candidate
    _election_elapsed: int
    _election_timeout: int

    # leader state
    _progress: dict[str, Progress]
    _leader_state: LeaderState
    _noop_index: int
    _heartbeat_elapsed: int
    _quorum_elapsed: int
    _transfer_target: str
    _transfer_ticks: int
    _transfer_sent: bool
    _read_seq: int
    _read_round_due: bool
    _pending_reads: list[tuple[int, int, int]]  # (heartbeat round, request id, read index)

    # outputs waiting for the next Ready
    _msgs: list[Message]
    _read_states: list[ReadState]
    _dropped_reads: list[int]
    _copy_targets: list[str]
    #: A member became FAILED or FAILED_UNRECOVERABLE, or answered again after that, since the
    #: driver last asked (:meth:`RaftCore.take_health_changed`).
    _health_changed: bool
    _active_config_dirty: bool
    _committed_config_dirty: bool
    _last_soft: SoftState | None
    _last_soft_key: tuple[object, ...]
    _outstanding: deque[Ready]  # handed out by ready(), not yet advanced, oldest first

    @property
    def active_config(self) -> RaftConfig:
        """The config in effect: the last one appended to the log (seed 003: effective on append)."""
        return self._pending_configs[-1] if self._pending_configs else self._committed_config

    @property
    def committed_config(self) -> RaftConfig:
        return self._committed_config

    @property
    def has_pending_config(self) -> bool:
        return bool(self._pending_configs)

    # -- implemented in raft.py
    def _become_follower(self, term: int, leader_id: str) -> None:
        raise NotImplementedError

    def _campaign(self, pre: bool, transfer: bool) -> None:
        raise NotImplementedError

    def _reset_election_timer(self, snooze: bool = False) -> None:
        raise NotImplementedError

    def _snooze_for_leader(self) -> None:
        raise NotImplementedError

    def _send(self, m: Message) -> None:
        raise NotImplementedError

    def _append_new(self, entry_type: EntryType, payload: bytes) -> OpId:
        raise NotImplementedError

    def _check_accepting_writes(self) -> None:
        raise NotImplementedError

    # -- implemented in _replication.py
    def _maybe_commit(self) -> None:
        raise NotImplementedError

    def _send_timeout_now(self, peer_id: str) -> None:
        raise NotImplementedError

    # -- implemented in _membership.py
    def _note_config_entry(self, index: int, config: RaftConfig) -> None:
        raise NotImplementedError

    def _commit_configs(self) -> None:
        raise NotImplementedError

    def _rollback_configs(self, after_index: int) -> None:
        raise NotImplementedError

    def _maybe_promote(self) -> None:
        raise NotImplementedError

    def _on_transfer_progress(self, peer_id: str) -> None:
        raise NotImplementedError

    def _tick_transfer(self) -> None:
        raise NotImplementedError
