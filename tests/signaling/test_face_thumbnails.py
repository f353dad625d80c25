"""Face thumbnails: a JPEG of at most 128 px of the aligned source face, kept with the face's
analysis (never the photo), listed by GET /api/faces and the dashboard's events, deleted with the
face, and 404 to any other account. Real photos through the real app with the `mesh` chain."""

from __future__ import annotations

import aiohttp
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from client.facefuse_client import FacefuseClient, ServerError
from pipeline.images import decode_image
from signaling.app_keys import FACES
from support.event_stream import open_events
from support.metering import ADMIN, create_account, metered_settings
from support.server import face_path, loopback_settings, running_server

pytestmark = pytest.mark.slow  # the mesh chain's warm-up and analyses


async def thumbnail(base_url: str, path: str, api_key: str | None = None) -> tuple[int, str, bytes]:
    """As the page fetches it (an image tag cannot send the key): status, type and body."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    async with aiohttp.ClientSession(headers=headers) as http, http.get(base_url + path) as response:
        return response.status, response.content_type, await response.read()


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return 10 * np.log10(255**2 / mse)


async def test_a_face_has_a_small_jpeg_of_its_aligned_face_until_it_is_deleted():
    async with running_server(loopback_settings("mesh")) as (url, app):
        async with FacefuseClient(url) as client:
            face_id = await client.upload_face(face_path("obama.jpg").read_bytes())
            face = await client.request("GET", f"/api/faces/{face_id}")
            assert face["thumbnail_url"] == f"/api/faces/{face_id}/thumbnail"
            status, content_type, body = await thumbnail(url, face["thumbnail_url"])
            assert (status, content_type) == (200, "image/jpeg")
            image, format_name = decode_image(body)
            assert format_name == "jpeg" and max(image.shape[:2]) <= 128 and image.shape[0] == image.shape[1]
            # it is the analysed face: the chain's own upright crop, made small
            crop = app[FACES].get(face_id).analysis.image[None].float().cpu()
            small = F.interpolate(crop, size=image.shape[:2], mode="bilinear", antialias=True)[0]
            expected = (small.clamp(0, 1) * 255).round().to(torch.uint8).permute(1, 2, 0).numpy()
            print(f"thumbnail {image.shape[1]}x{image.shape[0]}, {len(body)} bytes, {psnr(image, expected):.1f} dB")
            assert psnr(image, expected) > 30  # a JPEG's loss, not another picture
            assert len(body) < 20_000

            listed = (await client.request("GET", "/api/faces"))["faces"]
            assert listed == [face]
            async with open_events(url) as events:
                assert (await events.snapshot())["faces"] == listed

            await client.request("DELETE", f"/api/faces/{face_id}")
            assert (await thumbnail(url, face["thumbnail_url"]))[0] == 404
            assert (await client.request("GET", "/api/faces"))["faces"] == []


async def test_another_accounts_thumbnail_is_404():
    async with running_server(metered_settings(None, chain="mesh")) as (url, app):
        async with FacefuseClient(url, api_key=ADMIN) as admin:
            alice_key, bob_key = await create_account(admin, "alice", 10), await create_account(admin, "bob", 10)
        async with FacefuseClient(url, api_key=alice_key) as alice, FacefuseClient(url, api_key=bob_key) as bob:
            face_id = await alice.upload_face(face_path("obama.jpg").read_bytes())
            path = f"/api/faces/{face_id}/thumbnail"
            assert (await thumbnail(url, path, alice_key))[0] == 200
            status, content_type, body = await thumbnail(url, path, bob_key)
            assert (status, content_type) == (404, "application/json")
            assert (await bob.request("GET", "/api/faces"))["faces"] == []
            with pytest.raises(ServerError) as caught:
                await bob.request("GET", path)
            assert caught.value.code == "face_not_found"


async def test_a_chain_without_faces_keeps_no_thumbnail():
    async with running_server(loopback_settings()) as (url, app):  # passthrough: any photo will do
        async with FacefuseClient(url) as client:
            face_id = await client.upload_face(face_path("obama.jpg").read_bytes())
            face = await client.request("GET", f"/api/faces/{face_id}")
            assert face["thumbnail_url"] is None
            assert (face["face_size"], face["warnings"]) == (None, [])  # the library's one shape, all the same
            with pytest.raises(ServerError) as caught:
                await client.request("GET", f"/api/faces/{face_id}/thumbnail")
            assert (caught.value.status, caught.value.code) == (404, "thumbnail_not_found")
