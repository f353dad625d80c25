"""Processed fps per session against sessions offered, before and after admission by capacity.

"before": `--floor-fps 1`, every session offered is processed, all slowing together (the node as
it was before issue #36, which admitted up to --max-sessions whatever its device carried). "after": `--max-sessions auto`, the capacity model admits what
the device carries at the floor rate and the rest wait in line (their own video comes back
unprocessed). One server per mode and count, the mesh chain by default, 30 fps clients in this
process, a face uploaded and swapped. Prints a markdown table; with --out, appends it to a file.

    .venv/bin/python bench/capacity.py --sessions 1 2 3 4 --out bench/results/DATE-capacity.md
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from report import commit, emit  # bench/, next to this script
from server_process import ServerProcess, free_port

from client.facefuse_client import ClientSession, FacefuseClient
from client.image_track import ImageTrack
from client.still_picture import top_at_aspect

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests"))
from support.photos import face_path, face_rgb  # noqa: E402 (the photos are found where the tests find them)

FPS = 30
MODES = {"before": ("--floor-fps", "1"), "after": ("--floor-fps", "24")}
FIRST_FRAME_TIMEOUT_S = 60.0


@dataclass
class Trial:
    mode: str
    offered: int
    processed_fps: list[float] = field(default_factory=list)  # per processed session
    waiting: int = 0
    shed: list[str] = field(default_factory=list)  # the shed step of each processed session that has one
    received_fps: list[float] = field(default_factory=list)  # per session: what came back, processed or not
    planned_fps: float | None = None
    notes: list[str] = field(default_factory=list)


async def run_trial(args: argparse.Namespace, mode: str, offered: int, log_dir: Path) -> Trial:
    trial = Trial(mode, offered)
    port = free_port()
    argv = [sys.executable, "-m", "signaling.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
            "--ice-host", "127.0.0.1", "--chain", args.chain, "--device", "cpu", *MODES[mode]]  # fmt: skip
    server = ServerProcess(mode, argv, port, log_dir / f"{mode}-{offered}.log")
    server.start()
    sources: list[ImageTrack] = []
    sessions: list[ClientSession] = []
    try:
        async with FacefuseClient(server.url) as client:
            await server.wait_ready(client)
            face_id = await client.upload_face(face_path("biden.jpg").read_bytes()) if args.chain == "mesh" else None
            framed = top_at_aspect(face_rgb("obama.jpg"), args.width, args.height)
            for tag in range(1, offered + 1):
                source = ImageTrack(framed, width=args.width, height=args.height, fps=FPS, tag=tag)
                sources.append(source)
                sessions.append(await client.connect(source, face_id=face_id))
                await asyncio.sleep(args.apart)  # arrivals a little apart, as users arrive
            deadline = time.monotonic() + FIRST_FRAME_TIMEOUT_S
            while any(s.frames_received == 0 for s in sessions) and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            await asyncio.sleep(args.warmup)
            before = [await client.request("GET", f"/api/sessions/{s.session_id}") for s in sessions]
            received0 = [s.frames_received for s in sessions]
            started = time.monotonic()
            await asyncio.sleep(args.window)
            elapsed = time.monotonic() - started
            after = [await client.request("GET", f"/api/sessions/{s.session_id}") for s in sessions]
            received = [s.frames_received - r0 for s, r0 in zip(sessions, received0)]
            health = await client.request("GET", "/healthz")
            trial.planned_fps = health["capacity"]["planned_fps"]
            for s0, s1, count in zip(before, after, received):
                trial.received_fps.append(count / elapsed)
                if s1["capacity"]["queued"]:
                    trial.waiting += 1
                else:
                    trial.processed_fps.append((s1["frames_processed"] - s0["frames_processed"]) / elapsed)
                    if s1["capacity"]["shed_step"] != "full":
                        trial.shed.append(s1["capacity"]["shed_step"])
            for session in sessions:
                await session.close()
    finally:
        for source in sources:
            source.stop()
        server.stop()
    return trial


def _mean_min(values: list[float]) -> str:
    return f"{sum(values) / len(values):.1f} ({min(values):.1f})" if values else "-"


def table(trials: list[Trial]) -> list[str]:
    rows = [
        "| sessions offered | mode | processed | shed | waiting | processed fps per processed session, mean (min) "
        "| fps back per session, mean (min) |",
        "|---:|---|---:|---|---:|---:|---:|",
    ]
    for trial in sorted(trials, key=lambda t: (t.offered, t.mode != "before")):
        rows.append(
            f"| {trial.offered} | {trial.mode} | {len(trial.processed_fps)} | {', '.join(trial.shed) or '-'} "
            f"| {trial.waiting} "
            f"| {_mean_min(trial.processed_fps)} | {_mean_min(trial.received_fps)} |"
        )
    return rows


def header(args: argparse.Namespace, started: datetime.datetime) -> list[str]:
    return [
        f"### capacity, {started:%Y-%m-%d %H:%M} UTC",
        "",
        f"Commit {commit()}; nproc {len(os.sched_getaffinity(0))}, Python "
        f"{platform.python_version()}, load average {' '.join(f'{v:.2f}' for v in os.getloadavg())} at the end. "
        f"Chain {args.chain} on the CPU, {args.width}x{args.height} clients at {FPS} fps in this process (they "
        f"share the machine's cores with the server), {args.apart:g} s apart; warm-up {args.warmup:g} s, "
        f"window {args.window:g} s. --max-sessions auto; before: --floor-fps 1 (every session offered is "
        f"processed, as before the capacity model); after: --floor-fps 24 (the default; target 30).",
        "",
    ]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--chain", default="mesh", help="mesh (default), or e.g. fixed-cost:4:12")
    parser.add_argument("--size", default="640x480")
    parser.add_argument("--apart", type=float, default=1.0, help="seconds between arrivals")
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--window", type=float, default=10.0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    args.width, args.height = (int(part) for part in args.size.lower().split("x"))
    started = datetime.datetime.now(datetime.UTC)
    trials = []
    with tempfile.TemporaryDirectory(prefix="facefuse-capacity-") as logs:
        for offered in args.sessions:
            for mode in MODES:
                trial = await run_trial(args, mode, offered, Path(logs))
                print(
                    f"{mode} {offered}: {_mean_min(trial.processed_fps)} processed, {trial.waiting} waiting", flush=True
                )
                trials.append(trial)
    lines = [*header(args, started), *table(trials), ""]
    emit(lines, args.out)


if __name__ == "__main__":
    asyncio.run(main())
