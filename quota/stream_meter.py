"""quota's SessionMeter as a streaming session sees it (stream/metering.py's Meter): the few things
a session asks of its meter, so stream/ needs none of the meter's own types."""

from __future__ import annotations

from collections.abc import Callable

from quota.meter import LateReturns, Level, SessionMeter
from quota.settings import QuotaSettings, TierRules
from quota.store import QuotaStore


class StreamMeter:
    def __init__(self, meter: SessionMeter) -> None:
        self.session_meter = meter

    @property
    def priority(self) -> int:
        return self.session_meter.rules.priority

    @property
    def fps_cap(self) -> float | None:
        return self.session_meter.state.fps_cap

    @property
    def stopped(self) -> bool:
        return self.session_meter.state.level is Level.STOPPED

    @property
    def burn_rate(self) -> float:
        return self.session_meter.state.burn_rate

    def event(self) -> dict[str, object]:
        return self.session_meter.state.as_event()

    def charge(self, width: int, height: int) -> None:
        self.session_meter.charge_frame(width, height)

    async def open(self) -> None:
        await self.session_meter.open()

    async def run(self) -> None:
        await self.session_meter.run()

    async def close(self) -> None:
        await self.session_meter.close()


def stream_meters(
    store: QuotaStore, account_id: str, rules: TierRules, settings: QuotaSettings, late_returns: LateReturns
) -> Callable[[str, Callable[[], None], Callable[[str], None]], StreamMeter]:
    """A factory of one account's session meters, for SessionManager.open's `make_meter`."""

    def make_meter(
        session_id: str, on_level_change: Callable[[], None], on_exhausted: Callable[[str], None]
    ) -> StreamMeter:
        meter = SessionMeter(
            store,
            account_id,
            rules,
            session_id,
            settings,
            on_change=lambda state: on_level_change(),
            on_exhausted=on_exhausted,
            late_returns=late_returns,
        )
        return StreamMeter(meter)

    return make_meter
