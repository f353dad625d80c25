"""Draining a node for a restart: SIGTERM (an orchestrator stopping it) or the admin's request.

A draining node takes no new sessions (503 `node_draining` with Retry-After, or a 307 to another
node where the cluster has one), fails /healthz so a load balancer stops sending it work, and
lets its live sessions go on for up to the drain timeout; then it tells the ones left
`server_shutdown` and closes them, their leases returned. The admin's drain leaves the process
running (it holds nothing by then: the operator or orchestrator stops it); SIGTERM's stops the
process once the sessions are gone. A signal during the drain stops at once (serving.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from stream.manager import SessionManager

logger = logging.getLogger(__name__)

# How often the drain looks whether its sessions are all gone: a session ends on its own
# whenever its client leaves, and nothing calls back for the last one.
CHECK_EVERY_S = 0.5
# What the sessions are told when the drain begins, so a page can say the server is restarting.
DRAINING_EVENT = "draining"


class Drain:
    def __init__(self, sessions: SessionManager, timeout_s: float) -> None:
        self._sessions = sessions
        self.timeout_s = timeout_s
        self._task: asyncio.Task[None] | None = None
        self.started_at: float | None = None  # unix time
        self._deadline: float | None = None  # monotonic

    @property
    def draining(self) -> bool:
        return self.started_at is not None

    def start(self, then: Callable[[], None] | None = None) -> bool:
        """Begins the drain (False: it had begun already); `then` runs once no session is left."""
        if self.draining:
            return False
        self.started_at = time.time()
        self._deadline = time.monotonic() + self.timeout_s
        self._sessions.draining = True
        live = self._sessions.all()
        logger.info("draining: no new sessions; %d live session(s) get up to %g s", len(live), self.timeout_s)
        for session in live:
            session.send_event({"type": DRAINING_EVENT, "closes_in_s": self.timeout_s})
        self._task = asyncio.ensure_future(self._run(then))
        self._task.set_name("drain")
        return True

    def describe(self) -> dict[str, object]:
        left = None if self._deadline is None else max(0.0, round(self._deadline - time.monotonic(), 1))
        return {
            "draining": self.draining,
            "started_at": self.started_at,
            "timeout_s": self.timeout_s,
            "closes_in_s": left,
            "sessions": len(self._sessions.all()),
        }

    async def stop(self) -> None:
        """At shutdown: the drain's task must not outlive the app."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self, then: Callable[[], None] | None) -> None:
        assert self._deadline is not None
        while self._sessions.all() and time.monotonic() < self._deadline:
            await asyncio.sleep(min(CHECK_EVERY_S, max(0.0, self._deadline - time.monotonic())))
        if left := self._sessions.all():
            logger.info("drain timeout: closing the %d session(s) left", len(left))
            await self._sessions.close_all("the server is restarting (its drain timeout was reached)")
        logger.info("drained: no session left")
        if then is not None:
            then()
