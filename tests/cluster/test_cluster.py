"""Three `facefuse serve` nodes on one redis-server behave as one service: a full node sends new
sessions on by 307, any node answers for any session, a killed node drops out, and the tier's
sessions-at-once limit holds across nodes."""

import asyncio
import time

import aiohttp
import pytest

from client.facefuse_client import FacefuseClient, ServerError
from signaling.cluster.node_registry import HEARTBEAT_S, NODE_TTL_S
from support.cluster_nodes import camera, cluster
from support.metering import ADMIN, create_account
from support.server import wait_until

pytestmark = [pytest.mark.redis, pytest.mark.slow]

DRAIN_TIMEOUT_S = 6
# How long after its drain timeout a session may still be open: the close is sent at once, so this
# is the event's way back, with room for a machine twice as slow.
CLOSE_MARGIN_S = 1.5
# How long after its record expired a node may still be listed: one 0.2 s poll and the request.
LISTING_MARGIN_S = 1.0


async def node_ids_of(client: FacefuseClient) -> dict[str, str]:
    """Session id -> node id, as GET /api/sessions lists them."""
    listed = await client.request("GET", "/api/sessions")
    assert "unreachable_nodes" not in listed
    return {session["session_id"]: session["node_id"] for session in listed["sessions"]}


async def test_a_full_node_sends_offers_on_and_any_node_answers_for_any_session(redis_server, tmp_path):
    with cluster(redis_server.url, tmp_path, ("--max-sessions", "1"), (), ()) as nodes:
        async with FacefuseClient(nodes[0].base_url, api_key=ADMIN) as admin:
            key = await create_account(admin, "pia", balance=100, tier="paid")  # 4 sessions at once
            listed_nodes = (await admin.request("GET", "/api/admin/nodes"))["nodes"]
            assert sorted(node["id"] for node in listed_nodes) == ["node-0", "node-1", "node-2"]
            assert {node["url"] for node in listed_nodes} == {node.base_url for node in nodes}
        clients = [FacefuseClient(node.base_url, api_key=key) for node in nodes]
        try:
            # all three offers go to node-0, which has room for one: the client follows the 307s
            sessions = [await clients[0].connect(camera(n)) for n in range(2)]
            sessions.append(await clients[0].connect(camera(2), options={"stream": "desk"}))  # for WHEP, below
            await wait_until(lambda: all(s.frames_received >= 5 for s in sessions), timeout=20)
            placed = await node_ids_of(clients[0])
            assert set(placed) == {s.session_id for s in sessions}
            assert placed[sessions[0].session_id] == "node-0"
            assert all(placed[s.session_id] != "node-0" for s in sessions[1:]), placed
            for client in clients[1:]:  # the same list from every node
                assert await node_ids_of(client) == placed
            async with FacefuseClient(nodes[0].base_url, api_key=ADMIN) as admin:  # its own record is fresh
                records = {node["id"]: node for node in (await admin.request("GET", "/api/admin/nodes"))["nodes"]}
            assert records["node-0"]["sessions"] == records["node-0"]["capacity"] == 1
            shares = [record["chain_busy_share"] for record in records.values()]
            assert all(share is None or 0 <= share <= 1 for share in shares), records  # None: one beat yet

            # a node that does not hold the session answers for it by asking its owner
            moved = sessions[1].session_id
            other = next(c for c, n in zip(clients, ("node-0", "node-1", "node-2")) if n != placed[moved])
            assert (await other.request("GET", f"/api/sessions/{moved}"))["session_id"] == moved
            switched = await other.request("POST", f"/api/sessions/{moved}/face", json={"face_id": None})
            assert switched["session_id"] == moved
            async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}) as http:
                async with http.get(f"{other.base_url}/api/sessions/{moved}/still") as still:  # not JSON: as it is
                    assert (still.status, still.content_type) == (200, "image/jpeg")
                    assert still.headers["Cache-Control"] == "no-store"
                    assert (await still.read()).startswith(b"\xff\xd8")
            with pytest.raises(ServerError) as unknown:
                await other.request("GET", "/api/sessions/no-such-session")
            assert unknown.value.status == 404
            ended = await other.request("DELETE", f"/api/sessions/{moved}")
            assert ended["session_id"] == moved
            await wait_until(lambda: sessions[1].pc.connectionState in ("closed", "failed"), timeout=10)
            assert moved not in await node_ids_of(clients[2])

            # WHIP/WHEP resources and viewers: a 307 to the node holding the published session
            holder = nodes[int(placed[sessions[2].session_id].removeprefix("node-"))]
            redirects = {
                ("POST", "/whep/desk"): "application/sdp",
                ("PATCH", f"/whip/desk/{sessions[2].session_id}"): "application/trickle-ice-sdpfrag",
            }
            async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}) as http:
                for (method, path), content_type in redirects.items():
                    async with http.request(
                        method, nodes[0].base_url + path, data=b"v=0", headers={"Content-Type": content_type},
                        allow_redirects=False,
                    ) as answer:  # fmt: skip
                        assert (answer.status, answer.headers.get("Location")) == (307, holder.base_url + path)
                # a new WHIP publisher at the full node-0 is sent on too (RFC 9725's redirect), query and all
                path = "/whip/porch?swap=largest"
                async with http.post(
                    nodes[0].base_url + path, data=b"v=0", headers={"Content-Type": "application/sdp"},
                    allow_redirects=False,
                ) as answer:  # fmt: skip
                    assert answer.status == 307
                    assert answer.headers["Location"] in {node.base_url + path for node in nodes[1:]}
            for session in sessions:
                await session.close()
        finally:
            for client in clients:
                await client.close()


