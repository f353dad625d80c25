"""Per-stage times of a chain's batches (upload, convert, detect, ...), for stats and benchmarks."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator


class StageTimer:
    """Milliseconds per named stage of the last batch, and a running mean.

    On CUDA, work is asynchronous: pass `sync` (torch.cuda.synchronize) to charge each stage
    its own kernels; that costs the overlap of stages, so servers leave it off and see
    host-side times only.
    """

    def __init__(self, sync: Callable[[], None] | None = None) -> None:
        self._sync = sync
        self._lock = threading.Lock()  # the runner's thread writes, the event loop reads
        self.last: dict[str, float] = {}
        self._totals: dict[str, float] = {}
        self._batches = 0

    def start_batch(self) -> None:
        with self._lock:
            self.last = {}
            self._batches += 1

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        if self._sync is not None:
            self._sync()
        started = time.perf_counter()
        try:
            yield
        finally:
            if self._sync is not None:
                self._sync()
            elapsed = (time.perf_counter() - started) * 1000
            with self._lock:
                self.last[name] = self.last.get(name, 0.0) + elapsed
                self._totals[name] = self._totals.get(name, 0.0) + elapsed

    def totals(self) -> tuple[int, dict[str, float]]:
        """(batches, seconds per stage summed over them) since the start: the node's metrics."""
        with self._lock:
            return self._batches, {name: total / 1000 for name, total in self._totals.items()}

    def means(self) -> dict[str, float]:
        """Mean milliseconds per batch for each stage since the start."""
        with self._lock:
            return {name: round(total / max(self._batches, 1), 2) for name, total in self._totals.items()}
