"""Dashboard benchmark: what open dashboards cost the frame path (issue #27: 20 open dashboards
should cost nothing measurable). Delivered fps, server latency and server CPU with 0 and with N
dashboards reading GET /api/events, the counts alternated over rounds so a noisy machine hits
both alike.

The server is `facefuse serve` in its own process (bench/server_process.py), local mode; the
streaming clients are aiortc peers in this process; the dashboards read their event streams in a
child process of their own (this script with --read-events), so their parsing does not take the
streaming clients' CPU.

    .venv/bin/python bench/dashboards.py                       # 0 and 20 dashboards, 3 rounds, about 2 minutes
    .venv/bin/python bench/dashboards.py --dashboards 0 20 100 --rounds 2 --window 20

Not a test: it asserts nothing and the numbers depend on the machine's load.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
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

READERS_READY_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class BenchSettings:
    dashboards: tuple[int, ...]
    rounds: int
    sessions: int
    chain: str
    width: int
    height: int
    warmup_s: float
    window_s: float
    log_dir: Path | None


def parse_args(argv: Sequence[str]) -> BenchSettings:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dashboards", type=int, nargs="+", default=[0, 20], help="open dashboards, each in turn")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=1, help="streaming clients")
    parser.add_argument("--chain", default="fixed-cost:10:1", help="the server's --chain")
    parser.add_argument("--size", default="640x480")
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--window", type=float, default=10.0)
    parser.add_argument("--log-dir", type=Path)
    args = parser.parse_args(argv)
    width, height = (int(side) for side in args.size.split("x"))
    return BenchSettings(
        tuple(args.dashboards), args.rounds, args.sessions, args.chain, width, height, args.warmup, args.window,
        args.log_dir,
    )  # fmt: skip


# -- the dashboards' process --------------------------------------------------------------


async def read_events(url: str, count: int) -> None:
    """Opens `count` event streams and reads them until SIGTERM; prints "ready" once each has had a
    snapshot, then at the end one JSON line: snapshots and bytes per stream."""
    snapshots, received = [0] * count, [0] * count
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)

    async def one(index: int, http: aiohttp.ClientSession) -> None:
        async with http.get(f"{url}/api/events", timeout=aiohttp.ClientTimeout(total=None)) as response:
            response.raise_for_status()
            async for line in response.content:
                received[index] += len(line)
                if line.startswith(b"event: snapshot"):
                    snapshots[index] += 1

    async with aiohttp.ClientSession() as http:
        readers = [asyncio.ensure_future(one(index, http)) for index in range(count)]
        while not all(snapshots) and not any(reader.done() for reader in readers):
            await asyncio.sleep(0.05)
        failed = [reader for reader in readers if reader.done()]
        print("failed" if failed else "ready", flush=True)
        started = time.monotonic()
        first = list(snapshots), list(received)
        await stop.wait()
        elapsed = time.monotonic() - started
        for reader in readers:
            reader.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
    per_s = [(s - s0) / elapsed for s, s0 in zip(snapshots, first[0])]
    bytes_per_s = [(b - b0) / elapsed for b, b0 in zip(received, first[1])]
    print(json.dumps({"snapshots_per_s": statistics.mean(per_s), "bytes_per_s": statistics.mean(bytes_per_s)}))


class Dashboards:
    """`count` dashboards in a child process, while the `with` block runs."""

    def __init__(self, url: str, count: int) -> None:
        self._argv = [sys.executable, __file__, "--read-events", url, str(count)]
        self.count = count
        self.figures: dict[str, float] = {}
        self._process: subprocess.Popen[str] | None = None

    async def __aenter__(self) -> Dashboards:
        if not self.count:
            return self
        self._process = subprocess.Popen(self._argv, stdout=subprocess.PIPE, text=True)
        line = await asyncio.wait_for(asyncio.to_thread(self._process.stdout.readline), READERS_READY_TIMEOUT_S)
        if line.strip() != "ready":
            raise RuntimeError(f"the dashboards did not open their streams: {line!r}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._process is None:
            return
        self._process.send_signal(signal.SIGTERM)
        out, _ = await asyncio.to_thread(self._process.communicate, timeout=15)
        with contextlib.suppress(ValueError, IndexError):
            self.figures = json.loads(out.strip().splitlines()[-1])


# -- one trial ----------------------------------------------------------------------------


@dataclass
class Trial:
    dashboards: int
    round: int
    path: FramePath
    snapshots_per_s: float | None = None
    bytes_per_s: float | None = None


async def run_trial(streaming: Streaming, count: int, round_: int, settings: BenchSettings) -> Trial:
    async with Dashboards(streaming.server.url, count) as dashboards:
        await asyncio.sleep(settings.warmup_s)
        path = await measure_window(streaming, settings.window_s)
    return Trial(count, round_, path, dashboards.figures.get("snapshots_per_s"), dashboards.figures.get("bytes_per_s"))


def _cell(value: float | None, decimals: int = 1) -> str:
    return "-" if value is None else f"{value:.{decimals}f}"


def table(trials: list[Trial]) -> list[str]:
    rows = [
        "| dashboards | round | delivered fps/session mean (min) | server p50 ms | server CPU % | snapshots/s per dashboard | bytes/s per dashboard |",
        "|---:|---:|---|---:|---:|---:|---:|",
    ]
    for t in trials:
        rows.append(
            f"| {t.dashboards} | {t.round} | {statistics.mean(t.path.fps):.1f} ({min(t.path.fps):.1f}) | "
            f"{_cell(t.path.server_p50_ms)} | {t.path.server_cpu:.0f} | {_cell(t.snapshots_per_s, 2)} | "
            f"{_cell(t.bytes_per_s, 0)} |"
        )
    rows += [
        "",
        "| dashboards | delivered fps/session, mean of rounds | server p50 ms | server CPU % |",
        "|---:|---:|---:|---:|",
    ]
    for count in dict.fromkeys(t.dashboards for t in trials):
        mine = [t.path for t in trials if t.dashboards == count]
        p50s = [p.server_p50_ms for p in mine if p.server_p50_ms is not None]
        rows.append(
            f"| {count} | {statistics.mean(statistics.mean(p.fps) for p in mine):.1f} | "
            f"{_cell(statistics.mean(p50s) if p50s else None)} | {statistics.mean(p.server_cpu for p in mine):.0f} |"
        )
    return rows


async def bench(settings: BenchSettings, argv: Sequence[str]) -> None:
    started, load_start = datetime.datetime.now(datetime.UTC), load_now()
    trials: list[Trial] = []
    streaming_at = (settings.chain, settings.sessions, settings.width, settings.height, settings.log_dir)
    async with streaming_sessions(*streaming_at, prefix="facefuse-dashboards-") as streaming:
        for round_ in range(1, settings.rounds + 1):
            for count in settings.dashboards:
                trials.append(await run_trial(streaming, count, round_, settings))
    lines = [
        f"## facefuse dashboards bench, {started:%Y-%m-%d %H:%M} UTC",
        "",
        machine_line(load_start, "aiohttp"),
        f"Command: `{' '.join(['.venv/bin/python', 'bench/dashboards.py', *argv])}`; {settings.sessions} "
        f"session(s) of {settings.width}x{settings.height}@{FPS} VP8 through --chain {settings.chain}, "
        f"warm-up {settings.warmup_s:g} s, window {settings.window_s:g} s.",
        "",
        *table(trials),
        *server_log_lines(streaming.server),
    ]
    print("\n".join(lines) + f"\n\nServer log: {streaming.server.log_path}")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--read-events"]:
        asyncio.run(read_events(argv[1], int(argv[2])))
        return 0
    try:
        asyncio.run(bench(parse_args(argv), argv))
    except KeyboardInterrupt:
        print("interrupted; the server and peers closed", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