async def test_a_killed_node_leaves_the_registry_within_its_ttl_and_offers_go_elsewhere(redis_server, tmp_path):
    with cluster(redis_server.url, tmp_path, ("--max-sessions", "1"), (), ()) as nodes:
        async with FacefuseClient(nodes[0].base_url, api_key=ADMIN) as admin:
            key = await create_account(admin, "kai", balance=100, tier="paid")
            clients = [FacefuseClient(node.base_url, api_key=key) for node in nodes]
            try:
                first = await clients[0].connect(camera(0))  # node-0 is full from now on
                doomed = await clients[1].connect(camera(1))
                await wait_until(lambda: first.frames_received >= 5 and doomed.frames_received >= 5, timeout=20)
                assert set(await node_ids_of(clients[0])) == {first.session_id, doomed.session_id}

                nodes[1].process.kill()
                nodes[1].process.wait()
                killed_at = time.monotonic()
                listed = await clients[0].request("GET", "/api/sessions")  # node-1 is still registered
                assert [s["session_id"] for s in listed["sessions"]] == [first.session_id]
                assert listed["unreachable_nodes"] == ["node-1"]
                while "node-1" in [node["id"] for node in (await admin.request("GET", "/api/admin/nodes"))["nodes"]]:
                    assert time.monotonic() - killed_at < NODE_TTL_S + LISTING_MARGIN_S, "the dead node is still listed"
                    await asyncio.sleep(0.2)
                gone_after_s = time.monotonic() - killed_at
                print(f"the killed node left the registry after {gone_after_s:.1f} s")
                # its record expires a TTL after its last beat, which came at most a beat (and a late
                # one's slack) before the kill: not dropped early for one unanswered request
                assert gone_after_s >= NODE_TTL_S - 2 * HEARTBEAT_S, gone_after_s
                assert set(await node_ids_of(clients[0])) == {first.session_id}  # its session left the list
                await asyncio.sleep(HEARTBEAT_S * 1.5)  # node-0's placement reads the registry each heartbeat
                with pytest.raises(ServerError) as gone:  # and the directory, within the same TTL
                    await clients[0].request("GET", f"/api/sessions/{doomed.session_id}")
                assert gone.value.status == 404

                replacement = await clients[0].connect(camera(2))
                await wait_until(lambda: replacement.frames_received >= 5, timeout=20)
                assert (await node_ids_of(clients[0]))[replacement.session_id] == "node-2"
                for session in (first, doomed, replacement):
                    await session.close()
            finally:
                for client in clients:
                    await client.close()


