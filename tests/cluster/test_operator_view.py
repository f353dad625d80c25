"""The operator's dashboard on every node: the admin's event stream on one node of two (on a real
redis-server) lists the sessions of both, each with its node, and the registry's nodes; a node
that stops answering is named in the snapshot's errors, in words. A session's still is forwarded
to its node."""

from __future__ import annotations

import aiohttp
import pytest

from client.facefuse_client import FacefuseClient
from pipeline.images import decode_image
from support.cluster_nodes import camera, cluster
from support.event_stream import open_events
from support.metering import ADMIN, create_account
from support.server import wait_until

pytestmark = [pytest.mark.redis, pytest.mark.slow]


async def snapshot_where(events, condition, tries: int = 15) -> dict:
    """The first snapshot that meets `condition` (one a second: within `tries` seconds)."""
    for _ in range(tries):
        snapshot = await events.snapshot()
        if condition(snapshot):
            return snapshot
    raise AssertionError(f"no snapshot met the condition; the last: {snapshot}")


async def test_the_admins_stream_on_one_node_lists_a_session_placed_on_another(redis_server, tmp_path):
    with cluster(redis_server.url, tmp_path, (), ()) as nodes:
        async with FacefuseClient(nodes[0].base_url, api_key=ADMIN) as admin:
            key = await create_account(admin, "nia", balance=100, tier="paid")
        async with FacefuseClient(nodes[1].base_url, api_key=key) as client:
            session = await client.connect(camera(1))  # both empty: node-1 keeps it
            try:
                await wait_until(lambda: session.frames_received >= 5, timeout=20)
                async with open_events(nodes[0].base_url, ADMIN) as events:
                    snapshot = await snapshot_where(
                        events, lambda s: any(x["session_id"] == session.session_id for x in s["sessions"])
                    )
                    (listed,) = [x for x in snapshot["sessions"] if x["session_id"] == session.session_id]
                    assert listed["node_id"] == "node-1" and listed["account_id"] == "nia", listed
                    assert listed["state"] == "live"
                    node = snapshot["node"]
                    assert node["node_id"] == "node-0"
                    assert sorted(n["id"] for n in node["nodes"]) == ["node-0", "node-1"]
                    assert {n["url"] for n in node["nodes"]} == {n.base_url for n in nodes}
                    assert snapshot["errors"] == []

                    # the still of a session on another node is forwarded there, as the other session routes
                    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}) as http:
                        async with http.get(f"{nodes[0].base_url}/api/sessions/{session.session_id}/still") as still:
                            assert still.status == 200, await still.text()
                            assert still.content_type == "image/jpeg"
                            assert decode_image(await still.read())[0].shape == (240, 320, 3)

                    nodes[1].process.kill()  # still in the registry until its TTL: asked, and silent
                    nodes[1].process.wait()
                    snapshot = await snapshot_where(events, lambda s: s["errors"])
                    assert {
                        "code": "node_unreachable",
                        "message": ("node node-1 did not answer in time: its sessions are not listed"),
                    } in snapshot["errors"], snapshot["errors"]
                    assert all(x["node_id"] == "node-0" for x in snapshot["sessions"])
            finally:
                await session.close()


async def test_an_accounts_stream_and_streams_list_on_one_node_show_a_session_published_on_another(
    redis_server, tmp_path
):
    with cluster(redis_server.url, tmp_path, (), ()) as nodes:
        async with FacefuseClient(nodes[0].base_url, api_key=ADMIN) as admin:
            key = await create_account(admin, "ola", balance=100, tier="paid")
        async with (
            FacefuseClient(nodes[0].base_url, api_key=key) as on_0,
            FacefuseClient(nodes[1].base_url, api_key=key) as on_1,
        ):
            await on_0.request("POST", "/api/streams/desk/view-tokens")  # known on every node
            session = await on_1.connect(camera(1), options={"stream": "desk"})
            try:
                await wait_until(lambda: session.frames_received >= 5, timeout=20)
                (stream,) = (await on_0.request("GET", "/api/streams"))["streams"]
                assert (stream["stream"], stream["live"], stream["session_id"]) == ("desk", True, session.session_id)
                assert (stream["node_id"], stream["view_tokens"]) == ("node-1", 1)

                async with open_events(nodes[0].base_url, key) as events:
                    snapshot = await snapshot_where(events, lambda s: s["sessions"] and s["streams"][0]["live"])
                    (listed,) = snapshot["sessions"]
                    assert (listed["session_id"], listed["node_id"], listed["state"]) == (
                        session.session_id,
                        "node-1",
                        "live",
                    )
                    assert snapshot["streams"][0]["node_id"] == "node-1"
                    assert snapshot["errors"] == []
            finally:
                await session.close()
