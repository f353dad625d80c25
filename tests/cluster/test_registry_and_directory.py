"""The node registry and the session directory on a real redis-server: what a heartbeat writes,
what a dead node leaves, and the Cluster-safe key layout."""

import asyncio
import time

import pytest
import redis.asyncio as aioredis

from signaling.cluster.node_registry import HEARTBEAT_S, NODE_TTL_S, NodeRecord, RedisNodeRegistry, node_record_key
from signaling.cluster.session_directory import DirectoryEntry, RedisDirectory, account_sessions_key, stream_key

pytestmark = pytest.mark.redis

POLL_S = 0.25  # how often the test reads the live list


def record(node_id: str, sessions: int = 0) -> NodeRecord:
    return NodeRecord(node_id, f"http://{node_id}:8080", 4, sessions, "passthrough", "cpu")


@pytest.mark.slow
async def test_a_node_that_stops_beating_is_no_longer_listed_once_its_ttl_runs_out(redis_server):
    client = aioredis.from_url(redis_server.url, decode_responses=True)
    try:
        registry = RedisNodeRegistry(client, "ff")
        await registry.beat(record("a", sessions=1))
        await registry.beat(record("b"))  # b's last beat
        last_beat = time.monotonic()
        assert [node.id for node in await registry.live()] == ["a", "b"]
        assert (await registry.live())[0] == record("a", sessions=1)
        assert 0 < await client.ttl(node_record_key("ff", "a")) <= NODE_TTL_S

        # a beats on, b does not: b is listed until its TTL runs out (Redis's clock), then not
        next_beat = last_beat + HEARTBEAT_S
        while "b" in [node.id for node in await registry.live()]:
            assert time.monotonic() - last_beat < NODE_TTL_S + POLL_S * 2, "b outlived its TTL"
            if time.monotonic() >= next_beat:
                await registry.beat(record("a", sessions=1))
                next_beat += HEARTBEAT_S
            await asyncio.sleep(POLL_S)
        gone_after_s = time.monotonic() - last_beat
        assert gone_after_s >= NODE_TTL_S - POLL_S * 2, f"b dropped {gone_after_s:.2f} s after its last beat"
        assert [node.id for node in await registry.live()] == ["a"]
        assert await client.smembers("ff:{nodes}:index") == {"a"}  # the reader dropped the dead id
        await registry.leave("a")
        assert await registry.live() == []
    finally:
        await client.aclose()


async def test_the_directory_finds_sessions_and_streams_and_forgets_them(redis_server):
    client = aioredis.from_url(redis_server.url, decode_responses=True)
    try:
        directory = RedisDirectory(client, "ff")
        old = DirectoryEntry("s1", "acct", "node-a", "desk")
        new = DirectoryEntry("s2", "acct", "node-b", "desk")  # the publisher moved: the name is s2's now
        await directory.register([old])
        await directory.register([new, DirectoryEntry("s3", "other", "node-a")])
        assert await directory.owner("s1") == DirectoryEntry("s1", "acct", "node-a")
        assert await directory.account_sessions("acct") == {"s1": "node-a", "s2": "node-b"}
        assert (await directory.stream_owner("acct", "desk")).session_id == "s2"

        await directory.remove([old])  # the old session's end leaves the name to the new one
        assert await directory.owner("s1") is None
        assert (await directory.stream_owner("acct", "desk")).session_id == "s2"
        await directory.remove([new])
        assert await directory.stream_owner("acct", "desk") is None
        assert await directory.account_sessions("acct") == {}
        for key in (account_sessions_key("ff", "acct"), stream_key("ff", "acct", "desk")):
            assert key.startswith("ff:{acct}:")  # the account's hash tag: its slot, beside its leases
    finally:
        await client.aclose()
