"""The operator's batch share of each session and busy share of the device (GET /api/events with
the admin key): real aiortc sessions through the real app with the invert chain."""

from __future__ import annotations

import math

from client.facefuse_client import FacefuseClient
from client.image_track import ImageTrack
from support.event_stream import open_events
from support.metering import ADMIN, create_account, metered_settings
from support.server import face_rgb, running_server, wait_until


async def test_the_shares_are_0_to_1_and_move_when_frames_flow():
    async with running_server(metered_settings(None)) as (url, app):
        async with FacefuseClient(url, api_key=ADMIN) as admin:
            key = await create_account(admin, "sol", balance=1000)
        async with open_events(url, ADMIN) as events, FacefuseClient(url, api_key=key) as client:
            for _ in range(3):  # nothing runs: the device idles
                idle = (await events.snapshot())["node"]["scheduler"]["busy_share"]
                assert idle in (None, 0.0), idle
            sessions = [await client.connect(ImageTrack(face_rgb("obama.jpg"), width=640, height=480)) for _ in "ab"]
            try:
                await wait_until(lambda: all(s.frames_received >= 10 for s in sessions), timeout=15)
                for _ in range(15):
                    snapshot = await events.snapshot()
                    shares = {s["session_id"]: s["batch_share"] for s in snapshot["sessions"]}
                    busy = snapshot["node"]["scheduler"]["busy_share"]
                    if None not in shares.values() and all(shares.values()) and busy:
                        break
                else:
                    raise AssertionError(f"the shares did not move: {shares}, busy {busy}")
                assert set(shares) == {s.session_id for s in sessions}
                assert all(0 < share <= 1 for share in shares.values()), shares
                # two sessions of the same video split the batches' frames between them (counters
                # read a moment apart, so within a margin)
                assert math.isclose(sum(shares.values()), 1.0, abs_tol=0.15), shares
                assert 0 < busy <= 1, busy
            finally:
                for session in sessions:
                    await session.close()
