"""The app's cluster node: on Redis with --redis-url, else in memory (one node, the same code)."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator

import redis.asyncio as aioredis
from aiohttp import web
from redis.asyncio.connection import BlockingConnectionPool

from quota.settings import default_node_id
from signaling.app_keys import CLUSTER, DEVICE, RUNNER, SESSIONS, SETTINGS
from signaling.cluster.cluster_node import ClusterNode
from signaling.cluster.hops import new_secret
from signaling.cluster.node_registry import MemoryNodeRegistry, RedisNodeRegistry
from signaling.cluster.session_directory import MemoryDirectory, RedisDirectory
from signaling.settings import ServerSettings

# The heartbeat and the routes' look-ups need few connections: one beat at a time, look-ups short.
REDIS_CONNECTIONS = 4
REDIS_TIMEOUT_S = 2.0

_ANY_ADDRESS = ("", "0.0.0.0", "::")


def advertise_url(settings: ServerSettings) -> str:
    """--advertise-url, else SCHEME://HOST:PORT (the machine's name when listening on every address)."""
    if settings.cluster.advertise_url:
        return settings.cluster.advertise_url
    http = settings.http
    scheme = "https" if http.tls_cert is not None or http.tls_self_signed else "http"
    host = socket.gethostname() if http.host in _ANY_ADDRESS else http.host
    return f"{scheme}://{f'[{host}]' if ':' in host else host}:{http.port}"


def hop_secret_key(prefix: str) -> str:
    return f"{prefix}:{{nodes}}:hop-secret"


async def shared_hop_secret(client: aioredis.Redis, prefix: str) -> str:
    """The secret every node on this Redis signs its forwarded requests with: the first node to
    start writes it, the others read it. Whoever can read Redis can sign, as whoever can write it
    can rewrite every balance: Redis is the cluster's root of trust (give it a password)."""
    key = hop_secret_key(prefix)
    await client.set(key, new_secret(), nx=True)
    secret = await client.get(key)
    assert secret is not None  # written just before, never expired
    return secret


async def cluster_node(app: web.Application) -> AsyncIterator[None]:
    """After the sessions exist (it reads them) and before the socket accepts (it is in place)."""
    settings = app[SETTINGS]
    quota = settings.quota
    client = None
    if quota.redis_url:
        pool = BlockingConnectionPool.from_url(
            quota.redis_url,
            max_connections=REDIS_CONNECTIONS,
            timeout=REDIS_TIMEOUT_S,
            decode_responses=True,
            socket_timeout=REDIS_TIMEOUT_S,
            socket_connect_timeout=REDIS_TIMEOUT_S,
        )
        client = aioredis.Redis.from_pool(pool)
        registry, directory = RedisNodeRegistry(client, quota.redis_prefix), RedisDirectory(client, quota.redis_prefix)
        hop_secret = settings.cluster.hop_secret or await shared_hop_secret(client, quota.redis_prefix)
    else:
        registry, directory = MemoryNodeRegistry(), MemoryDirectory()
        hop_secret = settings.cluster.hop_secret or new_secret()  # one node: nobody to forward to
    node = ClusterNode(
        # the quota store's node id: the one its leases are recorded under (settled at the next start)
        quota.node_id or default_node_id(settings.http.port),
        advertise_url(settings),
        registry,
        directory,
        app[SESSIONS],
        app[RUNNER],
        app[DEVICE],
        hop_secret,
    )
    await node.start()
    app[CLUSTER] = node
    try:
        yield
    finally:
        await node.stop()
        if client is not None:
            await client.aclose()
