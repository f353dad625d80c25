"""The dashboards' open event streams (GET /api/events): how many each account and the node may
hold, each one's connection (what its socket still buffers), and the node's shutdown, which ends
them all at once instead of waiting for clients that never leave."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from signaling.errors import ApiError

# The key an admin's streams are counted under: no account id is None.
ADMIN = None


@dataclass(frozen=True)
class EventStreamSettings:
    # A dashboard refreshes once a second (issue #27); its plots hold 5 minutes of these.
    interval_s: float = 1.0
    # A comment line when nothing else was written for this long, so proxies keep the connection.
    keepalive_s: float = 15.0
    # A client whose socket took nothing for this long is dropped (its snapshots were skipped meanwhile).
    stall_s: float = 30.0
    # A person opens a few tabs; a script that opens streams in a loop must not take the node. The
    # node's limit is the accounts': the operator's (the admin key's) own max_per_account come on
    # top, so no number of accounts can lock the operator out of the dashboard.
    max_per_account: int = 20
    max_per_node: int = 200

    def __post_init__(self) -> None:
        if not (self.interval_s > 0 and self.keepalive_s > 0 and self.stall_s > 0):
            raise ValueError("the event streams' interval, keepalive and stall times must be > 0")
        if self.max_per_account < 1 or self.max_per_node < 1:
            raise ValueError("the event streams' limits must be at least 1")


class EventStreams:
    def __init__(self, settings: EventStreamSettings) -> None:
        self.settings = settings
        self.shutting_down = asyncio.Event()
        self._by_owner: Counter[str | None] = Counter()
        self._transports: set[asyncio.Transport] = set()

    @contextlib.contextmanager
    def opened(self, owner: str | None, transport: asyncio.Transport) -> Iterator[None]:
        """Holds one of the owner's places (an account id, or ADMIN) while the stream is open;
        429 past the account's limit, 503 past the node's (which the admin's streams are not held to)."""
        settings = self.settings
        if self._by_owner[owner] >= settings.max_per_account:
            raise ApiError(
                429,
                "too_many_event_streams",
                f"this account has {settings.max_per_account} dashboards open already; close one first",
                {"Retry-After": "5"},
            )
        accounts_open = len(self._transports) - self._by_owner[ADMIN]
        if owner is not ADMIN and accounts_open >= settings.max_per_node:
            raise ApiError(
                503,
                "event_streams_full",
                f"this server has {settings.max_per_node} dashboards open; try again later",
                {"Retry-After": "5"},
            )
        self._by_owner[owner] += 1
        self._transports.add(transport)
        try:
            yield
        finally:
            self._transports.discard(transport)
            self._by_owner[owner] -= 1
            if not self._by_owner[owner]:
                del self._by_owner[owner]

    def __len__(self) -> int:
        return len(self._transports)

    def buffered_bytes(self) -> list[int]:
        """What each open stream's socket holds unsent, beside the kernel's buffers."""
        return [transport.get_write_buffer_size() for transport in self._transports]

    async def shut_down(self) -> None:
        """The app's on_shutdown: every stream ends at its next wait."""
        self.shutting_down.set()
