"""GET /api/account/history: the streamer's own account and history, as the admin's
GET /api/admin/accounts/{id} shows them (credits, and sessions with what each cost)."""

from __future__ import annotations

import pytest

from client.facefuse_client import FacefuseClient, ServerError
from client.image_track import ImageTrack
from support.metering import ADMIN, create_account, metered_settings
from support.server import face_rgb, running_server, wait_until


async def test_an_account_reads_its_own_history_as_the_admin_does(store_url):
    async with running_server(metered_settings(store_url)) as (url, app):
        async with FacefuseClient(url, api_key=ADMIN) as admin:
            key = await create_account(admin, "dana", balance=20)
            await admin.request(
                "POST", "/api/admin/accounts/dana/credit", json={"amount": 5, "idempotency_key": "top-up-1"}
            )
            async with FacefuseClient(url, api_key=key) as dana:
                session = await dana.connect(ImageTrack(face_rgb("obama.jpg"), width=320, height=240))
                await wait_until(lambda: session.frames_received >= 10, timeout=15)
                await dana.request("DELETE", f"/api/sessions/{session.session_id}")
                await session.close()
                own = await dana.request("GET", "/api/account/history")
                seen_by_admin = await admin.request("GET", "/api/admin/accounts/dana")
            assert own == seen_by_admin
            kinds = [entry["kind"] for entry in own["history"]]
            assert kinds == ["session", "credit"], own["history"]  # newest first
            assert own["history"][0]["spent"] > 0 and own["history"][1]["amount"] == 5
            with pytest.raises(ServerError) as caught:  # the admin key has no account of its own
                await admin.request("GET", "/api/account/history")
            assert caught.value.status == 401
