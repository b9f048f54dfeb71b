"""wait_for and wait_for_async: the value returned, the failure message, back-off and deadlines."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from nyala.rpc.loop import run
from nyala.testing.wait import WaitTimeout, wait_for, wait_for_async


class FakeTime:
    """A clock that only moves when the waiter sleeps, so no test here waits for real time."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.mark.parametrize("found", [0, [], "", True, "ready"])
def test_the_first_value_that_is_neither_none_nor_false_is_returned(found: object) -> None:
    fake = FakeTime()
    answers = iter([None, False, None, found])
    assert wait_for(lambda: next(answers), what="it", clock=fake.clock, sleep=fake.sleep) == found
    assert len(fake.sleeps) == 3


def test_a_condition_that_holds_at_once_is_checked_once_without_sleeping() -> None:
    fake = FakeTime()
    calls = itertools.count(1)
    assert wait_for(lambda: next(calls), what="it", clock=fake.clock, sleep=fake.sleep) == 1
    assert fake.sleeps == []


def test_checks_back_off_from_a_millisecond_to_the_interval_and_stop_at_the_deadline() -> None:
    fake = FakeTime()
    checked_at: list[float] = []

    def never() -> bool:
        checked_at.append(fake.now)
        return False

    with pytest.raises(WaitTimeout):
        wait_for(never, what="never", timeout_s=0.1, interval_s=0.01, clock=fake.clock, sleep=fake.sleep)
    assert fake.sleeps[:5] == pytest.approx([0.001, 0.002, 0.004, 0.008, 0.01])
    assert max(fake.sleeps) == pytest.approx(0.01)
    assert checked_at[0] == 0.0
    assert checked_at[-1] == pytest.approx(0.1)  # one last check on the deadline itself
    assert sum(fake.sleeps) == pytest.approx(0.1)


def test_a_timeout_names_what_was_awaited_and_the_last_value_seen() -> None:
    fake = FakeTime()
    leaders = iter(range(1000))

    def agreed_leader() -> int | None:
        next(leaders)
        return None  # the servers never agree

    with pytest.raises(WaitTimeout) as caught:
        wait_for(agreed_leader, what="an agreed leader", timeout_s=2, clock=fake.clock, sleep=fake.sleep)
    assert str(caught.value) == "timed out after 2 s waiting for an agreed leader; last value seen: None"
    assert isinstance(caught.value, AssertionError)  # a test failure, not an error
    assert (caught.value.what, caught.value.timeout_s, caught.value.last) == ("an agreed leader", 2, None)

    with pytest.raises(WaitTimeout, match=r"waiting for the flag; last value seen: False$"):
        wait_for(lambda: False, what="the flag", timeout_s=1, clock=fake.clock, sleep=fake.sleep)


def test_listed_errors_are_retried_and_quoted_others_propagate_at_once() -> None:
    fake = FakeTime()
    attempts = itertools.count(1)

    def flaky() -> str:
        if next(attempts) < 4:
            raise ConnectionError("refused")
        return "up"

    assert wait_for(flaky, what="the server", retry_on=(ConnectionError,), clock=fake.clock, sleep=fake.sleep) == "up"

    def refusing() -> str:
        raise ConnectionError("refused")

    with pytest.raises(WaitTimeout, match=r"last value seen: None; last error: ConnectionError: refused"):
        wait_for(refusing, what="the server", timeout_s=1, retry_on=(OSError,), clock=fake.clock, sleep=fake.sleep)

    calls: list[int] = []

    def broken() -> str:
        calls.append(1)
        raise KeyError("bug")

    with pytest.raises(KeyError, match="bug"):
        wait_for(broken, what="the server", retry_on=(ConnectionError,), clock=fake.clock, sleep=fake.sleep)
    assert calls == [1]


def test_nonsense_timings_are_refused() -> None:
    with pytest.raises(ValueError, match="waiting for x: timeout_s must be >= 0 and interval_s > 0"):
        wait_for(lambda: True, what="x", timeout_s=-1)
    with pytest.raises(ValueError, match="interval_s > 0"):
        wait_for(lambda: True, what="x", interval_s=0)


def test_the_async_twin_takes_plain_and_coroutine_conditions() -> None:
    async def main() -> tuple[int, str]:
        ticks = itertools.count()
        plain = await wait_for_async(lambda: next(ticks) >= 3 and 7, what="three ticks")

        answers = iter([None, None, "done"])

        async def probe() -> str | None:
            await asyncio.sleep(0)
            return next(answers)

        return plain, await wait_for_async(probe, what="the probe")

    assert run(main()) == (7, "done")


def test_the_async_twin_names_what_it_awaited_when_time_runs_out() -> None:
    # The deadline itself is under test here, so these waits do run out of real time (20 ms).
    async def main() -> None:
        with pytest.raises(WaitTimeout, match=r"timed out after 0.02 s waiting for nothing; last value seen: False$"):
            await wait_for_async(lambda: False, what="nothing", timeout_s=0.02)

        async def refused() -> None:
            raise ConnectionError("refused")

        with pytest.raises(WaitTimeout, match=r"waiting for a server; .* last error: ConnectionError: refused"):
            await wait_for_async(refused, what="a server", timeout_s=0.02, retry_on=(ConnectionError,))

    run(main())


def test_a_coroutine_condition_still_running_at_the_deadline_is_cancelled() -> None:
    cancelled = asyncio.Event()

    async def hangs() -> bool:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return True

    async def main() -> None:
        with pytest.raises(WaitTimeout, match="waiting for an answer; last value seen: None"):
            await wait_for_async(hangs, what="an answer", timeout_s=0.05)
        assert cancelled.is_set()

    run(main())


def test_a_coroutine_conditions_own_timeout_is_a_failed_check_when_listed() -> None:
    attempts = itertools.count(1)

    async def times_out_twice() -> str:
        if next(attempts) <= 2:
            async with asyncio.timeout(0):
                await asyncio.sleep(1)
        return "answered"

    async def main() -> str:
        return await wait_for_async(times_out_twice, what="an answer", retry_on=(TimeoutError,))

    assert run(main()) == "answered"
