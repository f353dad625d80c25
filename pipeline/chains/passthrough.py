"""Returns every frame unchanged: measures the transport floor (decode, schedule, encode)."""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.chain import ChainItem, ChainResult, UnstagedChain


class PassthroughChain(UnstagedChain):
    name = "passthrough"

    def warm_up(self, max_batch: int = 1) -> None:
        pass

    def run(self, batch: Sequence[ChainItem]) -> list[ChainResult]:
        return [item.image for item in batch]

    def forget_session(self, session_id: str) -> None:
        pass
