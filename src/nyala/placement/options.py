"""Settings of the placement algorithm (declared here, read by the master)."""

from __future__ import annotations

import dataclasses

from nyala.common.config import setting
from nyala.errors import InvalidArgument

__all__ = ["PlacementOptions"]


@dataclasses.dataclass(frozen=True, slots=True)
class PlacementOptions:
    """How pending (placed but not yet reported) replicas are weighed when ranking servers."""

    tserver_last_replica_creations_halflife_ms: int = setting(
        60_000,
        "Half-life of the weight of a replica the master placed on a tablet server but that the "
        "server has not reported yet; such pending replicas count toward the server's load and decay.",
        "advanced",
    )
    placement_decay_quantum_ms: int = setting(
        1_000,
        "Granularity of the clock used to decay pending replicas; placements within one quantum see "
        "the same decay, which lets the master keep its rankings indexed between quanta.",
        "advanced",
    )

    def __post_init__(self) -> None:
        if self.tserver_last_replica_creations_halflife_ms <= 0:
            raise InvalidArgument("tserver_last_replica_creations_halflife_ms must be positive")
        if not 0 < self.placement_decay_quantum_ms <= self.tserver_last_replica_creations_halflife_ms:
            raise InvalidArgument("placement_decay_quantum_ms must be positive and at most the half-life")
