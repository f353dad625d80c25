"""What a side load (open dashboards, a metrics scraper) costs the frame path, measured alike by
each bench that asks (dashboards.py, metrics_cost.py): streaming aiortc sessions through one
`facefuse serve` process (server_process.py), and per window the frames delivered back, the
server's p50 latency and its CPU.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from server_process import ServerProcess, free_port  # bench/, next to this script
from streaming import _cpu_model, _load, _version  # the machine line, as streaming.py prints it

from client.facefuse_client import ClientSession, FacefuseClient
from client.image_track import ImageTrack
from client.still_picture import top_at_aspect

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.photos import face_rgb  # noqa: E402 (the photos are found where the tests find them)

FPS = 30


@dataclass
class FramePath:
    fps: list[float]  # per session, delivered back to the client
    server_p50_ms: float | None
    server_cpu: float  # % of one core


@dataclass
class Streaming:
    server: ServerProcess
    client: FacefuseClient
    sessions: list[ClientSession]


@contextlib.asynccontextmanager
async def streaming_sessions(
    chain: str, count: int, width: int, height: int, log_dir: Path | None, prefix: str
) -> AsyncIterator[Streaming]:
    """A server in local mode on --chain, and `count` sessions sending obama.jpg as a webcam frames it."""
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix=prefix))
    log_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    argv = [sys.executable, "-m", "signaling.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
            "--ice-host", "127.0.0.1", "--chain", chain, "--device", "cpu"]  # fmt: skip
    server = ServerProcess(chain, argv, port, log_dir / "server.log")
    photo = top_at_aspect(face_rgb("obama.jpg"), width, height)
    sources = [ImageTrack(photo, width=width, height=height, fps=FPS) for _ in range(count)]
    try:
        server.start()
        async with FacefuseClient(server.url) as client:
            await server.wait_ready(client)
            sessions = [await client.connect(source, codec="VP8") for source in sources]
            try:
                yield Streaming(server, client, sessions)
            finally:
                for session in sessions:
                    await session.close()
    finally:
        for source in sources:
            source.stop()
        server.stop()


async def measure_window(streaming: Streaming, window_s: float) -> FramePath:
    """The frame path over the next `window_s` seconds."""
    server, sessions = streaming.server, streaming.sessions
    frames0, start, cpu0 = [s.frames_received for s in sessions], time.monotonic(), server.cpu_seconds()
    await asyncio.sleep(window_s)
    frames1, end, cpu1 = [s.frames_received for s in sessions], time.monotonic(), server.cpu_seconds()
    described = [await streaming.client.request("GET", f"/api/sessions/{s.session_id}") for s in sessions]
    elapsed = end - start
    p50s = [d["latency_ms"]["p50"] for d in described if d["latency_ms"]["p50"] is not None]
    return FramePath(
        fps=[(f1 - f0) / elapsed for f0, f1 in zip(frames0, frames1)],
        server_p50_ms=statistics.mean(p50s) if p50s else None,
        server_cpu=(cpu1 - cpu0) / elapsed * 100,
    )


def machine_line(load_start: str, package: str) -> str:
    return (
        f"Machine: nproc {len(os.sched_getaffinity(0))}, {_cpu_model()}, Python {platform.python_version()}, "
        f"aiortc {_version('aiortc')}, {package} {_version(package)}; load average {load_start} at the start, "
        f"{_load()} at the end."
    )


def server_log_lines(server: ServerProcess) -> list[str]:
    problems = list(dict.fromkeys(server.log_problems()))
    if not problems:
        return []
    return ["", f"Server log: {len(problems)} distinct warning/error line(s), e.g. `{problems[0]}`"]


def load_now() -> str:
    return _load()
