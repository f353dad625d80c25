"""Lease returns retried after their sessions ended belong to the app whose sessions they were."""

import asyncio

import pytest

import quota.meter
from quota.memory_store import MemoryStore
from quota.meter import SessionMeter
from quota.settings import MICRO, QuotaSettings, to_micro
from support.server import loopback_settings, running_server
from support.switched_stores import FlakyStore

SETTINGS = QuotaSettings(lease_s=5)


async def test_one_apps_shutdown_leaves_another_apps_lease_returns_alone(monkeypatch):
    """Two apps in one process (the tests run many) shared one registry of returns still being
    retried: the first to shut down cancelled the other's retries after a single try against the
    other's store, and what that app's session had spent went unpaid."""
    monkeypatch.setattr(quota.meter, "LATE_CLOSE_RETRY_S", 0.05)
    switched = FlakyStore(MemoryStore())
    await switched.store.create_account("acct", "paid", to_micro(100), "hash")
    meter = SessionMeter(switched, "acct", SETTINGS.tier("paid"), "s1", SETTINGS)  # another app's session
    await meter.open()  # 5 tokens out on the lease
    for _ in range(60):  # 2 s of 480p video: 2 tokens, never reported to the store
        meter.charge_frame(640, 480)
    switched.up = False
    await meter.close()  # handed to the background, retried until the store is back

    async with running_server(loopback_settings()):
        pass  # this app's shutdown must touch only its own returns

    switched.up = True
    balance = 95.0
    for _ in range(100):
        balance = (await switched.store.get_account("acct", SETTINGS.tier("paid"))).balance / MICRO
        if balance != pytest.approx(95):
            break
        await asyncio.sleep(0.02)
    assert balance == pytest.approx(98, abs=1e-4), "the other app's lease was returned, what it spent charged"
