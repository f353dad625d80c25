"""A session's side of metering: the meter it talks to, and what it does when the level changes.

A session knows its meter only through `Meter` (quota/stream_meter.py adapts quota's
SessionMeter to it), so stream/ does not depend on how tokens are kept.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from pipeline.runner import FrameResult

logger = logging.getLogger(__name__)

# The most closing waits for the meter to return its lease: above the meter's own bound (quota.meter's
# CLOSE_WAIT_S, 2 s, after which it hands the return to the background; a test keeps it so).
RETURN_LEASE_LIMIT_S = 3.0


class Meter(Protocol):
    """One session's meter: it spends a lease as frames are charged and sets the throttle level."""

    @property
    def priority(self) -> int:
        """The scheduler's priority for the session's tier."""

    @property
    def fps_cap(self) -> float | None:
        """For the scheduler: None unlimited, 0 stopped."""

    @property
    def stopped(self) -> bool:
        """Out of tokens: frames are shown unprocessed and not charged."""

    @property
    def burn_rate(self) -> float:
        """Tokens a second over the last seconds."""

    def event(self) -> dict[str, object]:
        """The state as the client's "meter" event: level, fps_cap, reason, balance, grace_s, ..."""

    def charge(self, width: int, height: int) -> None:
        """A processed frame of this size reached the viewer: pay for it (never waits)."""

    async def open(self) -> None:
        """Opens the lease; raises the store's refusals (nothing to spend, too many sessions, store down)."""

    async def run(self) -> None:
        """Renews the lease until closed; calls on_exhausted when the grace period ends."""

    async def close(self) -> None:
        """Returns what the lease holds, within RETURN_LEASE_LIMIT_S."""


# Builds a session's meter: (session_id, on_level_change, on_exhausted(reason)) -> Meter
MeterFactory = Callable[[str, Callable[[], None], Callable[[str], None]], Meter]


def throttle(meter_event: Mapping[str, object]) -> dict[str, object] | None:
    """{"level", "reason"} while the meter holds the session below full speed, else None. The meter
    gives a reason only when it stops ("exhausted", "quota_store_unavailable"); below that it slows
    a session whose balance lasts under its tier's seconds (docs/metering.md): "low_balance"."""
    if meter_event["level"] == "full":
        return None
    return {"level": meter_event["level"], "reason": meter_event["reason"] or "low_balance"}


def is_charged(result: FrameResult) -> bool:
    """A frame the encoder took is paid for if the chain processed it. Only then: one replaced in
    the output slot before the encoder took it never reached the viewer and costs nothing."""
    return result.processed and result.error is None


class SessionMetering:
    """Runs one session's meter and follows its level: the scheduler's cap, the client's events,
    the session's end when the tokens (or the store) are gone for the grace period."""

    def __init__(
        self,
        session_id: str,
        make_meter: MeterFactory,
        *,
        send_event: Callable[[Mapping[str, Any]], None],
        set_fps_cap: Callable[[float | None], None],
        end_session: Callable[[str, str], None],
    ) -> None:
        self._session_id = session_id
        self._send_event = send_event
        self._set_fps_cap = set_fps_cap
        self._end_session = end_session
        self.meter = make_meter(session_id, self._level_changed, self._exhausted)

    async def run(self) -> None:
        try:
            await self.meter.run()
        except Exception:
            # Without its meter a session would never be charged nor stopped: end it.
            logger.exception("session %s: the meter failed", self._session_id)
            self._end_session("metering failed", "metering_failed")

    def _level_changed(self) -> None:
        self._set_fps_cap(self.meter.fps_cap)
        event = self.meter.event()
        self._send_event(event)
        if self.meter.stopped:
            self._send_event({"type": "exhausted", "reason": event["reason"], "grace_s": event["grace_s"]})

    def _exhausted(self, reason: str) -> None:
        if reason == "quota_store_unavailable":
            self._end_session("quota store unavailable", "quota_store_unavailable")
        else:
            self._end_session("tokens exhausted", "tokens_exhausted")
