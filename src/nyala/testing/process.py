"""Real server processes for tests, benchmarks and the local cluster: start, kill -9, pause, restart.

A :class:`ServerProcess` owns one child process, started in its own session so that
signals reach it and nothing else. Its output goes to a log file whose tail is quoted when
the process fails to start. Every process started here is recorded in a module-level
registry by PID, and :func:`kill_all` (called by fixtures and at interpreter exit) kills
whatever is still running, so a failing test never leaves servers behind.

A process killed outright (SIGKILL, or SIGTERM's default action) runs no exit handler, so
owned processes are also tied to this one by a *lifeline* (:mod:`nyala.server.lifeline`):
each gets the read end of a pipe whose write end this process alone keeps open, named in
``NYALA_LIFELINE_FD``; servers watch it and ask the kernel for SIGKILL when their parent
dies.  Owned processes are forked from one daemon thread that lives as long as this process,
because Linux delivers that signal when the forking *thread* ends, and a server started from
a short-lived worker thread would otherwise die with the thread.  Processes made with
``owned=False`` (the local cluster's) get no lifeline and live on.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from queue import SimpleQueue

from nyala.server.lifeline import LIFELINE_ENV
from nyala.testing.wait import WaitTimeout, wait_for

__all__ = [
    "ProcessError",
    "ServerProcess",
    "kill_all",
    "pid_alive",
    "running_pids",
    "stop_all",
    "stop_pid",
    "stop_pids",
]

_LIVE: dict[int, ServerProcess] = {}


class ProcessError(RuntimeError):
    """A server process did not start, or died when it should be running."""


class ServerProcess:
    """One child process with a name, an argument list and a log file."""

    def __init__(
        self, name: str, argv: Sequence[str], log_path: Path, env: dict[str, str] | None = None, *, owned: bool = True
    ) -> None:
        """``owned=False`` makes a process that outlives this one (the local cluster): it is not
        killed at exit, and may later be stopped by pid with :func:`stop_pid`."""
        self.name = name
        self.owned = owned
        self.argv = list(argv)
        self.log_path = log_path
        self.env = env
        self._proc: subprocess.Popen[bytes] | None = None
        self.paused = False

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode if self._proc is not None else None

    def start(self) -> None:
        if self.running:
            raise ProcessError(f"{self.name} is already running as pid {self.pid}")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            log.write(f"\n=== {time.strftime('%H:%M:%S')} starting: {' '.join(self.argv)}\n".encode())
            log.flush()
            env = {**os.environ, **(self.env or {})}
            env.pop(LIFELINE_ENV, None)  # never one inherited from whoever started this process
            if self.owned:
                lifeline = _Lifeline.of_this_process()
                env[LIFELINE_ENV] = str(lifeline.read_fd)
                self._proc = lifeline.spawn(lambda: subprocess.Popen(
                    self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                    start_new_session=True, pass_fds=(lifeline.read_fd,),
                ))  # fmt: skip
            else:
                self._proc = subprocess.Popen(
                    self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                    start_new_session=True,
                )  # fmt: skip
        self.paused = False
        if self.owned:
            _LIVE[self._proc.pid] = self

    def wait_ready(self, is_ready: Callable[[], bool], timeout_s: float = 60.0, poll_s: float = 0.05) -> None:
        """Poll ``is_ready`` until it is true; fail with the log's tail if the process exits or time runs out."""

        def ready() -> bool:
            if not self.running:
                raise ProcessError(f"{self.name} exited with code {self.returncode}:\n{self.log_tail()}")
            return is_ready()

        try:
            wait_for(ready, what=f"{self.name} to be ready", timeout_s=timeout_s, interval_s=poll_s)
        except WaitTimeout:
            raise ProcessError(f"{self.name} was not ready within {timeout_s:.0f} s:\n{self.log_tail()}") from None

    def kill(self) -> None:
        """SIGKILL (kill -9) and reap; nothing is flushed, as in a crash."""
        self._signal_and_wait(signal.SIGKILL, timeout_s=30)

    def stop(self, timeout_s: float = 20.0) -> None:
        """SIGTERM for a clean shutdown, then SIGKILL if it takes longer than ``timeout_s``."""
        stop_all([self], timeout_s=timeout_s)

    def _request_stop(self) -> bool:
        """SIGTERM (after SIGCONT if paused) without waiting; False when it was not running."""
        if not self.running:
            self._forget()
            return False
        if self.paused:
            self.resume()
        assert self._proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(self._proc.pid, signal.SIGTERM)
        return True

    def _await_stop(self, deadline: float) -> None:
        """Reap after :meth:`_request_stop`; SIGKILL if it is still running at ``deadline``."""
        assert self._proc is not None
        try:
            self._proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.kill()
            return
        self.paused = False
        self._forget()

    def pause(self, timeout_s: float = 10.0) -> None:
        """SIGSTOP: the process stays alive but stops answering, like a long GC pause or a hung disk.

        Returns once the kernel reports the process stopped (signals are delivered asynchronously).
        """
        self._send(signal.SIGSTOP)
        self.paused = True
        pid = self._proc.pid if self._proc else -1
        try:
            wait_for(
                lambda: _process_state(pid) in {"T", "t", "Z", "X", ""},
                what=f"{self.name} to stop on SIGSTOP",
                timeout_s=timeout_s,
                interval_s=0.001,
            )
        except WaitTimeout:
            raise ProcessError(f"{self.name} did not stop within {timeout_s} s of SIGSTOP") from None

    def resume(self) -> None:
        self._send(signal.SIGCONT)
        self.paused = False

    def restart(self) -> None:
        if self.running:
            self.stop()
        self.start()

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def _send(self, sig: signal.Signals) -> None:
        if not self.running:
            raise ProcessError(f"{self.name} is not running")
        assert self._proc is not None
        os.kill(self._proc.pid, sig)

    def _signal_and_wait(self, sig: signal.Signals, timeout_s: float) -> None:
        if self._proc is None:
            return
        if self._proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._proc.pid, sig)
            if self.paused and sig != signal.SIGKILL:
                os.kill(self._proc.pid, signal.SIGCONT)
            self._proc.wait(timeout=timeout_s)
        self.paused = False
        self._forget()

    def _forget(self) -> None:
        if self._proc is not None:
            _LIVE.pop(self._proc.pid, None)


