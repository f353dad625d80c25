"""Metrics benchmark: what GET /metrics costs the frame path (docs/metrics.md).

1. In this process: microseconds per histogram observation (prometheus-client's Histogram with the
   server's latency buckets), the cost each frame pays (about four: latency, queue wait, chain,
   encode).
2. Against `facefuse serve` in its own process (bench/server_process.py) with N streaming aiortc
   sessions: delivered fps, server latency and server CPU with no scraper and with one scraping
   every --interval seconds (1 s: fifteen times Prometheus's usual 15 s), alternated over rounds
   so a noisy machine hits both alike; and each scrape's time and size.

    .venv/bin/python bench/metrics_cost.py                         # 2 sessions, 3 rounds, about 2 minutes
    .venv/bin/python bench/metrics_cost.py --sessions 4 --interval 0.5 --rounds 2 --window 15

Not a test: it asserts nothing and the numbers depend on the machine's load.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import statistics
import sys
import tempfile
import time
import timeit
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from prometheus_client import CollectorRegistry, Histogram
from server_process import ServerProcess, free_port  # bench/, next to this script
from streaming import _cpu_model, _load, _version  # the machine line, as streaming.py prints it

from client.facefuse_client import ClientSession, FacefuseClient
from client.image_track import ImageTrack
from client.still_picture import top_at_aspect
from stream.node_metrics import LATENCY_BUCKETS_S

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.photos import face_rgb  # noqa: E402 (the photos are found where the tests find them)

FPS = 30
OBSERVATIONS_PER_FRAME = 4  # latency, queue wait, chain, one encoder's encode


def observation_us(repeats: int = 200_000) -> float:
    """The best of five runs: the machine's other load only ever adds."""
    histogram = Histogram("bench", "bench", buckets=LATENCY_BUCKETS_S, registry=CollectorRegistry())
    observe = histogram.observe
    runs = timeit.repeat(lambda: observe(0.04), number=repeats, repeat=5)
    return min(runs) / repeats * 1e6


@dataclass
class Trial:
    scraping: bool
    round: int
    fps: list[float] = field(default_factory=list)
    server_p50_ms: float | None = None
    server_cpu: float = 0.0  # % of one core
    scrape_ms: list[float] = field(default_factory=list)
    scrape_bytes: int = 0


async def scrape_every(http: aiohttp.ClientSession, url: str, interval_s: float, trial: Trial) -> None:
    while True:
        started = time.perf_counter()
        async with http.get(f"{url}/metrics") as response:
            body = await response.read()
        trial.scrape_ms.append((time.perf_counter() - started) * 1000)
        trial.scrape_bytes = len(body)
        await asyncio.sleep(max(0.0, interval_s - (time.perf_counter() - started)))


async def run_trial(
    server: ServerProcess, client: FacefuseClient, sessions: list[ClientSession], scraping: bool, round_: int,
    args: argparse.Namespace,
) -> Trial:  # fmt: skip
    trial = Trial(scraping, round_)
    async with aiohttp.ClientSession() as http:
        scraper = asyncio.ensure_future(scrape_every(http, server.url, args.interval, trial)) if scraping else None
        try:
            await asyncio.sleep(args.warmup)
            trial.scrape_ms.clear()
            frames0, start, cpu0 = [s.frames_received for s in sessions], time.monotonic(), server.cpu_seconds()
            await asyncio.sleep(args.window)
            frames1, end, cpu1 = [s.frames_received for s in sessions], time.monotonic(), server.cpu_seconds()
        finally:
            if scraper is not None:
                scraper.cancel()
                await asyncio.gather(scraper, return_exceptions=True)
    described = [await client.request("GET", f"/api/sessions/{s.session_id}") for s in sessions]
    elapsed = end - start
    trial.fps = [(f1 - f0) / elapsed for f0, f1 in zip(frames0, frames1)]
    trial.server_cpu = (cpu1 - cpu0) / elapsed * 100
    p50s = [d["latency_ms"]["p50"] for d in described if d["latency_ms"]["p50"] is not None]
    trial.server_p50_ms = statistics.mean(p50s) if p50s else None
    return trial


def _ms(values: list[float], pick) -> str:
    return f"{pick(values):.1f}" if values else "-"


