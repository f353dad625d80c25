"""The batching policy: decides which sessions' frames go into the next batch, and when.

Pure: it holds no frames and reads no clock; callers pass `now` (seconds). The
runner executes its decisions; tests drive it with hand-made times.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Decision:
    # Sessions whose pending frame runs now, highest priority first; empty = nothing yet.
    batch: tuple[str, ...]
    # Seconds until a decision could change without a new event (None: wait for one).
    wake_in: float | None


@dataclass
class _Session:
    priority: int
    fps_cap: float | None
    pending_since: float | None = None
    in_flight: int = 0
    next_due: float | None = None  # earliest start allowed by the fps cap
    last_arrival: float | None = None
    arrival_interval: float | None = None  # smoothed time between the session's frames


class BatchPolicy:
    def __init__(self, *, max_batch: int, max_wait_s: float, max_in_flight: int = 1) -> None:
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self.max_in_flight = max_in_flight
        self._sessions: dict[str, _Session] = {}

    # -- sessions ---------------------------------------------------------------
    def add_session(self, session_id: str, *, priority: int = 0, fps_cap: float | None = None) -> None:
        self._sessions[session_id] = _Session(priority, fps_cap)

    def remove_session(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def set_priority(self, session_id: str, priority: int) -> None:
        self._sessions[session_id].priority = priority

    def set_fps_cap(self, session_id: str, fps_cap: float | None) -> None:
        """None: unlimited; 0: no frame is processed until the cap is raised."""
        if fps_cap is not None and fps_cap < 0:
            raise ValueError("fps_cap must be >= 0")
        self._sessions[session_id].fps_cap = fps_cap

    def fps_cap(self, session_id: str) -> float | None:
        return self._sessions[session_id].fps_cap

    # -- events -----------------------------------------------------------------
    def frame_pending(self, session_id: str, now: float) -> None:
        """A frame waits in the session's slot (a replacement keeps the first arrival time)."""
        session = self._sessions[session_id]
        if session.pending_since is None:
            session.pending_since = now
        if session.last_arrival is not None:
            gap = now - session.last_arrival
            previous = session.arrival_interval
            session.arrival_interval = gap if previous is None else 0.8 * previous + 0.2 * gap
        session.last_arrival = now

    def frame_done(self, session_id: str) -> None:
        session = self._sessions.get(session_id)
        if session is not None and session.in_flight > 0:
            session.in_flight -= 1

    # -- the decision -------------------------------------------------------------
    def decide(self, now: float, finishing: frozenset[str] = frozenset()) -> Decision:
        """`finishing`: sessions whose frames are in the batch computing now, when the caller
        decides ahead of its end. A frame of theirs that is waiting, or expected before this
        batch's deadline, could join if the decision waited for that end: then nothing is
        decided ahead (an early decision would split such sessions into alternate batches for
        good), and the caller decides again when the running batch ends."""
        ready: list[tuple[str, _Session]] = []
        wake_in: float | None = None
        for session_id, session in self._sessions.items():
            if session.pending_since is None or session.in_flight >= self.max_in_flight:
                continue
            due_in = self._due_in(session, now)
            if due_in is None:
                continue
            if due_in > 0:
                wake_in = due_in if wake_in is None else min(wake_in, due_in)
                continue
            ready.append((session_id, session))
        if not ready:
            return Decision((), wake_in)

        deadline = min(s.pending_since for _, s in ready) + self.max_wait_s  # type: ignore[type-var]
        if finishing and self._finishing_could_join(finishing, deadline):
            return Decision((), None)
        if len(ready) < self.max_batch and now < deadline and self._others_could_join(ready, deadline):
            wait = deadline - now
            return Decision((), wait if wake_in is None else min(wake_in, wait))

        ready.sort(key=lambda item: (-item[1].priority, item[1].pending_since))
        chosen = ready[: self.max_batch]
        for _, session in chosen:
            self._start(session, now)
        return Decision(tuple(session_id for session_id, _ in chosen), 0.0 if len(ready) > len(chosen) else wake_in)

    def _others_could_join(self, ready: list[tuple[str, _Session]], deadline: float) -> bool:
        """Whether waiting can grow the batch: another session's next frame is expected in time.

        A session that was just served is a frame interval away from its next frame;
        waiting for it would only add latency, so the batch goes at once.
        """
        chosen = {session_id for session_id, _ in ready}
        for session_id, session in self._sessions.items():
            if session_id in chosen or session.in_flight >= self.max_in_flight:
                continue
            due_in = self._due_in(session, deadline)
            if due_in is None or due_in > 0:
                continue
            if session.last_arrival is None or session.arrival_interval is None:
                continue  # no rhythm known yet: nothing to wait for
            expected = session.last_arrival + session.arrival_interval
            if expected - self._tolerance(session.arrival_interval) <= deadline:
                return True
        return False

    def _finishing_could_join(self, finishing: frozenset[str], deadline: float) -> bool:
        for session_id in finishing:
            session = self._sessions.get(session_id)
            if session is None:
                continue
            due_in = self._due_in(session, deadline)
            if due_in is None or due_in > 0:
                continue  # its fps cap keeps it out anyway
            if session.pending_since is not None:
                return True
            if session.last_arrival is not None and session.arrival_interval is not None:
                expected = session.last_arrival + session.arrival_interval
                if expected - self._tolerance(session.arrival_interval) <= deadline:
                    return True
        return False

    @staticmethod
    def _tolerance(interval: float) -> float:
        # Frames arrive with jitter; without slack a 15 fps cap on a 30 fps source
        # would miss every other due frame and deliver 10 fps.
        return min(0.005, interval / 4)

    def _due_in(self, session: _Session, now: float) -> float | None:
        """Seconds until the fps cap lets this session start a frame; None if it never will."""
        cap = session.fps_cap
        if cap is None:
            return 0.0
        if cap == 0:
            return None
        if session.next_due is None:
            return 0.0
        return max(0.0, session.next_due - self._tolerance(1 / cap) - now)

    def _start(self, session: _Session, now: float) -> None:
        session.pending_since = None
        session.in_flight += 1
        if session.fps_cap:
            interval = 1 / session.fps_cap
            # Keep the cadence steady (one frame of credit for a late arrival), but after an
            # idle spell allow no burst of catch-up.
            previous = session.next_due if session.next_due is not None else now
            session.next_due = max(previous, now - interval) + interval
