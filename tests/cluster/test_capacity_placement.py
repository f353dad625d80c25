"""Issue #36: placement by measured headroom. Two nodes whose devices carry one 30 fps session each
(the fixed-cost chain, 4 ms a batch and 25 ms a frame): the second session is sent to the node
with room, the third waits in line instead of slowing anyone."""

import asyncio

import pytest

from client.facefuse_client import FacefuseClient
from signaling.cluster.node_registry import HEARTBEAT_S
from support.cluster_nodes import camera, cluster
from support.metering import ADMIN, create_account
from support.server import wait_until

pytestmark = [pytest.mark.redis, pytest.mark.slow]

ONE_SESSION_FITS = ("--chain", "fixed-cost:4:25")


async def records(admin: FacefuseClient) -> dict[str, dict]:
    return {node["id"]: node for node in (await admin.request("GET", "/api/admin/nodes"))["nodes"]}


async def node_of(client: FacefuseClient, session_id: str) -> dict:
    return await client.request("GET", f"/api/sessions/{session_id}")


async def test_a_new_session_goes_to_the_node_with_headroom_and_waits_when_none_has(redis_server, tmp_path):
    with cluster(redis_server.url, tmp_path, ONE_SESSION_FITS, ONE_SESSION_FITS) as nodes:
        async with FacefuseClient(nodes[0].base_url, api_key=ADMIN) as admin:
            key = await create_account(admin, "nia", balance=1000, tier="paid")
            before = await records(admin)
            assert [before[n]["headroom"] for n in ("node-0", "node-1")] == [1, 1], before
            async with FacefuseClient(nodes[0].base_url, api_key=key) as client:
                first = await client.connect(camera(1))
                await wait_until(lambda: first.frames_received >= 10, timeout=20)
                second = await client.connect(camera(2))  # node-0 has no room now: a 307 to node-1
                await wait_until(lambda: second.frames_received >= 10, timeout=20)
                listed = {s["session_id"]: s for s in (await client.request("GET", "/api/sessions"))["sessions"]}
                assert listed[first.session_id]["node_id"] == "node-0"
                assert listed[second.session_id]["node_id"] == "node-1"
                assert not listed[second.session_id]["capacity"]["queued"]  # processed there, not waiting

                await asyncio.sleep(2 * HEARTBEAT_S)  # node-0 reads node-1's new record
                now = await records(admin)
                assert [now[n]["headroom"] for n in ("node-0", "node-1")] == [0, 0], now
                third = await client.connect(camera(3))  # nobody has room: it waits, it is not refused
                await wait_until(lambda: any(e.get("type") == "queued" for e in third.events), timeout=10)
                listed = {s["session_id"]: s for s in (await client.request("GET", "/api/sessions"))["sessions"]}
                assert listed[third.session_id]["capacity"]["queued"]
                assert listed[third.session_id]["capacity"]["position"] == 1
                assert not listed[first.session_id]["capacity"]["queued"]
                assert not listed[second.session_id]["capacity"]["queued"]
                for session in (first, second, third):
                    await session.close()
