"""How near the source the `mesh` swap can get on the swap-quality set (issue #26) when the rules
that hold it back are dropped one by one: the same pairs swapped and judged by SFace and dlib
(bench/quality_identity.py's judging, unchanged) once per variant, a variant being relaxations
joined by `+`. A relaxation breaks a rule the chain keeps on purpose (a test or a defect guard);
the variants measure what each rule costs in identity, not a chain to ship.

Relaxations:
  eyes_mouth  the target's open eyes and mouth are not kept (--keep-eyes-mouth off)
  eyes        the target's open eyes are not kept, its open mouth still is
  shape       the source's proportions all the way (shape_transfer.STRENGTH 1.0; the landmarks
              measured on the output then leave the target's by more than 5 % of the eyes' distance)
  skin        the source's skin weight 1 everywhere (no fading at its outline, fringe or temples:
              source_skin.py)
  detail      no fading where the warp stretches the source thin (detail.py)
  shading     the target's slope of light not put on the texture (shading.py)
  crop        the source's photo crop warped instead of its prepared texture (source_texture.py)

    .venv/bin/python bench/identity_ceiling.py --variant base --variant eyes_mouth+shape [--every 3]

Counts of pairs only, never times: the figures do not depend on the machine's speed.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

RELAXATIONS = ("eyes_mouth", "eyes", "shape", "skin", "detail", "shading", "crop")


def relax(variant: str) -> None:
    """In a worker process, before the chain is built: the variant's rules dropped."""
    import torch

    import pipeline.swap.masks as masks
    import pipeline.swap.mesh_swapper as mesh_swapper
    import pipeline.swap.source as source
    from pipeline.swap import shape_transfer

    names = set(filter(None, variant.split("+"))) - {"base"}  # checked by main()
    if "eyes_mouth" in names:
        masks_of = mesh_swapper.face_masks
        mesh_swapper.face_masks = lambda points, size, keep=True, resolution=None: masks_of(
            points, size, False, resolution
        )
    if "eyes" in names:
        openness_of = masks.openness
        masks.openness = lambda points: openness_of(points) * torch.tensor([0.0, 0.0, 1.0], device=points.device)
    if "shape" in names:
        shape_transfer.STRENGTH = 1.0
    if "skin" in names:
        warp_of = mesh_swapper.warp_sources

        def warp_with_full_skin(images: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
            warped = warp_of(images, grid)
            warped[:, 3:] = 1.0
            return warped

        mesh_swapper.warp_sources = warp_with_full_skin
    if "detail" in names:
        mesh_swapper.detail_weight = lambda grid, source_size, skin: torch.ones_like(skin)
    if "shading" in names:
        mesh_swapper.target_shading = lambda base, skin: torch.ones_like(skin)
    if "crop" in names:
        source.prepare_texture = lambda *args, **kwargs: None


def _judge_with(job: tuple[str, list[tuple[str, str]]]):
    variant, pairs = job
    relax(variant)
    import quality_identity

    return quality_identity._judge_pairs(pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--every", type=int, default=1, help="every Nth pair of the set (a quicker look)")
    parser.add_argument("--variant", action="append", required=True, help="repeat; relaxations joined by +")
    args = parser.parse_args()
    for variant in args.variant:
        unknown = set(filter(None, variant.split("+"))) - {"base", *RELAXATIONS}
        if unknown:
            parser.error(f"unknown relaxations {sorted(unknown)}; known: {', '.join(RELAXATIONS)}")

    import quality_identity

    from support.pair_swaps import different_people, judged_photos

    _, people, _ = judged_photos()
    pairs = different_people(people)[:: args.every]
    chunks = [pairs[k :: args.workers] for k in range(args.workers)]
    jobs = [(variant, chunk) for variant in args.variant for chunk in chunks]
    with multiprocessing.get_context("spawn").Pool(args.workers, maxtasksperchild=1) as pool:
        parts = pool.map(_judge_with, jobs, chunksize=1)
    for k, variant in enumerate(args.variant):
        results = [r for part in parts[k * args.workers : (k + 1) * args.workers] for r in part]
        swapped = [r for r in results if r.swapped]
        print(f"\n== {variant}\n{quality_identity.summary(results)}")
        if swapped:
            sface = sum(r.sface[0] - r.sface[1] for r in swapped) / len(swapped)
            dlib = sum(r.dlib[0] - r.dlib[1] for r in swapped) / len(swapped)
            print(f"mean margin (to the source less to the target): SFace {sface:.3f}, dlib {dlib:.3f}")


if __name__ == "__main__":
    main()
