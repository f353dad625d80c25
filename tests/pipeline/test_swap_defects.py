"""The defect judge (support/swap_defects.py) against defects painted on a frame: a dark streak across
the forehead (the source's hair), a dark vertical band (a turned source's hidden half smeared), a
grey patch on one cheek (the source's shadow or stubble). Each must be flagged by its own term, on
the untouched target (which judged against itself scores 0) and on the chain's swap of a pair that
was clean on the baseline; and every pair of the real set is scored and printed (not asserted:
today's chain shows these defects, issue #26)."""

import numpy as np
import pytest

from support.pair_swaps import PairSwapper, different_people, judged_photos
from support.photos import face_rgb
from support.swap_defects import swap_defects

pytestmark = pytest.mark.slow

# The cleanest pair looked at on the baseline's sheets (0.38: no term near its limit)
CLEAN = ("obama3.jpg", "biden.jpg")
EYES = (33, 263)  # outer corners
BROWS_MIDDLE, FOREHEAD_TOP = 9, 10
NOSE_BRIDGE = 168
CHEEK_IMAGE_LEFT = 205  # FaceMesh's point in the middle of the image-left cheek


@pytest.fixture(scope="module")
def clean_swap():
    photos = {name: face_rgb(name) for name in CLEAN}
    return next(PairSwapper().swaps(photos, [CLEAN]))


def face_axes(points: np.ndarray, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, float]:
    """Each pixel's position across the face (from the nose bridge, along the eyes' line) and down
    it, in inter-ocular distances, and that distance in pixels."""
    right = points[EYES[1]] - points[EYES[0]]
    iod = float(np.linalg.norm(right))
    right /= iod
    down = np.array([-right[1], right[0]])
    ys, xs = np.mgrid[0 : shape[0], 0 : shape[1]] + 0.5
    offset = np.stack((xs, ys), axis=-1) - points[NOSE_BRIDGE]
    return offset @ right / iod, offset @ down / iod, iod


def darkened(rgb: np.ndarray, where: np.ndarray, factor: float) -> np.ndarray:
    out = rgb.astype(np.float64)
    out[where] *= factor
    return out.round().astype(np.uint8)


def with_hair_streaks(rgb: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Three thin dark strands falling slantwise across the forehead, as a fringe warped onto it."""
    across, down, iod = face_axes(points, rgb.shape[:2])
    brows = float((points[BROWS_MIDDLE] - points[NOSE_BRIDGE]) @ _down(points)) / iod
    top = float((points[FOREHEAD_TOP] - points[NOSE_BRIDGE]) @ _down(points)) / iod
    strands = np.zeros(rgb.shape[:2], bool)
    for start in (-0.45, -0.1, 0.25):
        # a line from (start, top) to (start + 0.3, brows), 2 px wide
        along = (down - top) / (brows - top)
        centre = start + 0.3 * along
        strands |= (np.abs(across - centre) * iod < 1.0) & (along > 0.1) & (along < 0.9)
    return darkened(rgb, strands, 0.35)


def with_dark_band(rgb: np.ndarray, points: np.ndarray) -> np.ndarray:
    """A band a quarter of the inter-ocular distance wide down one side of the face, from the eyes to
    the jaw, a third darker: a turned source's hidden half smeared out."""
    across, down, _ = face_axes(points, rgb.shape[:2])
    band = (across > 0.3) & (across < 0.55) & (down > 0.1) & (down < 1.2)
    return darkened(rgb, band, 0.65)


def with_grey_patch(rgb: np.ndarray, points: np.ndarray) -> np.ndarray:
    """A greyed, darker disc on one cheek: the source's shadowed cheek or stubble."""
    _, _, iod = face_axes(points, rgb.shape[:2])
    ys, xs = np.mgrid[0 : rgb.shape[0], 0 : rgb.shape[1]] + 0.5
    disc = np.hypot(xs - points[CHEEK_IMAGE_LEFT][0], ys - points[CHEEK_IMAGE_LEFT][1]) < 0.3 * iod
    out = rgb.astype(np.float64)
    grey = out[disc] @ np.array([0.299, 0.587, 0.114])
    out[disc] = 0.8 * (0.4 * out[disc] + 0.6 * grey[:, None])
    return out.round().astype(np.uint8)


def _down(points: np.ndarray) -> np.ndarray:
    right = points[EYES[1]] - points[EYES[0]]
    right = right / np.linalg.norm(right)
    return np.array([-right[1], right[0]])


PAINTED = [(with_hair_streaks, "streaks"), (with_dark_band, "band"), (with_grey_patch, "patch")]


def test_a_frame_judged_against_itself_has_no_defect(clean_swap):
    score = swap_defects(clean_swap.target_rgb, clean_swap.target_rgb, clean_swap.target_points)
    assert score.score == 0.0, score


@pytest.mark.parametrize(("paint", "term"), PAINTED)
def test_defects_painted_on_the_untouched_target_are_flagged(clean_swap, paint, term):
    """The judge alone, whatever the chain does: the target is a perfect 'swap' of itself (0.0)."""
    target, points = clean_swap.target_rgb, clean_swap.target_points.astype(np.float64)
    painted = swap_defects(target, paint(target, points), points)
    print(f"\n{paint.__name__} on the target: {painted}")
    assert getattr(painted, term) >= 1.0, f"{term} not flagged: {painted}"


@pytest.mark.parametrize(("paint", "term"), PAINTED)
def test_defects_painted_on_a_swap_stand_out_from_it(clean_swap, paint, term):
    """On the chain's swap of a pair that showed none of the defects on the baseline (0.38): each
    painted defect is flagged by its own term. Whether the unpainted swap stays under 1.0 is the
    chain's affair (printed, not asserted here)."""
    clean = swap_defects(clean_swap.target_rgb, clean_swap.output_rgb, clean_swap.target_points)
    painted_rgb = paint(clean_swap.output_rgb, clean_swap.target_points.astype(np.float64))
    painted = swap_defects(clean_swap.target_rgb, painted_rgb, clean_swap.target_points)
    print(f"\nthe swap {' -> '.join(CLEAN)}: {clean}\n{paint.__name__}: {painted}")
    # 2.2-4.3x the limit on the baseline's swap; a swap that darkens the other cheek itself takes
    # some of a painted patch's contrast with its mirror image away (1.2 on one such)
    assert getattr(painted, term) >= 1.0, f"{term} not flagged: {painted}"


@pytest.mark.timeout(1800)  # every pair of the set: 1-2 s a pair on an idle 2-core machine, 10-30 on a busy one
def test_every_pairs_defect_score_is_printed():
    photos, people, which = judged_photos()
    pairs = different_people(people)
    print(f"\n{which}, {len(pairs)} pairs")
    print("| source | target | defect score | streaks (share of skin) | band | patch |")
    print("|---|---|---|---|---|---|")
    flagged, not_swapped = 0, []
    swapper = PairSwapper()
    for source, target in pairs:
        swap = swapper.swap(photos, source, target)
        if swap is None:
            not_swapped.append(f"{source} -> {target}")
            continue
        score = swap_defects(swap.target_rgb, swap.output_rgb, swap.target_points)
        terms = score.terms
        flagged += score.flagged
        print(
            f"| {swap.source} | {swap.target} | {score.score:.2f} ({score.worst()}) | {terms['streaks']:.4f} "
            f"| {terms['band']:.3f} | {terms['patch']:.3f} |"
        )
        assert np.isfinite(score.score)
    print(f"{flagged} of {len(pairs) - len(not_swapped)} pairs flagged; not swapped: {not_swapped or 'none'}")