def table(trials: list[Trial], interval_s: float) -> list[str]:
    rows = [
        "| scraper | round | delivered fps/session mean (min) | server p50 ms | server CPU % | scrapes | scrape ms p50 (max) | scrape bytes |",
        "|---|---:|---|---:|---:|---:|---|---:|",
    ]
    for t in trials:
        rows.append(
            f"| {f'every {interval_s:g} s' if t.scraping else 'none'} | {t.round} | {statistics.mean(t.fps):.1f} "
            f"({min(t.fps):.1f}) | {_ms([t.server_p50_ms] if t.server_p50_ms else [], max)} | {t.server_cpu:.0f} | "
            f"{len(t.scrape_ms)} | {_ms(t.scrape_ms, statistics.median)} ({_ms(t.scrape_ms, max)}) | "
            f"{t.scrape_bytes or '-'} |"
        )
    rows += [
        "",
        "| scraper | delivered fps/session, mean of rounds | server p50 ms | server CPU % |",
        "|---|---:|---:|---:|",
    ]
    for scraping in (False, True):
        mine = [t for t in trials if t.scraping == scraping]
        if not mine:
            continue
        p50s = [t.server_p50_ms for t in mine if t.server_p50_ms is not None]
        rows.append(
            f"| {f'every {interval_s:g} s' if scraping else 'none'} | {statistics.mean(statistics.mean(t.fps) for t in mine):.1f} | "
            f"{_ms(p50s, statistics.mean)} | {statistics.mean(t.server_cpu for t in mine):.0f} |"
        )
    return rows


async def bench(args: argparse.Namespace, argv: Sequence[str]) -> None:
    started, load_start = datetime.datetime.now(datetime.UTC), _load()
    per_observation = observation_us()
    log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="facefuse-metrics-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    argv_server = [sys.executable, "-m", "signaling.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
                   "--ice-host", "127.0.0.1", "--chain", args.chain, "--device", "cpu"]  # fmt: skip
    server = ServerProcess(args.chain, argv_server, port, log_dir / "server.log")
    width, height = (int(side) for side in args.size.split("x"))
    photo = top_at_aspect(face_rgb("obama.jpg"), width, height)
    sources = [ImageTrack(photo, width=width, height=height, fps=FPS) for _ in range(args.sessions)]
    trials: list[Trial] = []
    try:
        server.start()
        async with FacefuseClient(server.url) as client:
            await server.wait_ready(client)
            sessions = [await client.connect(source, codec="VP8") for source in sources]
            for round_ in range(1, args.rounds + 1):
                for scraping in (False, True):
                    trials.append(await run_trial(server, client, sessions, scraping, round_, args))
            for session in sessions:
                await session.close()
    finally:
        for source in sources:
            source.stop()
        server.stop()
    lines = [
        f"## facefuse metrics bench, {started:%Y-%m-%d %H:%M} UTC",
        "",
        f"Machine: nproc {len(os.sched_getaffinity(0))}, {_cpu_model()}, Python {platform.python_version()}, "
        f"aiortc {_version('aiortc')}, prometheus-client {_version('prometheus-client')}; load average "
        f"{load_start} at the start, {_load()} at the end.",
        f"Command: `{' '.join(['.venv/bin/python', 'bench/metrics_cost.py', *argv])}`; {args.sessions} session(s) of "
        f"{width}x{height}@{FPS} VP8 through --chain {args.chain}, warm-up {args.warmup:g} s, window {args.window:g} s.",
        "",
        f"One histogram observation: {per_observation:.2f} us (best of 5); about {OBSERVATIONS_PER_FRAME} a frame: "
        f"{per_observation * OBSERVATIONS_PER_FRAME:.1f} us a frame, "
        f"{per_observation * OBSERVATIONS_PER_FRAME * FPS * args.sessions / 1e4:.3f} % of a core for these sessions.",
        "",
    ]
    if trials:
        lines += table(trials, args.interval)
    problems = list(dict.fromkeys(server.log_problems()))
    if problems:
        lines += ["", f"Server log: {len(problems)} distinct warning/error line(s), e.g. `{problems[0]}`"]
    print("\n".join(lines) + f"\n\nServer log: {server.log_path}")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between scrapes")
    parser.add_argument("--chain", default="fixed-cost:10:1", help="the server's --chain")
    parser.add_argument("--size", default="640x480")
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--window", type=float, default=10.0)
    parser.add_argument("--log-dir", type=Path)
    try:
        asyncio.run(bench(parser.parse_args(argv), argv))
    except KeyboardInterrupt:
        print("interrupted; the server and peers closed", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
