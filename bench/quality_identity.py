"""Identity on the swap-quality set by two judges (issue #26): every ordered pair of two different
people swapped once through today's `mesh` chain on the CPU (tests/support/pair_swaps.py: the
target's top square at 480x480, the third frame of the pair's session), and the output judged
nearer the source or the target by SFace (the pipeline's own identity model) and, separately, by
dlib's face ResNet (tests/support/second_embedder.py, another family). The issue asks at least
90 % of pairs nearer the source by each. The defect score (tests/support/swap_defects.py) is
printed beside them, so one run also gives the defect judge's worst pairs.

Each photo's reference is its own top square, as the chain saw the target (both judges, as
tests/pipeline/test_second_embedder.py does). Prints a line per pair as it goes, then the totals,
the worst pairs by each judge (the margin: similarity to the source less that to the target) and
a markdown table of every pair.

    .venv/bin/python bench/quality_identity.py [--workers 2] [--pairs N] [--sources A B] [--targets C D]
"""

from __future__ import annotations

import argparse
import multiprocessing
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

WORST = 12  # pairs listed as the worst by each judge


@dataclass(frozen=True)
class PairIdentity:
    source: str
    target: str
    swapped: bool
    sface: tuple[float, float] | None = None  # similarity of the output to the source, to the target
    dlib: tuple[float, float] | None = None
    dlib_boxed: bool = False  # dlib's own detector found no face in the output or a reference: our detector's box used
    defects: float | None = None
    worst_defect: str = ""


def _judge_pairs(pairs: list[tuple[str, str]]) -> list[PairIdentity]:
    """In a worker process: each pair swapped and judged (the models loaded once per worker)."""
    import torch

    torch.set_num_threads(1)  # one core per worker: the workers share the machine
    from support import second_embedder
    from support.face_identity import identity
    from support.pair_swaps import PairSwapper, judged_photos, rgb_of, square_frame
    from support.swap_defects import swap_defects

    photos, _, _ = judged_photos()
    swapper = PairSwapper()
    sface_of, dlib_of = {}, {}

    def dlib_descriptor(rgb) -> tuple[object, bool]:
        """dlib's descriptor and whether our detector's box stood in for dlib's HOG detector, which
        finds no face turned much past 30 degrees (the pipeline's box reads the same face within
        0.2: tests/pipeline/test_second_embedder.py)."""
        try:
            return second_embedder.embed(rgb), False
        except LookupError:
            found = swapper.chain.detector.detect(torch.from_numpy(rgb)[None])[0]
            largest = int((found.boxes[:, 2:] - found.boxes[:, :2]).prod(dim=1).argmax())
            return second_embedder.embed(rgb, found.boxes[largest].tolist()), True

    def references(name: str):
        if name not in sface_of:
            square = rgb_of(square_frame(photos[name]))
            sface_of[name] = identity(square)
            dlib_of[name] = dlib_descriptor(square)
        return sface_of[name], dlib_of[name]

    results = []
    for source, target in pairs:
        swap = swapper.swap(photos, source, target)
        if swap is None:
            results.append(PairIdentity(source, target, swapped=False))
            print(f"  {source} -> {target}: not swapped (the chain passed the frame through)", flush=True)
            continue
        (sface_source, dlib_source), (sface_target, dlib_target) = references(source), references(target)
        output = identity(swap.output_rgb)
        sface = (float(output @ sface_source), float(output @ sface_target))
        descriptor, boxed = dlib_descriptor(swap.output_rgb)
        _, figures = second_embedder.nearer(descriptor, dlib_source[0], dlib_target[0])
        dlib = (figures["to_source"], figures["to_target"])
        boxed = boxed or dlib_source[1] or dlib_target[1]
        defects = swap_defects(swap.target_rgb, swap.output_rgb, swap.target_points)
        results.append(PairIdentity(source, target, True, sface, dlib, boxed, defects.score, defects.worst()))
        dlib_text = f"{dlib[0]:.3f}/{dlib[1]:.3f}" + (" (our box)" if boxed else "")
        print(
            f"  {source} -> {target}: SFace {sface[0]:.3f}/{sface[1]:.3f}, dlib {dlib_text}, defect {defects.score:.2f}",
            flush=True,
        )
    return results


def nearer(figures: tuple[float, float] | None) -> bool:
    return figures is not None and figures[0] > figures[1]


