"""Shedding load by tier when the processed sessions fall below their floor anyway (a scene with
more faces, a device another tenant slowed), and undoing it when the load falls.

Each tick a session moves one step at most: full -> "rate" (processed at half the target rate)
-> "resolution" (also at a quarter of the pixels) -> "line" (back into the waiting line). The
lowest tier goes first, its newest sessions first; the next tier is touched only once every session
of the lower one is back in line. The earliest session of the highest tier is never shed: shedding
is for the others' sake, and a device too slow for one session alone gives that one all it has. Undoing goes the other way, highest tier and oldest first, one
step a tick, and only while every processed session would then get its full rate: between the
floor and full rate nothing moves, so the node does not flap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from stream.capacity import Demand, Node, floor_holds, full_rate_holds

STEPS = ("full", "rate", "resolution", "line")
RATE, RESOLUTION, LINE = 1, 2, 3
SHED_RATE_SHARE = 0.5  # "rate": processed at this share of the target rate
SHED_PIXELS_SHARE = 0.25  # "resolution": processed at this share of its pixels


@dataclass(frozen=True)
class Processed:
    """A session the node processes, as the shedding sees it."""

    session_id: str
    priority: int
    since: float  # when it first asked to be processed (monotonic)
    step: int  # 0 full, RATE, RESOLUTION
    width: int
    height: int


def demand(node: Node, session: Processed, step: int | None = None) -> Demand:
    """Its claim at a step. The model has no figure for what fewer pixels save the chain (its cost
    is per frame), so "resolution" is planned as "rate": only measurement shows the saving."""
    step = session.step if step is None else step
    if step >= LINE:
        return Demand(0.0, session.width, session.height)
    fps = node.target_fps * (SHED_RATE_SHARE if step >= RATE else 1.0)
    return Demand(fps, session.width, session.height)


def shed(node: Node, processed: Sequence[Processed], waiting: Sequence[Demand]) -> dict[str, int]:
    """The steps to take now: session id -> its new step; empty while the floor holds."""
    current = {session.session_id: session for session in processed}

    def holds() -> bool:
        return floor_holds(node, [demand(node, s) for s in current.values()] + list(waiting))

    if holds():
        return {}
    changes: dict[str, int] = {}
    kept = min(processed, key=lambda s: (-s.priority, s.since)).session_id if processed else None
    for tier in sorted({session.priority for session in processed}):
        members = sorted((s for s in processed if s.priority == tier and s.session_id != kept), key=lambda s: -s.since)
        for session in members:
            current[session.session_id] = replace(session, step=session.step + 1)
            changes[session.session_id] = session.step + 1
            if holds():
                return changes
        if any(changes[s.session_id] < LINE for s in members):
            return changes  # this tier has further steps to go: the next tier waits for the next tick
    return changes


def restore(node: Node, processed: Sequence[Processed], waiting: Sequence[Demand]) -> dict[str, int]:
    """The steps to undo now: session id -> its new step; each only if full rate holds after it."""
    current = {session.session_id: session for session in processed}
    changes: dict[str, int] = {}
    for session in sorted((s for s in processed if s.step > 0), key=lambda s: (-s.priority, s.since)):
        trial = {**current, session.session_id: replace(session, step=session.step - 1)}
        if not full_rate_holds(node, [demand(node, s) for s in trial.values()] + list(waiting)):
            break
        current = trial
        changes[session.session_id] = session.step - 1
    return changes
