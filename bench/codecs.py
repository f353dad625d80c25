"""What a session's video costs the node's cores by codec, size and encoder threads: CPU-ms per
frame to decode what arrives and to encode what leaves, and the sessions a core carries at 30 fps.

VP8 as libvpx with aiortc's real-time settings, on one thread (stream/aiortc_internals/vp8_encoder.py)
and on two (what aiortc itself picks above 640x480 on 3 cores or more); H.264 as libx264 ultrafast,
zerolatency, baseline (FastH264Encoder). The picture is a real photo framed as a webcam frames it,
with a band that changes every frame and a camera sensor's noise (a still costs an encoder almost
nothing). Decode with the
decoder aiortc uses for each. Prints a markdown table; --out appends it to a file.

    .venv/bin/python bench/codecs.py --out bench/results/DATE-codecs.md
"""

from __future__ import annotations

import argparse
import datetime
import fractions
import os
import platform
import sys
import time
from pathlib import Path

import av
import numpy as np
from report import commit, emit  # bench/, next to this script

from client.still_picture import top_at_aspect

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests"))
from support.photos import face_rgb  # noqa: E402 (the photos are found where the tests find them)

FPS = 30
BITRATE = 1_500_000
SENSOR_NOISE = 2.0  # grey levels, standard deviation: an indoor webcam's
ENCODERS = {
    "VP8, 1 thread": ("libvpx", 1),
    "VP8, 2 threads": ("libvpx", 2),
    "H.264 ultrafast": ("libx264", 1),
}
DECODERS = {"libvpx": "libvpx", "libx264": "h264"}


def encoder(codec: str, threads: int, width: int, height: int) -> av.CodecContext:
    context = av.CodecContext.create(codec, "w")
    context.width, context.height, context.pix_fmt = width, height, "yuv420p"
    context.time_base = fractions.Fraction(1, FPS)
    context.framerate = fractions.Fraction(FPS, 1)
    context.bit_rate = BITRATE
    context.thread_count = threads
    if codec == "libvpx":
        context.options = {"deadline": "realtime", "cpu-used": "-6", "lag-in-frames": "0"}
    else:
        context.options = {"preset": "ultrafast", "tune": "zerolatency"}
        context.profile = "Baseline"
    return context


def cpu_ms_per_frame(codec: str, threads: int, picture: np.ndarray, frames: int) -> tuple[float, float]:
    """(encode, decode) CPU-ms per frame."""
    height, width = picture.shape[0] * 2 // 3, picture.shape[1]
    context = encoder(codec, threads, width, height)
    packets = []
    noise = np.random.default_rng(0).normal(0, SENSOR_NOISE, (8, *picture.shape))  # a camera's sensor
    started = time.process_time()
    for index in range(frames):
        moving = np.clip(picture + noise[index % len(noise)], 0, 255).astype(np.uint8)
        moving[: height // 8] = (index * 7) % 255
        frame = av.VideoFrame.from_ndarray(moving, format="yuv420p")
        frame.pts = index
        packets += context.encode(frame)
    packets += context.encode(None)
    encode = (time.process_time() - started) * 1000 / frames
    decoder = av.CodecContext.create(DECODERS[codec], "r")
    started = time.process_time()
    for packet in packets:
        decoder.decode(packet)
    decode = (time.process_time() - started) * 1000 / frames
    return encode, decode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["640x480", "1280x720"])
    parser.add_argument("--frames", type=int, default=90)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    started = datetime.datetime.now(datetime.UTC)
    rows = [
        "| size | encoder | encode CPU-ms/frame | decode CPU-ms/frame | sessions a core carries at 30 fps |",
        "|---|---|---:|---:|---:|",
    ]
    for size in args.sizes:
        width, height = (int(part) for part in size.split("x"))
        rgb = top_at_aspect(face_rgb("obama.jpg"), width, height)
        picture = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p").to_ndarray().astype(float)
        for name, (codec, threads) in ENCODERS.items():
            cpu_ms_per_frame(codec, threads, picture, 10)  # the libraries' first use
            encode, decode = cpu_ms_per_frame(codec, threads, picture, args.frames)
            rows.append(f"| {size} | {name} | {encode:.1f} | {decode:.1f} | {1000 / (FPS * (encode + decode)):.1f} |")
    lines = [
        f"### codecs, {started:%Y-%m-%d %H:%M} UTC",
        "",
        f"Commit {commit()}; nproc {len(os.sched_getaffinity(0))}, Python "
        f"{platform.python_version()}, PyAV {av.__version__}; load average "
        f"{' '.join(f'{v:.2f}' for v in os.getloadavg())} at the end; {args.frames} frames each, "
        f"{BITRATE // 1000} kbit/s.",
        "",
        *rows,
        "",
    ]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
