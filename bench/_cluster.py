"""Shared pieces of the cluster benchmarks: a scratch directory, a cluster with production
timings, leaders spread over the tablet servers, closed-loop load with latencies and CPU, and
the figure table every benchmark prints.

The benchmarks run as scripts (``python bench/x.py``); each puts the repository root on
``sys.path`` so that ``bench._cluster`` imports the same way under mypy and at run time.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from nyala.client import AsyncClient, AsyncTable
from nyala.proto import common_pb2
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.rpc import Messenger
from nyala.services import GET_CONSENSUS_STATE, LEADER_STEP_DOWN
from nyala.testing.minicluster import MiniCluster, MiniClusterOptions

REPO = Path(__file__).resolve().parents[1]
SCRATCH = REPO / ".bench-tmp"  # git-ignored, on the repository's filesystem

#: The servers' own defaults (Kudu's): 100 ms Raft tick, 500 ms Raft heartbeat (so a 1.5 s
#: election timeout), 1 s master heartbeat.  Tests use faster timings; benchmarks do not.
PRODUCTION_TIMINGS = {"raft_tick_interval_ms": 100, "raft_heartbeat_interval_ms": 500, "heartbeat_interval_ms": 1000}


@contextlib.contextmanager
def scratch_dir(prefix: str, keep: bool = False) -> Iterator[Path]:
    """A fresh directory under .bench-tmp, deleted afterwards unless ``keep``."""
    SCRATCH.mkdir(exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=SCRATCH))
    try:
        yield path
    finally:
        if keep:
            print(f"kept {path}")
        else:
            shutil.rmtree(path, ignore_errors=True)


def cluster_options(num_tservers: int = 3, **overrides: object) -> MiniClusterOptions:
    """One master and ``num_tservers`` tablet servers with the production timings."""
    settings: dict[str, object] = {"num_masters": 1, "num_tservers": num_tservers, **PRODUCTION_TIMINGS}
    settings.update(overrides)
    return MiniClusterOptions(**settings)  # type: ignore[arg-type]


def process_cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process (all its threads), from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_of(pids: Sequence[int]) -> float:
    return sum(process_cpu_seconds(p) for p in pids)


async def settle(pids: Sequence[int], timeout_s: float = 30.0, busy_cores: float = 0.1) -> float:
    """Wait until the servers are idle (flushes and checkpoints a load left behind are done):
    below ``busy_cores`` of CPU over half a second.  Returns the seconds waited."""
    start = time.perf_counter()
    while time.perf_counter() - start < timeout_s:
        before, t0 = cpu_of(pids), time.perf_counter()
        await asyncio.sleep(0.5)
        if (cpu_of(pids) - before) / (time.perf_counter() - t0) < busy_cores:
            break
    return time.perf_counter() - start


_LOAD_AT_IMPORT = os.getloadavg()


def load_average() -> str:
    """The 1/5/15-minute load averages when the benchmark started and now (the run adds its own)."""
    start, now = _LOAD_AT_IMPORT, os.getloadavg()
    return (
        f"load average {start[0]:.2f} {start[1]:.2f} {start[2]:.2f} at the start, "
        f"{now[0]:.2f} {now[1]:.2f} {now[2]:.2f} at the end, {os.cpu_count()} cores"
    )


# --- instruction counts ---------------------------------------------------------------


class InstructionCounter:
    """Instructions that processes execute over a window, counted by ``perf stat``.

    On a shared two-core machine the rate and the CPU seconds of a figure move with the
    machine's speed, by 2x within an hour; the instructions a write takes barely do (two runs
    of the same code agreed within 1 %).  Without ``perf``, or without the permission to
    count, the count is None.
    """

    def __init__(self, pids: Sequence[int]) -> None:
        self._pids = [p for p in pids if p]
        fd, path = tempfile.mkstemp(prefix="perf-stat-", suffix=".csv")
        os.close(fd)
        self._output = Path(path)
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        perf = shutil.which("perf")
        if perf is None or not self._pids:
            return
        command = [perf, "stat", "-x", ",", "-e", "instructions", "-o", str(self._output)]
        command += ["-p", ",".join(map(str, self._pids))]
        self._process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self) -> int | None:
        """Stop counting; the instructions counted since ``start()``, or None."""
        process, self._process = self._process, None
        try:
            if process is None:
                return None
            process.send_signal(signal.SIGINT)  # perf stat writes its counts on SIGINT
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                return None
            for line in self._output.read_text().splitlines():
                value, _, rest = line.partition(",")
                if "instructions" in rest and value.strip().isdigit():
                    return int(value)
            return None
        finally:
            self._output.unlink(missing_ok=True)


# --- closed-loop load -------------------------------------------------------------------


@dataclass
class LoadResult:
    """Operations completed back to back by a fixed number of workers."""

    ops: int
    units: int  # rows (or puts) acknowledged; ``ops`` counts calls
    seconds: float
    latencies: list[float] = field(repr=False)
    client_cpu_s: float
    server_cpu_s: float
    client_instructions: int | None = None  # see InstructionCounter
    server_instructions: int | None = None

    @property
    def rate(self) -> float:
        return self.units / self.seconds if self.seconds else 0.0

    def percentile_ms(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e3

    @property
    def client_cpu_us(self) -> float:
        return self.client_cpu_s / self.units * 1e6 if self.units else float("nan")

    @property
    def server_cpu_us(self) -> float:
        return self.server_cpu_s / self.units * 1e6 if self.units else float("nan")

    @property
    def client_kilo_instructions(self) -> float | None:
        """Thousands of instructions per unit in this process, or None when not counted."""
        return self._per_unit(self.client_instructions)

    @property
    def server_kilo_instructions(self) -> float | None:
        return self._per_unit(self.server_instructions)

    def _per_unit(self, instructions: int | None) -> float | None:
        return None if instructions is None or not self.units else instructions / self.units / 1e3


async def closed_loop(
    op: Callable[[int], Awaitable[int]],
    workers: int,
    seconds: float,
    server_pids: Sequence[int],
    warmup_s: float = 1.0,
    count_instructions: bool = False,
) -> LoadResult:
    """``workers`` tasks call ``op(n)`` back to back (n numbers the calls, 0, 1, ...) for
    ``seconds`` after ``warmup_s``; ``op`` returns how many units it completed.  With
    ``count_instructions``, this process's and the servers' instructions are counted too."""
    # The servers' meter starts first: a perf started after this process's own would count as its child.
    meters = (InstructionCounter(server_pids), InstructionCounter([os.getpid()])) if count_instructions else ()
    counter = 0
    measuring = False
    latencies: list[float] = []
    units = 0
    stop_at = time.perf_counter() + warmup_s + seconds

    async def worker() -> None:
        nonlocal counter, units
        while (start := time.perf_counter()) < stop_at:
            n, counter = counter, counter + 1
            done = await op(n)
            if measuring:
                latencies.append(time.perf_counter() - start)
                units += done

    async def clock() -> tuple[float, float, float]:
        nonlocal measuring
        await asyncio.sleep(warmup_s)
        measuring = True
        # perf takes tens of milliseconds to attach, uncounted: about 1 % of a 10 s figure.
        for meter in meters:
            meter.start()
        return time.perf_counter(), time.process_time(), cpu_of(server_pids)

    clock_task = asyncio.ensure_future(clock())
    try:
        await asyncio.gather(*(worker() for _ in range(workers)))
        started, cpu_started, server_started = await clock_task
        elapsed = time.perf_counter() - started
        client_cpu_s, server_cpu_s = time.process_time() - cpu_started, cpu_of(server_pids) - server_started
    finally:
        server_instructions, client_instructions = (m.stop() for m in meters) if meters else (None, None)
    return LoadResult(
        ops=len(latencies),
        units=units,
        seconds=elapsed,
        latencies=latencies,
        client_cpu_s=client_cpu_s,
        server_cpu_s=server_cpu_s,
        client_instructions=client_instructions,
        server_instructions=server_instructions,
    )


# --- tablet leaders -----------------------------------------------------------------------


async def tablet_leaders(cluster: MiniCluster, messenger: Messenger) -> dict[str, str]:
    """Tablet id -> uuid of the tablet server that says it leads it, asked of every server."""
    leaders: dict[str, str] = {}
    for server in cluster.tservers:
        if not cluster.running(server):
            continue
        try:
            response = await messenger.call(server.address, GET_CONSENSUS_STATE, cpb.GetConsensusStateRequestPB())
        except Exception:
            continue
        for state in response.tablets:
            if state.leader_uuid and state.leader_uuid == server.uuid and state.role == common_pb2.LEADER:
                leaders[state.tablet_id] = server.uuid
    return leaders


async def spread_leaders(cluster: MiniCluster, table: AsyncTable, timeout_s: float = 60.0) -> dict[str, int]:
    """Move tablet leaders so that tablet i (in partition order) is led by tablet server
    i mod n: every server then leads its share.  Returns leaders per server address (what
    was reached, with a warning, if the moves did not all succeed in ``timeout_s``)."""
    tablets = [t.tablet_id for t in await table.tablets()]
    servers = cluster.tservers
    wanted = {tablet: servers[i % len(servers)].uuid for i, tablet in enumerate(tablets)}
    address_of = {s.uuid: s.address for s in servers}
    messenger = Messenger()
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            leaders = await tablet_leaders(cluster, messenger)
            wrong = [t for t in tablets if leaders.get(t) != wanted[t]]
            if not wrong:
                break
            if time.monotonic() > deadline:
                print(f"warning: {len(wrong)} of {len(tablets)} tablet leaders could not be moved in {timeout_s} s")
                break
            for tablet in wrong:
                current = leaders.get(tablet)
                if current is None:
                    continue  # an election is under way; look again
                request = cpb.LeaderStepDownRequestPB(tablet_id=tablet, new_leader_uuid=wanted[tablet])
                with contextlib.suppress(Exception):
                    await messenger.call(address_of[current], LEADER_STEP_DOWN, request)
            await asyncio.sleep(0.5)
    finally:
        await messenger.close()
    counts: dict[str, int] = {str(s.address): 0 for s in servers}
    for tablet in tablets:
        if tablet in leaders:
            counts[str(address_of[leaders[tablet]])] += 1
    return counts


async def connect(cluster: MiniCluster) -> AsyncClient:
    return await AsyncClient.connect(cluster.master_addresses_flag, timeout_s=60)


# --- the figure table ---------------------------------------------------------------------


@dataclass
class Figure:
    """One line of a benchmark's table."""

    name: str
    nyala: float | None
    reference: float | None = None
    target: str = ""
    digits: int = 0
    #: For "lower is better" figures (latencies, gaps) the ratio is still nyala / reference.
    note: str = ""

    def cells(self) -> list[str]:
        def show(value: float | None) -> str:
            return "-" if value is None else f"{value:,.{self.digits}f}"

        ratio = "-"
        if self.nyala is not None and self.reference:
            ratio = f"{self.nyala / self.reference:.2f}"
        return [self.name, show(self.nyala), show(self.reference), ratio, self.target]


def print_table(title: str, reference_name: str, figures: Sequence[Figure], notes: Sequence[str] = ()) -> None:
    header = ["figure", "Nyala", reference_name, "ratio", "target"]
    rows = [header, *(f.cells() for f in figures)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    print(f"\n{title}")
    for i, row in enumerate(rows):
        cells = [row[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(row[1:4], widths[1:4], strict=True))]
        print("  ".join([*cells, row[4]]).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))
    for note in notes:
        print(f"  {note}")


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")