def summary(results: list[PairIdentity]) -> str:
    swapped = [r for r in results if r.swapped]
    total = len(results)
    by_sface = sum(nearer(r.sface) for r in swapped)
    by_dlib = sum(nearer(r.dlib) for r in swapped)
    boxed = sum(r.dlib_boxed for r in swapped)
    flagged = sum(r.defects >= 1.0 for r in swapped)
    lines = [
        f"{total} ordered pairs of different people, {len(swapped)} swapped ({total - len(swapped)} passed through)",
        f"nearer the source by SFace: {by_sface} of {total} ({100 * by_sface / max(total, 1):.1f} %; "
        f"{100 * by_sface / max(len(swapped), 1):.1f} % of those swapped)",
        f"nearer the source by dlib:  {by_dlib} of {total} ({100 * by_dlib / max(total, 1):.1f} %; "
        f"{100 * by_dlib / max(len(swapped), 1):.1f} % of those swapped; {boxed} read from our detector's box)",
        f"flagged by the defect judge (score >= 1): {flagged} of {len(swapped)}",
    ]
    for judge in ("sface", "dlib"):
        values = [getattr(r, judge) for r in swapped if getattr(r, judge) is not None]
        if values:
            lines.append(
                f"mean {judge}: {sum(v[0] for v in values) / len(values):.3f} to the source against "
                f"{sum(v[1] for v in values) / len(values):.3f} to the target"
            )
    return "\n".join(lines)


def per_photo(results: list[PairIdentity]) -> str:
    """How often each photo's pairs are nearer the source, as the source and as the target: a
    photo that fails in one role across the board says more than any single pair."""
    names = sorted({r.source for r in results} | {r.target for r in results})
    lines = ["| photo | as source: SFace | dlib | swapped | as target: SFace | dlib | swapped |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for name in names:
        cells = []
        for role in ("source", "target"):
            mine = [r for r in results if getattr(r, role) == name and r.swapped]
            cells += [str(sum(nearer(r.sface) for r in mine)), str(sum(nearer(r.dlib) for r in mine)), str(len(mine))]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def worst(results: list[PairIdentity]) -> str:
    lines = []
    for judge in ("sface", "dlib"):
        ranked = sorted(
            (r for r in results if r.swapped),
            key=lambda r: getattr(r, judge)[0] - getattr(r, judge)[1],
        )
        lines.append(f"worst by {judge} (to the source less to the target):")
        for r in ranked[:WORST]:
            figures = getattr(r, judge)
            lines.append(f"  {r.source} -> {r.target}: {figures[0] - figures[1]:+.3f} (defect {r.defects:.2f})")
    return "\n".join(lines)


def table(results: list[PairIdentity]) -> str:
    lines = [
        "(* not nearer the source; b: dlib read the face in our detector's box)",
        "",
        "| # | source | target | SFace to source | to target | dlib to source | to target | defect score |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for index, r in enumerate(results, start=1):
        if not r.swapped:
            lines.append(f"| {index} | {r.source} | {r.target} | not swapped | | | | |")
            continue
        sface = (f"{r.sface[0]:.3f}" + ("" if nearer(r.sface) else " *"), f"{r.sface[1]:.3f}")
        dlib = (
            f"{r.dlib[0]:.3f}" + ("" if nearer(r.dlib) else " *"),
            f"{r.dlib[1]:.3f}" + (" b" if r.dlib_boxed else ""),
        )
        lines.append(
            f"| {index} | {r.source} | {r.target} | {sface[0]} | {sface[1]} | {dlib[0]} | {dlib[1]} "
            f"| {r.defects:.2f} ({r.worst_defect}) |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2, help="processes, one thread each")
    parser.add_argument("--pairs", type=int, help="only the first N pairs (to see the time)")
    parser.add_argument("--sources", nargs="+", help="source photo names (default: every photo of the set)")
    parser.add_argument("--targets", nargs="+", help="target photo names (default: every photo of the set)")
    args = parser.parse_args()

    from support.pair_swaps import different_people, judged_photos

    photos, people, which = judged_photos()
    pairs = [
        (s, t)
        for s, t in different_people(people)
        if (not args.sources or s in args.sources) and (not args.targets or t in args.targets)
    ]
    if args.pairs:
        pairs = pairs[: args.pairs]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout
    dirty = subprocess.run(["git", "status", "--porcelain", "pipeline"], capture_output=True, text=True, cwd=ROOT)
    changed = [line[3:] for line in dirty.stdout.splitlines()]
    print(
        f"{platform.node()} {platform.processor() or platform.machine()}, commit {commit.strip() or 'unknown'}, "
        f"{which}, {len(pairs)} pairs, {args.workers} workers"
    )
    if changed:
        print(f"uncommitted in pipeline/: {', '.join(changed)}")
    started = time.perf_counter()
    # interleaved, so each worker gets a share of every source and the runs end together
    chunks = [pairs[k :: args.workers] for k in range(args.workers)]
    if args.workers > 1:
        with multiprocessing.get_context("spawn").Pool(args.workers) as pool:
            parts = pool.map(_judge_pairs, chunks)
    else:
        parts = [_judge_pairs(pairs)]
    order = {pair: k for k, pair in enumerate(pairs)}
    results = sorted((r for part in parts for r in part), key=lambda r: order[(r.source, r.target)])
    print(f"\n{time.perf_counter() - started:.0f} s\n")
    print(summary(results))
    print()
    print(worst(results))
    print()
    print(per_photo(results))
    print()
    print(table(results))


if __name__ == "__main__":
    main()
