"""What a processed second of video costs the node, beside what it is charged: CPU time of the chain
(per frame at each batch size, in this process: no WebRTC) and of one session's video codecs (VP8
decode of what arrives and encode of what leaves, as aiortc does them with libvpx), by chain and
frame size, at 30 frames a second; and the token price of that second (quota/settings.py).

CPU-ms is process time (all threads), so it says what share of the machine's cores a session
takes: 1000 CPU-ms per second is one core. On CUDA the chain's device time is its wall time (the
device is synchronised after each batch) and its CPU time is the host's share.

    .venv/bin/python bench/cost.py [--device cpu|cuda] [--chains passthrough mesh] [--sizes 640x480 1280x720]

Not a test: it asserts nothing. Prints a markdown table.
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
import torch
from face_chain import frame  # bench/, next to this script

from pipeline.chain import ChainItem
from pipeline.chains import create_chain
from pipeline.faces import FaceLibrary
from quota.settings import QuotaSettings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.photos import face_rgb as photo  # noqa: E402 (the photos are found where the tests find them)

FPS = 30
SETTLE_BATCHES = 12  # tracking settles (the first frames detect)


def timed(run, repeats: int, sync) -> tuple[float, float]:
    """(CPU ms, wall ms) per call, means over `repeats` calls."""
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(repeats):
        run()
        if sync:
            sync()
    return (time.process_time() - cpu) * 1000 / repeats, (time.perf_counter() - wall) * 1000 / repeats


def codec_cpu_ms(image: np.ndarray, width: int, height: int, frames: int) -> tuple[float, float]:
    """(decode, encode) CPU ms per frame of VP8 at the frame's size, 1.5 Mbit/s, realtime."""
    encoder = av.CodecContext.create("libvpx", "w")
    encoder.width, encoder.height, encoder.pix_fmt = width, height, "yuv420p"
    encoder.time_base = fractions.Fraction(1, FPS)
    encoder.bit_rate = 1_500_000
    encoder.options = {"deadline": "realtime", "cpu-used": "4", "lag-in-frames": "0"}
    base = av.VideoFrame.from_ndarray(image, format="yuv420p")
    packets = []
    started = time.process_time()
    for index in range(frames):
        moving = base.to_ndarray().copy()
        moving[: height // 8] = (index * 7) % 255  # a changing band: not a still, which costs almost nothing
        video = av.VideoFrame.from_ndarray(moving, format="yuv420p")
        video.pts = index
        packets += encoder.encode(video)
    packets += encoder.encode(None)
    encode = (time.process_time() - started) * 1000 / frames
    decoder = av.CodecContext.create("libvpx", "r")
    started = time.process_time()
    for packet in packets:
        decoder.decode(packet)
    decode = (time.process_time() - started) * 1000 / frames
    return decode, encode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--chains", nargs="+", default=["passthrough", "mesh"])
    parser.add_argument("--sizes", nargs="+", default=["640x480", "1280x720"])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else None
    prices = QuotaSettings()

    print(f"## cost per processed second, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC")
    print(
        f"\nDevice {device}, torch {torch.__version__}, {torch.get_num_threads()} threads, nproc {os.cpu_count()}, "
        f"{platform.processor() or platform.machine()}, load {' '.join(f'{v:.2f}' for v in os.getloadavg())}; "
        f"{args.repeats} batches after {SETTLE_BATCHES} to settle; every frame its own session (one face); "
        f"at {FPS} fps. CPU-ms per second: 1000 is one core.\n"
    )
    print(
        "| chain | frame | batch | chain CPU-ms/frame | chain wall-ms/frame | decode+encode CPU-ms/frame "
        "| CPU-ms per processed second | tokens per second | CPU-ms per token |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    source = photo("biden.jpg")
    for name in args.chains:
        faces = FaceLibrary()
        chain = create_chain(name, device, faces)
        chain.warm_up(max(args.batches))
        analysis = getattr(chain, "analysis", None)
        face_id = None
        if analysis is not None:
            face_id = faces.add(
                source, owner="bench", format="jpeg", size_bytes=0, analysis=analysis.analyse(source)
            ).id
        for size in args.sizes:
            width, height = (int(part) for part in size.split("x"))
            image = frame(photo("obama.jpg"), width, height)
            decode, encode = codec_cpu_ms(image, width, height, FPS * 2)
            price = prices.price_per_second(width, height)
            for batch in args.batches:
                options = {"face_id": face_id} if face_id else {}
                items = [ChainItem(f"{name}-{size}-{batch}-{n}", image, options) for n in range(batch)]
                for _ in range(SETTLE_BATCHES):
                    chain.run(items)
                cpu, wall = timed(lambda chain=chain, items=items: chain.run(items), args.repeats, sync)
                per_frame_cpu = cpu / batch
                per_second = (per_frame_cpu + decode + encode) * FPS
                print(
                    f"| {name} | {size} | {batch} | {per_frame_cpu:.1f} | {wall / batch:.1f} | {decode + encode:.1f} "
                    f"| {per_second:.0f} | {price:g} | {per_second / price:.0f} |"
                )


if __name__ == "__main__":
    main()
