"""Leader step-down: the write gap of a graceful hand-over, beside an abrupt step-down.

One master and three tablet servers with the servers' default timings (100 ms Raft tick,
500 ms Raft heartbeat, 1.5 s election timeout); one table with a single tablet, RF 3, fsync
on.  ``--writers`` tasks of the async client each upsert one row per call, back to back, with
the client's default retry policy, and note when each call is acknowledged (the writers of
``failover_bench.py``).

``--trials`` rounds, each of one graceful and one abrupt step-down (alternated, so both see
the same machine); before each step-down the replicas are caught up and ``--spacing`` more
writes have been acknowledged.  A step-down is one ``LeaderStepDown`` RPC to the leader:

- GRACEFUL (Kudu's default): no ``new_leader_uuid``, so the leader picks the most caught-up
  voter, stops taking writes, brings it up to date and sends it ``TimeoutNow``;
- ABRUPT: the leader steps down at once and sits out the next election; a follower campaigns
  when its election timeout runs out.

Per step-down:

- write gap: the longest time between two consecutive acknowledged writes around it (from
  the last acknowledgement before the request to the first after the new leader took over);
- new leader: from the request until another replica reports itself leader (polled every
  10 ms), which splits the gap into the hand-over and the client taking up the new leader.

Target: median graceful gap <= 0.5 s.  The abrupt gap of the same run is the reference, and
the failover gap of docs/benchmarks.md (kill -9 of the leader) is printed for context.
``bench/tablet_copy_bench.py`` measures the gap of a whole move-replica of the leader's
replica (which ends with a graceful step-down) beside graceful step-downs in its own run.

Usage: ``python bench/step_down_bench.py [--trials 10] [--writers 4] [--spacing 200] [--keep]``.
Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._cluster import Figure, cluster_options, connect, load_average, median, print_table, scratch_dir
from bench.failover_bench import SCHEMA, Writers, consensus, longest_gap, wait_caught_up
from nyala.client import ClientOptions
from nyala.proto import common_pb2
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.rpc import Messenger
from nyala.rpc.loop import run
from nyala.services import LEADER_STEP_DOWN
from nyala.testing.minicluster import ClusterServer, MiniCluster

FAILOVER_GAP_S = 1.62  # docs/benchmarks.md: median failover gap (kill -9 of the leader), not in this run
TRIAL_TIMEOUT_S = 60.0
MODES = ("graceful", "abrupt")


@dataclass
class StepDown:
    mode: str
    gap_s: float
    new_leader_s: float | None
    moved: bool


async def wait_other_leader(
    messenger: Messenger, servers: list[ClusterServer], tablet_id: str, old: ClusterServer, term: int
) -> float:
    """The moment a replica other than ``old`` reports itself leader of a term above ``term``."""
    while True:
        for server in servers:
            if server is old:
                continue
            state = await consensus(messenger, server, tablet_id)
            if state is not None and state.role == common_pb2.LEADER and state.current_term > term:
                return time.perf_counter()
        await asyncio.sleep(0.01)


async def wait_acks(writers: Writers, count: int) -> None:
    target = len(writers.acks) + count
    deadline = time.perf_counter() + TRIAL_TIMEOUT_S
    while len(writers.acks) < target:
        if time.perf_counter() > deadline:
            raise TimeoutError(f"{count} writes were not acknowledged in {TRIAL_TIMEOUT_S} s: {writers.errors[-3:]}")
        await asyncio.sleep(0.01)


async def step_down(
    cluster: MiniCluster, messenger: Messenger, writers: Writers, tablet_id: str, mode: str, spacing: int
) -> StepDown:
    leader, term = await wait_caught_up(cluster, messenger, tablet_id)
    await wait_acks(writers, spacing)
    request = cpb.LeaderStepDownRequestPB(dest_uuid=leader.uuid, tablet_id=tablet_id, abrupt=mode == "abrupt")
    asked_at = time.perf_counter()
    await messenger.call(leader.address, LEADER_STEP_DOWN, request, timeout=10)
    new_leader_s: float | None = None
    try:
        elected_at = await asyncio.wait_for(
            wait_other_leader(messenger, cluster.tservers, tablet_id, leader, term), TRIAL_TIMEOUT_S
        )
        new_leader_s = elected_at - asked_at
    except TimeoutError:
        elected_at = asked_at  # leadership did not move (a graceful transfer may give up)
    # The first acknowledgement after the new leader reported itself is certainly its own.
    await writers.wait_for_ack_after(elected_at, asked_at + TRIAL_TIMEOUT_S - time.perf_counter())
    resumed_at = time.perf_counter()
    gap = longest_gap(writers.acks, asked_at, resumed_at)
    return StepDown(mode, gap, new_leader_s, new_leader_s is not None)


async def measure(cluster: MiniCluster, args: argparse.Namespace) -> list[StepDown]:
    client = await connect(cluster)
    messenger = Messenger()
    writers: Writers | None = None
    try:
        table = await client.create_table("step_down_bench", SCHEMA, num_replicas=3, wait=True)
        tablet_id = (await table.tablets())[0].tablet_id
        writers = Writers(table, args.writers)
        results = []
        for i in range(args.trials):
            for mode in MODES:
                result = await step_down(cluster, messenger, writers, tablet_id, mode, args.spacing)
                leader = f"new leader after {result.new_leader_s:.3f} s" if result.moved else "leadership did not move"
                print(f"  round {i + 1} {mode:8s}: gap {result.gap_s:.3f} s; {leader}", flush=True)
                results.append(result)
        return results
    finally:
        if writers is not None:
            await writers.stop()
        await messenger.close()
        await client.close()


def report(results: list[StepDown], args: argparse.Namespace) -> None:
    o = ClientOptions()
    gaps = {m: [r.gap_s for r in results if r.mode == m] for m in MODES}
    moved = {m: [r.new_leader_s for r in results if r.mode == m and r.new_leader_s is not None] for m in MODES}
    graceful, abrupt = gaps["graceful"], gaps["abrupt"]
    figures = [
        Figure(f"write gap, median of {len(graceful)}, s", median(graceful), median(abrupt), "<= 0.5", 3),
        Figure("write gap, min, s", min(graceful), min(abrupt), "", 3),
        Figure("write gap, max, s", max(graceful), max(abrupt), "", 3),
        Figure("request -> new leader reports itself, median, s", median(moved["graceful"]),
               median(moved["abrupt"]), "", 3),
        Figure("request -> new leader reports itself, max, s", max(moved["graceful"], default=float("nan")),
               max(moved["abrupt"], default=float("nan")), "", 3),
    ]  # fmt: skip
    print_table(
        f"Leader step-down under writes from {args.writers} writers, graceful beside abrupt (same run); RF 3; "
        f"500 ms Raft heartbeat (1.5 s election timeout); {load_average()}",
        "abrupt",
        figures,
        [
            f"for context, the failover gap (kill -9 of the leader, docs/benchmarks.md, not this run): "
            f"median {FAILOVER_GAP_S:.2f} s",
            f"graceful gaps, s: {', '.join(f'{g:.3f}' for g in graceful)}",
            f"abrupt gaps, s: {', '.join(f'{g:.3f}' for g in abrupt)}",
            f"leadership did not move: graceful {len(graceful) - len(moved['graceful'])}, "
            f"abrupt {len(abrupt) - len(moved['abrupt'])}",
            f"client retries: backoff {o.retry_backoff_initial_ms} ms doubling to {o.retry_backoff_max_ms} ms, "
            f"{o.rpc_attempt_timeout_ms / 1000:g} s per attempt, {o.operation_timeout_ms / 1000:g} s per operation",
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=10, help="rounds of one graceful and one abrupt step-down")
    parser.add_argument("--writers", type=int, default=4, help="concurrent single-row writers")
    parser.add_argument("--spacing", type=int, default=200, help="acknowledged writes between step-downs")
    parser.add_argument("--keep", action="store_true", help="keep the data and logs under .bench-tmp")
    args = parser.parse_args()
    with scratch_dir("step-down-bench-", args.keep) as root, MiniCluster(root / "nyala", cluster_options()) as cluster:
        print(f"Leader step-down: {args.trials} graceful and {args.trials} abrupt step-downs ...", flush=True)
        results = run(measure(cluster, args))
    report(results, args)


if __name__ == "__main__":
    main()
