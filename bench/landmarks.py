"""Face-mesh benchmark: median latency of FaceMesher.landmarks and crop_faces per batch size.

Real crops (the test photos, repeated to fill the batch). Prints a markdown table.

    .venv/bin/python bench/landmarks.py                    # CPU, 2 threads, batches 1 and 8
    .venv/bin/python bench/landmarks.py --device cuda --half --batches 1 8 32

Not a test: it asserts nothing and the numbers depend on the machine's load.
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from timing import median_ms  # noqa: E402 (bench/, next to this script)

from pipeline.landmarks import FaceMesher, crop_faces  # noqa: E402 (importable once the path is set)
from support.photos import face_rgb  # noqa: E402

FACE_BOXES = {  # the same boxes as tests/pipeline/test_landmarks.py
    "obama.jpg": (370, 140, 620, 390),
    "obama2.jpg": (205, 260, 480, 625),
    "obama3.jpg": (630, 280, 910, 630),
    "biden.jpg": (410, 200, 710, 540),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--half", action="store_true")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    mesher = FaceMesher(device, half=args.half)

    # one 640x480 frame per face (the photos' faces, scaled into 640x480 frames by cropping)
    frames, boxes = [], []
    for name, (x0, y0, x1, y1) in FACE_BOXES.items():
        image = face_rgb(name)
        cx, cy = (x0 + x1) // 2, (y0 + y1) // 2
        left, top = max(0, min(cx - 320, image.shape[1] - 640)), max(0, min(cy - 240, image.shape[0] - 480))
        frame = np.zeros((480, 640, 3), np.uint8)
        part = image[top : top + 480, left : left + 640]
        frame[: part.shape[0], : part.shape[1]] = part
        frames.append(frame)
        boxes.append((x0 - left, y0 - top, x1 - left, y1 - top))

    print(
        f"device {device}, {'fp16' if args.half else 'fp32'}, {torch.get_num_threads()} threads, torch {torch.__version__}"
    )
    print("| batch | crop_faces ms (640x480 frames) | landmarks ms | landmarks ms/face |")
    print("|---:|---:|---:|---:|")
    for batch in args.batches:
        picks = [i % len(frames) for i in range(batch)]
        frame_batch = torch.from_numpy(np.stack([frames[i] for i in picks])).to(device)
        box_batch = torch.tensor([boxes[i] for i in picks], dtype=torch.float32, device=device)
        index = torch.arange(batch, device=device)
        crops, _ = crop_faces(frame_batch, box_batch, index)
        crop_ms = median_ms(functools.partial(crop_faces, frame_batch, box_batch, index), device, args.repeats)
        mesh_ms = median_ms(functools.partial(mesher.landmarks, crops), device, args.repeats)
        print(f"| {batch} | {crop_ms:.2f} | {mesh_ms:.2f} | {mesh_ms / batch:.2f} |")


if __name__ == "__main__":
    main()
