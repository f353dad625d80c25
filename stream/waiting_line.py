"""The line of sessions waiting for the node's capacity: higher tiers first, then the earliest.

A waiting session's place is its (tier priority, time it first asked): a session shed back into
the line by a load spike keeps its first time, so it goes back in ahead of those that came later.
The estimated wait is the position over the rate at which processed sessions have lately freed
their place; before the first has, nobody knows (None).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

# How far back the rate of freed places is measured.
DEPARTURES_WINDOW_S = 600.0


@dataclass(frozen=True)
class Place:
    session_id: str
    priority: int
    since: float  # monotonic time it first asked to be processed


class WaitingLine:
    def __init__(self, started_at: float) -> None:
        self._places: dict[str, Place] = {}
        self._departures: deque[float] = deque()
        self._started_at = started_at

    def __len__(self) -> int:
        return len(self._places)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._places

    def join(self, session_id: str, priority: int, since: float) -> None:
        self._places[session_id] = Place(session_id, priority, since)

    def leave(self, session_id: str) -> None:
        self._places.pop(session_id, None)

    def in_order(self) -> list[Place]:
        return sorted(self._places.values(), key=lambda place: (-place.priority, place.since))

    def position(self, session_id: str) -> int | None:
        """1 for the next to be processed; None when not in line."""
        for position, place in enumerate(self.in_order(), start=1):
            if place.session_id == session_id:
                return position
        return None

    def place_freed(self, now: float) -> None:
        """A processed session ended: a place freed up."""
        self._departures.append(now)
        self._forget_old(now)

    def estimated_wait_s(self, position: int, now: float) -> float | None:
        self._forget_old(now)
        if not self._departures:
            return None
        watched = min(DEPARTURES_WINDOW_S, max(now - self._started_at, 1e-3))
        return round(position * watched / len(self._departures), 1)

    def _forget_old(self, now: float) -> None:
        while self._departures and self._departures[0] < now - DEPARTURES_WINDOW_S:
            self._departures.popleft()
