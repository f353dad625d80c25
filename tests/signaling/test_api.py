"""The HTTP API's answers, statuses and error bodies, against the real app."""

import asyncio
import io
import json

import aiohttp
import pytest

from client.facefuse_client import FacefuseClient, ServerError
from signaling.app_keys import RUNNER, SESSIONS
from support.photos import encode_still
from support.server import face_path, face_rgb, loopback_settings, running_server


@pytest.fixture
async def api():
    async with running_server(loopback_settings()) as (url, app):
        async with FacefuseClient(url) as client:
            yield client


async def expect_error(call, status: int, code: str | None = None) -> ServerError:
    with pytest.raises(ServerError) as caught:
        await call
    assert caught.value.status == status, caught.value
    if code is not None:
        assert caught.value.code == code
    assert caught.value.message  # a message a person can read
    return caught.value


async def test_health(api):
    health = await api.request("GET", "/healthz")
    assert health["status"] == "ok" and health["chain"] == "passthrough" and health["device"] == "cpu"
    assert (await api.request("GET", "/livez"))["status"] == "ok"


async def test_a_stopped_worker_fails_both_probes():
    """A node whose worker stopped processes nothing: not ready (/healthz) and not alive (/livez,
    for an orchestrator to restart it)."""
    async with running_server(loopback_settings()) as (url, app):
        await asyncio.to_thread(app[RUNNER].stop)
        async with aiohttp.ClientSession() as http:
            for path in ("/healthz", "/livez"):
                async with http.get(f"{url}{path}") as response:
                    assert response.status == 503, path
                    assert (await response.json())["status"] == "worker stopped", path


@pytest.mark.parametrize("codec", ["png", "webp"])
async def test_upload_png_and_webp(api, codec):
    rgb = face_rgb("biden.jpg")[:400, :300].copy()
    face_id = await api.upload_face(encode_still(rgb, codec), f"image/{codec}")
    face = await api.request("GET", f"/api/faces/{face_id}")
    assert (face["width"], face["height"], face["format"]) == (300, 400, codec)


async def test_upload_get_delete(api):
    face_id = await api.upload_face(face_path("obama.jpg").read_bytes())
    face = await api.request("GET", f"/api/faces/{face_id}")
    assert (face["width"], face["height"], face["format"]) == (910, 1137, "jpeg")
    await api.request("DELETE", f"/api/faces/{face_id}")
    await expect_error(api.request("GET", f"/api/faces/{face_id}"), 404, "face_not_found")
    await expect_error(api.request("DELETE", f"/api/faces/{face_id}"), 404)


async def test_multipart_upload(api):
    form = aiohttp.FormData()
    form.add_field("image", face_path("biden.jpg").read_bytes(), filename="biden.jpg", content_type="image/jpeg")
    body = await api.request("POST", "/api/faces", data=form)
    assert body["format"] == "jpeg"
    empty = aiohttp.FormData()
    empty.add_field("other", b"x", filename="x.bin")
    await expect_error(api.request("POST", "/api/faces", data=empty), 400, "missing_image")
    no_file = aiohttp.FormData()  # a form sent with no file chosen
    no_file.add_field("image", b"", filename="", content_type="application/octet-stream")
    await expect_error(api.request("POST", "/api/faces", data=no_file), 400, "empty_body")
    # fields before the image are read and count against the size limit
    after_a_field = aiohttp.FormData()
    after_a_field.add_field("note", b"n" * 1000, filename="note.txt")
    after_a_field.add_field(
        "image", face_path("biden.jpg").read_bytes(), filename="biden.jpg", content_type="image/jpeg"
    )
    assert (await api.request("POST", "/api/faces", data=after_a_field))["format"] == "jpeg"
    after_a_huge_field = aiohttp.FormData()
    after_a_huge_field.add_field("note", io.BytesIO(bytes(11 * 1024 * 1024)), filename="note.bin")
    after_a_huge_field.add_field(
        "image", face_path("biden.jpg").read_bytes(), filename="biden.jpg", content_type="image/jpeg"
    )
    await expect_error(api.request("POST", "/api/faces", data=after_a_huge_field), 413)
    # a multipart body aiohttp cannot read (once 500s): no boundary; headers cut off
    cut_off = b"--x\r\nContent-Disposition: form-da"
    # a part's header line over aiohttp's 8 KiB, too many header lines (aiohttp's own errors, not ValueErrors)
    long_line = b"--x\r\nContent-Disposition: form-data; name=image; x=" + b"a" * 9000 + b"\r\n\r\nimg\r\n--x--\r\n"
    many_lines = b"--x\r\n" + b"X-A: b\r\n" * 5000 + b"\r\nimg\r\n--x--\r\n"
    for content_type, data in (
        ("multipart/form-data", b"junk"),
        ("multipart/form-data; boundary=x", cut_off),
        ("multipart/form-data; boundary=x", long_line),
        ("multipart/form-data; boundary=x", many_lines),
    ):
        await expect_error(
            api.request("POST", "/api/faces", data=data, headers={"Content-Type": content_type}),
            400,
            "invalid_multipart",
        )


