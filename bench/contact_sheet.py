"""A contact sheet of face swaps: for each (source, target) pair of photos a row source | target |
output, with the figures under each, as ONE PNG; the same figures as a markdown table on stdout.

The swaps are today's `mesh` chain on the CPU, made as the swap-quality test makes them
(tests/support/pair_swaps.py: the target's top square at 480x480, the third frame of the pair's
session). Figures: SFace similarity of the output to the source and to the target, dlib's (the
second judge, tests/support/second_embedder.py) where it is installed, and the defect score
(tests/support/swap_defects.py: 1.0 or more is a defect a viewer sees; its worst term named).

The photos: the quality set (tests/support/quality_photos.py) when it exists, else the six of the
24-pair quality test; every ordered pair of two different people.

    .venv/bin/python bench/contact_sheet.py [--pairs N] [--out PATH] [--sources A B] [--targets C D]
        [--only SOURCE:TARGET ...] [--tile 160] [--columns 2] [--sort defects]
"""

from __future__ import annotations

import argparse
import io
import platform
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import av
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

from bitmap_text import LINE, draw_text  # noqa: E402 (bench/, next to this script)

from support.pair_swaps import PairSwap, PairSwapper, judged_photos  # noqa: E402 (importable once the path is set)
from support.swap_defects import DefectScore, swap_defects  # noqa: E402

GAP = 6  # px between tiles and around the sheet
PAIR_GAP = 18  # px between two pairs side by side
CAPTION_LINES = 4
BACKGROUND = (255, 255, 255)
FLAGGED = (200, 0, 0)  # the output's caption when the defect score flags it


@dataclass
class PairFigures:
    """What is printed under a pair's output."""

    index: int
    swap: PairSwap
    sface: tuple[float, float]  # to the source, to the target
    dlib: tuple[float, float] | None
    defects: DefectScore
    notes: list[str] = field(default_factory=list)


def extra_photos() -> dict[str, tuple[np.ndarray, str]]:
    """Photos named on the command line that are in neither set: the hard poses' (sdist_photos.py)."""
    from support.sdist_photos import FILES, grid_tile, photo_rgb

    extra = {name: (lambda n=name: (photo_rgb(n), n)) for name in FILES if name.endswith(".jpg")}
    # facetorch's grid: one woman, 25 expressions; "grid-R-C" names one tile
    for row in range(5):
        for column in range(5):
            extra[f"grid-{row}-{column}"] = lambda r=row, c=column: (grid_tile(r, c), "facetorch-woman")
    return extra


def judge(swap: PairSwap, sources: dict[str, np.ndarray], squares: dict[str, np.ndarray], index: int) -> PairFigures:
    from support.face_identity import identity

    output = identity(swap.output_rgb)
    sface = (float(output @ identity(squares[swap.source])), float(output @ identity(swap.target_rgb)))
    dlib = None
    try:
        from support import second_embedder

        _, figures = second_embedder.nearer_source(swap.output_rgb, squares[swap.source], swap.target_rgb)
        dlib = (figures["to_source"], figures["to_target"])
    except (ImportError, LookupError):
        dlib = None  # not installed, or dlib finds no face in one of them
    return PairFigures(index, swap, sface, dlib, swap_defects(swap.target_rgb, swap.output_rgb, swap.target_points))


def face_tile(rgb: np.ndarray, points: np.ndarray, tile: int) -> np.ndarray:
    """The face's square (its mesh's box grown by a third) scaled to tile x tile."""
    low, high = points.min(axis=0), points.max(axis=0)
    side = float((high - low).max()) * 1.35
    x0, y0 = ((low + high) / 2 - side / 2).round().astype(int)
    side = int(round(side))
    height, width = rgb.shape[:2]
    window = np.zeros((side, side, 3), np.uint8)
    sx0, sy0, sx1, sy1 = max(x0, 0), max(y0, 0), min(x0 + side, width), min(y0 + side, height)
    window[sy0 - y0 : sy1 - y0, sx0 - x0 : sx1 - x0] = rgb[sy0:sy1, sx0:sx1]
    frame = av.VideoFrame.from_ndarray(window, format="rgb24")
    return frame.reformat(tile, tile, format="rgb24", interpolation="AREA").to_ndarray()


def captions(figures: PairFigures) -> tuple[list[str], list[str], list[str]]:
    swap, defects = figures.swap, figures.defects
    source = [f"#{figures.index} SOURCE", swap.source]
    target = ["TARGET", swap.target]
    output = [f"SFACE S {figures.sface[0]:.2f} T {figures.sface[1]:.2f}"]
    output.append("DLIB  -" if figures.dlib is None else f"DLIB  S {figures.dlib[0]:.2f} T {figures.dlib[1]:.2f}")
    output.append(f"DEFECT {defects.score:.2f} {defects.worst()}" + (" !" if defects.flagged else ""))
    output.append(f"S{defects.streaks:.1f} B{defects.band:.1f} P{defects.patch:.1f}")
    return source, target, output


