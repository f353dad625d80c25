"""Both stores behind one harness, for the contract suite: the store, its clock, more nodes."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import redis.asyncio as aioredis

from quota.memory_store import MemoryStore
from quota.redis_store import RedisStore
from quota.store import QuotaStore
from support.redis_server import RedisServer


class FakeClock:
    def __init__(self, start: float = 1_800_000_000.25) -> None:
        self.t = start

    def __call__(self) -> float:
        return self.t


class StoreUnderTest:
    """One store kind for the contract suite: the store, its clock, and more stores ("nodes").

    memory: a fake clock that `advance` moves; every node is the same MemoryStore.
    redis: Redis's own clock (TIME) and real sleeps; every node is a separate RedisStore
    with its own client.
    """

    def __init__(self, kind: str, server: RedisServer | None) -> None:
        self.kind = kind
        self.server = server
        self.clock = FakeClock()
        self._stores: list[QuotaStore] = []
        self._admin: aioredis.Redis | None = None
        self.store = self.make_store()

    def make_store(self, **kwargs: Any) -> QuotaStore:
        """A new store (Redis: on the same server; memory: independent, on the same clock)."""
        store: QuotaStore
        if self.server is not None:
            store = RedisStore(self.server.url, **kwargs)
        else:
            store = MemoryStore(self.clock, **kwargs)
        self._stores.append(store)
        return store

    def nodes(self, count: int) -> list[QuotaStore]:
        """Stores sharing the default store's accounts: separate clients on Redis."""
        if self.server is None:
            return [self.store] * count
        return [self.store] + [self.make_store() for _ in range(count - 1)]

    @property
    def admin(self) -> aioredis.Redis:
        assert self.server is not None
        if self._admin is None:
            self._admin = aioredis.Redis.from_url(self.server.url, decode_responses=True)
        return self._admin

    async def now(self) -> float:
        """The store's clock, in seconds."""
        if self.server is None:
            return self.clock()
        seconds, micros = await self.admin.time()
        return seconds + micros / 1_000_000

    async def advance(self, seconds: float) -> None:
        if self.server is None:
            self.clock.t += seconds
        else:
            await asyncio.sleep(seconds)

    async def to_window_start(self, hour_s: float, margin_s: float = 0.02) -> None:
        """Waits until just after the start of the next hour window of the store's clock."""
        now = await self.now()
        await self.advance((math.floor(now / hour_s) + 1) * hour_s - now + margin_s)

    async def aclose(self) -> None:
        for store in self._stores:
            await store.aclose()
        if self._admin is not None:
            await self._admin.aclose()
