"""A server holding a lifeline dies when the pipe's write end closes, and hides the pipe from its children."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from nyala.server.lifeline import LIFELINE_ENV, hold_lifeline

pytestmark = pytest.mark.timeout(60)

# A stand-in server: holds the lifeline, reports what its children would see, then waits
# for a line on stdin that never comes.
HOLDER = f"""
import os, sys
from nyala.server.lifeline import hold_lifeline
fd = int(os.environ["{LIFELINE_ENV}"])
held = hold_lifeline()
print(held, os.environ.get("{LIFELINE_ENV}"), os.get_inheritable(fd), flush=True)
sys.stdin.readline()
"""


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read_fd, write_fd = os.pipe()
    try:
        yield read_fd, write_fd
    finally:
        for fd in (read_fd, write_fd):
            with contextlib.suppress(OSError):  # the test may have closed it
                os.close(fd)


def start_holder(read_fd: int) -> subprocess.Popen[str]:
    env = {**os.environ, LIFELINE_ENV: str(read_fd)}
    return subprocess.Popen(
        [sys.executable, "-c", HOLDER], env=env, pass_fds=(read_fd,), text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


def test_without_the_variable_nothing_is_held(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LIFELINE_ENV, raising=False)
    assert hold_lifeline() is False


@pytest.mark.parametrize("value", ["seven", "987654"])
def test_a_variable_that_is_no_open_descriptor_is_refused(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(LIFELINE_ENV, value)
    with pytest.raises(ValueError, match=f"{LIFELINE_ENV}='{value}' is not an open file descriptor"):
        hold_lifeline()


def test_the_holder_dies_when_the_write_end_closes_and_hides_the_pipe_from_its_children(
    pipe: tuple[int, int],
) -> None:
    read_fd, write_fd = pipe
    holder = start_holder(read_fd)
    try:
        assert holder.stdout is not None
        held, variable, inheritable = holder.stdout.readline().split()
        assert (held, variable, inheritable) == ("True", "None", "False")
        assert holder.poll() is None  # alive while the write end is open
        os.close(write_fd)  # what the kernel does when the starting process dies
        assert holder.wait(timeout=30) == -signal.SIGKILL
        assert holder.stderr is not None
        assert "lifeline: the process that started this server is gone" in holder.stderr.read()
    finally:
        holder.kill()
        holder.communicate()


def test_a_holder_whose_parent_is_gone_already_dies_at_once(pipe: tuple[int, int]) -> None:
    read_fd, write_fd = pipe
    os.close(write_fd)  # gone before the holder even starts
    holder = start_holder(read_fd)
    try:
        assert holder.wait(timeout=30) == -signal.SIGKILL
    finally:
        holder.kill()
        holder.communicate()
