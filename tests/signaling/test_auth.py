"""Accounts, API keys and who may touch what: every status code of the metered API."""

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from client.facefuse_client import FacefuseClient, ServerError
from client.image_track import ImageTrack
from support.server import face_path, face_rgb, loopback_settings, running_server

ADMIN = "admin-secret-for-tests"


@pytest.fixture
async def server():
    async with running_server(loopback_settings(quota={"admin_key": ADMIN})) as (url, app):
        yield url


@pytest.fixture
async def admin(server):
    async with FacefuseClient(server, api_key=ADMIN) as client:
        yield client


async def new_account(admin: FacefuseClient, account_id: str, tier: str = "paid", balance: float = 100) -> str:
    body = await admin.request("POST", "/api/admin/accounts", json={"id": account_id, "tier": tier, "balance": balance})
    assert body["id"] == account_id and body["tier"] == tier and body["balance"] == balance
    return body["api_key"]


async def status_of(call) -> int:
    with pytest.raises(ServerError) as caught:
        await call
    assert caught.value.message
    return caught.value.status


async def test_admin_endpoints_need_the_admin_key(server, admin):
    async with FacefuseClient(server) as anonymous, FacefuseClient(server, api_key="wrong") as wrong:
        assert await status_of(anonymous.request("POST", "/api/admin/accounts", json={"id": "a"})) == 401
        assert await status_of(wrong.request("POST", "/api/admin/accounts", json={"id": "a"})) == 401
        assert await status_of(wrong.request("GET", "/api/admin/accounts/a")) == 401
    key = await new_account(admin, "alice")
    async with FacefuseClient(server, api_key=key) as alice:  # a user key is no admin key
        assert await status_of(alice.request("GET", "/api/admin/accounts/alice")) == 401


async def test_an_api_key_that_is_not_ascii_is_401(server):
    """Bytes past ASCII in the header arrive as surrogates that cannot be hashed: once a 500."""
    host, port = server.removeprefix("http://").split(":")
    for path in ("/api/account", "/api/admin/accounts/a"):
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(
            f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n".encode()
            + b"Authorization: Bearer \xff\xfe\r\n\r\n"
        )
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), timeout=5)
        writer.close()
        assert status_line.split()[1] == b"401", (path, status_line)


async def test_account_creation_errors(admin):
    await new_account(admin, "bob")
    assert await status_of(admin.request("POST", "/api/admin/accounts", json={"id": "bob", "tier": "paid"})) == 409
    assert await status_of(admin.request("POST", "/api/admin/accounts", json={"id": "x", "tier": "platinum"})) == 400
    assert await status_of(admin.request("POST", "/api/admin/accounts", json={"id": "x", "tier": ["paid"]})) == 400
    assert (
        await status_of(admin.request("POST", "/api/admin/accounts", json={"id": "no spaces", "tier": "free"})) == 400
    )
    for balance in (-1, float("nan"), float("inf"), 1e13):
        assert (
            await status_of(admin.request("POST", "/api/admin/accounts", json={"id": "y", "balance": balance})) == 400
        )
    assert await status_of(admin.request("GET", "/api/admin/accounts/nobody")) == 404


async def test_users_need_a_valid_key(server, admin):
    key = await new_account(admin, "carol", balance=42)
    async with FacefuseClient(server) as anonymous, FacefuseClient(server, api_key="ff_wrong") as wrong:
        for client in (anonymous, wrong):
            assert await status_of(client.request("GET", "/api/account")) == 401
            assert await status_of(client.upload_face(face_path("obama.jpg").read_bytes())) == 401
            assert await status_of(client.request("GET", "/api/sessions")) == 401
    async with FacefuseClient(server, api_key=key) as carol:
        account = await carol.request("GET", "/api/account")
        assert (account["id"], account["tier"], account["balance"], account["active_sessions"]) == (
            "carol",
            "paid",
            42,
            0,
        )


async def test_credit_is_idempotent(admin):
    await new_account(admin, "dave", balance=1)
    for _ in range(3):
        body = await admin.request(
            "POST", "/api/admin/accounts/dave/credit", json={"amount": 5, "idempotency_key": "order-17"}
        )
        assert body["balance"] == 6
    body = await admin.request(
        "POST", "/api/admin/accounts/dave/credit", json={"amount": 2, "idempotency_key": "order-18"}
    )
    assert body["balance"] == 8
    # no number, or none a ledger should take: NaN and infinity once gave 500, 1e13 a negative balance,
    # 1e-7 credited nothing and used the key up
    for amount in (-2, 0, float("nan"), float("inf"), 1e13, 1e-7, True, "5"):
        credit = {"amount": amount, "idempotency_key": "k"}
        assert await status_of(admin.request("POST", "/api/admin/accounts/dave/credit", json=credit)) == 400, amount
    # a key Redis could not store (a lone surrogate; the memory store took it): 500 there, so none
    assert (
        await status_of(
            admin.request("POST", "/api/admin/accounts/dave/credit", json={"amount": 1, "idempotency_key": "\ud800"})
        )
        == 400
    )
    body = await admin.request("POST", "/api/admin/accounts/dave/credit", json={"amount": 1e9, "idempotency_key": "k"})
    assert body["balance"] == 1e9 + 8, "the largest credit, under the key none of the refused ones used"
    assert (
        await status_of(
            admin.request("POST", "/api/admin/accounts/nobody/credit", json={"amount": 2, "idempotency_key": "k"})
        )
        == 404
    )
    history = (await admin.request("GET", "/api/admin/accounts/dave"))["history"]
    assert [entry["amount"] for entry in history if entry["kind"] == "credit"] == [1e9, 2, 5]


