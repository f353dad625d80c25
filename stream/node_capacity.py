"""The node's capacity at work: whether a new session is processed or waits in line, who is let in
from the line as room frees, and shedding by tier when the processed sessions fall below the floor
(the model: capacity.py; the steps: load_shedding.py; the line: waiting_line.py).

The session manager asks `admits()` before a new session negotiates and calls `tick()` when a
session ends; `run()` ticks every second besides, as the measured costs move.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence

import torch

from pipeline.runner import BatchRunner
from stream.capacity import ASSUMED_SIZE, DEVICE_PLAN, Demand, Node, describe, fits_more, floor_holds
from stream.codec_cost import CodecCost
from stream.load_shedding import LINE, STEPS, Processed, demand, restore, shed
from stream.session import Session
from stream.settings import StreamSettings
from stream.waiting_line import WaitingLine

logger = logging.getLogger(__name__)

TICK_S = 1.0


class NodeCapacity:
    def __init__(
        self,
        runner: BatchRunner,
        settings: StreamSettings,
        codec: CodecCost | None = None,
        cores: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._runner = runner
        self._settings = settings
        self.codec = codec if codec is not None else CodecCost()
        self._cores = cores or os.cpu_count() or 1
        self._clock = clock
        self.line = WaitingLine(clock())
        self.steps_taken: Counter[tuple[str, str]] = Counter()  # (step, tier priority) -> count
        self.steps_undone: Counter[str] = Counter()  # step undone -> count
        self.admitted_from_line = 0
        self.refused = 0  # answered 503: the line was full

    # -- the model's view of the node ---------------------------------------------------------
    def node(self) -> Node:
        device = getattr(self._runner.chain, "device", None)  # chains that compute have one
        on_cpu = device is not None and getattr(device, "type", None) == "cpu"
        return Node(
            line=self._runner.cost.line(),
            max_batch=self._runner.max_batch,
            target_fps=self._settings.target_fps,
            floor_fps=self._settings.floor_fps,
            codec_s_per_pixel=self.codec.s_per_pixel,
            cores=self._cores,
            chain_threads=torch.get_num_threads() if on_cpu else 0,
            max_sessions=self._settings.max_sessions,
        )

    @staticmethod
    def _processed(sessions: Sequence[Session]) -> list[Processed]:
        return [
            Processed(s.id, s.priority, s.asked_at, s.shed_step, *s.frame_size())
            for s in sessions
            if not s.queued and not s.closing
        ]

    @staticmethod
    def _waiting(sessions: Sequence[Session]) -> list[Demand]:
        return [Demand(0.0, *s.frame_size()) for s in sessions if s.queued and not s.closing]

    def demands(self, sessions: Sequence[Session]) -> list[Demand]:
        node = self.node()
        return [demand(node, p) for p in self._processed(sessions)] + self._waiting(sessions)

    # -- admission ----------------------------------------------------------------------------
    def admits(self, sessions: Sequence[Session]) -> bool:
        """Whether a new session (not yet among `sessions`) is processed at once: nobody waits or
        is shed, and one more of a camera's size keeps the floor."""
        live = [s for s in sessions if not s.closing]
        if len(self.line) or any(s.shed_step for s in live):
            return False
        if not self._processed(live):
            return True  # a device too slow for one session still serves one, as well as it can
        return fits_more(self.node(), self.demands(live), *ASSUMED_SIZE) >= 1

    def line_full(self) -> bool:
        return len(self.line) >= self._settings.max_queue

    def refuse(self) -> None:
        self.refused += 1

    def join_line(self, session: Session) -> None:
        self.line.join(session.id, session.priority, session.asked_at)
        self._tell_places({session.id: session})

    def session_ended(self, session: Session, sessions: Sequence[Session]) -> None:
        if session.id in self.line:
            self.line.leave(session.id)
        else:
            self.line.place_freed(self._clock())
        self.tick(sessions)

    # -- each tick ----------------------------------------------------------------------------
    def tick(self, sessions: Sequence[Session]) -> None:
        """Sheds while the floor does not hold; else undoes steps while full rate holds, then lets
        the line in while the floor holds with one more."""
        live = {s.id: s for s in sessions if not s.closing}
        node = self.node()
        processed, waiting = self._processed(list(live.values())), self._waiting(list(live.values()))
        steps = shed(node, processed, waiting)
        for session_id, step in steps.items():
            session = live[session_id]
            self.steps_taken[(STEPS[step], str(session.priority))] += 1
            logger.info(
                "session %s shed to %s: the processed sessions are below %g fps",
                session_id,
                STEPS[step],
                node.floor_fps,
            )
            if step >= LINE:  # its place, and the "queued" event, follow below
                session.send_event({"type": "degraded", "step": "line", "fps_share": 0.0})
                self.line.join(session.id, session.priority, session.asked_at)
            else:
                session.set_shed_step(step)
        if not steps:
            for session_id, step in restore(node, processed, waiting).items():
                self.steps_undone[STEPS[step + 1]] += 1
                live[session_id].set_shed_step(step)
            self._let_in(live, node)
        self._tell_places(live)

    def _let_in(self, live: dict[str, Session], node: Node) -> None:
        if any(s.shed_step for s in live.values() if not s.queued):
            return  # shed sessions get their rate back before anyone new is processed
        for place in self.line.in_order():
            session = live.get(place.session_id)
            if session is None:
                self.line.leave(place.session_id)
                continue
            trial = [*self.demands(list(live.values())), Demand(node.target_fps, *session.frame_size())]
            trial.remove(Demand(0.0, *session.frame_size()))  # it no longer waits
            if self._processed(list(live.values())) and not floor_holds(node, trial, DEVICE_PLAN):
                return
            self.line.leave(session.id)
            self.admitted_from_line += 1
            session.start_processing(self._clock() - place.since)

    def _tell_places(self, live: dict[str, Session]) -> None:
        now = self._clock()
        for position, place in enumerate(self.line.in_order(), start=1):
            session = live.get(place.session_id)
            if session is not None:
                session.wait_in_line(position, self.line.estimated_wait_s(position, now))

    async def run(self, sessions: Callable[[], Sequence[Session]]) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            try:
                self.tick(sessions())
            except Exception:
                logger.exception("the capacity tick failed")

    # -- what it shows ------------------------------------------------------------------------
    def describe(self, sessions: Sequence[Session]) -> dict[str, object]:
        live = [s for s in sessions if not s.closing]
        node = self.node()
        processed = self._processed(live)
        return {
            **describe(node, self.demands(live)),
            "codec": self.codec.describe(),
            "processed": len(processed),
            "shed": dict(Counter(STEPS[p.step] for p in processed if p.step)),
            "waiting": len(self.line),
            "max_queue": self._settings.max_queue,
            "line": [
                {"session_id": p.session_id, "priority": p.priority, "waited_s": round(self._clock() - p.since, 1)}
                for p in self.line.in_order()
            ],
        }
