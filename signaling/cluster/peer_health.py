"""Which other nodes answer: a node whose forwarded requests keep failing is marked unhealthy for a
while, so requests for it fail at once (503) instead of each waiting out its timeout, and no new
session is sent to it by 307. One request a cool-off lets through tries it again; its answer
clears the mark.

Issue #35 reported: 120 requests to a session on a node whose address never answered each waited 5-6 s for
their 503, and forwards to a healthy node took 4.6 s instead of 0.01 s meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Callable

# Failures in a row (no answer, a refused connection, a timeout) that mark a node unhealthy.
FAILURES_TO_MARK = 3
# How long a mark holds before one request may try the node again.
COOL_OFF_S = 10.0
# Connections this node keeps open to one other node at most: a peer that never answers holds
# these and no more, and requests to the others go on (aiohttp's limit_per_host).
CONNECTIONS_PER_PEER = 16


class PeerHealth:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._failures: dict[str, int] = {}
        self._marked_until: dict[str, float] = {}

    def healthy(self, node_id: str) -> bool:
        """False while the node's mark holds; once it has run out, the next caller may try it
        (and the mark is extended meanwhile, so only that one waits on it)."""
        until = self._marked_until.get(node_id)
        if until is None:
            return True
        now = self._clock()
        if now < until:
            return False
        self._marked_until[node_id] = now + COOL_OFF_S  # one try at a time
        return True

    def succeeded(self, node_id: str) -> None:
        self._failures.pop(node_id, None)
        self._marked_until.pop(node_id, None)

    def failed(self, node_id: str) -> None:
        failures = self._failures.get(node_id, 0) + 1
        self._failures[node_id] = failures
        if failures >= FAILURES_TO_MARK:
            self._marked_until[node_id] = self._clock() + COOL_OFF_S

    def unhealthy(self) -> set[str]:
        now = self._clock()
        return {node_id for node_id, until in self._marked_until.items() if now < until}
