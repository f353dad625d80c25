"""A WHIP publisher of a stream name replaces the account's publisher of that name on any node, as
on one node; a request that cannot become a session must replace nothing (issue #35 item 6).
Before: `POST A/whip/camb` with the body `v=0` (400) ended `camb` live on node B."""

import aiohttp
import pytest

from client.facefuse_client import FacefuseClient
from support.cluster_nodes import camera, cluster
from support.metering import ADMIN, create_account
from support.server import wait_until
from support.whip_publisher import offer_like_obs, post_offer

pytestmark = [pytest.mark.redis, pytest.mark.slow]


async def live_streams(client: FacefuseClient) -> dict[str, str]:
    """Stream name -> node id of the account's live streams, as GET /api/streams lists them."""
    listed = await client.request("GET", "/api/streams")
    return {s["stream"]: s["node_id"] for s in listed["streams"] if s["live"]}


async def test_a_refused_publish_on_one_node_leaves_the_stream_live_on_another(redis_server, tmp_path):
    with cluster(redis_server.url, tmp_path, (), ()) as nodes:
        async with FacefuseClient(nodes[0].base_url, api_key=ADMIN) as admin:
            key = await create_account(admin, "cam", 1000, tier="paid")
        auth = {"Authorization": f"Bearer {key}"}
        async with aiohttp.ClientSession() as http, FacefuseClient(nodes[0].base_url, api_key=key) as client:
            pc, sdp = await offer_like_obs(camera(0))
            publisher = await post_offer(http, f"{nodes[1].base_url}/whip/camb", pc, sdp, headers=auth)
            try:
                assert publisher.status == 201, publisher.body
                await wait_until(lambda: publisher.pc.connectionState == "connected", timeout=20)
                assert await live_streams(client) == {"camb": "node-1"}

                async with http.post(
                    f"{nodes[0].base_url}/whip/camb", data=b"v=0", headers={**auth, "Content-Type": "application/sdp"}
                ) as refused:
                    assert refused.status == 400 and (await refused.json())["error"]["code"] == "invalid_sdp"
                assert await live_streams(client) == {"camb": "node-1"}, "a malformed offer ended the live stream"
                assert publisher.pc.connectionState == "connected"

            finally:
                await publisher.close()
