"""FFmpeg's own WHIP muxer (FFmpeg 9's `-f whip`, the build imageio-ffmpeg ships) publishing a still
photo with a tone: a WHIP client that is not ours, and one that answers no ICE consent checks.

It posts its offer with its candidates, sends H.264 and Opus, and DELETEs its session when its
input ends (`seconds`); killed, it sends nothing."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import imageio_ffmpeg


def publish_command(
    photo: Path, whip_url: str, seconds: float, *, fps: int = 30, token: str | None = None
) -> list[str]:
    command = [
        imageio_ffmpeg.get_ffmpeg_exe(), "-hide_banner", "-nostdin", "-loglevel", "info",
        "-re", "-loop", "1", "-framerate", str(fps), "-t", str(seconds), "-i", str(photo),
        "-re", "-f", "lavfi", "-t", str(seconds), "-i", "sine=frequency=440:sample_rate=48000",
        "-vf", "scale=320:240,format=yuv420p",
        "-c:v", "libx264", "-preset", "ultrafast", "-tune", "zerolatency", "-profile:v", "baseline",
        "-g", str(fps), "-bf", "0",
        "-c:a", "libopus", "-ar", "48000", "-ac", "2",
    ]  # fmt: skip
    if token is not None:
        command += ["-authorization", token]
    return [*command, "-f", "whip", whip_url]


@contextlib.contextmanager
def ffmpeg_publishing(photo: Path, whip_url: str, seconds: float, log_path: Path) -> Iterator[subprocess.Popen]:
    """FFmpeg publishing `photo` to `whip_url` for `seconds`, its output in `log_path`; killed on
    exit if it is still running."""
    with log_path.open("wb") as log:
        process = subprocess.Popen(publish_command(photo, whip_url, seconds), stdout=log, stderr=subprocess.STDOUT)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