async def test_a_free_account_cannot_open_one_session_on_each_node_but_its_publisher_can_move(redis_server, tmp_path):
    with cluster(redis_server.url, tmp_path, (), ()) as nodes:
        async with FacefuseClient(nodes[0].base_url, api_key=ADMIN) as admin:
            key = await create_account(admin, "fay", balance=10, tier="free")  # one session at a time
        async with (
            FacefuseClient(nodes[0].base_url, api_key=key) as here,
            FacefuseClient(nodes[1].base_url, api_key=key) as there,
        ):
            published = await here.connect(camera(0), options={"stream": "desk"})
            with pytest.raises(ServerError) as refused:
                await there.connect(camera(1))
            assert (refused.value.status, refused.value.code) == (429, "too_many_sessions")

            # the publisher reconnects through another node (OBS behind a load balancer): its session
            # there replaces the old one, as on one node, instead of being refused for it
            moved = await there.connect(camera(2), options={"stream": "desk"})
            await wait_until(lambda: moved.frames_received >= 3, timeout=20)
            await wait_until(lambda: published.pc.connectionState in ("closed", "failed"), timeout=10)
            assert await node_ids_of(here) == {moved.session_id: "node-1"}
            for session in (published, moved):
                await session.close()


async def test_a_drained_node_sends_new_sessions_on_and_ends_its_own_at_the_timeout(redis_server, tmp_path):
    with cluster(redis_server.url, tmp_path, ("--drain-timeout", str(DRAIN_TIMEOUT_S)), ()) as nodes:
        async with FacefuseClient(nodes[1].base_url, api_key=ADMIN) as admin:
            key = await create_account(admin, "dee", balance=100, tier="paid")
            clients = [FacefuseClient(node.base_url, api_key=key) for node in nodes]
            try:
                live = await clients[0].connect(camera(0))
                await wait_until(lambda: live.frames_received >= 5, timeout=20)
                assert (await node_ids_of(clients[0]))[live.session_id] == "node-0"

                asked_at = time.monotonic()
                drained = await admin.request("POST", "/api/admin/nodes/node-0/drain")  # asked of node-1
                assert (drained["node_id"], drained["draining"], drained["sessions"]) == ("node-0", True, 1)
                await wait_until(lambda: any(e.get("type") == "draining" for e in live.events), timeout=5)
                before = live.frames_received
                await wait_until(lambda: live.frames_received >= before + 5, timeout=5)  # it goes on
                async with aiohttp.ClientSession() as http, http.get(f"{nodes[0].base_url}/healthz") as health:
                    assert health.status == 503

                moved = await clients[0].connect(camera(1))  # offered to node-0, sent on by 307
                await wait_until(lambda: moved.frames_received >= 5, timeout=20)
                assert (await node_ids_of(clients[1]))[moved.session_id] == "node-1"

                await wait_until(lambda: any(e.get("type") == "closed" for e in live.events), timeout=20)
                closed_after_s = time.monotonic() - asked_at
                closed = next(e for e in live.events if e.get("type") == "closed")
                assert closed["code"] == "server_shutdown", closed
                # node-0's deadline starts after the request left: never before the timeout, and soon after it
                assert DRAIN_TIMEOUT_S <= closed_after_s <= DRAIN_TIMEOUT_S + CLOSE_MARGIN_S, closed_after_s
                before = moved.frames_received
                await wait_until(lambda: moved.frames_received >= before + 5, timeout=10)
                with pytest.raises(ServerError) as unknown:
                    await admin.request("POST", "/api/admin/nodes/node-9/drain")
                assert (unknown.value.status, unknown.value.code) == (404, "node_not_found")
                for session in (live, moved):
                    await session.close()
            finally:
                for client in clients:
                    await client.close()
