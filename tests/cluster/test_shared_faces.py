"""Faces shared through Redis (signaling/shared_faces.py): two nodes (two apps on one real
redis-server) are one face library. A face uploaded on node A swaps on a session on node B (its
identity judged by SFace, as the chain's tests do), is listed and shown on B, can be chosen on B
over the data channel after the session started; the limits count both nodes' uploads; a face
deleted on one node is gone on the other."""

from __future__ import annotations

import contextlib
import dataclasses

import numpy as np
import pytest

from client.facefuse_client import FacefuseClient, ServerError
from client.image_track import ImageTrack
from client.still_picture import top_at_aspect
from support.cluster_nodes import camera, cluster
from support.face_identity import identity
from support.metering import ADMIN, create_account, metered_settings
from support.server import face_path, face_rgb, running_server, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def node_settings(redis_url: str, chain: str = "mesh", faces_per_account: int = 32):
    settings = metered_settings(redis_url, chain)
    return dataclasses.replace(
        settings, http=dataclasses.replace(settings.http, max_faces_per_account=faces_per_account)
    )


@contextlib.asynccontextmanager
async def two_nodes(redis_url: str, **settings):
    async with (
        running_server(node_settings(redis_url, **settings)) as (a, _),
        running_server(node_settings(redis_url, **settings)) as (b, _),
    ):
        yield a, b


def nearer_source(received_rgb: np.ndarray, source: str, target: str) -> tuple[float, float]:
    face = identity(received_rgb)
    return float(face @ identity(face_rgb(source))), float(face @ identity(face_rgb(target)))


async def test_a_face_uploaded_on_one_node_swaps_on_another(redis_server):
    async with two_nodes(redis_server.url) as (a, b), FacefuseClient(a, api_key=ADMIN) as admin:
        key = await create_account(admin, "ada", balance=1000)
        async with FacefuseClient(a, api_key=key) as on_a, FacefuseClient(b, api_key=key) as on_b:
            hopper = await on_a.upload_face(face_path("grace_hopper.jpg").read_bytes())
            listed = (await on_b.request("GET", "/api/faces"))["faces"]
            assert [face["id"] for face in listed] == [hopper]
            assert (await on_b.request("GET", f"/api/faces/{hopper}"))["face_size"] == listed[0]["face_size"]

            session = await on_b.connect(ImageTrack(top_at_aspect(face_rgb("obama.jpg"), 640, 480)), face_id=hopper)
            try:
                await wait_until(lambda: session.frames_received >= 15, timeout=60)
                received = session.received[-1].frame.to_ndarray(format="rgb24")
                to_source, to_target = nearer_source(received, "grace_hopper.jpg", "obama.jpg")
                print(
                    f"\nnode B, a face from node A: SFace {to_source:.3f} to the source, {to_target:.3f} to the target"
                )
                assert to_source > to_target, "node B swaps with the face uploaded on node A"

                # uploaded on A after the session began on B, chosen over B's data channel
                biden = await on_a.upload_face(face_path("biden.jpg").read_bytes())
                session.send_command({"type": "set_face", "face_id": biden})
                await wait_until(lambda: any(e.get("type") == "face" for e in session.events), timeout=10)
                assert [e for e in session.events if e.get("type") == "face"][-1]["face_id"] == biden
                assert not [e for e in session.events if e.get("type") == "error"], list(session.events)
            finally:
                await session.close()


