"""A first reading of what a batch costs, taken at start before any session: the capacity model
has a line to plan by from the first session on, and live batches replace it within a few dozen.

Blank frames hold no face, so a face chain's reading is its cheapest (detection alone): the live
batches of real faces raise it (pipeline/chain_cost.py follows them).
"""

from __future__ import annotations

import logging
import time

import numpy as np

from pipeline.chain import Chain, ChainItem
from pipeline.chain_cost import ChainCost

logger = logging.getLogger(__name__)

SIZE = (640, 480)  # a camera's default
RUNS = 3  # the first run of a size is dropped: its allocations are one-off


def calibrate(chain: Chain, cost: ChainCost, max_batch: int) -> None:
    """Times blank batches of one frame and of the largest batch (up to 4) into `cost`."""
    width, height = SIZE
    grey = np.full((height * 3 // 2, width), 128, np.uint8)
    session_ids = [f"calibration-{index}" for index in range(min(4, max_batch))]
    try:
        for size in sorted({1, len(session_ids)}):
            items = [ChainItem(session_id, grey.copy(), {}, None) for session_id in session_ids[:size]]
            for run in range(RUNS):
                started = time.monotonic()
                chain.run(items)
                if run:
                    cost.add(size, time.monotonic() - started)
    except Exception as exc:  # the live batches will measure it instead
        logger.warning("could not time the chain at start: %s", exc)
    finally:
        for session_id in session_ids:
            chain.forget_session(session_id)