def draw_sheet(rows: list[tuple[PairFigures, list[np.ndarray]]], tile: int, columns: int) -> np.ndarray:
    """rows: each pair's figures and its three tiles; `columns` pairs side by side."""
    pair_width = 3 * tile + 2 * GAP
    pair_height = tile + CAPTION_LINES * LINE + GAP
    lines = (len(rows) + columns - 1) // columns
    width = 2 * GAP + columns * pair_width + (columns - 1) * PAIR_GAP
    height = 2 * GAP + lines * pair_height + (lines - 1) * GAP
    sheet = np.full((height, width, 3), BACKGROUND, np.uint8)
    for at, (figures, tiles) in enumerate(rows):
        top = GAP + (at // columns) * (pair_height + GAP)
        left = GAP + (at % columns) * (pair_width + PAIR_GAP)
        for column, (image, caption) in enumerate(zip(tiles, captions(figures))):
            x = left + column * (tile + GAP)
            sheet[top : top + tile, x : x + tile] = image
            colour = FLAGGED if column == 2 and figures.defects.flagged else (0, 0, 0)
            for line, text in enumerate(caption[:CAPTION_LINES]):
                draw_text(sheet, text[: tile // 6], top + tile + 3 + line * LINE, x, colour)
    return sheet


def png_bytes(rgb: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="image2pipe") as output:
        stream = output.add_stream("png")
        stream.height, stream.width = rgb.shape[:2]
        stream.pix_fmt = "rgb24"
        for packet in [
            *stream.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")),
            *stream.encode(),
        ]:
            output.mux(packet)
    return buffer.getvalue()


def table(results: list[PairFigures]) -> str:
    lines = [
        "| # | source | target | SFace to source | to target | dlib to source | to target "
        "| defect score | streaks (share of skin) | band | patch | flagged |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for f in results:
        dlib = ("-", "-") if f.dlib is None else (f"{f.dlib[0]:.3f}", f"{f.dlib[1]:.3f}")
        t = f.defects.terms
        lines.append(
            f"| {f.index} | {f.swap.source} | {f.swap.target} | {f.sface[0]:.3f} | {f.sface[1]:.3f} | {dlib[0]} "
            f"| {dlib[1]} | {f.defects.score:.2f} ({f.defects.worst()}) | {t['streaks']:.4f} | {t['band']:.3f} "
            f"| {t['patch']:.3f} | {'yes' if f.defects.flagged else ''} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sources", nargs="+", help="source photo names (default: every photo of the set)")
    parser.add_argument("--targets", nargs="+", help="target photo names (default: every photo of the set)")
    parser.add_argument("--pairs", type=int, help="only the first N pairs")
    parser.add_argument("--only", nargs="+", metavar="SOURCE:TARGET", help="just these pairs, in this order")
    parser.add_argument("--out", type=Path, default=Path("contact_sheet.png"))
    parser.add_argument("--tile", type=int, default=160, help="each picture's side, px")
    parser.add_argument("--columns", type=int, default=2, help="pairs side by side")
    parser.add_argument("--sort", choices=("pairs", "defects"), default="pairs", help="order of the rows")
    args = parser.parse_args()

    photos, people, which = judged_photos()
    in_set = list(photos)
    extra = extra_photos()
    only = [tuple(pair.split(":", 1)) for pair in args.only or []]
    for name in [*(args.sources or []), *(args.targets or []), *(name for pair in only for name in pair)]:
        if name not in photos:
            if name not in extra:
                parser.error(f"no photo {name!r}: the set has {', '.join(photos)}; also {', '.join(extra)}")
            photos[name], people[name] = extra[name]()
    sources = args.sources or in_set
    targets = args.targets or sources
    pairs = only or [(s, t) for s in sources for t in targets if people[s] != people[t]]
    if args.pairs:
        pairs = pairs[: args.pairs]

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout
    commit = commit.strip() or "unknown (not a git checkout)"
    print(f"{platform.node()} {platform.processor() or platform.machine()}, commit {commit}, {which}")
    started = time.perf_counter()
    swapper = PairSwapper()
    from support.pair_swaps import rgb_of, square_frame

    squares = {name: rgb_of(square_frame(photos[name])) for name in {s for s, _ in pairs}}
    results, rows, not_swapped = [], [], []
    for index, (source, target) in enumerate(pairs, start=1):
        swap = swapper.swap(photos, source, target)
        if swap is None:
            not_swapped.append(f"{source} -> {target}")
            print(f"  {index}/{len(pairs)} {source} -> {target}: not swapped (the chain passed the frame through)")
            continue
        figures = judge(swap, photos, squares, index)
        source_points = swapper.target_points(squares[swap.source])
        tiles = [
            face_tile(squares[swap.source], source_points, args.tile),
            face_tile(swap.target_rgb, swap.target_points, args.tile),
            face_tile(swap.output_rgb, swap.target_points, args.tile),
        ]
        results.append(figures)
        rows.append((figures, tiles))
        print(f"  {index}/{len(pairs)} {swap.source} -> {swap.target}: defect {figures.defects.score:.2f}", flush=True)
    if args.sort == "defects":
        rows.sort(key=lambda row: -row[0].defects.score)
    args.out.write_bytes(png_bytes(draw_sheet(rows, args.tile, args.columns)))
    flagged = sum(f.defects.flagged for f in results)
    nearer = sum(f.sface[0] > f.sface[1] for f in results)
    print(f"\n{len(results)} pairs in {time.perf_counter() - started:.0f} s; {flagged} flagged by the defect score; "
          f"{nearer} nearer the source by SFace; sheet: {args.out} ({args.out.stat().st_size // 1024} KB)\n")  # fmt: skip
    print(table(results))
    if not_swapped:
        print(f"\nnot swapped: {', '.join(not_swapped)}")


if __name__ == "__main__":
    main()
