"""WHIP soak: FFmpeg's WHIP muxer (tests/support/ffmpeg_whip.py) publishes a still with a tone to
`facefuse serve` in its own process for a long time, and the session is read every few seconds:
whether it stays live, its frame rate in, and how it ended. FFmpeg answers no ICE consent checks,
so this is how long such a publisher lasts (tests/e2e/test_whip_ffmpeg.py holds a minute in CI).

    .venv/bin/python bench/whip_soak.py                      # 10 minutes
    .venv/bin/python bench/whip_soak.py --seconds 120 --every 5

Not a test: it asserts nothing. Prints a markdown table: a row per minute.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from streaming import _cpu_model, _load, _version  # bench/, next to this script

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.browser import live_sessions, served, wait_for  # noqa: E402
from support.ffmpeg_whip import ffmpeg_publishing  # noqa: E402
from support.photos import face_path  # noqa: E402

STREAM = "soak"


def the_session(server) -> dict | None:
    return next((s for s in live_sessions(server) if s["stream"] == STREAM), None)


def commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    return done.stdout.strip() or "?"


def soak(seconds: float, every: float, chain: str) -> list[str]:
    started = datetime.datetime.now(datetime.UTC)
    load_start = _load()
    samples: list[tuple[float, str, int]] = []  # (seconds since live, state, frames_in)
    with tempfile.TemporaryDirectory() as folder, served(Path(folder) / "server.log", chain=chain) as server:
        with ffmpeg_publishing(
            face_path("obama.jpg"), f"{server.base_url}/whip/{STREAM}", seconds, Path(folder) / "ffmpeg.log"
        ) as ffmpeg:
            first = wait_for(lambda: (s := the_session(server)) and s["state"] == "live" and s, 30, "live")
            session_id, live_at = first["session_id"], time.monotonic()
            samples.append((0.0, first["state"], first["frames_in"]))
            while ffmpeg.poll() is None:
                time.sleep(every)
                now = the_session(server)
                if now is None or now["session_id"] != session_id:
                    samples.append((time.monotonic() - live_at, "gone", samples[-1][2]))
                    break
                samples.append((time.monotonic() - live_at, now["state"], now["frames_in"]))
            ffmpeg_exit = ffmpeg.wait(timeout=30)
        wait_for(lambda: the_session(server) is None, 15, "the session gone")
        reason = server.closing_reason(session_id)
        lasted = time.monotonic() - live_at
    return report(samples, started, load_start, seconds, chain, ffmpeg_exit, reason, lasted)


def report(samples, started, load_start, seconds, chain, ffmpeg_exit, reason, lasted) -> list[str]:
    lines = [
        f"## WHIP soak: FFmpeg's WHIP muxer for {seconds:g} s, {started:%Y-%m-%d %H:%M} UTC",
        "",
        f"Machine: nproc {len(os.sched_getaffinity(0))}, {_cpu_model()}, Python {platform.python_version()}, "
        f"aiortc {_version('aiortc')}, aioice {_version('aioice')}, imageio-ffmpeg {_version('imageio-ffmpeg')}; "
        f"commit {commit()}; chain {chain}; load {load_start} at start, {_load()} at end",
        "",
        "| minute | state at its end | frames in | fps in |",
        "|---|---|---|---|",
    ]
    minute_ends = [s for s in samples if s[0] > 0]
    by_minute: dict[int, tuple[float, str, int]] = {}
    for sample in minute_ends:
        by_minute[int((sample[0] - 1e-9) // 60)] = sample  # the minute's last sample
    previous = samples[0]
    for minute in sorted(by_minute):
        at, state, frames = by_minute[minute]
        fps = f"{(frames - previous[2]) / (at - previous[0]):.1f}" if state != "gone" and at > previous[0] else "–"
        lines.append(f"| {minute + 1} | {state} | {frames} | {fps} |")
        previous = by_minute[minute]
    lines += [
        "",
        f"Live for {lasted:.0f} s; FFmpeg exited {ffmpeg_exit}; the server closed the session: {reason}.",
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=600.0, help="how long FFmpeg publishes")
    parser.add_argument("--every", type=float, default=10.0, help="seconds between reads of the session")
    parser.add_argument("--chain", default="passthrough")
    args = parser.parse_args()
    print("\n".join(soak(args.seconds, args.every, args.chain)))


if __name__ == "__main__":
    main()
