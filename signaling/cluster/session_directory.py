"""The session directory: which node holds a session, an account's sessions, and which node holds
the session published under a stream name (where a WHEP viewer must go).

On Redis (keys in quota/redis_keys.py's docstring):
    <prefix>:session:<id>                  string: JSON {"node", "account"}; TTL, refreshed by the heartbeat
    <prefix>:{<account>}:sessions          hash: session id -> node id (the account's slot, beside its leases)
    <prefix>:{<account>}:stream:<name>     string: JSON {"node", "session"}; TTL, refreshed by the heartbeat
Entries of a node that died expire with the TTL; the account's hash keeps its dead fields until a
reader drops them (a field whose node is not live). In memory (one node) the directory is never
asked about another node, so it keeps nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

import redis.asyncio as aioredis

from quota.redis_keys import account_tag
from signaling.cluster.node_registry import NODE_TTL_S


@dataclass(frozen=True)
class DirectoryEntry:
    session_id: str
    account_id: str | None
    node_id: str
    stream: str | None = None


def session_key(prefix: str, session_id: str) -> str:
    return f"{prefix}:session:{session_id}"


def account_sessions_key(prefix: str, account_id: str | None) -> str:
    return f"{prefix}:{{{account_tag(account_id or '')}}}:sessions"


def stream_key(prefix: str, account_id: str | None, stream: str) -> str:
    return f"{prefix}:{{{account_tag(account_id or '')}}}:stream:{stream}"


class MemoryDirectory:
    """One node: every session is this node's, and the manager already knows them."""

    async def register(self, entries: Iterable[DirectoryEntry]) -> None:
        pass

    async def remove(self, entries: Iterable[DirectoryEntry]) -> None:
        pass

    async def owner(self, session_id: str) -> DirectoryEntry | None:
        return None

    async def account_sessions(self, account_id: str | None) -> dict[str, str]:
        return {}

    async def drop_sessions(self, account_id: str | None, session_ids: Iterable[str]) -> None:
        pass

    async def stream_owner(self, account_id: str | None, stream: str) -> DirectoryEntry | None:
        return None


class RedisDirectory:
    def __init__(self, client: aioredis.Redis, prefix: str) -> None:
        self._client = client
        self._prefix = prefix

    async def register(self, entries: Iterable[DirectoryEntry]) -> None:
        """Adds the sessions or refreshes their TTL: one round trip for all of them."""
        pipe = self._client.pipeline(transaction=False)
        for entry in entries:
            value = json.dumps({"node": entry.node_id, "account": entry.account_id})
            pipe.set(session_key(self._prefix, entry.session_id), value, ex=NODE_TTL_S)
            sessions = account_sessions_key(self._prefix, entry.account_id)
            pipe.hset(sessions, entry.session_id, entry.node_id)
            # the hash outlives its sessions by a TTL at most: an idle account leaves nothing behind
            pipe.expire(sessions, NODE_TTL_S)
            if entry.stream is not None:
                published = json.dumps({"node": entry.node_id, "session": entry.session_id})
                pipe.set(stream_key(self._prefix, entry.account_id, entry.stream), published, ex=NODE_TTL_S)
        if len(pipe):
            await pipe.execute()

    async def remove(self, entries: Iterable[DirectoryEntry]) -> None:
        pipe = self._client.pipeline(transaction=False)
        for entry in entries:
            pipe.delete(session_key(self._prefix, entry.session_id))
            pipe.hdel(account_sessions_key(self._prefix, entry.account_id), entry.session_id)
        if len(pipe):
            await pipe.execute()
        for entry in entries:  # a stream name is dropped only while it still names this session
            if entry.stream is not None:
                await self._remove_stream(entry)

    async def _remove_stream(self, entry: DirectoryEntry) -> None:
        key = stream_key(self._prefix, entry.account_id, entry.stream or "")
        text = await self._client.get(key)
        if text is not None and json.loads(text).get("session") == entry.session_id:
            await self._client.delete(key)

    async def owner(self, session_id: str) -> DirectoryEntry | None:
        text = await self._client.get(session_key(self._prefix, session_id))
        if text is None:
            return None
        value = json.loads(text)
        return DirectoryEntry(session_id, value["account"], value["node"])

    async def account_sessions(self, account_id: str | None) -> dict[str, str]:
        """Session id -> node id, dead nodes' fields included (the caller knows which nodes live)."""
        return await self._client.hgetall(account_sessions_key(self._prefix, account_id))

    async def drop_sessions(self, account_id: str | None, session_ids: Iterable[str]) -> None:
        if ids := list(session_ids):
            await self._client.hdel(account_sessions_key(self._prefix, account_id), *ids)

    async def stream_owner(self, account_id: str | None, stream: str) -> DirectoryEntry | None:
        """The session published under the account's stream name, and its node."""
        text = await self._client.get(stream_key(self._prefix, account_id, stream))
        if text is None:
            return None
        value = json.loads(text)
        return DirectoryEntry(value["session"], account_id, value["node"], stream)
