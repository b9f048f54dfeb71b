"""The Spark tier's one SparkSession, kept usable after a test is cut short mid-call.

How one timeout used to fail every later Spark test: pytest-timeout's default method on
Linux is a SIGALRM whose handler raises ``Failed`` in the main thread, wherever it is; in a
Spark test that is nearly always inside a Py4J call, blocked reading the JVM's answer.  Py4J
catches ``Exception`` there, not a ``BaseException`` like ``Failed``, so the thread's one
connection to the JVM is left waiting for an answer that is still to come.  The next command
on that connection (PySpark's own clean-up in the same test, ``setCallSite`` on the way out
of ``collect``) reads that stale answer or waits for it for as long as the Spark job runs, and
each command after it gets the answer of the one before: gateway errors in every later test.

:func:`guard_interrupted_calls` makes Py4J close a connection whose command was interrupted
by anything that is not an ``Exception`` (a timeout, Ctrl-C) before the interruption goes on:
the next command opens a fresh connection and gets its own answer, so the failure stays in
the test where it happened.  :class:`SharedSpark` checks before each test that the JVM still
answers (and starts a new session and JVM if it does not), and after an interrupted test
cancels the Spark jobs the interrupted call left running, so they do not hold the cores.
"""

from __future__ import annotations

import contextlib
import secrets
import warnings
from typing import Any

from py4j.clientserver import ClientServerConnection  # type: ignore[import-untyped]
from pyspark import SparkContext
from pyspark.sql import SparkSession, SQLContext

from nyala.spark import local_session

__all__ = ["SharedSpark", "guard_interrupted_calls"]

#: Interrupted Py4J calls so far (all connections).
interrupted_calls = 0


def guard_interrupted_calls() -> None:
    """Make Py4J drop, instead of reuse, a connection whose command was interrupted (idempotent)."""
    if getattr(ClientServerConnection.send_command, "guarded", False):
        return
    send_command = ClientServerConnection.send_command

    def guarded(self: Any, command: str) -> Any:
        global interrupted_calls
        try:
            return send_command(self, command)
        except BaseException as exc:
            if not isinstance(exc, Exception):
                # The answer to this command is still on its way: never read it as the next one's.
                interrupted_calls += 1
                self.close(reset=True)
            raise

    guarded.guarded = True  # type: ignore[attr-defined]
    ClientServerConnection.send_command = guarded


class SharedSpark:
    """One local SparkSession for many tests, checked before each and rebuilt when it is broken."""

    def __init__(self, app_name: str, log_level: str = "FATAL") -> None:
        self.app_name = app_name
        self.log_level = log_level
        self.sessions_started = 0
        self._session: SparkSession | None = None
        self._interrupted_before = interrupted_calls
        guard_interrupted_calls()

    def session(self) -> SparkSession:
        """The session, answering: a new one (and a new JVM) when the JVM no longer answers."""
        if self._session is not None and not self._answers(self._session):
            self._discard(self._session)
            self._session = None
        if self._session is None:
            self._session = local_session(self.app_name, log_level=self.log_level)
            self.sessions_started += 1
        return self._session

    def after_test(self) -> None:
        """Cancel the jobs an interrupted call left running: they would hold the local cores."""
        if interrupted_calls == self._interrupted_before or self._session is None:
            return
        self._interrupted_before = interrupted_calls
        with contextlib.suppress(Exception):
            self._session.sparkContext.cancelAllJobs()

    def stop(self) -> None:
        if self._session is not None:
            if self._answers(self._session):
                self._session.stop()
            else:
                self._discard(self._session)
            self._session = None

    @staticmethod
    def _answers(session: SparkSession) -> bool:
        """Whether the JVM parses a fresh number right, on this thread's connection."""
        gateway = session.sparkContext._gateway
        if gateway is None:
            return False
        client = gateway._gateway_client
        connection = client.get_thread_connection()
        if connection is not None and connection.socket is not None and connection not in client.deque:
            # Out of the pool means mid-command (interrupted some way the guard did not see).
            connection.close(reset=True)
        token = secrets.randbelow(2**31)  # a stale answer to some earlier call will not match it
        try:
            return bool(gateway.jvm.java.lang.Integer.parseInt(str(token)) == token)
        except Exception:
            return False

    @staticmethod
    def _discard(session: SparkSession) -> None:
        """Forget a session whose JVM is gone, so that the next one starts a new JVM."""
        gateway = session.sparkContext._gateway
        with warnings.catch_warnings(), contextlib.suppress(Exception):
            warnings.simplefilter("ignore")  # "Unable to cleanly shutdown Spark JVM process"
            session.sparkContext.stop()
        if gateway is not None:
            with contextlib.suppress(Exception):
                gateway.shutdown()
        process = getattr(gateway, "proc", None)
        if process is not None:
            process.kill()
            process.wait()
        SparkSession._instantiatedSession = None
        SparkSession._activeSession = None
        SQLContext._instantiatedContext = None
        SparkContext._active_spark_context = None
        SparkContext._gateway = None
        SparkContext._jvm = None
