"""The session meter against the in-memory store: leases, renewals, levels, grace, outages."""

import asyncio
import time

import pytest

from quota.errors import NothingToSpend, StoreUnavailable
from quota.memory_store import MemoryStore
from quota.meter import THROTTLED_REFRESH_S, LateReturns, Level, SessionMeter
from quota.settings import MICRO, QuotaSettings, to_micro
from support.switched_stores import FlakyStore, SilentStore


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


SETTINGS = QuotaSettings(lease_s=5, slow_below_s=60, crawl_below_s=15, grace_s=10)


async def make_meter(
    balance: float, tier: str = "paid", settings: QuotaSettings = SETTINGS, store=None, clock=None, late_returns=None
):
    store = store or MemoryStore()
    await store.create_account("acct", tier, to_micro(balance), "hash")
    changes, exhausted = [], []
    meter = SessionMeter(
        store,
        "acct",
        settings.tier(tier),
        "s1",
        settings,
        on_change=changes.append,
        on_exhausted=exhausted.append,
        clock=clock or Clock(),
        late_returns=late_returns,
    )
    return meter, store, changes, exhausted


async def balance_of(store) -> float:
    return (await store.get_account("acct", SETTINGS.tier("paid"))).balance / MICRO


def spend(meter: SessionMeter, frames: int, size: tuple[int, int] = (640, 480)) -> None:
    for _ in range(frames):
        meter.charge_frame(*size)


async def test_open_reserves_one_lease_and_close_returns_the_rest():
    meter, store, changes, _ = await make_meter(100)
    state = await meter.open()
    assert state.level is Level.FULL and state.fps_cap is None
    assert await balance_of(store) == pytest.approx(95)  # 5 s at 1 token/s
    spend(meter, 30)  # one second of 480p video
    await meter.close()
    assert await balance_of(store) == pytest.approx(99, abs=1e-4)
    assert changes[0].level is Level.FULL


async def test_price_follows_the_output_resolution():
    meter, store, _, _ = await make_meter(100)
    runner = await running(meter)
    for size in ((1280, 720), (1920, 1080)):
        for _ in range(6):  # a second of video, renewing as the lease runs low
            spend(meter, 5, size=size)
            await asyncio.sleep(0.01)
    assert meter.state.price_per_second == 5
    await meter.close()
    await runner
    assert await balance_of(store) == pytest.approx(100 - 3 - 5, abs=1e-4)


@pytest.mark.parametrize(
    "size, price",
    [
        ((640, 480), 1),
        ((480, 640), 1),
        ((320, 960), 1),
        ((641, 480), 3),
        ((1280, 720), 3),
        ((720, 1280), 3),
        ((2560, 480), 5),
        ((1281, 720), 5),
        ((1920, 1080), 5),
    ],
)
def test_the_price_goes_by_pixel_count_not_height(size, price):
    """By height, a 2560x480 strip (four times 480p's pixels) was billed as 480p and a 480x640
    portrait (480p's pixels) as 720p."""
    assert SETTINGS.price_per_second(*size) == price


async def test_a_portrait_session_pays_the_480p_price_and_a_wide_strip_the_top_one():
    for size, paid in (((480, 640), 1), ((2560, 480), 5)):
        meter, store, _, _ = await make_meter(100)
        await meter.open(*size)
        assert await balance_of(store) == pytest.approx(100 - 5 * paid)  # a 5 s lease at its price
        spend(meter, 30, size=size)  # one second of video
        await meter.close()
        assert await balance_of(store) == pytest.approx(100 - paid, abs=1e-4), size


async def test_renewals_are_one_per_lease_not_per_frame():
    meter, store, _, _ = await make_meter(1000)
    calls = []
    renew = store.renew_lease

    async def counting_renew(*args, **kwargs):
        calls.append(args)
        return await renew(*args, **kwargs)

    store.renew_lease = counting_renew
    runner = await running(meter)
    for _ in range(60):  # one minute of video at 30 fps, a second at a time
        spend(meter, 30)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
    await meter.close()
    await runner
    assert 10 <= len(calls) <= 13, f"{len(calls)} renewals for a minute of video"
    assert await balance_of(store) == pytest.approx(1000 - 60, abs=1e-3)


