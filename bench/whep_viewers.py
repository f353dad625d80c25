"""What each WHEP viewer costs (bench/whip_whep.py): one OBS-shaped publisher, N viewers.

The publisher is tests/support/whip_publisher.py's (H.264 42e01f and Opus, sendonly: its video
reaches no one until a viewer plays it), streaming a real face with a stamp in each frame
(client/frame_stamp.py). For each N its viewers (tests/support/whep_viewer.py) join, play for a
warm-up and a window, and leave: the server's CPU over the window, the fps each viewer got, the
latency of every stamped frame, the frames the server dropped for each viewer.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import av
import numpy as np
from server_process import ServerProcess, cpu_seconds  # bench/, next to this script
from waits import wait_for

from client.facefuse_client import FacefuseClient
from client.frame_stamp import read_stamp, split_value
from client.image_track import ImageTrack
from client.still_picture import top_at_aspect

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.whep_viewer import whep_viewer  # noqa: E402 (the tests' publisher and player)
from support.whip_publisher import offer_like_obs, post_offer  # noqa: E402

FPS = 30
PUBLISHER_TAG = 7
FIRST_FRAME_TIMEOUT_S = 20.0
DRAIN_TIMEOUT_S = 15.0  # the viewers of one N must be gone from the server before the next N

LEGEND = [
    "- One OBS-shaped publisher (H.264 42e01f and Opus) per size and round; its viewers join for each N and leave "
    "after. Each viewer is an aiortc WHEP player taking VP8 (aiortc's first codec) and Opus.",
    "- fps/viewer: video frames each viewer received in the window / window, mean (min) over viewers; latency: "
    "the publisher's frame handed to its encoder -> the frame decoded at a viewer (pixel stamps), all viewers "
    "pooled: an H.264 encode and decode, the chain, a VP8 encode and decode; aiortc's receiver at the viewer "
    "hands a frame on when the next one starts arriving, so about one frame interval of it is aiortc's.",
    "- publisher fps at the server: its frames the server decoded in the window / window (/api/sessions "
    "frames_in); under 30, the publisher (in this process) or the server's decoder could not keep up.",
    "- server CPU: utime + stime of the server process over the window, % of one core; bench CPU: this process "
    "(the publisher's H.264 encode, every viewer's VP8 decode and stamp reading), on the same 2 cores. server drops: "
    "frames a viewer's latest-frame slot replaced before its encoder took them (/api/streams).",
    "- The cost table: the server's CPU and the viewers' fps at each N, the mean of the rounds. CPU per viewer "
    "beyond the first: (CPU at N - CPU at 1) / (N - 1); the first viewer also starts the processing of the "
    "unwatched publisher's frames. Where fps/viewer falls, the machine is full and that figure low; CPU ms per "
    "frame sent, (CPU at N - CPU at 0) / the frames the server sent to all viewers, holds when frames are dropped, "
    "and x 30 fps gives what one viewer at full rate costs (a full machine's contention still inflates it).",
]


class StampLog:
    """One viewer's video: when each frame arrived and how late, from the publisher's stamp."""

    def __init__(self, source: ImageTrack) -> None:
        self.source = source
        self.frames: list[tuple[float, float]] = []  # (arrival, latency ms; nan when unknown)

    def __call__(self, frame: av.VideoFrame, arrived: float) -> None:
        latency = math.nan
        stamp = read_stamp(frame)
        if stamp is not None:
            tag, index = split_value(stamp[0])
            if tag == PUBLISHER_TAG and (sent := self.source.sent_at.get(index)) is not None:
                latency = (arrived - sent) * 1000
        self.frames.append((arrived, latency))

    def between(self, start: float, end: float) -> list[float]:
        return [latency for at, latency in self.frames if start <= at < end]


@dataclass
class ViewerTrial:
    size: str
    viewers: int
    round: int
    server_cpu: float = math.nan  # % of one core
    bench_cpu: float = math.nan
    fps: list[float] = field(default_factory=list)  # per viewer
    latency_ms: list[float] = field(default_factory=list)  # every stamped frame, all viewers
    drops_per_s: float = math.nan  # per viewer
    sent_per_s: float = 0.0  # frames the server sent, all viewers together
    decoded_fps: float = math.nan  # the publisher's frames the server decoded, per second
    notes: list[str] = field(default_factory=list)


async def _viewer_counts(client: FacefuseClient, stream: str) -> dict[str, tuple[int, int]]:
    """(frames_sent, frames_dropped) of each viewer the server has on `stream`."""
    for entry in (await client.request("GET", "/api/streams"))["streams"]:
        if entry["stream"] == stream:
            return {v["viewer_id"]: (v["frames_sent"], v["frames_dropped"]) for v in entry["viewers"]}
    return {}


async def _drained(client: FacefuseClient, stream: str) -> bool:
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while await _viewer_counts(client, stream):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.2)
    return True


async def _frames_in(client: FacefuseClient, session_id: str) -> int:
    return (await client.request("GET", f"/api/sessions/{session_id}"))["frames_in"]


async def viewer_trial(
    server: ServerProcess, client: FacefuseClient, http: aiohttp.ClientSession, stream: str, session_id: str,
    source: ImageTrack, trial: ViewerTrial, warmup_s: float, window_s: float,
) -> None:  # fmt: skip
    logs = [StampLog(source) for _ in range(trial.viewers)]
    async with contextlib.AsyncExitStack() as stack:
        ids = []
        for log in logs:  # each plays the video and the audio, as a player does
            viewer = await stack.enter_async_context(whep_viewer(http, f"{server.url}/whep/{stream}", on_video=log))
            if viewer.status != 201:
                raise RuntimeError(f"POST /whep answered {viewer.status}: {viewer.body[:300]}")
            ids.append(viewer.headers["X-Facefuse-Viewer"])
        if not await wait_for(lambda: all(log.frames for log in logs), FIRST_FRAME_TIMEOUT_S):
            silent = sum(not log.frames for log in logs)
            trial.notes.append(f"{silent} viewer(s) without a frame after {FIRST_FRAME_TIMEOUT_S:.0f} s")
        await asyncio.sleep(warmup_s)
        counts0, frames_in0 = await _viewer_counts(client, stream), await _frames_in(client, session_id)
        start, server0, bench0 = time.monotonic(), server.cpu_seconds(), cpu_seconds(os.getpid())
        await asyncio.sleep(window_s)
        end, server1, bench1 = time.monotonic(), server.cpu_seconds(), cpu_seconds(os.getpid())
        counts1, frames_in1 = await _viewer_counts(client, stream), await _frames_in(client, session_id)
    elapsed = end - start
    trial.server_cpu = (server1 - server0) / elapsed * 100
    trial.bench_cpu = (bench1 - bench0) / elapsed * 100
    trial.decoded_fps = (frames_in1 - frames_in0) / elapsed
    for log in logs:
        window = log.between(start, end)
        trial.fps.append(len(window) / elapsed)
        trial.latency_ms += [ms for ms in window if not math.isnan(ms)]
    if ids:
        sent, dropped = (sum(counts1.get(i, (0, 0))[k] - counts0.get(i, (0, 0))[k] for i in ids) for k in (0, 1))
        trial.sent_per_s = sent / elapsed
        trial.drops_per_s = dropped / len(ids) / elapsed
    if not await _drained(client, stream):
        trial.notes.append(f"viewers still on the server {DRAIN_TIMEOUT_S:.0f} s after they left")


async def one_publisher(
    server: ServerProcess, client: FacefuseClient, http: aiohttp.ClientSession, photo: np.ndarray,
    size: tuple[int, int], order: Sequence[int], round_number: int, warmup_s: float, window_s: float,
    trials: list[ViewerTrial],
) -> None:  # fmt: skip
    """A publisher of one size, its viewers joining and leaving for each N in `order`; each trial
    goes into `trials` once done, so that those before a failure are kept."""
    width, height = size
    name, stream = f"{width}x{height}", f"bench-{width}x{height}"
    framed = top_at_aspect(photo, width, height)  # a webcam's head and shoulders
    source = ImageTrack(framed, width=width, height=height, fps=FPS, tag=PUBLISHER_TAG)
    pc, sdp = await offer_like_obs(source)
    publisher = await post_offer(http, f"{server.url}/whip/{stream}", pc, sdp)
    try:
        if publisher.status != 201:
            raise RuntimeError(f"POST /whip answered {publisher.status}: {publisher.body[:300]}")
        await wait_for(lambda: pc.connectionState == "connected", FIRST_FRAME_TIMEOUT_S)
        await asyncio.sleep(warmup_s)
        for n in order:
            print(f"[viewers] round {round_number}, {name}, N={n}", file=sys.stderr, flush=True)
            trial = ViewerTrial(name, n, round_number)
            session_id = publisher.headers["X-Facefuse-Session"]
            await viewer_trial(server, client, http, stream, session_id, source, trial, warmup_s, window_s)
            trials.append(trial)
        async with http.delete(server.url + publisher.location) as response:
            await response.read()
    finally:
        await publisher.close()


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if values else math.nan


def trial_table(trials: list[ViewerTrial]) -> list[str]:
    rows = [
        "| size | N | round | publisher fps at the server | fps/viewer mean (min) | latency p50 ms | latency p99 ms "
        "| server CPU % | server drops/s/viewer | bench CPU % |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for t in sorted(trials, key=lambda t: (t.size, t.viewers, t.round)):
        fps = f"{np.mean(t.fps):.1f} ({min(t.fps):.1f})" if t.fps else "-"
        p50, p99 = (f"{ms:.0f}" for ms in np.percentile(t.latency_ms, [50, 99])) if t.latency_ms else ("-", "-")
        drops = "-" if math.isnan(t.drops_per_s) else f"{t.drops_per_s:.1f}"
        rows.append(
            f"| {t.size} | {t.viewers} | {t.round} | {t.decoded_fps:.1f} | {fps} | {p50} | {p99} | {t.server_cpu:.0f} | {drops} "
            f"| {t.bench_cpu:.0f} |"
        )
    return rows


def cost_table(trials: list[ViewerTrial]) -> list[str]:
    """Per size: the server's CPU at each N (mean of the rounds) and what a viewer adds, two ways."""
    rows = [
        "| size | N | server CPU % | fps/viewer | CPU % per viewer beyond the first | CPU ms per frame sent "
        "| that at 30 fps, % per viewer |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for size in dict.fromkeys(t.size for t in trials):
        cpu = {}
        for n in sorted({t.viewers for t in trials if t.size == size}):
            at_n = [t for t in trials if t.size == size and t.viewers == n]
            cpu[n] = _mean([t.server_cpu for t in at_n])
            fps = _mean([f for t in at_n for f in t.fps])
            sent_per_s = _mean([t.sent_per_s for t in at_n])
            extra = "-"
            if n > 1 and 1 in cpu:
                extra = f"{(cpu[n] - cpu[1]) / (n - 1):.1f}"
            elif n == 1 and 0 in cpu:
                extra = f"(the first: {cpu[1] - cpu[0]:+.1f})"
            per_frame = per_viewer = "-"
            if n > 0 and 0 in cpu and sent_per_s > 0:
                ms = (cpu[n] - cpu[0]) * 10 / sent_per_s  # CPU % is 10 ms of CPU per second
                per_frame, per_viewer = f"{ms:.1f}", f"{ms * FPS / 10:.0f}"
            fps_cell = "-" if math.isnan(fps) else f"{fps:.1f}"
            rows.append(f"| {size} | {n} | {cpu[n]:.0f} | {fps_cell} | {extra} | {per_frame} | {per_viewer} |")
    return rows


def notes(trials: list[ViewerTrial]) -> list[str]:
    return [f"- {t.size}, N={t.viewers}, round {t.round}: {note}" for t in trials for note in t.notes]