async def test_faces_and_sessions_belong_to_their_account(server, admin):
    erin_key, frank_key = await new_account(admin, "erin"), await new_account(admin, "frank")
    async with FacefuseClient(server, api_key=erin_key) as erin, FacefuseClient(server, api_key=frank_key) as frank:
        face_id = await erin.upload_face(face_path("obama.jpg").read_bytes())
        assert await status_of(frank.request("GET", f"/api/faces/{face_id}")) == 403
        assert await status_of(frank.request("DELETE", f"/api/faces/{face_id}")) == 403
        offer = frank.connect(ImageTrack(face_rgb("biden.jpg"), width=320, height=240), face_id=face_id)
        assert await status_of(offer) == 403

        session = await erin.connect(ImageTrack(face_rgb("obama.jpg"), width=320, height=240), face_id=face_id)
        try:
            assert await status_of(frank.request("GET", f"/api/sessions/{session.session_id}")) == 403
            assert await status_of(frank.request("DELETE", f"/api/sessions/{session.session_id}")) == 403
            assert (await frank.request("GET", "/api/sessions"))["sessions"] == []
            mine = (await erin.request("GET", "/api/sessions"))["sessions"]
            assert [s["session_id"] for s in mine] == [session.session_id]
            assert (await erin.request("GET", f"/api/faces/{face_id}"))["id"] == face_id
        finally:
            await session.close()


async def test_nothing_to_spend_is_402(server, admin):
    key = await new_account(admin, "gina", balance=0)
    async with FacefuseClient(server, api_key=key) as gina:
        assert await status_of(gina.connect(ImageTrack(face_rgb("obama.jpg"), width=320, height=240))) == 402
        assert (await gina.request("GET", "/api/sessions"))["sessions"] == []


async def test_more_sessions_than_the_tier_allows_is_429(server, admin):
    key = await new_account(admin, "hal", tier="free", balance=10)  # free: one session at a time
    async with FacefuseClient(server, api_key=key) as hal:
        first = await hal.connect(ImageTrack(face_rgb("obama.jpg"), width=320, height=240))
        try:
            assert await status_of(hal.connect(ImageTrack(face_rgb("obama.jpg"), width=320, height=240))) == 429
        finally:
            await first.close()


async def test_local_mode_needs_no_key_and_has_no_admin_api():
    async with running_server(loopback_settings()) as (url, app):
        async with FacefuseClient(url) as client:
            account = await client.request("GET", "/api/account")
            assert (account["id"], account["tier"], account["metered"]) == ("local", "vip", False)
            assert await status_of(client.request("POST", "/api/admin/accounts", json={"id": "x"})) == 403


def test_serving_beyond_loopback_without_an_admin_key_is_refused():
    facefuse = str(Path(sys.executable).with_name("facefuse"))
    result = subprocess.run(
        [facefuse, "serve", "--host", "0.0.0.0", "--port", "0"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "without --admin-key" in result.stderr


async def real_offer(audio: bool) -> str:
    """What an aiortc peer offers for a camera sent and received (and a microphone), loopback only."""
    from aiortc import RTCPeerConnection

    from stream.ice import IceSettings, restrict_gathering, rtc_configuration

    ice = IceSettings(hosts=("127.0.0.1",))
    peer = RTCPeerConnection(rtc_configuration(ice))
    peer.createDataChannel("events")
    peer.addTransceiver("video", direction="sendrecv")
    if audio:
        peer.addTransceiver("audio", direction="sendrecv")
    await restrict_gathering(peer, ice)
    await peer.setLocalDescription(await peer.createOffer())
    sdp = peer.localDescription.sdp
    await peer.close()
    return sdp


def second_audio_section(sdp: str) -> str:
    """The offer with its audio section offered twice (a=mid:9 for the copy)."""
    start = sdp.index("m=audio")
    end = sdp.find("m=", start + 1)
    audio = sdp[start : end if end > 0 else len(sdp)]
    mid = next(line for line in audio.splitlines() if line.startswith("a=mid:"))
    return sdp + audio.replace(mid, "a=mid:9")


async def test_a_malformed_offer_is_refused_before_any_lease(admin):
    """A 400 offer opens no lease: it is not 402 for an empty account, and it writes no history
    (a thousand of them had pushed the account's credits out of its history). The same for offers
    a peer can really make that a session cannot take: video it only wants to receive, and two audio
    sections (aiortc answered those, then left a UDP socket open after the session ended: one
    offer and DELETE a few milliseconds, so a client could run the server out of descriptors)."""
    broke_key = await new_account(admin, "gina", balance=0)
    offer = await real_offer(audio=True)
    unusable = [
        "hello",
        second_audio_section(offer),
        offer.replace("a=sendrecv", "a=recvonly"),
        offer.replace("a=sendrecv", "a=inactive"),
    ]
    open_files = len(list(Path("/proc/self/fd").iterdir()))
    async with FacefuseClient(admin.base_url, api_key=broke_key) as gina:
        for sdp in unusable * 3:
            assert await status_of(gina.request("POST", "/api/offer", json={"sdp": sdp, "type": "offer"})) == 400
    assert len(list(Path("/proc/self/fd").iterdir())) <= open_files  # the server runs in this process
    history = (await admin.request("GET", "/api/admin/accounts/gina"))["history"]
    assert [entry for entry in history if entry["kind"] == "session"] == []
