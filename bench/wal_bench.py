"""WAL throughput: group commit against a raw os.write + os.fdatasync loop, in the same run.

For 1, 8 and 64 writers and 256-byte and 4 KiB entries, each writer appends one entry and
waits until it is durable, back to back (fsync on, default settings, 8 MiB segments).  Writers
come in three kinds:

- threads ("1", "8", "64"): take their index under a shared lock, call ``Log.append`` and wait
  on its ``concurrent.futures.Future`` outside the lock; "1s" is one thread calling
  ``Log.append_sync``, which commits on the caller's own thread when the log is idle;
- asyncio tasks on one event loop ("1a", "8a", "64a"): ``await log.append_async(...)``, the
  asyncio-native path whose futures the appender resolves with one loop wake-up per group;
- "64w": 64 asyncio tasks awaiting ``asyncio.wrap_future(log.append(...))``, the way the
  consensus runtime appended before ``append_async`` existed (one loop wake-up per append).

The event loop is uvloop, as in the servers (``--loop asyncio`` for the standard one).  For
asyncio rows "cpu/e" is the event-loop thread's CPU time per entry, all of the writers' own
work included.
Beside each WAL figure two references are measured on the same filesystem, in the same run:

- raw 1-writer: one thread looping os.write of one entry's bytes (as the WAL frames it) and
  os.fdatasync, into files preallocated to the WAL's segment size (a fresh one, prepared off the
  clock, when one is full);
- raw equal-group: the same loop writing, per fdatasync, as many entries as the WAL's average
  group size in that run.

The three are interleaved in short slices so that load from other processes hits them alike.
Targets: with 64 writers, WAL >= 0.8 x raw equal-group; with 1 writer, WAL >= 0.8 x raw 1-writer.

Usage: ``python bench/wal_bench.py [--seconds 2] [--slices 20] [--dir PATH] [--loop uvloop]``.  ``--seconds``
is the time per measurement per cell.  Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from nyala.rpc.loop import loop_factory
from nyala.wal import Log, LogEntry, WalOptions
from nyala.wal.format import batch_header, encode_entries

REPO = Path(__file__).resolve().parents[1]
SEGMENT_BYTES = WalOptions().segment_size_bytes


@dataclass
class Tally:
    """Entries and seconds summed over slices."""

    entries: int = 0
    seconds: float = 0.0
    groups: int = 0
    group_sizes: list[int] = field(default_factory=list)
    loop_cpu: float = 0.0  # event-loop thread CPU seconds (asyncio writers only)

    @property
    def rate(self) -> float:
        return self.entries / self.seconds if self.seconds else 0.0


def framed_entry(size: int) -> bytes:
    """The bytes the WAL writes for one single-entry group: batch header, record header, payload."""
    data, _ = encode_entries([LogEntry(1, 1, 0, os.urandom(size))])
    return batch_header(data) + data


class RawWriter:
    """The raw reference: os.write + os.fdatasync into files laid out like WAL segments.

    Each file is preallocated to the WAL's segment size (a much larger preallocated file makes
    every fdatasync markedly slower on ext4, which would flatter the WAL).  Files are created
    and made durable off the clock, and only deleted when the cell is done, so no slice pays
    for another's metadata.
    """

    def __init__(self, directory: str, name: str) -> None:
        self._directory = directory
        self._name = name
        self._paths: list[str] = []
        self._fd = -1
        self._written = 0
        self._next_file()

    def _next_file(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        path = os.path.join(self._directory, f"{self._name}-{len(self._paths)}")
        self._paths.append(path)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.posix_fallocate(self._fd, 0, SEGMENT_BYTES)
        os.fsync(self._fd)
        dir_fd = os.open(self._directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        self._written = 0

    def run(self, chunk: bytes, entries_per_write: int, seconds: float, tally: Tally) -> None:
        """Loop for ``seconds`` of clock time; a full file is replaced by a fresh one off the clock."""
        elapsed = 0.0
        fd = self._fd
        while elapsed < seconds:
            start = time.perf_counter()
            stop = start + seconds - elapsed
            while self._written + len(chunk) <= SEGMENT_BYTES and time.perf_counter() < stop:
                os.write(fd, chunk)
                os.fdatasync(fd)
                self._written += len(chunk)
                tally.entries += entries_per_write
            elapsed += time.perf_counter() - start
            if self._written + len(chunk) > SEGMENT_BYTES:
                self._next_file()
                fd = self._fd
        tally.seconds += elapsed

    def close(self) -> None:
        os.close(self._fd)
        for path in self._paths:
            os.unlink(path)


@dataclass(frozen=True)
class Mode:
    """How the WAL is driven: ``writers`` writers, each appending ``per_append`` entries per call.

    ``api`` is ``sync`` (append_sync), ``future`` (append + Future.result on threads), ``wrap``
    (asyncio tasks awaiting asyncio.wrap_future(append)) or ``async`` (tasks awaiting
    append_async).
    """

    label: str
    writers: int
    api: str
    per_append: int = 1

    @property
    def asyncio_tasks(self) -> bool:
        return self.api in ("wrap", "async")


class WalRun:
    """One log kept open across slices; writers reserve indexes under a shared lock, as Raft does."""

    def __init__(self, directory: str, entry_size: int, mode: Mode, use_uvloop: bool) -> None:
        self.log = Log.open(os.path.join(directory, "wal"), "bench")
        self.loop_factory = loop_factory() if use_uvloop else asyncio.new_event_loop
        self.mode = mode
        self.payload = os.urandom(entry_size)
        self.lock = threading.Lock()
        self.next_index = 1

    def slice(self, seconds: float, tally: Tally) -> None:
        """Drive the log for ``seconds``; thread start-up and shutdown stay off the clock."""
        groups_before, requests_before = self.log.group_stats
        counts: list[int] = []
        if self.mode.asyncio_tasks:
            with asyncio.Runner(loop_factory=self.loop_factory) as runner:
                elapsed, cpu = runner.run(self._async_writers(seconds, counts))
            tally.loop_cpu += cpu
        else:
            elapsed = self._thread_writers(seconds, counts)
        tally.seconds += elapsed
        tally.entries += sum(counts)
        groups, requests = self.log.group_stats
        tally.groups += groups - groups_before
        per_group = (requests - requests_before) * self.mode.per_append / max(groups - groups_before, 1)
        tally.group_sizes.append(round(per_group))

    def _entries(self, first: int) -> list[LogEntry]:
        return [LogEntry(1, i, 0, self.payload) for i in range(first, first + self.mode.per_append)]

    def _thread_writers(self, seconds: float, counts: list[int]) -> float:
        ready = threading.Barrier(self.mode.writers + 1)
        window: list[float] = []  # [start, stop], set before the barrier opens
        finished: list[float] = []
        threads = [
            threading.Thread(target=self._writer, args=(ready, window, counts, finished))
            for _ in range(self.mode.writers)
        ]
        for t in threads:
            t.start()
        start = time.perf_counter()
        window.extend((start, start + seconds))
        ready.wait()
        for t in threads:
            t.join()
        return max(finished) - start

    def _writer(self, ready: threading.Barrier, window: list[float], counts: list[int], finished: list[float]) -> None:
        ready.wait()
        stop = window[1]
        done = 0
        log = self.log
        count = self.mode.per_append
        while time.perf_counter() < stop:
            if self.mode.api == "future":
                with self.lock:  # indexes are assigned in reservation order, as a Raft leader does
                    first = self.next_index
                    self.next_index = first + count
                    future = log.append(self._entries(first))
                future.result()
            else:  # a single writer: no lock needed around the index
                log.append_sync(self._entries(self.next_index))
                self.next_index += count
            done += count
        finished.append(time.perf_counter())
        counts.append(done)

    async def _async_writers(self, seconds: float, counts: list[int]) -> tuple[float, float]:
        """Run the tasks; return (elapsed seconds, event-loop thread CPU seconds)."""
        start = time.perf_counter()
        cpu_start = time.thread_time()
        stop = start + seconds
        native = self.mode.api == "async"

        async def task() -> None:
            done = 0
            log = self.log
            while time.perf_counter() < stop:
                first = self.next_index  # one event loop: reserving is atomic without a lock
                self.next_index = first + self.mode.per_append
                if native:
                    await log.append_async(self._entries(first))
                else:
                    await asyncio.wrap_future(log.append(self._entries(first)))
                done += self.mode.per_append
            counts.append(done)

        await asyncio.gather(*(task() for _ in range(self.mode.writers)))
        return time.perf_counter() - start, time.thread_time() - cpu_start

    def close(self) -> None:
        self.log.close()


def handoff_ceiling(writers: int, seconds: float) -> float:
    """Entries/s when writer threads hand requests to one thread that completes them with no I/O.

    Uses the cheapest primitives there are (a deque and raw locks), so it bounds what any
    thread-per-writer design reaches on this machine, whatever the log does.
    """
    pending: deque[threading.Lock | None] = deque()
    bell = threading.Semaphore(0)

    def completer() -> None:
        while True:
            bell.acquire()
            while pending:
                waiter = pending.popleft()
                if waiter is None:
                    return
                waiter.release()

    counts: list[int] = []
    order = threading.Lock()
    stop = time.perf_counter() + seconds

    def writer() -> None:
        done = 0
        while time.perf_counter() < stop:
            waiter = threading.Lock()
            waiter.acquire()
            with order:
                pending.append(waiter)
            bell.release()
            waiter.acquire()
            done += 1
        counts.append(done)

    thread = threading.Thread(target=completer)
    thread.start()
    start = time.perf_counter()
    writers_threads = [threading.Thread(target=writer) for _ in range(writers)]
    for t in writers_threads:
        t.start()
    for t in writers_threads:
        t.join()
    elapsed = time.perf_counter() - start
    pending.append(None)
    bell.release()
    thread.join()
    return sum(counts) / elapsed


def asyncio_ceiling(writers: int, seconds: float, use_uvloop: bool) -> float:
    """Entries/s when asyncio tasks await futures that one thread completes in bulk, with no I/O.

    Like the WAL's appender, the thread is woken when a request reaches it idle, takes
    everything queued and resolves it with one ``call_soon_threadsafe``; the tasks build the
    same one-entry lists as the WAL rows.  So it bounds ``append_async`` with that many tasks
    on this machine, whatever the disk.
    """
    pending: list[asyncio.Future[int]] = []
    lock = threading.Lock()
    bell = threading.Semaphore(0)
    state = {"busy": False, "running": True}

    def resolve(batch: list[asyncio.Future[int]]) -> None:
        for future in batch:
            future.set_result(0)

    def completer(loop: asyncio.AbstractEventLoop) -> None:
        while True:
            bell.acquire()
            if not state["running"]:
                return
            while True:
                with lock:
                    batch = pending[:]
                    pending.clear()
                    if not batch:
                        state["busy"] = False
                        break
                loop.call_soon_threadsafe(resolve, batch)

    async def main() -> float:
        loop = asyncio.get_running_loop()
        thread = threading.Thread(target=completer, args=(loop,))
        thread.start()
        payload = os.urandom(256)
        counts: list[int] = []
        start = time.perf_counter()
        stop = start + seconds

        async def task() -> None:
            done = 0
            while time.perf_counter() < stop:
                _ = [LogEntry(1, done, 0, payload)]
                future = loop.create_future()
                with lock:
                    pending.append(future)
                    ring = not state["busy"]
                    state["busy"] = True
                if ring:
                    bell.release()
                await future
                done += 1
            counts.append(done)

        await asyncio.gather(*(task() for _ in range(writers)))
        elapsed = time.perf_counter() - start
        state["running"] = False
        bell.release()
        await asyncio.to_thread(thread.join)
        return sum(counts) / elapsed

    with asyncio.Runner(loop_factory=loop_factory() if use_uvloop else asyncio.new_event_loop) as runner:
        return runner.run(main())


@dataclass
class Cell:
    mode: Mode
    entry_size: int
    wal: Tally
    raw_single: Tally
    raw_group: Tally

    @property
    def average_group(self) -> float:
        return self.wal.entries / self.wal.groups if self.wal.groups else 0.0


def measure(directory: str, mode: Mode, entry_size: int, seconds: float, slices: int, use_uvloop: bool) -> Cell:
    cell = Cell(mode, entry_size, Tally(), Tally(), Tally())
    chunk = framed_entry(entry_size)
    run = WalRun(directory, entry_size, mode, use_uvloop)
    raw_group = RawWriter(directory, "raw-group")
    raw_single = RawWriter(directory, "raw-single")
    try:
        for _ in range(slices):
            run.slice(seconds / slices, cell.wal)
            group = max(cell.wal.group_sizes[-1], 1)
            raw_group.run(chunk * group, group, seconds / slices, cell.raw_group)
            raw_single.run(chunk, 1, seconds / slices, cell.raw_single)
    finally:
        run.close()
        raw_group.close()
        raw_single.close()
    return cell


def filesystem_of(path: str) -> str:
    best = ("", "?", "?")
    with open("/proc/self/mounts") as f:
        for line in f:
            device, mount, kind = line.split()[:3]
            if path.startswith(mount) and len(mount) >= len(best[1]):
                best = (device, mount, kind)
    return f"{best[2]} on {best[0]} (mounted at {best[1]})"


def print_table(cells: list[Cell]) -> None:
    header = (
        f"{'writers':>7} {'entry':>6} {'WAL e/s':>9} {'WAL MB/s':>9} {'avg grp':>7} "
        f"{'raw1 e/s':>9} {'rawG e/s':>9} {'WAL/rawG':>8} {'WAL/raw1':>8} {'cpu/e':>6}  target"
    )
    print(header)
    print("-" * len(header))
    for c in cells:
        vs_group = c.wal.rate / c.raw_group.rate if c.raw_group.rate else 0.0
        vs_single = c.wal.rate / c.raw_single.rate if c.raw_single.rate else 0.0
        target = ""
        if c.mode.writers == 64 and c.mode.api in ("future", "async"):
            target = f"WAL/rawG >= 0.8: {'met' if vs_group >= 0.8 else 'NOT met'}"
        elif c.mode.writers == 1 and c.mode.per_append == 1:
            target = f"WAL/raw1 >= 0.8: {'met' if vs_single >= 0.8 else 'NOT met'}"
        cpu = f"{c.wal.loop_cpu / c.wal.entries * 1e6:>5.1f}u" if c.mode.asyncio_tasks and c.wal.entries else ""
        print(
            f"{c.mode.label:>7} {c.entry_size:>6} {c.wal.rate:>9.0f} {c.wal.rate * c.entry_size / 1e6:>9.2f} "
            f"{c.average_group:>7.1f} {c.raw_single.rate:>9.0f} {c.raw_group.rate:>9.0f} "
            f"{vs_group:>8.2f} {vs_single:>8.2f} {cpu:>6}  {target}"
        )


MODES = (
    Mode("1s", 1, "sync"),
    Mode("1", 1, "future"),
    Mode("8", 8, "future"),
    Mode("64", 64, "future"),
    Mode("64w", 64, "wrap"),
    Mode("1a", 1, "async"),
    Mode("8a", 8, "async"),
    Mode("64a", 64, "async"),
)


def run_cells(scratch: str, seconds: float, slices: int, use_uvloop: bool, only: set[str] | None) -> list[Cell]:
    cells: list[Cell] = []
    for entry_size in (256, 4096):
        for mode in MODES:
            if only is None or mode.label in only:
                cells.append(measure(scratch, mode, entry_size, seconds, slices, use_uvloop))
                shutil.rmtree(os.path.join(scratch, "wal"))
        # One writer appending as many entries per call as the 64 writers' groups held: the WAL's
        # own cost per group, without 64 writers' wake-ups per entry.  "1axG" is the consensus
        # runtime's pattern: one task on the event loop, one append_async per Raft Ready.
        for source, label, api in (("64", "1xG", "sync"), ("64a", "1axG", "async")):
            done = [c for c in cells if c.mode.label == source and c.entry_size == entry_size]
            if done and (only is None or label in only):
                group = max(round(done[0].average_group), 1)
                mode = Mode(label.replace("G", str(group)), 1, api, group)
                cells.append(measure(scratch, mode, entry_size, seconds, slices, use_uvloop))
                shutil.rmtree(os.path.join(scratch, "wal"))
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="time per measurement per cell")
    parser.add_argument("--slices", type=int, default=20, help="interleaved slices per measurement")
    parser.add_argument("--dir", default=str(REPO / ".bench-tmp"), help="scratch directory (same filesystem)")
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop", help="event loop of asyncio rows")
    parser.add_argument("--only", help="comma-separated row labels to run (1s,1,8,64,64w,1a,8a,64a,1xG,1axG)")
    parser.add_argument(
        "--switch-interval", type=float, help="sys.setswitchinterval for the whole run (Python's default: 0.005 s)"
    )
    args = parser.parse_args()
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    base = Path(args.dir)
    created = not base.exists()
    base.mkdir(parents=True, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="wal-bench-", dir=base)
    print(f"WAL group commit vs raw os.write + os.fdatasync; fsync on; {args.seconds} s per measurement")
    print(f"asyncio rows run on {args.loop}; GIL switch interval {sys.getswitchinterval() * 1e3:g} ms")
    print(f"scratch: {scratch} ({filesystem_of(os.path.realpath(scratch))}); {os.cpu_count()} CPUs")
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    try:
        only = set(args.only.split(",")) if args.only else None
        cells = run_cells(scratch, args.seconds, args.slices, args.loop == "uvloop", only)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if created:
            try:
                base.rmdir()
            except OSError:
                pass
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    print()
    print_table(cells)
    print()
    print("e/s = entries per second acknowledged durable; MB/s counts entry payload bytes;")
    print("raw1 = one writer, one entry per fdatasync; rawG = one writer, 'avg grp' entries per fdatasync.")
    print("writers 1s = one writer calling append_sync (commits on its own thread when the log is idle);")
    print("1, 8, 64 = threads waiting on append()'s future; 1xG = one thread, append_sync, G entries per call;")
    print("1a, 8a, 64a = asyncio tasks on one event loop awaiting log.append_async(...); 1axG = one task,")
    print("append_async with G entries per call (the consensus runtime's pattern: one append per Ready);")
    print("64w = 64 asyncio tasks awaiting asyncio.wrap_future(log.append(...)) (the old asyncio path);")
    print("cpu/e = event-loop thread CPU per entry (asyncio rows), the writers' own work included.")
    ceilings = ", ".join(f"{n} writers {handoff_ceiling(n, 1.0):.0f} e/s" for n in (8, 64))
    print(f"thread hand-off ceiling (no I/O, raw locks; bounds any thread-per-writer design): {ceilings}")
    use_uvloop = args.loop == "uvloop"
    ceilings = ", ".join(f"{n} tasks {asyncio_ceiling(n, 1.0, use_uvloop):.0f} e/s" for n in (1, 8, 64))
    print(f"asyncio hand-off ceiling (no I/O, one loop call per group; bounds append_async): {ceilings}")


if __name__ == "__main__":
    main()
