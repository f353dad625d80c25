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
import statistics
import sys
import time
import timeit
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from frame_path import (  # bench/, next to this script
    FPS,
    FramePath,
    Streaming,
    load_now,
    machine_line,
    measure_window,
    server_log_lines,
    streaming_sessions,
)
from prometheus_client import CollectorRegistry, Histogram

from stream.node_metrics import LATENCY_BUCKETS_S

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
    path: FramePath | None = None
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


async def run_trial(streaming: Streaming, scraping: bool, round_: int, args: argparse.Namespace) -> Trial:
    trial = Trial(scraping, round_)
    async with aiohttp.ClientSession() as http:
        url = streaming.server.url
        scraper = asyncio.ensure_future(scrape_every(http, url, args.interval, trial)) if scraping else None
        try:
            await asyncio.sleep(args.warmup)
            trial.scrape_ms.clear()
            trial.path = await measure_window(streaming, args.window)
        finally:
            if scraper is not None:
                scraper.cancel()
                await asyncio.gather(scraper, return_exceptions=True)
    return trial


def _ms(values: list[float], pick) -> str:
    return f"{pick(values):.1f}" if values else "-"


def table(trials: list[Trial], interval_s: float) -> list[str]:
    rows = [
        "| scraper | round | delivered fps/session mean (min) | server p50 ms | server CPU % | scrapes | scrape ms p50 (max) | scrape bytes |",
        "|---|---:|---|---:|---:|---:|---|---:|",
    ]
    for t in trials:
        path = t.path
        assert path is not None
        rows.append(
            f"| {f'every {interval_s:g} s' if t.scraping else 'none'} | {t.round} | {statistics.mean(path.fps):.1f} "
            f"({min(path.fps):.1f}) | {_ms([path.server_p50_ms] if path.server_p50_ms else [], max)} | "
            f"{path.server_cpu:.0f} | "
            f"{len(t.scrape_ms)} | {_ms(t.scrape_ms, statistics.median)} ({_ms(t.scrape_ms, max)}) | "
            f"{t.scrape_bytes or '-'} |"
        )
    rows += [
        "",
        "| scraper | delivered fps/session, mean of rounds | server p50 ms | server CPU % |",
        "|---|---:|---:|---:|",
    ]
    for scraping in (False, True):
        mine = [t.path for t in trials if t.scraping == scraping and t.path is not None]
        if not mine:
            continue
        p50s = [p.server_p50_ms for p in mine if p.server_p50_ms is not None]
        rows.append(
            f"| {f'every {interval_s:g} s' if scraping else 'none'} | "
            f"{statistics.mean(statistics.mean(p.fps) for p in mine):.1f} | "
            f"{_ms(p50s, statistics.mean)} | {statistics.mean(p.server_cpu for p in mine):.0f} |"
        )
    return rows


async def bench(args: argparse.Namespace, argv: Sequence[str]) -> None:
    started, load_start = datetime.datetime.now(datetime.UTC), load_now()
    per_observation = observation_us()
    width, height = (int(side) for side in args.size.split("x"))
    trials: list[Trial] = []
    async with streaming_sessions(
        args.chain, args.sessions, width, height, args.log_dir, "facefuse-metrics-"
    ) as streaming:
        for round_ in range(1, args.rounds + 1):
            for scraping in (False, True):
                trials.append(await run_trial(streaming, scraping, round_, args))
    lines = [
        f"## facefuse metrics bench, {started:%Y-%m-%d %H:%M} UTC",
        "",
        machine_line(load_start, "prometheus-client"),
        f"Command: `{' '.join(['.venv/bin/python', 'bench/metrics_cost.py', *argv])}`; {args.sessions} session(s) of "
        f"{width}x{height}@{FPS} VP8 through --chain {args.chain}, warm-up {args.warmup:g} s, window {args.window:g} s.",
        "",
        f"One histogram observation: {per_observation:.2f} us (best of 5); about {OBSERVATIONS_PER_FRAME} a frame: "
        f"{per_observation * OBSERVATIONS_PER_FRAME:.1f} us a frame, "
        f"{per_observation * OBSERVATIONS_PER_FRAME * FPS * args.sessions / 1e4:.3f} % of a core for these sessions.",
        "",
        *table(trials, args.interval),
        *server_log_lines(streaming.server),
    ]
    print("\n".join(lines) + f"\n\nServer log: {streaming.server.log_path}")


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
