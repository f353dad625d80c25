"""Polling on the event loop for the benchmarks, which note a timeout rather than fail on it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def wait_for(predicate: Callable[[], bool], timeout: float, step: float = 0.05) -> bool:
    """Whether `predicate` came to hold within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(step)
    return True
