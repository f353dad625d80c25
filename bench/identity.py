"""Identity benchmark: median latency of align_faces, SFace and IdentityEmbedder.embed per batch size.

Real faces (the test photos' 600x600 windows around the face, repeated to fill the batch, one face
per frame). Prints a markdown table.

    .venv/bin/python bench/identity.py                    # CPU, 2 threads, batches 1 and 8
    .venv/bin/python bench/identity.py --device cuda --half --batches 1 8 32

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

from pipeline.detect import FaceDetector  # noqa: E402 (importable once the path is set)
from pipeline.identity import IdentityEmbedder, align_faces  # noqa: E402
from support.server import face_rgb  # noqa: E402

PHOTOS = ("obama.jpg", "obama2.jpg", "obama3.jpg", "biden.jpg")
SIDE = 600


def face_frames(detector: FaceDetector) -> tuple[np.ndarray, torch.Tensor]:
    """[4, 600, 600, 3] frames, one face each, and the faces' key points [4, 5, 2]."""
    frames = []
    for name in PHOTOS:
        image = face_rgb(name)
        centre = detector.detect(torch.from_numpy(image)[None])[0].keypoints[0].mean(dim=0)
        left = int(min(max(float(centre[0]) - SIDE / 2, 0), image.shape[1] - SIDE))
        top = int(min(max(float(centre[1]) - SIDE / 2, 0), image.shape[0] - SIDE))
        frames.append(image[top : top + SIDE, left : left + SIDE])
    stacked = np.stack(frames)
    found = detector.detect(torch.from_numpy(stacked))
    return stacked, torch.cat([faces.keypoints[:1] for faces in found])


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
    frames, keypoints = face_frames(FaceDetector(torch.device("cpu")))
    embedder = IdentityEmbedder(device, half=args.half)

    print(
        f"device {device}, {'fp16' if args.half else 'fp32'}, {torch.get_num_threads()} threads, torch {torch.__version__}"
    )
    print(f"| batch | align_faces ms ({SIDE}x{SIDE} frames) | SFace ms | embed ms | embed ms/face |")
    print("|---|---|---|---|---|")
    for batch in args.batches:
        pick = [i % len(PHOTOS) for i in range(batch)]
        batch_frames = torch.from_numpy(frames[pick]).to(device)
        batch_points = keypoints[pick].to(device)
        frame_index = torch.arange(batch, device=device)
        crops, _ = align_faces(batch_frames, batch_points, frame_index)
        with torch.inference_mode():
            align = median_ms(
                functools.partial(align_faces, batch_frames, batch_points, frame_index), device, args.repeats
            )
            model = median_ms(functools.partial(embedder.embed_aligned, crops), device, args.repeats)
        embed = median_ms(
            functools.partial(embedder.embed, batch_frames, batch_points, frame_index), device, args.repeats
        )
        print(f"| {batch} | {align:.2f} | {model:.2f} | {embed:.2f} | {embed / batch:.2f} |")


if __name__ == "__main__":
    main()
