"""Helper process of test_wal_crash.py: append from several writers, print every acknowledgement.

Usage: ``python wal_crash_writer.py DIRECTORY SEED WRITERS [threads|asyncio]``.  Prints ``open
LAST_INDEX`` once the log is recovered, then ``ack FIRST LAST`` (flushed) after each append
completed, until killed.  ``threads`` (the default) runs WRITERS threads, one of them calling
``append_sync``, the others waiting on ``append``'s future; ``asyncio`` runs WRITERS tasks on
one uvloop event loop awaiting ``append_async``.  Entry contents are a function of the index
(:func:`expected_entry`), so the test can check every byte after reopening.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import sys
import threading

from nyala.rpc.loop import run
from nyala.wal import Log, LogEntry, WalOptions

TABLET = "crash-test"
OPTIONS = WalOptions(segment_size_bytes=32 * 1024)


def expected_entry(index: int) -> LogEntry:
    digest = hashlib.blake2b(index.to_bytes(8, "little"), digest_size=16).digest()
    size = (index * 7919) % 700
    return LogEntry(1 + index // 400, index, index % 5, (digest * (size // 16 + 1))[:size])


def main() -> None:
    directory, seed, writers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    mode = sys.argv[4] if len(sys.argv) > 4 else "threads"
    log = Log.open(directory, TABLET, OPTIONS)
    print(f"open {log.last_index}", flush=True)
    if mode == "asyncio":
        run(async_writers(log, seed, writers))
    else:
        thread_writers(log, seed, writers)


async def async_writers(log: Log, seed: int, tasks: int) -> None:
    async def writer(number: int) -> None:
        rng = random.Random(seed * 1000 + number)
        while True:
            count = rng.choice((1, 1, 1, 2, 5))
            first = log.next_index  # one event loop: reserving needs no lock
            last = await log.append_async([expected_entry(i) for i in range(first, first + count)])
            sys.stdout.write(f"ack {first} {last}\n")
            sys.stdout.flush()

    await asyncio.gather(*(writer(n) for n in range(tasks)))  # forever: the test kills this process


def thread_writers(log: Log, seed: int, threads: int) -> None:
    reserve = threading.Lock()
    output = threading.Lock()

    def writer(number: int) -> None:
        rng = random.Random(seed * 1000 + number)
        while True:
            count = rng.choice((1, 1, 1, 2, 5))
            with reserve:  # indexes are assigned in reservation order, as a Raft leader does
                first = log.next_index
                entries = [expected_entry(i) for i in range(first, first + count)]
                if number == 0:  # one thread blocks, committing on its own thread when the log is idle
                    last = log.append_sync(entries)
                else:
                    future = log.append(entries)
            if number != 0:
                last = future.result()
            with output:
                sys.stdout.write(f"ack {first} {last}\n")
                sys.stdout.flush()

    workers = [threading.Thread(target=writer, args=(n,), daemon=True) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()  # forever: the test kills this process


if __name__ == "__main__":
    main()