@pytest.mark.parametrize(
    "balance, level, cap",
    [(100, Level.FULL, None), (59, Level.SLOW, 15), (16, Level.SLOW, 15), (14, Level.CRAWL, 5), (0.5, Level.CRAWL, 5)],
)
async def test_levels_switch_at_the_thresholds(balance, level, cap):
    meter, _, _, _ = await make_meter(balance)
    state = await meter.open()
    assert (state.level, state.fps_cap) == (level, cap)


async def test_level_drops_as_tokens_are_spent_and_stops_at_zero():
    clock = Clock()
    meter, store, changes, exhausted = await make_meter(2, clock=clock)
    await meter.open()
    spend(meter, 60)  # all of it
    assert meter.state.level is Level.STOPPED and meter.state.fps_cap == 0
    assert meter.state.reason == "exhausted"
    assert [c.level for c in changes] == [Level.CRAWL, Level.STOPPED]
    spend(meter, 30)  # frames processed anyway are not charged beyond the lease
    await meter.close()
    assert await balance_of(store) == 0


async def test_nothing_to_spend_refuses_to_open():
    meter, _, _, _ = await make_meter(0)
    with pytest.raises(NothingToSpend):
        await meter.open()


async def test_grace_period_ends_an_exhausted_session():
    clock = Clock()
    meter, store, _, exhausted = await make_meter(0.2, settings=QuotaSettings(grace_s=2), clock=clock)
    await meter.open()
    spend(meter, 10)
    runner = asyncio.ensure_future(meter.run())
    await asyncio.sleep(0.05)
    assert exhausted == []
    clock.now += 2.5
    await asyncio.wait_for(runner, timeout=3)
    assert exhausted == ["exhausted"]
    await meter.close()


async def test_top_up_during_grace_resumes_full_rate():
    clock = Clock()
    meter, store, changes, exhausted = await make_meter(0.2, settings=QuotaSettings(grace_s=30), clock=clock)
    await meter.open()
    spend(meter, 10)
    assert meter.state.level is Level.STOPPED
    runner = asyncio.ensure_future(meter.run())
    await store.credit("acct", to_micro(500), "top-up-1")
    for _ in range(40):
        if meter.state.level is Level.FULL:
            break
        await asyncio.sleep(0.05)
    assert meter.state.level is Level.FULL and exhausted == []
    await meter.close()
    await runner


async def test_store_outage_fails_closed_and_nothing_is_charged_twice():
    flaky = FlakyStore(MemoryStore())
    clock = Clock()
    meter, _, changes, exhausted = await make_meter(100, store=flaky, clock=clock)
    runner = await running(meter)
    flaky.up = False
    spend(meter, 150)  # the whole lease: 5 s of video
    for _ in range(20):
        await asyncio.sleep(0.05)
    assert meter.state.level is Level.STOPPED and meter.state.reason == "quota_store_unavailable"
    flaky.up = True
    clock.now += 1.5  # past the retry pause
    for _ in range(60):
        if meter.state.level is not Level.STOPPED:
            break
        await asyncio.sleep(0.05)
    assert meter.state.level is Level.FULL
    spend(meter, 30)
    await meter.close()
    await runner
    assert await balance_of(flaky.store) == pytest.approx(100 - 6, abs=1e-3)
    assert exhausted == []


