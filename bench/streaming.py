"""Streaming benchmark: N live clients against facefuse and against a naive inline server.

For each number of client peers, each server mode gets the same load, one after
the other (modes interleaved per N, so a noisy machine hits them alike):

  passthrough  facefuse, passthrough chain through the scheduler (the transport floor)
  fixed-cost   facefuse, fixed-cost:BATCH_MS:FRAME_MS chain through the scheduler
  naive        bench/naive_server.py: the same cost run inline in each track's
               recv() on the event loop, stock aiortc (how aiortc's server example
               and the face-swap tools built on it do it)

Each server is a separate process (its CPU is read from /proc/<pid>/stat over the
measurement window). The clients all run here, in one event loop: a real face
photo as 640x480@30 VP8 video, each frame stamped with (session, index) so the
end-to-end latency of every received frame is known. Each trial streams for a
warm-up, then a measurement window. Prints a markdown table.

    .venv/bin/python bench/streaming.py            # N in 1 2 4 8, about 3 minutes
    .venv/bin/python bench/streaming.py --quick    # N in 1 2, 4 s window
    .venv/bin/python bench/streaming.py --sessions 4 --modes fixed-cost naive --window 20

Not a test: it asserts nothing and the numbers depend on the machine's load.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import importlib.metadata
import math
import os
import platform
import signal
import sys
import tempfile
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import numpy as np
from server_process import ServerProcess, cpu_seconds, free_port  # bench/, next to this script

from client.facefuse_client import ClientSession, FacefuseClient, ReceivedFrame, ServerError
from client.frame_stamp import read_stamp, split_value
from client.image_track import ImageTrack
from client.still_picture import top_at_aspect

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests"))
from support.photos import FACES_DIR, face_path, face_rgb  # noqa: E402 (the photos are found where the tests find them)

NAIVE_SERVER = Path(__file__).resolve().with_name("naive_server.py")
MODE_NAMES = ("passthrough", "fixed-cost", "naive", "mesh")
DEFAULT_MODES = ("passthrough", "fixed-cost", "naive")  # mesh: the face swap chain, asked for by name

FPS, CODEC = 30, "VP8"
FIRST_FRAME_TIMEOUT_S = 20.0
DRAIN_TIMEOUT_S = 15.0  # a server's sessions of the previous trial must be gone by then


# -- settings ---------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchSettings:
    sessions: tuple[int, ...]
    modes: tuple[str, ...]
    warmup_s: float
    window_s: float
    batch_ms: float
    frame_ms: float
    max_batch: int
    max_wait_ms: float
    face: str
    log_dir: Path | None
    device: str = "cpu"
    width: int = 640
    height: int = 480


def parse_args(argv: Sequence[str] | None) -> BenchSettings:
    parser = argparse.ArgumentParser(
        prog="bench/streaming.py",
        description="N aiortc clients (640x480@30 VP8 unless --size) against facefuse (passthrough, fixed-cost) and a naive "
        "inline server; prints a markdown table of delivered fps, latency, server CPU and batch size.",
    )
    parser.add_argument(
        "--sessions",
        type=int,
        nargs="+",
        default=None,
        metavar="N",
        help="client peer counts (default: 1 2 4 8; --quick: 1 2)",
    )
    parser.add_argument(
        "--modes",
        nargs="+",
        choices=MODE_NAMES,
        default=list(DEFAULT_MODES),
        help="server modes to compare (default: passthrough fixed-cost naive; mesh swaps biden.jpg onto the streamed face)",
    )
    parser.add_argument(
        "--warmup",
        type=float,
        default=3.0,
        help="seconds streamed before measuring, after every session got its first frame (default 3)",
    )
    parser.add_argument(
        "--window", type=float, default=None, help="measurement window in seconds (default 8; --quick: 4)"
    )
    parser.add_argument(
        "--cost",
        default="10:1",
        metavar="BATCH_MS:FRAME_MS",
        help="fixed cost of the fixed-cost chain and the naive server (default 10:1)",
    )
    parser.add_argument("--max-batch", type=int, default=8, help="facefuse --max-batch (default 8)")
    parser.add_argument("--max-wait-ms", type=float, default=4.0, help="facefuse --max-wait-ms (default 4)")
    parser.add_argument("--face", default="obama.jpg", help=f"photo from {FACES_DIR} to stream (default obama.jpg)")
    parser.add_argument(
        "--log-dir", type=Path, default=None, help="where the servers' logs go (default: a new temporary folder)"
    )
    parser.add_argument(
        "--device", default="cpu", choices=("cpu", "cuda", "auto"), help="the server's --device (default cpu)"
    )
    parser.add_argument(
        "--size", default="640x480", metavar="WxH", help="the clients' video size (default 640x480; even numbers)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="a short check that everything works: N in 1 2, 4 s window"
    )
    args = parser.parse_args(argv)
    try:
        batch_ms, frame_ms = (float(part) for part in args.cost.split(":"))
    except ValueError:
        parser.error(f"--cost must be BATCH_MS:FRAME_MS, not {args.cost!r}")
    try:
        width, height = (int(part) for part in args.size.lower().split("x"))
    except ValueError:
        parser.error(f"--size must be WxH, not {args.size!r}")
    if width < 16 or height < 16 or width % 2 or height % 2:
        parser.error("--size must be even numbers of at least 16")
    sessions = tuple(args.sessions) if args.sessions else ((1, 2) if args.quick else (1, 2, 4, 8))
    window = args.window if args.window is not None else (4.0 if args.quick else 8.0)
    if any(n < 1 or n > 32 for n in sessions):
        parser.error("--sessions must be between 1 and 32 (the server's default --max-sessions)")
    if window <= 0 or args.warmup < 0 or batch_ms < 0 or frame_ms < 0:
        parser.error("--window must be > 0; --warmup and the costs >= 0")
    return BenchSettings(
        sessions=sessions,
        modes=tuple(dict.fromkeys(args.modes)),
        warmup_s=args.warmup,
        window_s=window,
        batch_ms=batch_ms,
        frame_ms=frame_ms,
        max_batch=args.max_batch,
        max_wait_ms=args.max_wait_ms,
        face=args.face,
        log_dir=args.log_dir,
        device=args.device,
        width=width,
        height=height,
    )


# -- servers ----------------------------------------------------------------------------


def server_argv(mode: str, port: int, settings: BenchSettings) -> list[str]:
    if mode == "naive":
        return [sys.executable, str(NAIVE_SERVER), "--host", "127.0.0.1", "--port", str(port), "--ice-host", "127.0.0.1",
                "--batch-ms", f"{settings.batch_ms:g}", "--frame-ms", f"{settings.frame_ms:g}"]  # fmt: skip
    chain = mode if mode in ("passthrough", "mesh") else f"fixed-cost:{settings.batch_ms:g}:{settings.frame_ms:g}"
    return [sys.executable, "-m", "signaling.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
            "--ice-host", "127.0.0.1", "--chain", chain, "--device", settings.device,
            "--max-batch", str(settings.max_batch), "--max-wait-ms", f"{settings.max_wait_ms:g}"]  # fmt: skip


# -- clients ------------------------------------------------------------------------------


class LatencyLog:
    """What one client session received: arrival time and end-to-end latency per frame."""

    def __init__(self, source: ImageTrack, tag: int) -> None:
        self.source = source
        self.tag = tag
        self.frames: list[tuple[float, float]] = []  # (arrival, latency ms; nan if unknown)
        self.foreign = 0  # frames stamped with another session's tag
        self.unstamped = 0

    def __call__(self, received: ReceivedFrame) -> None:
        latency = math.nan
        stamp = read_stamp(received.frame)
        if stamp is None:
            self.unstamped += 1
        else:
            tag, index = split_value(stamp[0])
            if tag != self.tag:
                self.foreign += 1
            elif (sent := self.source.sent_at.get(index)) is not None:
                latency = (received.at - sent) * 1000
        self.frames.append((received.at, latency))

    def between(self, start: float, end: float) -> list[float]:
        return [latency for at, latency in self.frames if start <= at < end]


# -- one trial ----------------------------------------------------------------------------


@dataclass
class TrialResult:
    mode: str
    sessions: int
    fps: list[float] = field(default_factory=list)  # per session, over the window
    e2e_ms: list[float] = field(default_factory=list)  # every measured frame, all sessions
    server_p50: float | None = None
    server_p99: float | None = None
    server_cpu: float | None = None  # % of one core
    bench_cpu: float | None = None
    batch_mean: float | None = None
    drops_per_s: float | None = None  # per session: frames the server replaced unprocessed
    stages_ms: dict[str, float] = field(
        default_factory=dict
    )  # face chains: mean ms per batch of each stage, over the window
    notes: list[str] = field(default_factory=list)


async def _wait_drained(server: ServerProcess, client: FacefuseClient) -> int:
    """Waits until the server has no session left; returns how many remain at the timeout."""
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while True:
        sessions = (await client.request("GET", "/healthz")).get("sessions", 0)
        if not sessions or time.monotonic() > deadline:
            return sessions
        await asyncio.sleep(0.2)


async def _session_stats(client: FacefuseClient, sessions: list[ClientSession]) -> list[dict | None]:
    async def one(session: ClientSession) -> dict | None:
        try:
            return await client.request("GET", f"/api/sessions/{session.session_id}")
        except ServerError:
            return None  # the server already closed it

    return list(await asyncio.gather(*(one(session) for session in sessions)))


def _scheduler(health: dict) -> dict:
    return health.get("scheduler", {})


def _window_stages(before: dict, after: dict) -> dict[str, float]:
    """Mean ms per batch of each chain stage over the window, from the stage means since the
    server started (/healthz chain_stages_ms) and the batch counts at both ends."""
    batches0 = sum(_scheduler(before).get("batch_sizes", {}).values())
    batches1 = sum(_scheduler(after).get("batch_sizes", {}).values())
    means0, means1 = before.get("chain_stages_ms") or {}, after.get("chain_stages_ms") or {}
    if batches1 <= batches0:
        return {}
    return {
        stage: (mean * batches1 - means0.get(stage, 0.0) * batches0) / (batches1 - batches0)
        for stage, mean in means1.items()
    }


def _batch_mean(before: dict, after: dict) -> float | None:
    sizes = {int(k): v - before.get("batch_sizes", {}).get(k, 0) for k, v in after.get("batch_sizes", {}).items()}
    batches = sum(sizes.values())
    return sum(size * count for size, count in sizes.items()) / batches if batches else None


async def run_trial(
    server: ServerProcess, client: FacefuseClient, n: int, photo: np.ndarray, settings: BenchSettings
) -> TrialResult:
    result = TrialResult(server.mode, n)
    batched = server.mode != "naive"
    leftover = await _wait_drained(server, client)
    if leftover:
        result.notes.append(f"{leftover} session(s) of the previous trial still open on the server")

    framed = top_at_aspect(photo, settings.width, settings.height)  # a webcam's head and shoulders
    sources = [
        ImageTrack(framed, width=settings.width, height=settings.height, fps=FPS, tag=tag) for tag in range(1, n + 1)
    ]
    logs = [LatencyLog(source, tag) for tag, source in zip(range(1, n + 1), sources)]
    sessions: list[ClientSession] = []
    face_id = None
    if server.mode == "mesh":
        face_id = await client.upload_face(face_path("biden.jpg").read_bytes())
    try:
        for source, log in zip(sources, logs):
            session = await client.connect(source, codec=CODEC, on_frame=log, face_id=face_id)
            # The client keeps its last 90 decoded frames (~40 MB per 480p session); one is enough here.
            session.received = deque(maxlen=1)
            sessions.append(session)

        deadline = time.monotonic() + FIRST_FRAME_TIMEOUT_S
        while any(session.frames_received == 0 for session in sessions) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        silent = sum(session.frames_received == 0 for session in sessions)
        if silent:
            result.notes.append(f"{silent} of {n} session(s) got no frame within {FIRST_FRAME_TIMEOUT_S:.0f} s")
        await asyncio.sleep(settings.warmup_s)

        health0 = await client.request("GET", "/healthz") if batched else {}
        stats0 = await _session_stats(client, sessions) if batched else []
        start, server_cpu0, bench_cpu0 = time.monotonic(), server.cpu_seconds(), cpu_seconds(os.getpid())
        await asyncio.sleep(settings.window_s)
        end, server_cpu1, bench_cpu1 = time.monotonic(), server.cpu_seconds(), cpu_seconds(os.getpid())
        health1 = await client.request("GET", "/healthz") if batched else {}
        stats1 = await _session_stats(client, sessions) if batched else []
    finally:
        for session in sessions:
            await session.close()
        for source in sources:
            source.stop()

    elapsed = end - start
    result.server_cpu = (server_cpu1 - server_cpu0) / elapsed * 100
    result.bench_cpu = (bench_cpu1 - bench_cpu0) / elapsed * 100
    for log in logs:
        window = log.between(start, end)
        result.fps.append(len(window) / elapsed)
        result.e2e_ms += [latency for latency in window if not math.isnan(latency)]
    foreign, unstamped = sum(log.foreign for log in logs), sum(log.unstamped for log in logs)
    if foreign:
        result.notes.append(f"{foreign} frame(s) carried another session's stamp")
    if unstamped:
        result.notes.append(f"{unstamped} frame(s) without a readable stamp")
    if batched:
        result.batch_mean = _batch_mean(_scheduler(health0), _scheduler(health1))
        result.stages_ms = _window_stages(health0, health1)
        live = [(s0, s1) for s0, s1 in zip(stats0, stats1) if s0 is not None and s1 is not None]
        if len(live) < n:
            result.notes.append(f"{n - len(live)} session(s) closed by the server during the trial")
        p50s = [s1["latency_ms"]["p50"] for _, s1 in live if s1["latency_ms"]["p50"] is not None]
        p99s = [s1["latency_ms"]["p99"] for _, s1 in live if s1["latency_ms"]["p99"] is not None]
        result.server_p50 = sum(p50s) / len(p50s) if p50s else None
        result.server_p99 = sum(p99s) / len(p99s) if p99s else None
        if live:
            drops = sum(s1["frames_dropped"] - s0["frames_dropped"] for s0, s1 in live)
            result.drops_per_s = drops / len(live) / elapsed
            failed = sum(s1["frames_failed"] - s0["frames_failed"] for s0, s1 in live)
            if failed:
                result.notes.append(f"{failed} frame(s) failed processing (sent unprocessed)")
    return result


# -- the report ---------------------------------------------------------------------------


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    return platform.processor() or "?"


def _load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def header(settings: BenchSettings, started: datetime.datetime, load_start: str) -> list[str]:
    return [
        f"## facefuse streaming bench, {started:%Y-%m-%d %H:%M} UTC",
        "",
        f"Machine: nproc {len(os.sched_getaffinity(0))}, {_cpu_model()}, Python {platform.python_version()}, "
        f"aiortc {_version('aiortc')}, av {_version('av')}, aiohttp {_version('aiohttp')}; "
        f"load average {load_start} at the start, {_load()} at the end.",
        f"Settings: {settings.width}x{settings.height}@{FPS} {CODEC}, N in ({', '.join(map(str, settings.sessions))}), "
        f"warm-up {settings.warmup_s:g} s, window {settings.window_s:g} s, cost {settings.batch_ms:g} ms/batch + "
        f"{settings.frame_ms:g} ms/frame, facefuse --max-batch {settings.max_batch} --max-wait-ms {settings.max_wait_ms:g}, "
        f"face {settings.face}; all clients in this process (client/facefuse_client.py: the same tuned receive path as the server).",
        "",
    ]


def _ms(value: float | None, decimals: int = 0) -> str:
    return "-" if value is None else f"{value:.{decimals}f}"


def table(results: list[TrialResult]) -> list[str]:
    rows = [
        "| N | mode | fps/session mean (min) | e2e p50 ms | e2e p99 ms | server p50 ms | server p99 ms | server CPU % | mean batch | server drops/s/session | bench CPU % |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    order = {mode: index for index, mode in enumerate(MODE_NAMES)}
    for r in sorted(results, key=lambda r: (r.sessions, order[r.mode])):
        naive = r.mode == "naive"
        e2e = np.percentile(r.e2e_ms, [50, 99]) if r.e2e_ms else (None, None)
        fps = f"{np.mean(r.fps):.1f} ({min(r.fps):.1f})" if r.fps else "-"
        rows.append(
            f"| {r.sessions} | {r.mode} | {fps} | {_ms(e2e[0])} | {_ms(e2e[1])} "
            f"| {'n/a' if naive else _ms(r.server_p50, 1)} | {'n/a' if naive else _ms(r.server_p99, 1)} "
            f"| {_ms(r.server_cpu)} | {'n/a' if naive else ('-' if r.batch_mean is None else f'{r.batch_mean:.2f}')} "
            f"| {'n/a' if naive else ('-' if r.drops_per_s is None else f'{r.drops_per_s:.1f}')} | {_ms(r.bench_cpu)} |"
        )
    return rows


def stage_table(results: list[TrialResult]) -> list[str]:
    """The face chains' stages inside the server over the window (ms per batch), beside the table."""
    timed = [r for r in results if r.stages_ms]
    if not timed:
        return []
    stages = list(dict.fromkeys(stage for r in timed for stage in r.stages_ms))
    rows = [
        "",
        "Inside the server, over the window: mean ms per batch of each chain stage (the chain's own timer).",
        "",
    ]
    rows.append("| N | mode | " + " | ".join(stages) + " | sum |")
    rows.append("|---:|---|" + "---:|" * (len(stages) + 1))
    for r in sorted(timed, key=lambda r: (r.sessions, r.mode)):
        cells = " | ".join(f"{r.stages_ms.get(stage, 0.0):.1f}" for stage in stages)
        rows.append(f"| {r.sessions} | {r.mode} | {cells} | {sum(r.stages_ms.values()):.1f} |")
    return rows


