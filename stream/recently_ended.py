"""Sessions and viewers that ended in the last minute, for a DELETE that comes after the end.

A WHIP/WHEP client often closes its peer connection before it sends its DELETE (whip.js does), and
the server has ended the session by then; answering that DELETE 404 would tell the client its
stop failed. A DELETE for a resource ended within TTL_S answers 200 with its last description.
Bounded: at most MAX_ENTRIES are kept, the oldest dropped first.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass

TTL_S = 60.0
MAX_ENTRIES = 1024


@dataclass(frozen=True)
class Ended:
    account_id: str | None
    stream: str | None
    description: dict[str, object]
    at: float


class RecentlyEnded:
    def __init__(self, ttl_s: float = TTL_S, max_entries: int = MAX_ENTRIES) -> None:
        self._ttl_s = ttl_s
        self._max_entries = max_entries
        self._entries: OrderedDict[str, Ended] = OrderedDict()

    def add(self, resource_id: str, account_id: str | None, stream: str | None, description: dict[str, object]) -> None:
        self._entries[resource_id] = Ended(account_id, stream, description, time.monotonic())
        self._entries.move_to_end(resource_id)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)

    def find(self, resource_id: str, account_id: str | None, stream: str) -> dict[str, object] | None:
        """The description of the resource if it ended lately, as the account's, under that stream name."""
        now = time.monotonic()
        while self._entries and now - next(iter(self._entries.values())).at > self._ttl_s:
            self._entries.popitem(last=False)
        ended = self._entries.get(resource_id)
        if ended is None or ended.account_id != account_id or ended.stream != stream:
            return None
        return ended.description