async def test_oversized_upload_is_413(api):
    huge = b"\xff\xd8\xff" + bytes(11 * 1024 * 1024)
    await expect_error(api.upload_face(huge), 413)

    async def chunks():  # no Content-Length: the limit holds while streaming
        for _ in range(12):
            yield bytes(1024 * 1024)

    await expect_error(api.request("POST", "/api/faces", data=chunks()), 413)


async def test_not_an_image_is_415(api):
    await expect_error(api.upload_face(b"just some text, not a picture", "text/plain"), 415, "unsupported_media_type")


async def test_corrupt_image_is_400(api):
    await expect_error(api.upload_face(b"\xff\xd8\xff\xe0" + bytes(2000)), 400, "unreadable_image")


async def test_empty_upload_is_400(api):
    await expect_error(api.upload_face(b""), 400, "empty_body")


@pytest.mark.parametrize(
    "body",
    [
        {"sdp": "not an sdp", "type": "offer"},
        {"sdp": "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\n", "type": "offer"},
        {"sdp": "", "type": "offer"},
        {"sdp": "v=0", "type": "answer"},
        {"type": "offer"},
        ["not", "an", "object"],
        {"sdp": "v=0", "type": "offer", "options": "fast"},
    ],
)
async def test_malformed_offer_is_400(api, body):
    await expect_error(api.request("POST", "/api/offer", json=body), 400)
    assert (await api.request("GET", "/api/sessions"))["sessions"] == []


async def test_invalid_json_is_400(api):
    await expect_error(
        api.request("POST", "/api/offer", data=b"{nope", headers={"Content-Type": "application/json"}),
        400,
        "invalid_json",
    )
    nested = b"[" * 100_000 + b"]" * 100_000  # too deep for the parser: RecursionError, once a 500
    await expect_error(
        api.request("POST", "/api/offer", data=nested, headers={"Content-Type": "application/json"}),
        400,
        "invalid_json",
    )
    # a charset Python has no codec for (once a 500)
    bogus = {"Content-Type": "application/json; charset=bogus"}
    await expect_error(
        api.request("POST", "/api/offer", data=b'{"type": "offer"}', headers=bogus), 415, "unsupported_media_type"
    )


@pytest.mark.parametrize(
    "path, module, setting",
    [
        ("/api/offer", "signaling.request_body", "JSON_BODY_TIMEOUT_S"),
        ("/api/faces", "signaling.upload_body", "UPLOAD_STALL_S"),
    ],
)
async def test_a_body_that_stops_arriving_is_given_up(api, monkeypatch, path, module, setting):
    """A client that announces a body and stops sending must not hold its buffer and connection."""
    import importlib

    monkeypatch.setattr(importlib.import_module(module), setting, 0.5)
    host, port = api.base_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        f'POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{"sdp": '.encode()
    )
    await writer.drain()
    status_line = await asyncio.wait_for(reader.readline(), timeout=5)
    writer.close()
    assert status_line.split()[1] == b"408", status_line


async def test_unknown_face_is_404(api):
    await expect_error(
        api.request("POST", "/api/offer", json={"sdp": "v=0", "type": "offer", "face_id": "nobody"}),
        404,
        "face_not_found",
    )


async def test_unknown_session_is_404(api):
    await expect_error(api.request("GET", "/api/sessions/nope"), 404, "session_not_found")
    await expect_error(api.request("DELETE", "/api/sessions/nope"), 404, "session_not_found")


async def test_unknown_route_and_method_are_json(api):
    await expect_error(api.request("GET", "/api/nothing"), 404)
    error = await expect_error(api.request("PUT", "/api/faces/x"), 405)
    assert error.code == "method_not_allowed"


async def test_index_page_is_served(api):
    async with api._http.get(api.base_url + "/") as response:
        assert response.status == 200
        assert "<video" in await response.text()


