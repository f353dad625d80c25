"""The node registry and the session directory on a real redis-server: what a heartbeat writes,
what a dead node leaves, and the Cluster-safe key layout."""

import pytest
import redis.asyncio as aioredis

from signaling.cluster.node_registry import NODE_TTL_S, NodeRecord, RedisNodeRegistry, node_record_key
from signaling.cluster.session_directory import DirectoryEntry, RedisDirectory, account_sessions_key, stream_key

pytestmark = pytest.mark.redis


def record(node_id: str, sessions: int = 0) -> NodeRecord:
    return NodeRecord(node_id, f"http://{node_id}:8080", 4, sessions, "passthrough", "cpu")


async def test_a_node_whose_record_expired_is_no_longer_listed(redis_server):
    client = aioredis.from_url(redis_server.url, decode_responses=True)
    try:
        registry = RedisNodeRegistry(client, "ff")
        await registry.beat(record("a", sessions=1))
        await registry.beat(record("b"))
        assert [node.id for node in await registry.live()] == ["a", "b"]
        assert (await registry.live())[0] == record("a", sessions=1)
        assert 0 < await client.ttl(node_record_key("ff", "a")) <= NODE_TTL_S

        await client.delete(node_record_key("ff", "b"))  # what its TTL does to a node that stopped beating
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
