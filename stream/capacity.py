"""The node's capacity model: from what a batch costs (pipeline/chain_cost.py) and what a session's
codecs cost (codec_cost.py), whether the sessions it processes hold their rate, and how many more
of each frame size would fit.

The device: the fastest session's rate sets how many batches a second run (the others' frames
join them), each batch costs per_batch + per_frame * its frames, so a second of video costs
    busy = batches/s * per_batch + (sum of the sessions' rates) * per_frame    (seconds a second)
and past 1 every session slows alike, to 1 / busy of its rate. New sessions are admitted with a
margin, as if the device had only DEVICE_PLAN of its time: the node is full when one more would put
them below the floor so planned; it sheds only when they fall below it with all of its time.
The CPU: every session, processed or waiting, decodes and encodes its video; on a CPU device the
chain's busy share takes the cores torch computes with too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.chain_cost import CostLine

# New sessions are planned on this share of the device's time: batch times vary by about a tenth
# from one to the next, and the gap between admitting and shedding keeps the node from flapping.
DEVICE_PLAN = 0.9
# The cores are planned at most this busy: the event loop, RTP and the network need the rest.
CPU_PLAN = 0.8
# The frame sizes the model answers for (what cameras and OBS send).
SIZES: dict[str, tuple[int, int]] = {
    "360p": (640, 360),
    "480p": (640, 480),
    "720p": (1280, 720),
    "1080p": (1920, 1080),
}
# A session whose frames have not arrived yet is planned as a camera's default.
ASSUMED_SIZE = SIZES["480p"]
MOST_COUNTED = 1024  # "how many more fit" stops counting here


@dataclass(frozen=True)
class Demand:
    """One session's claim: the rate it is processed at (the target, or its shed rate; 0 while it
    waits in line) and its frame size."""

    fps: float
    width: int
    height: int


@dataclass(frozen=True)
class Node:
    """What the model needs of the node."""

    line: CostLine | None  # None before any batch was measured: the device is taken as free
    max_batch: int
    target_fps: float
    floor_fps: float
    codec_s_per_pixel: float
    cores: int
    chain_threads: int  # cores the chain computes with on a CPU device; 0 on a GPU
    max_sessions: int | None  # the operator's bound; None: the model alone decides


def device_busy(node: Node, demands: Sequence[Demand]) -> float:
    """Seconds of device time a second of these sessions' video takes."""
    processed = [d.fps for d in demands if d.fps > 0]
    if node.line is None or not processed:
        return 0.0
    batches = max(processed) * math.ceil(len(processed) / node.max_batch)
    return batches * node.line.per_batch_s + sum(processed) * node.line.per_frame_s


def rate_share(node: Node, demands: Sequence[Demand], plan: float = 1.0) -> float:
    """The share of its rate each processed session gets with `plan` of the device's time."""
    busy = device_busy(node, demands)
    return 1.0 if busy <= plan else plan / busy


def cpu_busy(node: Node, demands: Sequence[Demand]) -> float:
    """Cores taken: every session's codecs at the target rate, and a CPU device's chain."""
    codecs = sum(node.codec_s_per_pixel * d.width * d.height * node.target_fps for d in demands)
    return codecs + min(1.0, device_busy(node, demands)) * node.chain_threads


def floor_holds(node: Node, demands: Sequence[Demand], plan: float = 1.0) -> bool:
    """Processed sessions at the target rate get at least the floor, and the cores keep up. With
    plan=DEVICE_PLAN: so planned (admitting); with 1: as it is (shedding)."""
    cores = node.cores * (CPU_PLAN if plan < 1.0 else 1.0)
    return rate_share(node, demands, plan) * node.target_fps >= node.floor_fps and cpu_busy(node, demands) <= cores


def full_rate_holds(node: Node, demands: Sequence[Demand]) -> bool:
    """Every processed session gets all of its rate, so planned (the mark for undoing a shed step)."""
    return rate_share(node, demands, DEVICE_PLAN) >= 1.0 and cpu_busy(node, demands) <= node.cores * CPU_PLAN


def fits_more(node: Node, demands: Sequence[Demand], width: int, height: int) -> int:
    """How many more sessions of this size, processed at the target rate, keep the floor."""
    room = MOST_COUNTED if node.max_sessions is None else max(0, node.max_sessions - len(demands))
    new = Demand(node.target_fps, width, height)
    fits, too_many = 0, room + 1  # more sessions only load the node more: a bisection finds the edge
    while too_many - fits > 1:
        middle = (fits + too_many) // 2
        if floor_holds(node, [*demands, *[new] * middle], DEVICE_PLAN):
            fits = middle
        else:
            too_many = middle
    return fits


def describe(node: Node, demands: Sequence[Demand]) -> dict[str, object]:
    """The model and its inputs, for /healthz, /metrics and the operator's view."""
    share = rate_share(node, demands, DEVICE_PLAN)
    return {
        "target_fps": node.target_fps,
        "floor_fps": node.floor_fps,
        "max_sessions": node.max_sessions if node.max_sessions is not None else "auto",
        "chain_cost": node.line.describe() if node.line is not None else None,
        "max_batch": node.max_batch,
        "codec_ns_per_pixel": round(node.codec_s_per_pixel * 1e9, 2),
        "cores": node.cores,
        "device_busy": round(device_busy(node, demands), 3),
        "cpu_busy_cores": round(cpu_busy(node, demands), 3),
        "planned_fps": round(share * node.target_fps, 1),
        "fits_more": {name: fits_more(node, demands, *size) for name, size in SIZES.items()},
    }