LEGEND = [
    "",
    "- fps/session: frames each client received in the window / window; mean (min) over sessions.",
    "- e2e: frame handed to the client's encoder -> decoded frame back in the client, from the frame stamps, all "
    "sessions pooled: two encodes, two decodes and the server; the clients share this 2-core machine with the server.",
    "- server p50/p99: the server's own stats (decode done -> processed frame handed to its encoder; a 10 s rolling "
    "window read at the end of the measurement window), mean over sessions.",
    "- server CPU: utime + stime of the server process over the window, % of one core; bench CPU: the same for this "
    "process (all clients: encode, decode, stamps).",
    "- mean batch: frames per batch over the window (/healthz batch_sizes deltas). server drops: frames the server "
    "replaced before processing or encoding (latest frame wins).",
]


# -- main ---------------------------------------------------------------------------------


async def bench(settings: BenchSettings) -> None:
    started, load_start = datetime.datetime.now(datetime.UTC), _load()
    photo = face_rgb(settings.face)
    log_dir = settings.log_dir or Path(tempfile.mkdtemp(prefix="facefuse-bench-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    servers: dict[str, ServerProcess] = {}
    clients: dict[str, FacefuseClient] = {}
    results: list[TrialResult] = []
    trials = [(n, mode) for n in settings.sessions for mode in settings.modes]
    try:
        for mode in settings.modes:
            port = free_port()
            servers[mode] = ServerProcess(mode, server_argv(mode, port, settings), port, log_dir / f"{mode}.log")
            servers[mode].start()
            clients[mode] = FacefuseClient(servers[mode].url)
        await asyncio.gather(*(servers[mode].wait_ready(clients[mode]) for mode in settings.modes))

        for number, (n, mode) in enumerate(trials, 1):
            print(f"[{number}/{len(trials)}] {mode}, N={n} ...", file=sys.stderr, flush=True)
            if not servers[mode].alive():
                raise RuntimeError(f"the {mode} server died:\n{servers[mode].log_tail()}")
            try:
                results.append(await run_trial(servers[mode], clients[mode], n, photo, settings))
            except (TimeoutError, aiohttp.ClientError, ServerError, OSError) as exc:
                # One failed trial (a refused offer, an HTTP error) should not cost the others.
                print(f"    failed: {exc!r}", file=sys.stderr, flush=True)
                results.append(TrialResult(mode, n, notes=[f"trial failed: {exc!r}"]))
    finally:
        for client in clients.values():
            await client.close()
        for server in servers.values():
            server.stop()
        if results:
            report(settings, started, load_start, results, servers, log_dir, complete=len(results) == len(trials))


def report(
    settings: BenchSettings,
    started: datetime.datetime,
    load_start: str,
    results: list[TrialResult],
    servers: dict[str, ServerProcess],
    log_dir: Path,
    *,
    complete: bool,
) -> None:
    lines = header(settings, started, load_start)
    if not complete:
        lines.insert(1, "\n**Interrupted: partial results.**")
    print("\n".join(lines + table(results) + LEGEND + stage_table(results)))
    notes = [f"- {r.mode}, N={r.sessions}: {note}" for r in results for note in r.notes]
    for mode, server in servers.items():
        problems = server.log_problems()
        if problems:
            distinct = list(dict.fromkeys(problems))
            notes.append(
                f"- {mode} server log: {len(problems)} warning/error line(s), e.g. "
                + "; ".join(f"`{p}`" for p in distinct[:3])
            )
    if notes:
        print("\nNotes:\n" + "\n".join(notes))
    print(f"\nServer logs: {log_dir}")


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_args(argv)

    async def run() -> None:
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        await bench(settings)

    try:
        asyncio.run(run())
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("interrupted; servers and peers closed", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
