"""quota's SessionMeter as a streaming session sees it: every member of stream.metering.Meter, each
saying what the meter itself says."""

import pytest

from quota.memory_store import MemoryStore
from quota.meter import LateReturns, Level
from quota.settings import MICRO, QuotaSettings, to_micro
from quota.stream_meter import StreamMeter, stream_meters
from stream.metering import Meter

SETTINGS = QuotaSettings(lease_s=5, slow_below_s=60, crawl_below_s=15, grace_s=10)


async def stream_meter(balance: float, tier: str = "paid"):
    store = MemoryStore()
    await store.create_account("acct", tier, to_micro(balance), "hash")
    level_changes, exhausted = [], []
    make_meter = stream_meters(store, "acct", SETTINGS.tier(tier), SETTINGS, LateReturns())
    meter = make_meter("s1", lambda: level_changes.append(meter.event()["level"]), exhausted.append)
    return meter, store, level_changes


def test_it_has_every_member_a_session_uses():
    members = [name for name in vars(Meter) if not name.startswith("_")]
    assert {"priority", "fps_cap", "stopped", "burn_rate", "event", "charge", "open", "run", "close"} <= set(members)
    missing = [name for name in members if not hasattr(StreamMeter, name)]
    assert missing == [], f"StreamMeter lacks {missing}"


async def test_it_says_what_the_session_meter_says():
    meter, store, level_changes = await stream_meter(100)
    await meter.open()
    state = meter.session_meter.state
    assert meter.event() == state.as_event() and meter.event()["type"] == "meter"
    assert meter.fps_cap is None and not meter.stopped
    assert meter.priority == SETTINGS.tier("paid").priority
    assert level_changes == ["full"], "the level change reaches the session, the new state readable"
    for _ in range(30):  # one second of 480p video: one token
        meter.charge(640, 480)
    assert meter.event()["spent"] == pytest.approx(1)
    await meter.close()
    assert (await store.get_account("acct", SETTINGS.tier("paid"))).balance / MICRO == pytest.approx(99, abs=1e-4)


async def test_a_spent_lease_reads_as_stopped_with_a_zero_cap():
    meter, _, level_changes = await stream_meter(0.2)
    await meter.open()
    for _ in range(10):  # more than the 0.2 tokens the lease could hold
        meter.charge(640, 480)
    assert meter.session_meter.state.level is Level.STOPPED
    assert meter.stopped and meter.fps_cap == 0
    assert level_changes[-1] == "stopped" and meter.event()["reason"] == "exhausted"
    await meter.close()
