"""Face detector benchmark: median milliseconds per batch of 640x480 frames (a real photo).

    .venv/bin/python bench/detect.py                      # CPU, 2 threads, batches 1 and 4
    .venv/bin/python bench/detect.py --threads 4 --batches 1 2 4 8
    .venv/bin/python bench/detect.py --device cuda --half

Columns: letterbox (resize + pad + normalise on the device), forward (RetinaFace alone), detect
(everything: letterbox, forward, decode, NMS, per-image results). Prints a markdown table.
Not a test: it asserts nothing and the numbers depend on the machine's load.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from timing import median_ms  # bench/, next to this script

from pipeline.detect import FaceDetector
from support.photos import face_rgb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--input-size", type=int, default=640)
    parser.add_argument("--half", action="store_true")
    parser.add_argument("--reps", type=int, default=50)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    detector = FaceDetector(device, input_size=args.input_size, half=args.half)
    photo = torch.from_numpy(face_rgb("obama.jpg")[:728]).permute(2, 0, 1)[None].float()
    frame = F.interpolate(photo, size=(480, 640), mode="bilinear", antialias=True).round().clamp(0, 255)
    frame = frame.to(torch.uint8)[0].permute(1, 2, 0).contiguous().to(device)

    input_shape = "x".join(str(side) for side in reversed(detector.letterbox(frame[None])[0].shape[2:]))
    print(
        f"device {device}, {'fp16' if args.half else 'fp32'}, {args.threads} CPU threads, torch {torch.__version__}, "
        f"640x480 frames scaled to fit {args.input_size}x{args.input_size} (network input {input_shape})\n"
    )
    print("| batch | letterbox ms | forward ms | detect ms | detect ms per frame | faces |")
    print("|---:|---:|---:|---:|---:|---|")
    for n in args.batches:
        print(row(detector, frame[None].expand(n, -1, -1, -1).contiguous(), args.reps))


def row(detector: FaceDetector, frames: torch.Tensor, reps: int) -> str:
    device, n = detector.device, frames.shape[0]
    with torch.inference_mode():
        batch = detector.letterbox(frames)[0].to(detector.dtype)
        letterbox = median_ms(lambda: detector.letterbox(frames), device, reps)
        forward = median_ms(lambda: detector.model(batch), device, reps)
    detect = median_ms(lambda: detector.detect(frames), device, reps)
    faces = [len(found) for found in detector.detect(frames)]
    return f"| {n} | {letterbox:.2f} | {forward:.1f} | {detect:.1f} | {detect / n:.1f} | {faces} |"


if __name__ == "__main__":
    main()
