"""Face chain benchmark: per-stage milliseconds of the `mesh` chain per batch, steady state.

Each frame of a batch is a separate session streaming the same real photo (so tracking is in
its steady state: the detector runs only periodically); stages: upload, convert (I420 <-> RGB,
both ways), detect, landmarks, track, swap (warp + masks + colour + multiband blend), blend
(fade + badge), download. Prints a markdown table.

    .venv/bin/python bench/face_chain.py [--device cpu|cuda] [--batches 1 4 8] [--sizes 640x480 1280x720]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
from pathlib import Path

import av
import numpy as np
import torch

from client.still_picture import top_at_aspect
from pipeline.chain import ChainItem
from pipeline.chains import create_chain
from pipeline.faces import FaceLibrary
from pipeline.host_memory import keep_freed_memory
from pipeline.stage_timer import StageTimer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.photos import face_rgb as photo  # noqa: E402 (the photos are found where the tests find them)

STAGES = ("upload", "convert", "detect", "landmarks", "track", "swap", "hands", "blend", "download")


def frame(rgb: np.ndarray, width: int, height: int, inset: bool = False) -> np.ndarray:
    """The photo cropped to the frame's aspect (top part, where the face is) as I420; inset: shrunk
    to 3/8 of the frame's width in its lower right corner, on grey (a face cam in a streamed scene)."""
    crop = top_at_aspect(rgb, width, height)
    if not inset:
        return av.VideoFrame.from_ndarray(crop, format="rgb24").reformat(width, height, format="yuv420p").to_ndarray()
    small_w, small_h = width * 3 // 8 // 2 * 2, height * 3 // 8 // 2 * 2
    small = av.VideoFrame.from_ndarray(crop, format="rgb24").reformat(small_w, small_h).to_ndarray(format="rgb24")
    scene = np.full((height, width, 3), 90, np.uint8)
    scene[height - small_h - 16 : height - 16, width - small_w - 16 : width - 16] = small
    return av.VideoFrame.from_ndarray(scene, format="rgb24").reformat(format="yuv420p").to_ndarray()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--sizes", nargs="+", default=["640x480", "1280x720"])
    parser.add_argument(
        "--repeats", type=int, default=15, help="batches measured (15: one palm look per session on a still frame)"
    )
    parser.add_argument("--hands", choices=("on", "off"), default="on", help="as the server's --hands")
    parser.add_argument("--inset", action="store_true", help="the face as a small face cam in a corner of the frame")
    parser.add_argument(
        "--keep-freed-memory",
        choices=("on", "off"),
        default="on",
        help="glibc keeps freed memory for reuse, as the server sets it (pipeline/host_memory.py)",
    )
    args = parser.parse_args()
    kept = args.keep_freed_memory == "on" and keep_freed_memory()
    device = torch.device(args.device)
    faces = FaceLibrary()
    # as the server builds it: fp16 models on CUDA, hands as asked
    chain = create_chain("mesh", device, faces, hands=args.hands == "on")
    chain.warm_up()
    source = photo("biden.jpg")
    face_id = faces.add(source, owner="bench", format="jpeg", size_bytes=0, analysis=chain.analysis.analyse(source)).id
    sync = torch.cuda.synchronize if device.type == "cuda" else None

    print(f"## mesh chain stages, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC")
    print(
        f"\nDevice {device}, torch {torch.__version__}, {torch.get_num_threads()} threads, nproc {os.cpu_count()}, "
        f"{platform.processor() or platform.machine()}; freed memory kept: {'yes' if kept else 'no'}; "
        f"{args.repeats} batches after tracking settled: stage medians, "
        "hands and total as means (they include the periodic looks); "
        "every frame is its own session (one face each)"
        f"{', the face in a small inset (--inset)' if args.inset else ''}.\n"
    )
    print(
        "| frame | batch | "
        + " | ".join("hands (mean)" if s == "hands" else s for s in STAGES)
        + " | total ms | ms per frame |"
    )
    print("|---|---:|" + "---:|" * (len(STAGES) + 2))
    for size in args.sizes:
        width, height = (int(part) for part in size.split("x"))
        image = frame(photo("obama.jpg"), width, height, args.inset)
        for batch in args.batches:
            items = [ChainItem(f"{size}-{batch}-{n}", image, {"face_id": face_id}) for n in range(batch)]
            for _ in range(12):  # let tracking settle (first frames detect)
                chain.run(items)
            rows, totals = [], []
            for _ in range(args.repeats):
                chain.timer = StageTimer(sync)
                started = time.perf_counter()
                chain.run(items)
                if sync:
                    sync()
                totals.append((time.perf_counter() - started) * 1000)
                rows.append(chain.timer.last)
            # medians, except hands: on the CPU they look on some frames only, so the mean says what they cost
            medians = [
                float((np.mean if stage == "hands" else np.median)([row.get(stage, 0.0) for row in rows]))
                for stage in STAGES
            ]
            total = float(np.mean(totals))  # a mean: what the periodic looks (detector, palms) cost shows
            cells = " | ".join(f"{value:.1f}" for value in medians)
            print(f"| {size} | {batch} | {cells} | {total:.1f} | {total / batch:.1f} |")


if __name__ == "__main__":
    main()