async def test_a_dead_store_is_asked_at_most_once_a_second():
    flaky = FlakyStore(MemoryStore())
    clock = Clock()
    meter, _, _, _ = await make_meter(100, store=flaky, clock=clock)
    await meter.open()
    calls = []
    renew = flaky.__getattr__("renew_lease")

    async def counting(*args, **kwargs):
        calls.append(clock.now)
        return await renew(*args, **kwargs)

    flaky.renew_lease = counting
    runner = asyncio.ensure_future(meter.run())
    flaky.up = False
    for _ in range(120):  # four seconds of frames, the lease running low from the start
        spend(meter, 1)
        clock.now += 1 / 30
        await asyncio.sleep(0)
    await meter.close()
    await runner
    assert 1 <= len(calls) <= 5, f"{len(calls)} attempts in 4 s"


async def test_unmetered_tier_is_recorded_but_never_throttled():
    meter, store, _, _ = await make_meter(0, tier="vip")
    state = await meter.open()
    assert state.level is Level.FULL
    runner = asyncio.ensure_future(meter.run())
    for _ in range(10):
        spend(meter, 30)
        assert meter.state.level is Level.FULL
        await asyncio.sleep(0.01)
    await meter.close()
    await runner
    history = await store.history("acct")
    assert history[0]["kind"] == "session" and history[0]["spent"] == pytest.approx(10 * MICRO, rel=1e-4)


async def running(meter: SessionMeter) -> asyncio.Task[None]:
    """The meter's lease opened and its loop running."""
    await meter.open()
    return asyncio.ensure_future(meter.run())


def count_renewals(store: MemoryStore, clock: Clock) -> list[float]:
    """The (clock) times of the store's renew_lease calls from now on."""
    calls: list[float] = []
    renew = store.renew_lease

    async def counting(*args, **kwargs):
        calls.append(clock.now)
        return await renew(*args, **kwargs)

    store.renew_lease = counting
    return calls


async def run_for(meter: SessionMeter, clock: Clock, seconds: float, fps: float) -> None:
    """`seconds` of (clock) time at `fps` processed frames, the meter's loop running between frames."""
    for _ in range(round(seconds * fps)):
        clock.now += 1 / fps
        spend(meter, 1)
        for _ in range(3):
            await asyncio.sleep(0)


async def test_a_slowly_spent_lease_is_kept_alive_and_charged():
    """At 1 fps a lease lasts 150 s, longer than the store's 60 s TTL: it is renewed anyway, so the
    store never settles a live session's lease (which had refunded it, freed its session slot and
    ended the session as exhausted with the balance full)."""
    clock = Clock()
    store = MemoryStore(clock=clock)
    meter, _, _, exhausted = await make_meter(100, store=store, clock=clock)
    runner = await running(meter)
    await run_for(meter, clock, 200, fps=1)
    assert meter.state.level is Level.FULL and exhausted == []
    held = meter.held
    assert held <= to_micro(5) + 1, "kept alive, not topped up beyond one lease"
    await meter.close()
    await runner
    assert await balance_of(store) == pytest.approx(100 - 200 / 30, abs=1e-3)


