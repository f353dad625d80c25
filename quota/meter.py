"""The meter of one session: spends a lease frame by frame, renews it, sets the throttle level.

Store round trips are O(1 per lease): a lease holds `lease_s` seconds of video at
the session's price; the meter renews when less than `renew_below` of a lease is
left, for a whole lease more, so at 30 fps a session makes about 12 renewals a
minute. Besides: a lease is renewed at least every third of its TTL however slowly
it is spent (or the store would settle a live session's lease); while throttled,
every THROTTLED_REFRESH_S (a top-up lifts the throttle soon); and a lease the
account cannot refill is asked again at most once a second, not at every frame.
Frames are charged only when processed (`charge_frame`, called on the
event loop, never waits). Levels: full, slow (15 fps), crawl (5 fps), stopped
(no processing; the session shows the original video and is closed after the
grace period unless tokens arrive). A store that cannot be reached fails closed:
the session spends what its lease holds, then stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from quota.errors import LeaseNotFound, StoreUnavailable
from quota.settings import MICRO, QuotaSettings, TierRules, to_tokens
from quota.store import Grant, QuotaStore

logger = logging.getLogger(__name__)

STORE_RETRY_S = 1.0  # a dead store, or a lease the account could not refill, is asked again after this
THROTTLED_REFRESH_S = 2.0  # while slow or crawling, the balance is read this often (a top-up shows soon)
LATE_CLOSE_RETRY_S = 2.0  # a lease that could not be returned at once is tried again this often, for a TTL
# How long close() waits for the store before handing the return to the background: a Redis that
# takes connections but never answers held every close (a DELETE, a shutdown) for about 13 s.
CLOSE_WAIT_S = 2.0


class LateReturns:
    """Lease returns still being retried after their sessions ended. The app owns one and drains it
    at shutdown, before its store closes; apps in one process (the tests run many) keep theirs apart."""

    def __init__(self) -> None:
        self._pending: dict[asyncio.Task[None], tuple[SessionMeter, int]] = {}  # task -> (meter, seq of its close)

    def __len__(self) -> int:
        return len(self._pending)

    def retry(self, meter: SessionMeter, seq: int) -> None:
        task = asyncio.ensure_future(meter._close_later(seq))
        self._pending[task] = (meter, seq)
        task.add_done_callback(lambda done: self._pending.pop(done, None))

    async def drain(self, timeout_s: float = 2.0) -> None:
        """One last try for each lease still being returned."""
        pending = dict(self._pending)
        for task in pending:
            task.cancel()
        tries = [meter._try_close(seq) for meter, seq in pending.values()]
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await asyncio.gather(*tries, return_exceptions=True)


class Level(str, Enum):
    FULL = "full"
    SLOW = "slow"
    CRAWL = "crawl"
    STOPPED = "stopped"


@dataclass(frozen=True)
class MeterState:
    level: Level
    fps_cap: float | None  # for the scheduler: None unlimited, 0 stopped
    reason: str | None  # why stopped: "exhausted" or "quota_store_unavailable"
    tier: str
    balance: float  # tokens left to this session: the account's available tokens + the lease
    spent: float  # tokens this session has spent
    burn_rate: float  # tokens per second over the last seconds
    price_per_second: float
    seconds_left: float | None  # at the current price; None when unmetered
    grace_s: float | None  # when stopped: seconds until the session is closed unless topped up

    def as_event(self) -> dict[str, object]:
        return {
            "type": "meter",
            "level": self.level.value,
            "fps_cap": self.fps_cap,
            "reason": self.reason,
            "tier": self.tier,
            "balance": round(self.balance, 4),
            "spent": round(self.spent, 4),
            "burn_rate": round(self.burn_rate, 4),
            "price_per_second": self.price_per_second,
            "seconds_left": None if self.seconds_left is None else round(self.seconds_left, 1),
            "grace_s": self.grace_s,
        }


class SessionMeter:
    def __init__(
        self,
        store: QuotaStore,
        account_id: str,
        rules: TierRules,
        session_id: str,
        settings: QuotaSettings,
        *,
        on_change: Callable[[MeterState], None] = lambda state: None,
        on_exhausted: Callable[[str], None] = lambda reason: None,
        clock: Callable[[], float] = time.monotonic,
        late_returns: LateReturns | None = None,
    ) -> None:
        self.account_id = account_id
        self.rules = rules
        self.session_id = session_id
        self.lease_id = f"lease-{session_id}"
        self._store = store
        self._settings = settings
        self._on_change = on_change
        self._on_exhausted = on_exhausted
        self._clock = clock
        self._late_returns = late_returns if late_returns is not None else LateReturns()
        self._size = (640, 480)  # the output's (width, height): the price goes by its pixels
        self._granted_total = 0
        self._spent_total = 0
        self._store_available = 0  # the account's grantable tokens at the last store answer
        self._seq = 0  # the last lease operation the store confirmed
        self._sent_seq = 0  # the highest one sent (a lost answer may still have been applied)
        self._reason: str | None = None
        self._stopped_since: float | None = None
        self._retry_at = 0.0  # after a store failure, no new attempt before this (clock) time
        self._renewed_at = 0.0  # (clock) time of the last lease operation the store confirmed
        self._short = False  # the last grant was less than asked: the account has no more to give now
        self._unanswered: tuple[int, int, int, float] | None = (
            None  # (seq, reported, want, first sent) of a lost answer
        )
        self._reported = 0  # the spending the store last confirmed
        self._lease_gone = False  # the store no longer knows the lease: nothing more to ask
        self._renew_wanted = asyncio.Event()
        self._burn: deque[tuple[float, int]] = deque(maxlen=64)
        self._state: MeterState | None = None
        self._closed = False

    # -- pricing -----------------------------------------------------------------------
    @property
    def price_per_second(self) -> float:
        return self._settings.price_per_second(*self._size)

    def _frame_cost(self) -> int:
        return round(self.price_per_second * MICRO / self._settings.nominal_fps)

    def _lease_want(self) -> int:
        return round(self._settings.lease_s * self.price_per_second * MICRO)

    @property
    def held(self) -> int:
        return self._granted_total - self._spent_total

    # -- the session's side ----------------------------------------------------------------
    async def open(self, width: int = 640, height: int = 480) -> MeterState:
        """Opens the lease; raises NothingToSpend, TooManyLeases or StoreUnavailable."""
        self._size = (width, height)
        grant = await self._store.open_lease(
            self.account_id,
            self.lease_id,
            self.session_id,
            self._lease_want(),
            self.rules,
            hour_s=self._settings.hour_s,
            refill_period_s=self._settings.refill_period_s,
            lease_ttl_s=self._settings.lease_ttl_s,
        )
        self._apply(grant, reported_spent=0)
        self._renewed_at = self._clock()
        return self._update()

    def charge_frame(self, width: int, height: int) -> None:
        """A processed frame of this size was delivered: pay for it from the lease."""
        self._size = (width, height)
        spent = self._spent_total + self._frame_cost()
        # Metered: never more than the lease holds (the store would refuse it anyway).
        self._spent_total = min(self._granted_total, spent) if self.rules.metered else spent
        self._burn.append((self._clock(), self._spent_total))
        self._update()
        if self._renewal_want() is not None:
            self._renew_wanted.set()

    @property
    def state(self) -> MeterState:
        return self._state if self._state is not None else self._update()

    # -- the background loop -----------------------------------------------------------------
    async def run(self) -> None:
        """Renews when the lease runs low; while stopped, retries once a second and ends the grace period."""
        while not self._closed:
            await self._wait_for_work(1.0)
            self._renew_wanted.clear()
            want = self._renewal_want()
            if want is not None and self._clock() >= self._retry_at:
                await self._renew(want)
            state = self._update()
            if state.level is Level.STOPPED and self._stopped_since is not None:
                if self._clock() - self._stopped_since >= self._settings.grace_s:
                    self._on_exhausted(state.reason or "exhausted")
                    return

    async def _wait_for_work(self, at_most_s: float) -> None:
        """Until a renewal is wanted, or at most `at_most_s`. A timeout scope, not wait_for: on
        Python 3.11 wait_for returns the event's result when a cancellation arrives in the same turn
        as the event (as charge_frame sets it at 30 fps), so a cancelled meter went on renewing."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(at_most_s):
                await self._renew_wanted.wait()

    def _renewal_want(self) -> int | None:
        """What to ask the store for now, or None when no renewal is due."""
        if self._lease_gone:
            return None
        since = self._clock() - self._renewed_at
        level = self.state.level
        if level is Level.STOPPED:  # no frames come: the loop's one-second wake paces these
            return self._lease_want()
        if self.held < self._lease_want() * self._settings.renew_below:
            return self._lease_want() if not self._short or since >= STORE_RETRY_S else None
        due = THROTTLED_REFRESH_S if level in (Level.SLOW, Level.CRAWL) else self._settings.lease_ttl_s / 3
        # a lease that is not low is only kept alive (and the balance read): topped up to one lease, no more
        return max(0, self._lease_want() - self.held) if since >= due else None

    async def _renew(self, want: int) -> None:
        seq = self._seq + 1  # the same seq is retried until it succeeds: idempotent in the store
        reported, sent_at = self._spent_total, self._clock()
        if self._unanswered is not None and self._unanswered[0] == seq:
            # The store may have applied the lost attempt and answers a repeated seq with that
            # attempt's grant (and its time: the lease's TTL runs from it): this attempt must say
            # what that one said, or the grant is misread.
            _, reported, want, sent_at = self._unanswered
        self._unanswered = (seq, reported, want, sent_at)
        self._sent_seq = max(self._sent_seq, seq)
        try:
            grant = await self._store.renew_lease(
                self.account_id,
                self.lease_id,
                seq,
                reported,
                want,
                self.rules,
                hour_s=self._settings.hour_s,
                refill_period_s=self._settings.refill_period_s,
            )
        except StoreUnavailable as exc:
            self._retry_at = self._clock() + STORE_RETRY_S  # every frame asks; a dead store is asked once a second
            if self._reason != "quota_store_unavailable":
                logger.warning("session %s: quota store unavailable, spending the lease: %s", self.session_id, exc)
            self._reason = "quota_store_unavailable"
            return
        except LeaseNotFound:
            # expired in the store (a store outage longer than the TTL): nothing more can be granted to it
            self._unanswered = None
            self._lease_gone = True
            logger.warning("session %s: lease %s is gone from the store", self.session_id, self.lease_id)
            self._reason = "exhausted"
            self._store_available = 0
            self._granted_total = self._spent_total
            return
        self._seq = seq
        self._unanswered = None
        self._renewed_at = sent_at
        self._reported = reported
        self._short = grant.granted < want
        self._reason = None
        self._apply(grant, reported)

    def _apply(self, grant: Grant, reported_spent: int) -> None:
        # The store recorded `reported_spent`; frames charged while we awaited it come off the lease too.
        self._granted_total = max(self._granted_total, reported_spent + grant.held)
        if self.rules.metered:
            self._store_available = grant.balance if grant.hour_left is None else min(grant.balance, grant.hour_left)

    async def close(self) -> None:
        """Returns what the lease holds; retried briefly, idempotent in the store."""
        self._closed = True
        self._renew_wanted.set()
        seq = self._sent_seq + 1  # beyond any renew that may have been applied; the same for every retry
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CLOSE_WAIT_S):  # a cut-off return is safe to repeat: same seq
                for attempt in range(3):
                    if await self._try_close(seq):
                        return
                    await asyncio.sleep(0.2 * (attempt + 1))
        # The store settles a lease it stops hearing from as spent up to the last renewal, so what
        # was spent since would go unpaid: keep trying in the background for a TTL, if anything was.
        if self._spent_total == self._reported:
            logger.warning(
                "session %s: could not return lease %s; the store settles it after its TTL",
                self.session_id,
                self.lease_id,
            )
            return
        logger.warning(
            "session %s: could not return lease %s yet; retrying for %g s",
            self.session_id,
            self.lease_id,
            self._settings.lease_ttl_s,
        )
        self._late_returns.retry(self, seq)

    async def _try_close(self, seq: int) -> bool:
        """True once the store has the lease's final spending (or no longer knows the lease)."""
        try:
            await self._store.close_lease(
                self.account_id, self.lease_id, seq, self._spent_total, self.rules, hour_s=self._settings.hour_s
            )
        except StoreUnavailable:
            return False
        except LeaseNotFound:
            pass
        return True

    async def _close_later(self, seq: int) -> None:
        deadline = time.monotonic() + self._settings.lease_ttl_s
        while time.monotonic() < deadline:
            await asyncio.sleep(LATE_CLOSE_RETRY_S)
            if await self._try_close(seq):
                logger.info("session %s: lease %s returned late", self.session_id, self.lease_id)
                return
        logger.warning(
            "session %s: could not return lease %s; the store settles it after its TTL", self.session_id, self.lease_id
        )

    # -- the level ---------------------------------------------------------------------------
    def _burn_rate(self) -> float:
        now = self._clock()
        while self._burn and self._burn[0][0] < now - 10:
            self._burn.popleft()
        if len(self._burn) < 2:
            return 0.0
        (first_at, first_spent), (_, last_spent) = self._burn[0], self._burn[-1]
        span = max(now - first_at, 1.0)
        return to_tokens(last_spent - first_spent) / span

    def _stop_reason(self) -> str:
        if self._reason is not None:
            return self._reason
        # The lease ran dry while the account still had tokens at the store's last answer: a renewal
        # is unanswered (a Redis that hangs answers nothing for seconds), not an exhausted account.
        if self.rules.metered and self._store_available >= self._frame_cost():
            return "quota_store_unavailable"
        return "exhausted"

    def _update(self) -> MeterState:
        settings = self._settings
        price = self.price_per_second
        if not self.rules.metered:
            level, cap, left, balance = Level.FULL, None, None, to_tokens(self._store_available)
        else:
            balance = to_tokens(max(0, self._store_available) + max(0, self.held))
            left = balance / price
            if self.held >= self._frame_cost() and left >= settings.slow_below_s:
                level, cap = Level.FULL, None
            elif self.held >= self._frame_cost() and left >= settings.crawl_below_s:
                level, cap = Level.SLOW, settings.slow_fps
            elif self.held >= self._frame_cost():
                level, cap = Level.CRAWL, settings.crawl_fps
            else:
                level, cap = Level.STOPPED, 0.0
        reason = self._stop_reason() if level is Level.STOPPED else None
        if level is Level.STOPPED:
            if self._stopped_since is None:
                self._stopped_since = self._clock()
        else:
            self._stopped_since = None
        grace = None
        if self._stopped_since is not None:
            grace = round(max(0.0, settings.grace_s - (self._clock() - self._stopped_since)), 1)
        state = MeterState(
            level,
            cap,
            reason,
            self.rules.name,
            balance,
            to_tokens(self._spent_total),
            self._burn_rate(),
            price,
            left,
            grace,
        )
        previous = self._state
        self._state = state
        if previous is None or (previous.level, previous.reason) != (state.level, state.reason):
            self._on_change(state)
        return state
