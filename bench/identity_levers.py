"""Identity levers of the `mesh` swap, A/B on the swap-quality set (issue #26): the same pairs
swapped and judged by SFace and dlib (bench/quality_identity.py's judging, unchanged) once per
variant, a variant being module constants set in the worker processes before the chain is built.
Prints each variant's totals and the pairs that changed side against the first variant. The
figures do not depend on the machine's speed (compare counts of pairs, not times).

    .venv/bin/python bench/identity_levers.py --sources A B --targets C D \\
        --variant base --variant "pipeline.swap.shape_transfer:STRENGTH=1.0"

A variant is `name` (nothing set) or `;`-separated `module:NAME=python literal` settings. The
workers import the working tree as it is when they start: run it from a copy of the tree (rsync,
then the venv's python on the copy's bench/identity_levers.py) when others edit pipeline/ meanwhile.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import multiprocessing
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]


def settings_of(variant: str) -> list[tuple[str, str, object]]:
    """`module:NAME=value;...` -> [(module, NAME, value)]; a bare name sets nothing."""
    settings = []
    for part in filter(None, (p.strip() for p in variant.split(";"))):
        if ":" not in part:
            continue
        module, assignment = part.split(":", 1)
        name, value = assignment.split("=", 1)
        settings.append((module.strip(), name.strip(), ast.literal_eval(value.strip())))
    return settings


def _judge_with(job: tuple[str, list[tuple[str, str]]]):
    """In a worker process: the variant's constants set, then the pairs judged."""
    variant, pairs = job
    for module, name, value in settings_of(variant):
        target = importlib.import_module(module)
        if not hasattr(target, name):
            raise AttributeError(f"{module} has no {name}")
        setattr(target, name, value)
    import quality_identity

    return quality_identity._judge_pairs(pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--sources", nargs="+")
    parser.add_argument("--targets", nargs="+")
    parser.add_argument("--variant", action="append", required=True, help="repeat; the first is the reference")
    args = parser.parse_args()

    import quality_identity

    from support.pair_swaps import different_people, judged_photos

    _, people, _ = judged_photos()
    pairs = [
        (s, t)
        for s, t in different_people(people)
        if (not args.sources or s in args.sources) and (not args.targets or t in args.targets)
    ]
    chunks = [pairs[k :: args.workers] for k in range(args.workers)]
    jobs = [(variant, chunk) for variant in args.variant for chunk in chunks]
    with multiprocessing.get_context("spawn").Pool(args.workers, maxtasksperchild=1) as pool:
        parts = pool.map(_judge_with, jobs, chunksize=1)
    order = {pair: k for k, pair in enumerate(pairs)}
    by_variant = {}
    for k, variant in enumerate(args.variant):
        mine = [r for part in parts[k * args.workers : (k + 1) * args.workers] for r in part]
        by_variant[variant] = sorted(mine, key=lambda r: order[(r.source, r.target)])
    reference = by_variant[args.variant[0]]
    for variant, results in by_variant.items():
        print(f"\n== {variant}\n{quality_identity.summary(results)}")
        for judge in ("sface", "dlib"):
            gained = [
                f"{r.source}->{r.target}"
                for r, ref in zip(results, reference)
                if r.swapped
                and quality_identity.nearer(getattr(r, judge))
                and not quality_identity.nearer(getattr(ref, judge))
            ]
            lost = [
                f"{r.source}->{r.target}"
                for r, ref in zip(results, reference)
                if r.swapped
                and not quality_identity.nearer(getattr(r, judge))
                and quality_identity.nearer(getattr(ref, judge))
            ]
            if variant != args.variant[0]:
                print(f"{judge}: +{len(gained)} {gained}\n{judge}: -{len(lost)} {lost}")
        margins = [(r.sface[0] - r.sface[1], r.dlib[0] - r.dlib[1], r.defects) for r in results if r.swapped]
        if margins:
            print(
                f"mean margin sface {sum(m[0] for m in margins) / len(margins):.3f} "
                f"dlib {sum(m[1] for m in margins) / len(margins):.3f}; "
                f"mean defect {sum(m[2] for m in margins) / len(margins):.2f}; "
                f"median defect {sorted(m[2] for m in margins)[len(margins) // 2]:.2f}; "
                f"flagged {sum(m[2] >= 1.0 for m in margins)}"
            )


if __name__ == "__main__":
    main()