async def test_offer_with_only_outside_candidates_is_400():
    """A peer offering only non-loopback candidates to a loopback-only server gets a clear 400."""
    from client.image_track import ImageTrack
    from stream.ice import IceSettings

    async with running_server(loopback_settings()) as (url, app):
        async with FacefuseClient(url, ice=IceSettings()) as client:  # aioice's own enumeration: no 127.0.0.1
            error = await expect_error(
                client.connect(ImageTrack(face_rgb("obama.jpg"), width=320, height=240)), 400, "invalid_sdp"
            )
            assert "networks this server accepts" in error.message
            assert (await client.request("GET", "/api/sessions"))["sessions"] == []


async def test_swap_options_are_checked(api):
    # an unknown option (a typo, or a payload echoed in every stats event) is refused too
    for options in (
        {"swap": "everyone"},
        {"swap": "reference"},
        {"swap": "all", "turbo": True},
        {"swap": "all", "reference_threshold": 0.6},  # a threshold only goes with a reference
    ):
        await expect_error(
            api.request("POST", "/api/offer", json={"sdp": "v=0", "type": "offer", "options": options}),
            400,
            "invalid_body",
        )
    await expect_error(
        api.request(
            "POST",
            "/api/offer",
            json={"sdp": "v=0", "type": "offer", "options": {"swap": "reference", "reference_face_id": "x"}},
        ),
        404,
        "face_not_found",
    )


