"""What one steady batch of the mesh chain asks of torch, by faces in the batch: aten ops, host reads,
and CPU-ms per face. Every frame is its own session with one face, tracking settled.

A host read is a call that makes the host wait for the device's data: `.item()`, `float()`,
`int()`, `bool()`, `.tolist()`, `.numpy()` and `.cpu()` of a tensor (seen as torch functions), `nonzero`
(its size is data) and `lift_fresh` (a tensor from Python data, uploaded; both seen as aten ops). On CUDA each is a sync and each op a launch:
issue #37 wants the steady batch at 16 faces within 1.3x the ops of 1 face and at most 6 host reads.

    .venv/bin/python bench/device_path.py [--faces 1 4 16] [--batches 10] [--out FILE]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
from pathlib import Path

import torch

from pipeline.chain import ChainItem
from pipeline.chains import create_chain
from pipeline.faces import FaceLibrary

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "bench"))
from face_chain import frame  # noqa: E402 (the photo framed as a webcam frames it)
from report import commit, emit  # noqa: E402

sys.path.insert(0, str(REPO_ROOT / "tests"))
from support.photos import face_rgb  # noqa: E402 (the photos are found where the tests find them)
from support.torch_calls import ATEN_READS, TENSOR_READS, TorchCalls  # noqa: E402

SETTLE_BATCHES = 12  # the first frames detect; then tracking holds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--faces", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--batches", type=int, default=10, help="steady batches counted")
    parser.add_argument("--size", default="640x480")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    width, height = (int(part) for part in args.size.split("x"))
    device = torch.device("cpu")
    faces = FaceLibrary()
    chain = create_chain("mesh", device, faces)
    chain.warm_up()
    source = face_rgb("biden.jpg")
    face_id = faces.add(source, owner="bench", format="jpeg", size_bytes=0, analysis=chain.analysis.analyse(source)).id
    image = frame(face_rgb("obama.jpg"), width, height)
    rows = [
        "| faces in the batch | aten ops per batch | host reads per batch | of which `.item()`, `float()`, `int()`, `.tolist()`, `.cpu()` | `nonzero` "
        "| `lift_fresh` | CPU-ms per batch | CPU-ms per face |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for count in args.faces:
        items = [ChainItem(f"bench-{count}-{n}", image, {"face_id": face_id}) for n in range(count)]
        for _ in range(SETTLE_BATCHES):
            chain.run(items)
        started = time.process_time()
        with TorchCalls() as calls:
            for _ in range(args.batches):
                chain.run(items)
        cpu_ms = (time.process_time() - started) * 1000 / args.batches  # counting included: a ratio only
        reads = {name: calls.reads[name] / args.batches for name in ATEN_READS}
        reads["python"] = sum(calls.reads[name] for name in TENSOR_READS) / args.batches
        total = (calls.ops.total() + calls.reads["nonzero"] + calls.reads["lift_fresh"]) / args.batches
        rows.append(
            f"| {count} | {total:,.0f} | {sum(reads.values()):.1f} | {reads['python']:.1f} "
            f"| {reads['nonzero']:.1f} | {reads['lift_fresh']:.1f} | {cpu_ms:.0f} | {cpu_ms / count:.0f} |"
        )
        for session in items:
            chain.forget_session(session.session_id)
    lines = [
        f"### device path, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
        "",
        f"Commit {commit()}; the mesh chain on the CPU, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, nproc {os.cpu_count()}, {platform.machine()}; {args.size} frames of "
        f"obama.jpg, biden.jpg swapped in, every frame its own session; {args.batches} batches counted after "
        f"{SETTLE_BATCHES}. CPU-ms include the counting (compare them with each other only).",
        "",
        *rows,
        "",
    ]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
