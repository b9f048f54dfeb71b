"""Consensus metadata: a replica's term, vote and committed config, written atomically.

The WAL holds the log; this small file holds what must survive beside it (Kudu's cmeta).
Every save writes a temporary file, fsyncs it, renames it over the old one and fsyncs the
directory, so a crash leaves either the old or the new contents, never a mix.  The commit
index is stored as a hint only: losing its latest value is safe.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from google.protobuf.message import DecodeError

from nyala.consensus.core import HardState, RaftConfig, decode_config, encode_config
from nyala.errors import Corruption, NotFound
from nyala.files import write_atomically
from nyala.proto import consensus_pb2

__all__ = ["CMETA_FILE", "ConsensusMetadata"]

CMETA_FILE = "cmeta"


@dataclass(frozen=True, slots=True)
class ConsensusMetadata:
    """What one replica persists about consensus besides its log."""

    hard_state: HardState
    committed_config: RaftConfig

    @classmethod
    def load(cls, directory: Path) -> ConsensusMetadata:
        """Read the metadata; NotFound when the replica has none, Corruption when it does not parse."""
        path = directory / CMETA_FILE
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise NotFound(f"no consensus metadata at {path}") from None
        pb = consensus_pb2.ConsensusMetadataPB()
        try:
            pb.ParseFromString(data)
            config = decode_config(pb.committed_config.SerializeToString())
        except DecodeError as exc:
            raise Corruption(f"consensus metadata {path} does not parse: {exc}") from exc
        return cls(HardState(pb.current_term, pb.voted_for, pb.commit_index), config)

    def save(self, directory: Path) -> None:
        """Replace the metadata atomically and durably."""
        pb = consensus_pb2.ConsensusMetadataPB(
            current_term=self.hard_state.term,
            voted_for=self.hard_state.vote,
            commit_index=self.hard_state.commit,
        )
        pb.committed_config.ParseFromString(encode_config(self.committed_config))
        write_atomically(directory / CMETA_FILE, pb.SerializeToString())