class LostAnswerStore:
    """The first renewal is applied by the store, but its answer never arrives (our interface only)."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.lost = False

    def __getattr__(self, name):
        return getattr(self.store, name)

    async def renew_lease(self, *args, **kwargs):
        grant = await self.store.renew_lease(*args, **kwargs)
        if not self.lost:
            self.lost = True
            raise StoreUnavailable("the answer was lost")
        return grant


async def test_a_renewal_whose_answer_was_lost_is_retried_as_it_was_sent():
    """The store answers a repeated seq with the first attempt's grant; a retry that reported a
    newer spend misread that grant and let the session spend past its balance uncharged."""
    clock = Clock()
    lossy = LostAnswerStore(MemoryStore(clock=clock))
    meter, _, _, _ = await make_meter(7, store=lossy, clock=clock)
    runner = await running(meter)
    await run_for(meter, clock, 12, fps=30)
    assert lossy.lost
    charged = meter.state.spent
    await meter.close()
    await runner
    assert charged == pytest.approx(7, abs=1e-3), "all of the balance, no more"
    assert await balance_of(lossy.store) == pytest.approx(7 - charged, abs=1e-3), (
        "what the meter charged, the store has"
    )


async def test_a_lease_that_cannot_be_refilled_is_asked_once_a_second_not_every_frame():
    clock = Clock()
    store = MemoryStore(clock=clock)
    meter, _, _, _ = await make_meter(7, store=store, clock=clock)
    calls = count_renewals(store, clock)
    runner = await running(meter)
    await run_for(meter, clock, 6, fps=30)  # 6 s: all 7 tokens in the lease, 1 left in it, low
    before = len(calls)
    await run_for(meter, clock, 4, fps=5)  # crawling on what the lease holds, nothing more to grant
    assert 1 <= len(calls) - before <= 5, f"{len(calls) - before} renewals in 4 s (20 frames)"
    await meter.close()
    await runner


async def test_a_top_up_lifts_the_throttle_within_seconds():
    clock = Clock()
    store = MemoryStore(clock=clock)
    meter, _, _, _ = await make_meter(12, store=store, clock=clock)
    runner = await running(meter)
    await run_for(meter, clock, 1, fps=5)
    assert meter.state.level is Level.CRAWL
    await store.credit("acct", to_micro(1000), "top-up")
    await run_for(meter, clock, THROTTLED_REFRESH_S + 0.5, fps=5)
    assert meter.state.level is Level.FULL
    await meter.close()
    await runner


async def test_a_lease_returned_during_an_outage_is_returned_when_the_store_is_back(monkeypatch):
    """Given up after the first tries, the store would settle the lease at the last renewal's
    spending, and the video processed since would go unpaid."""
    import quota.meter

    monkeypatch.setattr(quota.meter, "LATE_CLOSE_RETRY_S", 0.05)
    flaky = FlakyStore(MemoryStore())
    meter, _, _, _ = await make_meter(100, store=flaky)
    await meter.open()
    spend(meter, 90)  # 3 tokens, inside the first lease: never reported to the store
    flaky.up = False
    await meter.close()
    assert await balance_of(flaky.store) == pytest.approx(95), "the lease is still out"
    flaky.up = True
    for _ in range(40):
        if await balance_of(flaky.store) != pytest.approx(95):
            break
        await asyncio.sleep(0.05)
    assert await balance_of(flaky.store) == pytest.approx(97, abs=1e-4), "charged what was spent, the rest returned"


async def test_a_replayed_renewal_keeps_the_lease_alive_from_when_the_store_applied_it():
    """The store answers a repeated seq without renewing the lease again: the keep-alive must count
    from the first attempt, or a slow session's lease expires under it."""
    clock = Clock()
    lossy = LostAnswerStore(MemoryStore(clock=clock))
    settings = QuotaSettings(lease_s=5, lease_ttl_s=60, slow_below_s=60, crawl_below_s=15, grace_s=10)
    meter, _, _, exhausted = await make_meter(1000, store=lossy, clock=clock, settings=settings)
    runner = await running(meter)
    await run_for(meter, clock, 20, fps=1)  # the first keep-alive (at 20 s) is applied, its answer lost
    assert lossy.lost
    real = lossy.store
    lossy.store = FlakyStore(real)
    lossy.store.up = False  # and the store goes away for 41 s: the replay comes at 61 s
    await run_for(meter, clock, 41, fps=1)
    lossy.store.up = True
    await run_for(meter, clock, 60, fps=1)
    assert meter.state.level is Level.FULL and exhausted == [], meter.state
    await meter.close()
    await runner
    assert await balance_of(real) == pytest.approx(1000 - 121 / 30, abs=1e-3)


async def test_a_lease_gone_from_the_store_is_not_asked_for_again():
    clock = Clock()
    store = MemoryStore(clock=clock)
    meter, _, _, _ = await make_meter(0, tier="vip", store=store, clock=clock)
    calls = count_renewals(store, clock)
    runner = await running(meter)
    await store.close_lease("acct", meter.lease_id, 99, 0, SETTINGS.tier("vip"), hour_s=3600)  # gone under it
    await run_for(meter, clock, 10, fps=30)
    assert 1 <= len(calls) <= 2, f"{len(calls)} renewals of a lease the store no longer has"
    await meter.close()
    await runner


