"""Reading the dashboard's event stream (GET /api/events) with aiohttp's client, as the page reads
it with fetch(): the Server-Sent Events wire format, parsed here line by line."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import aiohttp


@dataclass
class EventStream:
    response: aiohttp.ClientResponse
    comments: list[str] = field(default_factory=list)

    async def next_event(self, timeout: float = 10) -> tuple[str, dict]:
        """The next event's name and its data (JSON); comment lines are kept in `comments`."""
        name, data = "message", []
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no event within {timeout} s"
            line = (await asyncio.wait_for(self.response.content.readline(), remaining)).decode()
            assert line, "the server ended the stream"
            line = line.rstrip("\r\n")
            if not line:
                if data:
                    return name, json.loads("\n".join(data))
                continue
            if line.startswith(":"):
                self.comments.append(line[1:].strip())
            elif line.startswith("event:"):
                name = line.removeprefix("event:").strip()
            elif line.startswith("data:"):
                data.append(line.removeprefix("data:").strip())

    async def snapshot(self, after: float | None = None, timeout: float = 10) -> dict:
        """The next snapshot (one built at server time `after` or later, when given)."""
        deadline = time.monotonic() + timeout
        while True:
            name, data = await self.next_event(max(0.1, deadline - time.monotonic()))
            assert name == "snapshot", name
            if after is None or data["t"] >= after:
                return data


@contextlib.asynccontextmanager
async def open_events(base_url: str, api_key: str | None = None) -> AsyncIterator[EventStream]:
    """GET /api/events, its 200 checked; closed on leaving."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{base_url}/api/events", headers=headers) as response:
            assert response.status == 200, await response.text()
            yield EventStream(response)
