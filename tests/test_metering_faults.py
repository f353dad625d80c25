"""Metering when Redis misbehaves, and two server nodes spending one account."""

import asyncio
import time

import pytest
import redis.asyncio as redis_asyncio

from signaling.app_keys import SESSIONS
from signaling.client import FacefuseClient
from stream.image_track import ImageTrack
from support import face_rgb, running_server
from test_metering import ADMIN, InvertedLog, create_account, metered_settings, wait_for

pytestmark = pytest.mark.redis


def meter_levels(session) -> list[tuple[str, str | None]]:
    return [(e["level"], e.get("reason")) for e in session.events if e.get("type") == "meter"]


async def test_redis_stopped_mid_session_fails_closed_and_charges_once(redis_server):
    settings = metered_settings(redis_server.url, lease_s=2.0, slow_below_s=1.0, crawl_below_s=0.5, grace_s=30.0)
    async with running_server(settings) as (url, app):
        async with FacefuseClient(url, api_key=ADMIN) as admin:
            key = await create_account(admin, "lee", balance=100)
        async with FacefuseClient(url, api_key=key) as lee:
            log = InvertedLog()
            session = await lee.connect(ImageTrack(face_rgb("obama.jpg"), tag=4), on_frame=log)
            server_session = app[SESSIONS].get(session.session_id)
            await asyncio.sleep(1.0)
            redis_server.stop(kill=True)
            killed = time.monotonic()
            await wait_for(lambda: ("stopped", "quota_store_unavailable") in meter_levels(session), timeout=10)
            ran_on = time.monotonic() - killed
            print(f"processed on the lease for {ran_on:.1f} s after Redis died")
            assert ran_on < 3.5, "no more than the lease (at most 1.4 x 2 s of video) is spent without the store"
            await asyncio.sleep(0.5)
            now = time.monotonic()
            assert log.fps(now - 0.4, now, processed=True) == 0, "fail closed: nothing processed without the store"
            assert log.fps(now - 0.4, now, processed=False) > 15, "the original video keeps flowing"

            redis_server.start()
            await wait_for(lambda: meter_levels(session)[-1][0] == "full", timeout=10)
            await asyncio.sleep(1.0)
            await lee.request("DELETE", f"/api/sessions/{session.session_id}")
            await session.close()
            processed = server_session.stats.frames_processed
            account = await lee.request("GET", "/api/account")
            charged = 100 - account["balance"]
            print(f"processed {processed} frames, charged {charged:.4f} tokens")
            assert charged == pytest.approx(processed / 30, abs=0.01), "charged exactly once for what was processed"


async def test_script_flush_mid_session_is_survived(redis_server):
    settings = metered_settings(redis_server.url, lease_s=0.5, slow_below_s=1.0, crawl_below_s=0.5)
    async with running_server(settings) as (url, app):
        async with FacefuseClient(url, api_key=ADMIN) as admin:
            key = await create_account(admin, "max", balance=100)
        async with FacefuseClient(url, api_key=key) as max_:
            session = await max_.connect(ImageTrack(face_rgb("obama.jpg"), width=320, height=240))
            server_session = app[SESSIONS].get(session.session_id)
            client = redis_asyncio.from_url(redis_server.url)
            for _ in range(3):
                await asyncio.sleep(0.7)
                await client.script_flush()
            await client.aclose()
            await asyncio.sleep(0.7)
            assert all(level == "full" for level, _ in meter_levels(session))
            await max_.request("DELETE", f"/api/sessions/{session.session_id}")
            await session.close()
            account = await max_.request("GET", "/api/account")
            processed = server_session.stats.frames_processed
            assert processed > 60
            assert 100 - account["balance"] == pytest.approx(processed / 30, abs=0.01)


async def test_two_nodes_spend_one_account_consistently(redis_server):
    settings = metered_settings(redis_server.url, lease_s=1.0, slow_below_s=0.1, crawl_below_s=0.05, grace_s=1.0)
    async with running_server(settings) as (url_a, app_a), running_server(settings) as (url_b, app_b):
        async with FacefuseClient(url_a, api_key=ADMIN) as admin:
            key = await create_account(admin, "nia", balance=3)
        async with FacefuseClient(url_a, api_key=key) as node_a, FacefuseClient(url_b, api_key=key) as node_b:
            sessions = [
                await node.connect(ImageTrack(face_rgb("obama.jpg"), width=320, height=240)) for node in (node_a, node_b)
            ]
            server_sessions = [app_a[SESSIONS].get(sessions[0].session_id), app_b[SESSIONS].get(sessions[1].session_id)]
            await wait_for(lambda: all(s.state == "closed" for s in server_sessions), timeout=30)
            for session in sessions:
                await session.close()
            account = await node_b.request("GET", "/api/account")
            charged = 3 - account["balance"]
            processed = sum(s.stats.frames_processed for s in server_sessions)
            print(f"nodes processed {[s.stats.frames_processed for s in server_sessions]} frames, charged {charged:.4f}")
            assert all(s.close_reason == "tokens exhausted" for s in server_sessions)
            assert account["balance"] >= 0
            assert charged > 3 - 2 / 30, "the account was spent down"
            unpaid = processed / 30 - charged
            assert -0.001 <= unpaid <= 2 / 30 + 0.001, "at most the one frame per session that emptied its lease is unpaid"
