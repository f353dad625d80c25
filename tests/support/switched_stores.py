"""A quota store behind a switch, for tests of what the meter does when the store fails (our own
interface only: the real store does the work while the switch is on)."""

import asyncio

from quota.errors import StoreUnavailable
from quota.memory_store import MemoryStore


class FlakyStore:
    """Off means unreachable: every operation raises StoreUnavailable."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.up = True

    def __getattr__(self, name):
        operation = getattr(self.store, name)

        async def call(*args, **kwargs):
            if not self.up:
                raise StoreUnavailable("store switched off")
            return await operation(*args, **kwargs)

        return call


class SilentStore(FlakyStore):
    """Off means connected but never answering, like a Redis stopped with SIGSTOP."""

    def __getattr__(self, name):
        operation = getattr(self.store, name)

        async def call(*args, **kwargs):
            while not self.up:
                await asyncio.sleep(0.01)
            return await operation(*args, **kwargs)

        return call
