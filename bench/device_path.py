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
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from pipeline.chain import ChainItem
from pipeline.chains import create_chain
from pipeline.faces import FaceLibrary

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "bench"))
from face_chain import frame  # noqa: E402 (the photo framed as a webcam frames it)

sys.path.insert(0, str(REPO_ROOT / "tests"))
from support.photos import face_rgb  # noqa: E402 (the photos are found where the tests find them)

HOST_READS = ("nonzero", "lift_fresh")  # aten ops
TENSOR_READS = {"item", "tolist", "numpy", "cpu", "__float__", "__int__", "__bool__", "__index__"}
SETTLE_BATCHES = 12  # the first frames detect; then tracking holds


class ReadCounter(TorchFunctionMode):
    """Tensor methods that hand data to Python."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: Counter[str] = Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in TENSOR_READS:
            self.reads[name] += 1
        return func(*args, **(kwargs or {}))


class OpCounter(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[func._overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


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
        counter, python_reads = OpCounter(), ReadCounter()
        started = time.process_time()
        with python_reads, counter:
            for _ in range(args.batches):
                chain.run(items)
        cpu_ms = (time.process_time() - started) * 1000 / args.batches  # counting included: a ratio only
        reads = {name: counter.ops[name] / args.batches for name in HOST_READS}
        reads["python"] = sum(python_reads.reads.values()) / args.batches
        total = sum(counter.ops.values()) / args.batches
        rows.append(
            f"| {count} | {total:,.0f} | {sum(reads.values()):.1f} | {reads['python']:.1f} "
            f"| {reads['nonzero']:.1f} | {reads['lift_fresh']:.1f} | {cpu_ms:.0f} | {cpu_ms / count:.0f} |"
        )
        for session in items:
            chain.forget_session(session.session_id)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True)
    lines = [
        f"### device path, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
        "",
        f"Commit {commit.stdout.strip() or '?'}; the mesh chain on the CPU, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, nproc {os.cpu_count()}, {platform.machine()}; {args.size} frames of "
        f"obama.jpg, biden.jpg swapped in, every frame its own session; {args.batches} batches counted after "
        f"{SETTLE_BATCHES}. CPU-ms include the counting (compare them with each other only).",
        "",
        *rows,
        "",
    ]
    print("\n".join(lines))
    if args.out is not None:
        with args.out.open("a") as out:
            out.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
