"""A server that dies with the process that started it, when that process asks for it.

The test kit starts servers that must not outlive it, even when it is killed outright
(SIGKILL or SIGTERM leave it no chance to stop them).  It asks by putting the number of an
inherited file descriptor in the environment, ``NYALA_LIFELINE_FD``: the read end of a pipe
whose write end only the starting process holds, for its whole life, never writing to it.
When that process dies, for whatever reason, the kernel closes the write end and the read
end reports end of file.  A server started that way, in :func:`hold_lifeline`:

- asks Linux to SIGKILL it when its parent goes (``prctl(PR_SET_PDEATHSIG)``).  The kernel
  sends that signal when the *thread* that forked the server ends, so the test kit forks its
  servers from one thread that lives as long as its process.  This also ends a server that
  a test stopped with SIGSTOP, which can run no code of its own;
- watches the pipe from a daemon thread and SIGKILLs itself at end of file.  That works
  where prctl does not exist, and covers a parent that died before the prctl call.

SIGKILL, not a clean stop: nobody is left to wait for the stop, and a test kit's data is
thrown away.  The server first writes one line to stderr, its log, saying why.

Servers started any other way (``nyala local-cluster start``, a production deployment) have
no such variable and live on their own.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading

__all__ = ["LIFELINE_ENV", "hold_lifeline"]

#: The environment variable naming the read end of the lifeline pipe.
LIFELINE_ENV = "NYALA_LIFELINE_FD"
#: From <linux/prctl.h>.
PR_SET_PDEATHSIG = 1


def hold_lifeline() -> bool:
    """Die with the starting process if ``NYALA_LIFELINE_FD`` asks for it; True if it did.

    Call it first thing in a server's main.  The variable is taken out of the environment so
    that the server's own children (a location mapping script, say) do not inherit it, and the
    descriptor is kept from them too.  ValueError names a variable that is not an open
    descriptor: a server should refuse to start rather than outlive its tests.
    """
    value = os.environ.pop(LIFELINE_ENV, None)
    if not value:
        return False
    try:
        fd = int(value)
        os.fstat(fd)
    except (ValueError, OSError) as exc:
        raise ValueError(f"{LIFELINE_ENV}={value!r} is not an open file descriptor: {exc}") from None
    os.set_inheritable(fd, False)
    _kill_me_with_my_parent()
    threading.Thread(target=_watch, args=(fd,), name="lifeline", daemon=True).start()
    return True


def _kill_me_with_my_parent() -> None:
    if not sys.platform.startswith("linux"):
        return  # the pipe alone does it
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl(PR_SET_PDEATHSIG) failed: {os.strerror(errno)}")


def _watch(fd: int) -> None:
    """Block on the pipe; its end of file means the starting process is gone."""
    try:
        while os.read(fd, 64):
            pass  # nothing is ever written; read on until end of file
    except OSError:
        pass  # a broken lifeline means the same as a cut one
    os.write(2, b"lifeline: the process that started this server is gone; exiting\n")
    os.kill(os.getpid(), signal.SIGKILL)