async def test_a_lease_with_nothing_unreported_is_not_retried_after_close(monkeypatch):
    import quota.meter

    monkeypatch.setattr(quota.meter, "LATE_CLOSE_RETRY_S", 0.05)
    flaky = FlakyStore(MemoryStore())
    late_returns = LateReturns()
    meter, _, _, _ = await make_meter(100, store=flaky, late_returns=late_returns)
    await meter.open()
    flaky.up = False
    await meter.close()  # spent nothing: the store's settling at the TTL gives the same
    assert len(late_returns) == 0


async def test_a_store_that_never_answers_holds_close_for_close_wait_s_only(monkeypatch):
    """A DELETE or a shutdown waited about 13 s on a silent Redis (three tries on its socket timeout):
    close hands the return to the background after CLOSE_WAIT_S, and it is made once the store answers."""
    import quota.meter

    monkeypatch.setattr(quota.meter, "CLOSE_WAIT_S", 0.3)
    monkeypatch.setattr(quota.meter, "LATE_CLOSE_RETRY_S", 0.05)
    silent = SilentStore(MemoryStore())
    late_returns = LateReturns()
    meter, _, _, _ = await make_meter(100, store=silent, late_returns=late_returns)
    await meter.open()
    spend(meter, 60)
    silent.up = False
    started = time.monotonic()
    await meter.close()
    assert time.monotonic() - started < 1.0, "close waited past CLOSE_WAIT_S"
    assert len(late_returns) == 1, "what was spent is still to be returned"
    silent.up = True
    for _ in range(100):
        if not late_returns:
            break
        await asyncio.sleep(0.02)
    assert len(late_returns) == 0
    assert await balance_of(silent.store) == pytest.approx(98, abs=1e-4), "charged the 2 s once"


async def test_leases_still_being_returned_get_a_last_try_at_shutdown(monkeypatch):
    import quota.meter

    monkeypatch.setattr(quota.meter, "LATE_CLOSE_RETRY_S", 60)  # no retry of its own in this test
    flaky = FlakyStore(MemoryStore())
    late_returns = LateReturns()
    meter, _, _, _ = await make_meter(100, store=flaky, late_returns=late_returns)
    await meter.open()
    spend(meter, 60)
    flaky.up = False
    await meter.close()
    assert len(late_returns) == 1
    flaky.up = True
    await late_returns.drain()
    await asyncio.sleep(0)
    assert len(late_returns) == 0
    assert await balance_of(flaky.store) == pytest.approx(98, abs=1e-4)


async def test_a_store_that_hangs_is_the_reason_from_the_first_stop():
    """With Redis stopped (SIGSTOP) the lease ran dry while a renewal waited for an answer, and the
    client was told `exhausted` (the balance was 190) for 2.5 s before `quota_store_unavailable`."""
    silent = SilentStore(MemoryStore())
    meter, _, changes, _ = await make_meter(100, store=silent)
    runner = await running(meter)
    silent.up = False
    for _ in range(10):  # the whole lease, a frame at a time, the loop free to ask for more
        spend(meter, 15)
        await asyncio.sleep(0.01)
    assert meter.state.level is Level.STOPPED
    stops = [change for change in changes if change.level is Level.STOPPED]
    assert stops and stops[0].reason == "quota_store_unavailable", [(c.level, c.reason) for c in changes]
    silent.up = True
    await meter.close()
    await runner


async def test_an_account_spent_to_zero_is_exhausted():
    meter, _, changes, _ = await make_meter(3)
    runner = await running(meter)
    for _ in range(10):
        spend(meter, 15)
        await asyncio.sleep(0.01)
    assert meter.state.level is Level.STOPPED and meter.state.reason == "exhausted"
    assert [c.reason for c in changes if c.level is Level.STOPPED][0] == "exhausted"
    await meter.close()
    await runner
