"""The node registry: this node's record, refreshed by its heartbeat, and the list of live nodes.

On Redis each node's record is a string key with a short TTL (Redis's clock, not the nodes'), so a
node that dies drops out within the TTL without anyone noticing it died; an index zset lets a
reader list the nodes without SCAN. All of it shares the hash tag {nodes}: one Cluster slot.
In memory (one node) the registry knows only this node.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis

# A node not heard from for this long is gone: five missed heartbeats, so a slow beat or a short
# Redis hiccup does not drop a live node, and a dead one's clients are placed elsewhere in seconds.
NODE_TTL_S = 10
# How often a node writes its record and reads the others' (each beat is two round trips).
HEARTBEAT_S = 2.0


@dataclass(frozen=True)
class NodeRecord:
    id: str
    url: str  # --advertise-url: where clients and other nodes reach it
    capacity: int  # the most sessions it processes now: those it does and the headroom
    sessions: int  # those it processes
    chain: str
    device: str
    draining: bool = False
    chain_ms_p50: float | None = None  # the runner's recent chain time per batch
    batches: int = 0
    # the share of the last heartbeat interval the chain was computing (batches run x their p50 time),
    # None before a second beat: how busy the device is, beside how many sessions it holds
    chain_busy_share: float | None = None
    heartbeat_at: float = 0.0  # unix time of the beat that wrote this record
    # more 480p sessions its capacity model says it can process at the floor rate (stream/capacity.py);
    # None in a record without it: capacity - sessions
    headroom: int | None = None
    waiting: int = 0  # sessions in its line

    @property
    def free_share(self) -> float:
        """The share of its capacity still free: 0 when full (or draining, which takes nothing)."""
        if self.draining or self.capacity <= 0:
            return 0.0
        headroom = self.capacity - self.sessions if self.headroom is None else self.headroom
        return max(0, headroom) / self.capacity

    def describe(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, text: str) -> NodeRecord:
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in json.loads(text).items() if key in fields})


def nodes_index_key(prefix: str) -> str:
    return f"{prefix}:{{nodes}}:index"


def node_record_key(prefix: str, node_id: str) -> str:
    return f"{prefix}:{{nodes}}:node:{node_id}"


class MemoryNodeRegistry:
    """One node, nothing shared: the live list is this node's own last record."""

    def __init__(self) -> None:
        self._own: NodeRecord | None = None

    async def beat(self, record: NodeRecord) -> None:
        self._own = record

    async def leave(self, node_id: str) -> None:
        self._own = None

    async def live(self) -> list[NodeRecord]:
        return [self._own] if self._own is not None else []


class RedisNodeRegistry:
    def __init__(self, client: aioredis.Redis, prefix: str) -> None:
        self._client = client
        self._prefix = prefix
        self._index = nodes_index_key(prefix)

    async def beat(self, record: NodeRecord) -> None:
        pipe = self._client.pipeline(transaction=False)
        pipe.set(node_record_key(self._prefix, record.id), json.dumps(record.describe()), ex=NODE_TTL_S)
        pipe.sadd(self._index, record.id)
        await pipe.execute()

    async def leave(self, node_id: str) -> None:
        """A clean stop: gone at once rather than after the TTL."""
        pipe = self._client.pipeline(transaction=False)
        pipe.delete(node_record_key(self._prefix, node_id))
        pipe.srem(self._index, node_id)
        await pipe.execute()

    async def live(self) -> list[NodeRecord]:
        """The nodes whose record has not expired; the index's dead entries are removed on the way."""
        ids = sorted(await self._client.smembers(self._index))
        if not ids:
            return []
        records = await self._client.mget([node_record_key(self._prefix, node_id) for node_id in ids])
        if dead := [node_id for node_id, text in zip(ids, records) if text is None]:
            await self._client.srem(self._index, *dead)
        return [NodeRecord.from_json(text) for text in records if text is not None]