async def test_limits_count_every_nodes_uploads_and_a_delete_reaches_every_node(redis_server):
    async with (
        two_nodes(redis_server.url, chain="invert", faces_per_account=2) as (a, b),
        FacefuseClient(a, api_key=ADMIN) as admin,
    ):
        ada, bob = await create_account(admin, "ada", 10), await create_account(admin, "bob", 10)
        async with FacefuseClient(a, api_key=ada) as on_a, FacefuseClient(b, api_key=ada) as on_b:
            first = await on_a.upload_face(face_path("obama.jpg").read_bytes())
            await on_b.upload_face(face_path("biden.jpg").read_bytes())
            with pytest.raises(ServerError) as full:
                await on_a.upload_face(face_path("grace_hopper.jpg").read_bytes())
            assert (full.value.status, full.value.code) == (507, "face_library_full")

            await on_a.request("GET", f"/api/faces/{first}")  # node A holds it now
            await on_b.request("DELETE", f"/api/faces/{first}")
            with pytest.raises(ServerError) as gone:
                await on_a.request("GET", f"/api/faces/{first}")
            assert gone.value.status == 404
            third = await on_a.upload_face(face_path("grace_hopper.jpg").read_bytes())  # room again
            async with FacefuseClient(b, api_key=bob) as bob_on_b:
                with pytest.raises(ServerError) as other:
                    await bob_on_b.request("GET", f"/api/faces/{third}")
                assert other.value.status == 403


async def test_a_face_in_use_on_another_node_is_not_deleted(redis_server, tmp_path):
    with cluster(redis_server.url, tmp_path, (), ()) as nodes:
        async with FacefuseClient(nodes[0].base_url, api_key=ADMIN) as admin:
            key = await create_account(admin, "cy", balance=100)
        async with (
            FacefuseClient(nodes[0].base_url, api_key=key) as on_0,
            FacefuseClient(nodes[1].base_url, api_key=key) as on_1,
        ):
            face = await on_0.upload_face(face_path("obama.jpg").read_bytes())
            session = await on_1.connect(camera(1), face_id=face)
            try:
                await wait_until(lambda: session.frames_received >= 3, timeout=20)
                with pytest.raises(ServerError) as in_use:
                    await on_0.request("DELETE", f"/api/faces/{face}")
                assert (in_use.value.status, in_use.value.code) == (409, "face_in_use")
                assert session.session_id in in_use.value.message
                # ended by its DELETE before the peer closes: a closed peer ends it too, and then
                # the DELETE raced that end (404)
                await on_1.request("DELETE", f"/api/sessions/{session.session_id}")
            finally:
                await session.close()
            await on_0.request("DELETE", f"/api/faces/{face}")
            with pytest.raises(ServerError) as gone:
                await on_1.request("GET", f"/api/faces/{face}")
            assert gone.value.status == 404


async def test_a_face_store_gone_is_an_error_event_and_the_session_goes_on(redis_server):
    """Redis stopped while a session runs: choosing a face only the store holds is answered
    face_store_unavailable on the data channel, the session keeps its frames, and once the store
    is back the same command works."""
    async with two_nodes(redis_server.url, chain="invert") as (a, b), FacefuseClient(a, api_key=ADMIN) as admin:
        key = await create_account(admin, "di", balance=1000)
        async with FacefuseClient(a, api_key=key) as on_a, FacefuseClient(b, api_key=key) as on_b:
            own = await on_b.upload_face(face_path("obama.jpg").read_bytes())
            from_a = await on_a.upload_face(face_path("biden.jpg").read_bytes())  # B has not read it yet
            session = await on_b.connect(camera(1), face_id=own)
            try:
                await wait_until(lambda: session.frames_received >= 3, timeout=20)
                redis_server.stop()
                session.send_command({"type": "set_face", "face_id": from_a})
                await wait_until(lambda: any(e.get("type") == "error" for e in session.events), timeout=20)
                error = [e for e in session.events if e.get("type") == "error"][-1]
                assert error["code"] == "face_store_unavailable", error
                frames = session.frames_received
                await wait_until(lambda: session.frames_received >= frames + 5, timeout=20)

                redis_server.start()
                session.send_command({"type": "set_face", "face_id": from_a})
                await wait_until(lambda: any(e.get("type") == "face" for e in session.events), timeout=20)
                assert [e for e in session.events if e.get("type") == "face"][-1]["face_id"] == from_a
            finally:
                await session.close()
