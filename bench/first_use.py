"""What each model's first call at an input shape costs after the server's warm-up, against the
second call at the same shape: on CUDA a shape's kernels load and get picked on first use, so a
shape the warm-up does not run costs a live batch that time.

    python bench/first_use.py --device cuda --max-batch 8

The chain is built and warmed up as the server does (create_chain, warm_up(max_batch)); then the
detector reads upright 640x480 frames and quarter-turned ones (480x640: the looks for faces of
tracking/look_schedule.py), the face mesh and the hands' models their batch sizes.
Not a test: it asserts nothing and the numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.chains import create_chain  # noqa: E402
from pipeline.faces import FaceLibrary  # noqa: E402
from pipeline.hands.hand_landmarks import Rois  # noqa: E402


def timed_ms(run: Callable[[], object], device: torch.device) -> float:
    start = time.perf_counter()
    run()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench/first_use.py", description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--max-batch", type=int, default=8, help="the server's --max-batch (default 8)")
    args = parser.parse_args()
    device = torch.device(args.device)
    chain = create_chain("mesh", device, FaceLibrary())
    started = time.perf_counter()
    chain.warm_up(args.max_batch)
    print(
        f"device {device}, torch {torch.__version__}; warm_up({args.max_batch}) took {time.perf_counter() - started:.1f} s\n"
    )
    print("| model | input | first call ms | second call ms |")
    print("|---|---|---:|---:|")

    def row(model: str, shape: str, run: Callable[[], object]) -> None:
        with torch.inference_mode():
            first, second = timed_ms(run, device), timed_ms(run, device)
        print(f"| {model} | {shape} | {first:.1f} | {second:.1f} |", flush=True)

    sizes = sorted({1, 2, 4, args.max_batch, 2 * args.max_batch})
    for n in sizes:
        upright = torch.full((n, 480, 640, 3), 128, dtype=torch.uint8, device=device)
        turned = torch.full((n, 640, 480, 3), 128, dtype=torch.uint8, device=device)
        row("detector", f"{n} x 640x480", lambda frames=upright: chain.detector.detect(frames))
        row("detector", f"{n} x 480x640 (turned)", lambda frames=turned: chain.detector.detect(frames))
    for n in sizes:
        crops = torch.zeros(n, 3, 192, 192, device=device)
        row("face mesh", f"{n} crops", lambda crops=crops: chain.mesher.landmarks(crops))
    if chain.hands is not None:
        frames = torch.full((1, 3, 480, 640), 0.5, device=device)
        for n in sizes:
            batch = frames.expand(n, -1, -1, -1).contiguous()
            row("palms", f"{n} x 640x480", lambda batch=batch: chain.hands.palms.detect(batch))
            hands = Rois(
                torch.full((n, 2), 200.0, device=device),
                torch.full((n,), 96.0, device=device),
                torch.zeros(n, device=device),
            )
            row(
                "hand landmarks",
                f"{n} hands in 1 frame",
                lambda hands=hands: chain.hands.landmarker.landmarks_in(frames, [hands]),
            )


if __name__ == "__main__":
    main()
