"""The process supervisor under MiniCluster: real child processes, signals and cleanup."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from nyala.testing.process import (
    ProcessError,
    ServerProcess,
    pid_alive,
    running_pids,
    stop_all,
    stop_pids,
)
from nyala.testing.wait import wait_for

pytestmark = pytest.mark.timeout(60)


def _kill(procs: list[ServerProcess]) -> None:
    """Kill a test's own processes (never ``kill_all``: the test process may hold others)."""
    for proc in procs:
        if proc.running:
            proc.kill()


SERVER = """
import pathlib, sys, time
pathlib.Path(sys.argv[1]).write_text("ready")
print("serving", flush=True)
while True:
    time.sleep(0.01)
"""


def state(pid: int) -> str:
    """The kernel's one-letter process state (R, S, T for stopped, ...)."""
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


@pytest.fixture
def server(tmp_path: Path):
    ready = tmp_path / "ready"
    proc = ServerProcess("toy", [sys.executable, "-c", SERVER, str(ready)], tmp_path / "toy.log")
    try:
        yield proc, ready
    finally:
        proc.kill()


def test_start_kill_and_restart(server) -> None:
    proc, ready = server
    proc.start()
    proc.wait_ready(ready.exists)
    first = proc.pid
    assert proc.running
    proc.kill()
    assert not proc.running
    assert proc.returncode == -9
    ready.unlink()
    proc.restart()
    proc.wait_ready(ready.exists)
    assert proc.pid != first
    assert "serving" in proc.log_tail()


def test_pause_stops_the_process_and_resume_continues_it(server) -> None:
    proc, ready = server
    proc.start()
    proc.wait_ready(ready.exists)
    proc.pause()
    assert state(proc.pid) == "T"
    proc.resume()
    assert proc.running
    assert not proc.paused


def test_stop_of_a_paused_process_still_terminates_it(server) -> None:
    proc, ready = server
    proc.start()
    proc.wait_ready(ready.exists)
    proc.pause()
    proc.stop(timeout_s=10)
    assert not proc.running


def test_a_process_that_dies_at_startup_is_reported_with_its_log(tmp_path: Path) -> None:
    proc = ServerProcess("broken", [sys.executable, "-c", "raise SystemExit('bad flag --x')"], tmp_path / "b.log")
    proc.start()
    with pytest.raises(ProcessError, match="bad flag --x"):
        proc.wait_ready(lambda: False, timeout_s=30)


def test_kill_all_leaves_nothing_running(tmp_path: Path) -> None:
    # In a process of its own: kill_all kills every server this process started, and a test
    # process may hold servers of other tests (a session-scoped cluster) at the same time.
    script = f"""
import sys
from pathlib import Path
from nyala.testing.process import ServerProcess, kill_all, running_pids
root = Path({str(tmp_path)!r})
procs = [ServerProcess(f"p{{i}}", [sys.executable, "-c", {SERVER!r}, str(root / f"r{{i}}")], root / f"{{i}}.log")
         for i in range(3)]
for p in procs:
    p.start()
assert set(running_pids()) >= {{p.pid for p in procs}}
kill_all()
assert not any(p.running for p in procs)
assert running_pids() == []
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


# A server that, asked to stop, notes it and exits cleanly only once every one of its siblings
# has been asked too: stopped one after the other, the first would wait for ever (it gives up
# after 60 s with status 3).  Signals instead of polling: SIGTERM and SIGUSR1 are blocked, so
# one that arrives early stays pending until ``sigwait`` takes it; each server, once asked,
# sends SIGUSR1 to its siblings (their PIDs are in their ready files) to have them look again.
SIBLING_SERVER = """
import os, pathlib, signal, sys, time
me, siblings = pathlib.Path(sys.argv[1]), [pathlib.Path(p) for p in sys.argv[2:]]
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGUSR1})
me.with_suffix(".ready").write_text(str(os.getpid()))
signal.sigwait({signal.SIGTERM})
me.write_text("asked")
for sibling in siblings:
    if sibling != me:
        os.kill(int(sibling.with_suffix(".ready").read_text()), signal.SIGUSR1)
deadline = time.monotonic() + 60
while not all(p.exists() for p in siblings):
    if signal.sigtimedwait({signal.SIGUSR1}, max(0.0, deadline - time.monotonic())) is None:
        sys.exit(3)