async def test_data_channel_commands_switch_face_and_faces_to_swap_mid_stream():
    """set_face and set_swap on a live session's data channel: each answered with an event and seen
    in GET /api/sessions/{id}; a bad one is answered with an error event and changes nothing."""
    from client.image_track import ImageTrack
    from support.server import wait_until

    async with running_server(loopback_settings()) as (url, app):
        async with FacefuseClient(url) as client:
            face = await client.upload_face(face_path("biden.jpg").read_bytes())
            reference = await client.upload_face(face_path("obama2.jpg").read_bytes())
            # a reference photo's id with another mode is dropped, unread: it was once kept and echoed,
            # whatever it held, in every stats event (a 600 KB one: too big for SCTP, no stats at all)
            payload = {"swap": "all", "reference_face_id": {"x": "y" * 300_000}}
            session = await client.connect(ImageTrack(face_rgb("obama.jpg"), width=320, height=240), options=payload)
            try:
                await wait_until(lambda: session.channel.readyState == "open", timeout=10)
                assert (await client.request("GET", f"/api/sessions/{session.session_id}"))["options"] == {
                    "swap": "all"
                }
                await wait_until(lambda: any(e["type"] == "stats" for e in list(session.events)), timeout=5)

                async def answer_to(command: dict) -> dict:
                    seen = len(session.events)
                    session.send_command(command)
                    await wait_until(lambda: any(e["type"] != "stats" for e in list(session.events)[seen:]), timeout=5)
                    return next(e for e in list(session.events)[seen:] if e["type"] != "stats")

                async def snapshot() -> dict:
                    return await client.request("GET", f"/api/sessions/{session.session_id}")

                assert await answer_to({"type": "set_face", "face_id": face}) == {"type": "face", "face_id": face}
                assert (await snapshot())["face_id"] == face
                swap = {"swap": "reference", "reference_face_id": reference}
                assert await answer_to({"type": "set_swap", **swap}) == {"type": "swap", **swap}
                assert (await snapshot())["options"] == swap
                assert await answer_to({"type": "set_swap", "swap": "largest"}) == {"type": "swap", "swap": "largest"}
                assert (await snapshot())["options"] == {"swap": "largest"}, "the reference goes with its mode"

                # a reference photo only goes with its mode
                assert await answer_to({"type": "set_swap", "swap": "largest", "reference_face_id": reference}) == {
                    "type": "swap", "swap": "largest"}  # fmt: skip
                for bad, code in (
                    ({"type": "set_swap", "swap": "everyone"}, "invalid_command"),
                    ({"type": "set_swap", "swap": "reference"}, "invalid_command"),
                    ({"type": "set_swap", "swap_mode": "largest"}, "invalid_command"),  # no 'swap': not "all"
                    ({"type": "set_swap", "swap": "reference", "reference_face_id": "nope"}, "face_not_found"),
                    ({"type": "set_swap", "swap": "largest", "reference_threshold": 0.6}, "invalid_command"),
                    ({"type": "set_swap", **swap, "reference_threshold": 1.5}, "invalid_command"),
                    ({"type": "set_swap", **swap, "reference_threshold": True}, "invalid_command"),
                    ({"type": "set_face", "face_id": "nope"}, "face_not_found"),
                    ({"type": "set_face", "face_id": 123}, "invalid_command"),
                    ({"type": "set_face"}, "invalid_command"),  # no 'face_id': not "stop swapping"
                    ({"type": "dance"}, "unknown_command"),
                ):
                    answer = await answer_to(bad)
                    assert answer["type"] == "error" and answer["code"] == code, (bad, answer)
                    assert answer["command"] == bad["type"], "the error names the command it answers"
                # what is no command at all: nested too deep for the parser, too long to echo back
                # (its answer would exceed the peer's SCTP message limit); the session lives on
                for raw, message in (
                    ("[" * 1000 + "]" * 1000, "expected a JSON object"),
                    (json.dumps({"type": "x" * 140_000}), "at most"),
                ):
                    seen = len(session.events)
                    session.channel.send(raw)
                    await wait_until(
                        lambda seen=seen: any(e["type"] == "error" for e in list(session.events)[seen:]), timeout=5
                    )
                    answer = next(e for e in list(session.events)[seen:] if e["type"] == "error")
                    assert answer["code"] == "invalid_command" and message in answer["message"], answer
                assert session.pc.connectionState == "connected"
                received = session.frames_received
                await wait_until(lambda: session.frames_received >= received + 5, timeout=5)
                after = await snapshot()
                assert after["options"] == {"swap": "largest"} and after["face_id"] == face, "nothing changed"

                # the same over HTTP, for a dashboard or a script that holds no data channel
                path = f"/api/sessions/{session.session_id}/swap"
                stricter = {**swap, "reference_threshold": 0.7}
                assert (await client.request("POST", path, json=stricter))["options"] == stricter
                assert await answer_to({"type": "set_swap", **stricter}) == {"type": "swap", **stricter}
                error = await expect_error(
                    client.request("POST", path, json={**swap, "reference_threshold": "high"}), 400, "invalid_body"
                )
                assert "between 0 and 1" in error.message
                assert (await client.request("POST", path, json=swap))["options"] == swap
                await expect_error(client.request("POST", path, json={"swap": "everyone"}), 400, "invalid_body")
                await expect_error(
                    client.request("POST", path, json={"reference_face_id": reference}), 400, "invalid_body"
                )
                await expect_error(client.request("POST", path, json=["largest"]), 400, "invalid_body")
                # a typo is not "stop swapping" (that takes an explicit null)
                face_path_ = f"/api/sessions/{session.session_id}/face"
                await expect_error(client.request("POST", face_path_, json={"faceid": face}), 400, "invalid_body")
                assert (await snapshot())["face_id"] == face
                await expect_error(
                    client.request("POST", path, json={"swap": "reference", "reference_face_id": "x"}),
                    404,
                    "face_not_found",
                )
                await expect_error(client.request("POST", "/api/sessions/nope/swap", json={"swap": "all"}), 404)
                assert (await snapshot())["options"] == swap

                # a face a live session uses is not deleted under it (every frame after failed)
                for in_use in (face, reference):
                    error = await expect_error(client.request("DELETE", f"/api/faces/{in_use}"), 409, "face_in_use")
                    assert session.session_id in error.message
                assert (await snapshot())["frames_failed"] == 0
            finally:
                await session.close()
            await wait_until(lambda: not app[SESSIONS].all(), timeout=5)
            for unused in (face, reference):
                assert (await client.request("DELETE", f"/api/faces/{unused}"))["deleted"] is True


@pytest.mark.parametrize("admin_key, accepted", [(None, 3), ("admin-key", 2)])
async def test_an_accounts_share_of_the_face_library(admin_key, accepted):
    """Metered, one account keeps at most max_faces_per_account; in local mode the one account
    everyone shares has the whole library."""
    import dataclasses

    from signaling.settings import HttpSettings

    settings = loopback_settings(quota={"admin_key": admin_key})
    settings = dataclasses.replace(settings, http=HttpSettings(max_faces=3, max_faces_per_account=2))
    async with running_server(settings) as (url, app):
        key = None
        if admin_key:
            async with FacefuseClient(url, api_key=admin_key) as admin:
                created = await admin.request(
                    "POST", "/api/admin/accounts", json={"id": "ann", "tier": "paid", "balance": 1}
                )
                key = created["api_key"]
        async with FacefuseClient(url, api_key=key) as client:
            photo = face_path("obama.jpg").read_bytes()
            for _ in range(accepted):
                await client.upload_face(photo)
            full = await expect_error(client.upload_face(photo), 507, "face_library_full")
            assert ("this account" in full.message) == bool(admin_key), full.message