#: A function starting a child, and the future it hands the child to.
_SpawnRequest = tuple[Callable[[], "subprocess.Popen[bytes]"], "Future[subprocess.Popen[bytes]]"]


class _Lifeline:
    """This process's lifeline pipe and the one thread that forks its owned processes."""

    _current: _Lifeline | None = None
    _creating = threading.Lock()

    def __init__(self) -> None:
        # Both ends are close-on-exec: only the children given the read end (pass_fds) get it.
        self.read_fd, self.write_fd = os.pipe()
        self._requests: SimpleQueue[_SpawnRequest] = SimpleQueue()
        threading.Thread(target=self._fork_on_request, name="nyala-spawner", daemon=True).start()

    @classmethod
    def of_this_process(cls) -> _Lifeline:
        with cls._creating:
            if cls._current is None:
                cls._current = cls()
            return cls._current

    @classmethod
    def forget_after_fork(cls) -> None:
        """In a forked child: drop the parent's pipe (its copy of the write end would keep the
        parent's servers alive) and its spawner (the thread does not exist here)."""
        current, cls._current = cls._current, None
        cls._creating = threading.Lock()
        if current is not None:
            for fd in (current.read_fd, current.write_fd):
                with contextlib.suppress(OSError):
                    os.close(fd)

    def spawn(self, popen: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
        """Run ``popen`` on the spawner thread and return the child it started."""
        future: Future[subprocess.Popen[bytes]] = Future()
        self._requests.put((popen, future))
        return future.result()

    def _fork_on_request(self) -> None:
        while True:
            popen, future = self._requests.get()
            try:
                future.set_result(popen())
            except BaseException as exc:
                future.set_exception(exc)


os.register_at_fork(after_in_child=_Lifeline.forget_after_fork)


def _process_state(pid: int) -> str:
    """The kernel's one-letter state of a process (Linux /proc), or "" when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return ""


def pid_alive(pid: int) -> bool:
    """Whether a process with ``pid`` exists and is not a zombie."""
    return _process_state(pid) not in {"", "Z", "X"}


def stop_pid(pid: int, timeout_s: float = 20.0) -> bool:
    """SIGTERM a process we may not have started (a local-cluster server), SIGKILL after ``timeout_s``.

    Returns True if it was running.
    """
    if not pid_alive(pid):
        return False
    stop_pids([pid], timeout_s=timeout_s)
    return True


def stop_all(processes: Sequence[ServerProcess], timeout_s: float = 20.0) -> None:
    """Stop several processes at once: SIGTERM to each, then reap each, SIGKILL for any that
    take longer than ``timeout_s``.

    A clean stop is mostly the server's own work (closing logs and stores, the interpreter's
    exit), so asking every server first and waiting afterwards costs the slowest stop rather
    than the sum of them: a cluster of six servers stopped in about a third of the time.
    """
    deadline = time.monotonic() + timeout_s
    asked = [process for process in processes if process._request_stop()]
    for process in asked:
        process._await_stop(deadline)


def stop_pids(pids: Sequence[int], timeout_s: float = 20.0) -> None:
    """:func:`stop_pid` for several processes at once (SIGTERM to each, then wait for each)."""
    live = [pid for pid in pids if pid_alive(pid)]
    for pid in live:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)  # a paused process cannot act on SIGTERM
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for pid in live:
        try:
            wait_for(
                lambda pid=pid: not pid_alive(pid),  # type: ignore[misc]
                what=f"pid {pid} to exit on SIGTERM",
                timeout_s=max(0.0, deadline - time.monotonic()),
            )
        except WaitTimeout:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def running_pids() -> list[int]:
    """PIDs of the processes started here that are still alive."""
    return [pid for pid, proc in _LIVE.items() if proc.running]


def kill_all() -> None:
    """Kill -9 every process started here that is still running."""
    for proc in list(_LIVE.values()):
        with contextlib.suppress(Exception):
            proc.kill()
    _LIVE.clear()


atexit.register(kill_all)