sys.exit(0)
"""


def test_stop_all_asks_every_process_before_waiting_for_any(tmp_path: Path) -> None:
    marks = [tmp_path / f"asked-{i}" for i in range(3)]
    procs = [
        ServerProcess(
            f"s{i}", [sys.executable, "-c", SIBLING_SERVER, str(mark), *map(str, marks)], tmp_path / f"{i}.log"
        )
        for i, mark in enumerate(marks)
    ]
    try:
        for p in procs:
            p.start()
        for p, mark in zip(procs, marks, strict=True):
            p.wait_ready(mark.with_suffix(".ready").exists)
        procs[1].pause()
        stop_all(procs, timeout_s=30)
        # Exit status 0: each saw every sibling asked, so none needed the SIGKILL after the timeout;
        # the paused one was resumed to act on its SIGTERM.
        assert [p.returncode for p in procs] == [0, 0, 0]
        assert not any(p.running or p.paused for p in procs)
        assert not set(running_pids()) & {p.pid for p in procs}
    finally:
        _kill(procs)


def test_stop_all_kills_a_process_that_ignores_sigterm(tmp_path: Path) -> None:
    stubborn = (
        "import pathlib, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "pathlib.Path(sys.argv[1]).write_text('ready')\n"
        "while True: signal.pause()"
    )
    ready = tmp_path / "ready"
    proc = ServerProcess("stubborn", [sys.executable, "-c", stubborn, str(ready)], tmp_path / "s.log")
    try:
        proc.start()
        proc.wait_ready(ready.exists)
        stop_all([proc], timeout_s=0.5)
        assert proc.returncode == -9
        assert proc.pid not in running_pids()
    finally:
        _kill([proc])


def test_stop_pids_stops_processes_this_one_does_not_own(tmp_path: Path) -> None:
    procs = [
        ServerProcess(
            f"d{i}", [sys.executable, "-c", SERVER, str(tmp_path / f"r{i}")], tmp_path / f"{i}.log", owned=False
        )
        for i in range(2)
    ]
    try:
        for i, p in enumerate(procs):
            p.start()
            p.wait_ready((tmp_path / f"r{i}").exists)
        procs[0].pause()
        pids = [p.pid for p in procs]
        assert all(pid is not None and pid_alive(pid) for pid in pids)
        stop_pids([pid for pid in pids if pid is not None], timeout_s=30)
        assert not any(pid is not None and pid_alive(pid) for pid in pids)
        assert [p._proc.wait(timeout=30) if p._proc else None for p in procs] == [-15, -15]
    finally:
        for p in procs:
            if p.running:
                p.kill()


# A server holding the lifeline like Nyala's own: it reports whether it got one, and answers
# SIGUSR1 by writing a "pong" file (a process killed or being killed can no longer do that).
LIFELINE_SERVER = """
import os, pathlib, signal, sys, threading
from nyala.server.lifeline import hold_lifeline
here = pathlib.Path(sys.argv[1])
signal.signal(signal.SIGUSR1, lambda *_: (here / "pong").write_text("pong"))
(here / "ready").write_text(str(hold_lifeline()))
threading.Event().wait()
"""


def lifeline_server(tmp_path: Path, owned: bool) -> ServerProcess:
    return ServerProcess(
        "holder", [sys.executable, "-c", LIFELINE_SERVER, str(tmp_path)], tmp_path / "holder.log", owned=owned
    )


@pytest.mark.parametrize("owned", [True, False])
def test_owned_processes_get_a_lifeline_and_others_do_not(tmp_path: Path, owned: bool) -> None:
    proc = lifeline_server(tmp_path, owned)
    try:
        proc.start()
        proc.wait_ready((tmp_path / "ready").exists)
        assert (tmp_path / "ready").read_text() == str(owned)
    finally:
        proc.kill()


def test_an_owned_process_outlives_the_thread_that_started_it(tmp_path: Path) -> None:
    # Linux sends the parent-death signal when the *thread* that forked a child ends; the
    # supervisor forks from a thread of its own so that a server started from a short-lived
    # worker thread lives on.
    proc = lifeline_server(tmp_path, owned=True)

    def start() -> None:
        proc.start()
        proc.wait_ready((tmp_path / "ready").exists)  # the server holds its lifeline before the thread ends

    starter = threading.Thread(target=start)
    try:
        starter.start()
        starter.join()
        assert starter.native_id is not None
        gone = str(starter.native_id)
        wait_for(lambda: gone not in os.listdir("/proc/self/task"), what="the starting thread to have exited")
        assert proc.pid is not None
        os.kill(proc.pid, signal.SIGUSR1)
        # Had the kernel sent SIGKILL at the thread's exit, no handler could run any more.
        wait_for((tmp_path / "pong").exists, what="an answer after the starter thread ended", timeout_s=10)
        assert proc.running
    finally:
        proc.kill()
