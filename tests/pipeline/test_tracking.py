"""Face tracking (pipeline/tracking): the One-Euro filter on made-up landmark sets, the tracker
driven by hand-made detections and meshes (no models), and one end-to-end run of the real
detector and mesher on a still photo."""

from __future__ import annotations

import functools
import gc
import itertools
import math
import random
import types
from dataclasses import dataclass

import pytest
import torch

from pipeline.detect import Detections, FaceDetector
from pipeline.landmarks import FaceMesher, crop_faces, to_frame_coords
from pipeline.tracking import (
    FaceCrop,
    Observation,
    OneEuroFilter,
    OneEuroSettings,
    OneEuroState,
    Tracker,
    TrackingSettings,
    one_euro_step,
    stack_crops,
)
from pipeline.tracking.tracker import iou
from support.photos import face_rgb

FPS = 30.0
POINTS = 468
LEFT_EYE, RIGHT_EYE = 33, 263  # the mesh's outer eye corners, which boxes_from_points reads


@functools.cache
def template(seed: int = 0) -> torch.Tensor:
    """A made-up face mesh [468, 3] centred on 0, about 1 wide, eyes level in the upper half."""
    generator = torch.Generator().manual_seed(seed)
    points = torch.rand(POINTS, 3, generator=generator) - 0.5
    points[:, 2] *= 0.3
    points[LEFT_EYE] = torch.tensor([-0.3, -0.15, 0.0])
    points[RIGHT_EYE] = torch.tensor([0.3, -0.15, 0.0])
    return points


TEMPLATE = template()


def noise(shape: tuple[int, ...], sigma: float, seed: int) -> torch.Tensor:
    return sigma * torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def run_filter(frames: torch.Tensor, settings: OneEuroSettings | None = None) -> torch.Tensor:
    """Filters [T, P, D] frames of one track at FPS; returns [T, P, D]."""
    one_euro = OneEuroFilter(1, settings)
    return torch.stack([one_euro.filter(frame[None], [i / FPS])[0] for i, frame in enumerate(frames)])


# --- the One-Euro filter ----------------------------------------------------------------------


def test_a_constant_signal_stays_constant() -> None:
    face = TEMPLATE * 200 + torch.tensor([320.0, 240.0, 0.0])
    one_euro = OneEuroFilter(2)
    times = [0.0, 0.0]
    for step in range(1000):
        times = [times[0] + 1 / FPS, times[1] + random.Random(step).uniform(0.001, 0.2)]  # uneven clock
        out = one_euro.filter(torch.stack((face, face)), times)
    assert torch.equal(out, torch.stack((face, face)))
    assert one_euro.state is not None and not one_euro.state.slope.any()


def test_jitter_of_a_still_face_is_reduced_several_fold() -> None:
    """2 px of independent jitter per point on a 200 px face, 10 s at 30 fps: seen reduced ~7x
    (the speed is read through the whole face, so jitter does not hold the cutoff up)."""
    frames = 300
    still = TEMPLATE * 200 + torch.tensor([320.0, 240.0, 0.0])
    jitter = noise((frames, POINTS, 3), 2.0, seed=1)
    out = run_filter(still + jitter)
    settled = slice(60, None)
    reduction = jitter[settled].std() / (out[settled] - still).std()
    assert reduction > 5, reduction
    step = (out[61:] - out[60:-1]).norm(dim=-1).mean()
    assert step < 0.2, step  # px per frame (seen 0.07), from ~4.5 px raw
    # jitter that moves the whole mesh at once cannot be told from motion: reduced as by the
    # classic filter at this lag (seen ~1.35x)
    shake = noise((frames, 1, 3), 2.0, seed=2).expand(frames, POINTS, 3)
    out = run_filter(still + shake)
    assert shake[settled].std() / (out[settled] - still).std() > 1.15


@pytest.mark.parametrize("speed", [0.25, 1.5, 4.0])  # face widths per second
def test_a_moving_face_is_followed_with_little_lag(speed: float) -> None:
    frames = 90
    size = 200.0
    start = TEMPLATE * size + torch.tensor([320.0, 240.0, 0.0])
    t = torch.arange(frames) / FPS
    shift = torch.zeros(frames, 1, 3)
    shift[:, 0, 0] = (t - 1.0).clamp(min=0) * speed * size  # still for 1 s, then a steady move
    truth = start + shift
    out = run_filter(truth + noise((frames, POINTS, 3), 1.0, seed=3))
    lag = (truth - out)[..., 0].mean(dim=1)  # along the move, averaged over the face
    moving = 30
    assert lag[moving + 1] < 2.5, lag[moving + 1]  # the first frame of the move
    assert lag[moving + 5 :].abs().max() < 1.0, lag[moving + 5 :]  # seen <= 0.6 px
    # a fixed low-pass with the still face's cutoff would trail by speed * tau
    fixed = speed * size / (2 * math.pi * OneEuroSettings().min_cutoff)
    print(f"speed {speed}: lag {float(lag[moving + 5 :].abs().max()):.2f} px; a fixed low-pass {fixed:.0f} px")


def test_a_turning_head_and_an_opening_mouth_are_followed() -> None:
    frames = 60
    size = 200.0
    centre = torch.tensor([320.0, 240.0])
    t = (torch.arange(frames) / FPS - 0.5).clamp(min=0)
    angle = t * 1.0  # 1 rad/s about the face's centre
    rotation = torch.stack((torch.cos(angle), -torch.sin(angle), torch.sin(angle), torch.cos(angle)), -1).view(-1, 2, 2)
    xy = (TEMPLATE[:, :2] * size) @ rotation.transpose(1, 2) + centre
    turning = torch.cat((xy, (TEMPLATE[:, 2:] * size).expand(frames, POINTS, 1)), dim=-1)
    out = run_filter(turning + noise((frames, POINTS, 3), 1.0, seed=4))
    error = (out - turning)[..., :2].norm(dim=-1).mean(dim=1)
    assert error[25:].max() < 2.0, error[25:]  # the noise alone leaves ~1 px

    mouth = slice(0, 40)  # 40 points drop 30 px in 0.1 s, the rest stay
    opening = (TEMPLATE * size + torch.tensor([320.0, 240.0, 0.0])).expand(frames, POINTS, 3).clone()
    opening[:, mouth, 1] += ((torch.arange(frames) / FPS - 1.0) / 0.1).clamp(0, 1)[:, None] * 30
    out = run_filter(opening + noise((frames, POINTS, 3), 1.0, seed=5))
    lag = (opening - out)[:, mouth, 1].mean(dim=1)
    assert lag[36:].abs().max() < 1.0, lag[36:]  # from 3 frames after the mouth stopped


def test_rows_keep_their_own_clocks() -> None:
    """Two tracks in one filter, at 30 and 12 fps with unrelated clocks (one near 1.7e9 s,
    beyond float32's resolution), give what each gives alone."""
    size = 150.0
    motion = [
        TEMPLATE * size + torch.tensor([100.0 + 3 * i, 200.0, 0.0]) + noise((POINTS, 3), 1.0, i) for i in range(40)
    ]
    clocks = [[i / 30 for i in range(40)], [1.7e9 + i / 12 for i in range(40)]]
    both = OneEuroFilter(2)
    together = [
        both.filter(torch.stack((frame, frame)), [clocks[0][i], clocks[1][i]]) for i, frame in enumerate(motion)
    ]
    for row, clock in enumerate(clocks):
        alone = OneEuroFilter(1)
        expected = [alone.filter(frame[None], [clock[i]])[0] for i, frame in enumerate(motion)]
        torch.testing.assert_close(torch.stack([t[row] for t in together]), torch.stack(expected))
    # the two clocks lag differently: the same move in fewer, longer steps
    assert not torch.allclose(together[-1][0], together[-1][1])


def test_reset_starts_rows_over_and_a_repeated_time_keeps_the_value() -> None:
    face = TEMPLATE * 100
    one_euro = OneEuroFilter(2)
    one_euro.filter(torch.stack((face, face)), [0.0, 0.0])
    far = face + 50
    moved = one_euro.filter(torch.stack((far, far)), [0.1, 0.0])
    assert not torch.equal(moved[0], far)  # smoothed
    torch.testing.assert_close(moved[1], face)  # no time passed
    one_euro.reset([1])
    again = one_euro.filter(torch.stack((far, far)), [0.2, 0.1])
    assert torch.equal(again[1], far) and not torch.equal(again[0], far)


def test_the_step_function_batches_rows_and_checks_shapes() -> None:
    faces = torch.stack([TEMPLATE * 100, TEMPLATE * 300])
    state = OneEuroState.start(faces)
    out = one_euro_step(
        state, faces + 1, torch.tensor([1 / FPS, 1 / FPS]), OneEuroSettings(), fresh=torch.tensor([False, True])
    )
    assert torch.equal(out.value[1], faces[1] + 1) and not out.slope[1].any()
    assert (out.value[0] - faces[0]).abs().max() < 1
    with pytest.raises(ValueError):
        one_euro_step(state, faces[:, :4], torch.zeros(2), OneEuroSettings())
    with pytest.raises(ValueError):
        one_euro_step(state, faces, torch.zeros(3), OneEuroSettings())
    with pytest.raises(ValueError):
        OneEuroSettings(min_cutoff=0)


# --- the tracker, with a made-up world --------------------------------------------------------


@dataclass(frozen=True)
class Face:
    """A face in the made-up world: the template at (x, y), `size` px wide."""

    x: float
    y: float
    size: float = 120.0
    seed: int = 0

    @functools.cached_property
    def points(self) -> torch.Tensor:
        return template(self.seed) * self.size + torch.tensor([self.x, self.y, 0.0])

    @functools.cached_property
    def bounds(self) -> tuple[float, float, float, float]:
        xy = self.points[:, :2]
        return (*xy.amin(0).tolist(), *xy.amax(0).tolist())  # type: ignore[return-value]


def detect(faces: list[Face]) -> Detections:
    """What a detector would report: every face, its box and its eyes."""
    keypoints = torch.zeros(len(faces), 5, 2)
    for i, face in enumerate(faces):
        keypoints[i, :2] = face.points[[LEFT_EYE, RIGHT_EYE], :2]
    boxes = torch.tensor([face.bounds for face in faces]).view(-1, 4)
    return Detections(boxes, torch.full((len(faces),), 0.99), keypoints)


def mesh(crop: FaceCrop, faces: list[Face]) -> tuple[torch.Tensor, float]:
    """What the mesher would find in a crop: the face whose box holds the crop's centre."""
    cx, cy = ((crop.box[:2] + crop.box[2:]) / 2).tolist()
    for face in faces:
        x0, y0, x1, y1 = face.bounds
        if x0 <= cx <= x1 and y0 <= cy <= y1:
            return face.points, 0.95
    return torch.zeros(POINTS, 3), 0.05


class World:
    """Runs the chain's part against hand-made faces; records which frames ran the detector."""

    def __init__(self, tracker: Tracker) -> None:
        self.tracker = tracker
        self.frame = 0
        self.detected: list[tuple[int, str, str]] = []  # (frame, session, reason)

    def step(self, scene: dict[str, list[Face]], time: float | None = None) -> None:
        time = self.frame / FPS if time is None else time
        plan = self.tracker.plan([(session_id, time) for session_id in scene])
        observations = []
        for session in plan.sessions:
            faces = scene[session.session_id]
            detections = None
            if session.detect is not None:
                self.detected.append((self.frame, session.session_id, session.detect))
                detections = detect(faces)
            crops = self.tracker.crops(session, detections)
            found = [mesh(crop, faces) for crop in crops]
            points = torch.stack([p for p, _ in found]) if found else torch.zeros(0, POINTS, 3)
            scores = torch.tensor([s for _, s in found])
            observations.append(Observation(session.session_id, time, detections is not None, crops, points, scores))
        self.tracker.update(observations)
        self.frame += 1

    def detect_frames(self, session_id: str = "a") -> list[int]:
        return [frame for frame, session, _ in self.detected if session == session_id]


def ids(tracker: Tracker, session_id: str = "a") -> list[int]:
    return [track.id for track in tracker.tracks(session_id)]


def centre(points: torch.Tensor) -> tuple[float, float]:
    return tuple(points[:, :2].mean(0).tolist())  # type: ignore[return-value]


def test_the_detector_runs_first_then_only_every_n_frames() -> None:
    world = World(Tracker(TrackingSettings(detect_every=15)))
    for _ in range(46):
        world.step({"a": [Face(300, 200)]})
    assert world.detect_frames() == [0, 15, 30, 45]
    assert [reason for *_, reason in world.detected] == ["no_faces", "periodic", "periodic", "periodic"]
    assert ids(world.tracker) == [1]


def test_two_moving_faces_keep_their_ids() -> None:
    world = World(Tracker(TrackingSettings(detect_every=10)))
    for i in range(40):
        faces = [Face(200 + 2 * i, 200 + i, seed=1), Face(500 - 3 * i, 220, size=100, seed=2)]
        world.step({"a": faces})
        tracks = world.tracker.tracks("a")
        assert [t.id for t in tracks] == [1, 2]
        for track, face in zip(tracks, faces, strict=True):
            assert track.misses == 0 and track.visibility == 1.0
            assert torch.equal(track.points, face.points)  # cropped from the last landmarks: found
            x, y = centre(track.smoothed)
            assert abs(x - face.x) < 5 and abs(y - face.y) < 5
    assert world.detect_frames() == [0, 10, 20, 30]


def test_frame_times_that_stand_still_or_go_back_do_not_freeze_the_face() -> None:
    """A sender's broken timestamps: the smoothing still follows the face, as at 30 fps."""
    for times in ([0.0] * 30, [1.0 - i / FPS for i in range(30)]):
        world = World(Tracker())
        for i, time in enumerate(times):
            face = Face(200 + 4 * i, 200)
            world.step({"a": [face]}, time=time)
            x, _ = centre(world.tracker.tracks("a")[0].smoothed)
            assert abs(x - face.x) < 5


def test_a_vanished_face_is_held_fading_then_dropped() -> None:
    world = World(Tracker(TrackingSettings(detect_every=15, max_misses=3)))
    for _ in range(5):
        world.step({"a": [Face(300, 200)]})
    (track,) = world.tracker.tracks("a")
    track.held = "the last swap"
    last = track.smoothed
    seen = []
    for _ in range(5):
        world.step({"a": []})
        seen.append([(t.id, t.misses, t.visibility) for t in world.tracker.tracks("a")])
    assert seen == [[(1, 1, 0.75)], [(1, 2, 0.5)], [(1, 3, 0.25)], [], []]
    assert track.held == "the last swap" and torch.equal(track.smoothed, last)
    # lost: the detector looks every frame from the first miss on (and while there is no face)
    assert world.detect_frames() == [0, 6, 7, 8, 9]
    assert {reason for frame, _, reason in world.detected if frame in (6, 7, 8)} == {"lost"}
    world.step({"a": [Face(300, 200)]})
    assert ids(world.tracker) == [2]  # a new track: ids are never reused


def test_a_face_found_again_within_the_window_keeps_its_track() -> None:
    world = World(Tracker(TrackingSettings(max_misses=3)))
    for _ in range(5):
        world.step({"a": [Face(300, 200)]})
    world.step({"a": []})
    world.step({"a": [Face(300, 200)]})  # back where it was: the retried crop finds it
    (track,) = world.tracker.tracks("a")
    assert (track.id, track.misses, track.visibility) == (1, 0, 1.0)
    world.step({"a": []})
    world.step({"a": [Face(360, 200)]})  # half a face away: the detector finds it, smoothing restarts
    (track,) = world.tracker.tracks("a")
    assert (track.id, track.misses) == (1, 0)
    assert torch.equal(track.smoothed, Face(360, 200).points)
    world.step({"a": [Face(361, 200)]})  # then smooths again
    assert not torch.equal(track.smoothed, Face(361, 200).points)
    world.step({"a": [Face(700, 300)]})  # gone from here: held, and the detector looks next frame
    assert [(t.id, t.misses) for t in world.tracker.tracks("a")] == [(1, 1)]
    world.step({"a": [Face(700, 300)]})  # a face far off is another face
    assert [(t.id, t.misses) for t in world.tracker.tracks("a")] == [(1, 2), (2, 0)]


def test_a_new_face_is_found_at_the_next_periodic_detection() -> None:
    world = World(Tracker(TrackingSettings(detect_every=10)))
    for i in range(12):
        faces = [Face(200, 200)] + ([Face(500, 200, seed=3)] if i >= 3 else [])
        world.step({"a": faces})
        assert ids(world.tracker) == ([1, 2] if i >= 10 else [1]), i
    assert world.detect_frames() == [0, 10]


def test_sessions_are_independent_and_forget_frees_one() -> None:
    world = World(Tracker(TrackingSettings(detect_every=5)))
    for i in range(12):
        world.step({"a": [Face(300, 200)], "b": [Face(100, 100, seed=4)] if i >= 2 else [], "c": []})
    assert ids(world.tracker, "a") == [1] and ids(world.tracker, "b") == [1] and ids(world.tracker, "c") == []
    assert world.detect_frames("a") == [0, 5, 10]
    assert world.detect_frames("b") == [0, 1, 2, 7]
    assert world.detect_frames("c") == list(range(12))  # no face: the detector looks every frame
    assert len(world.tracker) == 3
    world.tracker.forget("a")
    world.tracker.forget("never seen")
    assert len(world.tracker) == 2 and world.tracker.tracks("a") == ()
    assert world.tracker.plan([("a", 1.0)]).sessions[0].detect == "no_faces"
    world.step({"b": [Face(100, 100, seed=4)]})
    assert ids(world.tracker, "b") == [1]


def test_crops_from_detections_and_landmarks_and_the_face_limit() -> None:
    tracker = Tracker(TrackingSettings(max_faces=2))
    world = World(tracker)
    world.step({"a": [Face(200, 200)]})
    plan = tracker.plan([("a", 1.0)])
    (planned,) = plan.sessions[0].crops
    assert planned.track_id == 1 and planned.box.shape == (4,) and planned.eyes.shape == (2, 2)
    # the tracked face's detection adds nothing; of three new faces, one fits
    faces = [Face(200, 202), Face(500, 200, seed=1), Face(700, 200, seed=2), Face(400, 500, seed=3)]
    crops = tracker.crops(plan.sessions[0], detect(faces))
    assert [crop.track_id for crop in crops] == [1, None]
    torch.testing.assert_close(crops[1].box, torch.tensor(faces[1].bounds))
    boxes, eyes, index = stack_crops([crops, (), crops[:1]], torch.device("cpu"))
    assert boxes.shape == (3, 4) and eyes.shape == (3, 2, 2) and index.tolist() == [0, 0, 2]
    assert stack_crops([(), ()], torch.device("cpu"))[0].shape == (0, 4)


def test_two_meshes_of_one_face_make_one_track() -> None:
    tracker = Tracker()
    face = Face(300, 200)
    crop = FaceCrop(None, torch.tensor(face.bounds), face.points[[LEFT_EYE, RIGHT_EYE], :2])
    points = torch.stack((face.points, face.points + 2))
    tracker.update([Observation("a", 0.0, True, (crop, crop), points, torch.tensor([0.9, 0.97]))])
    (track,) = tracker.tracks("a")
    assert torch.equal(track.points, points[1])  # the better score wins
    assert iou((0, 0, 2, 2), (1, 0, 3, 2)) == pytest.approx(1 / 3) and iou((0, 0, 1, 1), (2, 2, 3, 3)) == 0


def test_bad_batches_are_refused() -> None:
    tracker = Tracker()
    with pytest.raises(ValueError):
        tracker.plan([("a", 0.0), ("a", 0.1)])
    with pytest.raises(ValueError):
        tracker.update([Observation("a", 0.0, True, (), torch.zeros(1, POINTS, 3), torch.zeros(1))])
    with pytest.raises(ValueError):
        TrackingSettings(detect_every=0)


def test_a_mesh_with_nan_infinite_or_absurd_points_counts_as_missed() -> None:
    """A broken mesh (a model gone NaN) never enters a track's smoothing: the face is held as for
    a miss, then followed again."""
    world = World(Tracker())
    for _ in range(3):
        world.step({"a": [Face(300, 200)]})
    for bad in (float("nan"), float("inf"), -1e30):
        plan = world.tracker.plan([("a", world.frame / FPS)])
        crops = world.tracker.crops(plan.sessions[0], None)
        points = torch.stack([Face(300, 200).points] * len(crops))
        points[0, 5, 0] = bad
        world.tracker.update(
            [Observation("a", world.frame / FPS, False, crops, points, torch.full((len(crops),), 0.95))]
        )
        world.frame += 1
        (track,) = world.tracker.tracks("a")
        assert track.misses == 1 and bool(track.smoothed.isfinite().all())
        world.step({"a": [Face(300, 200)]})
        (track,) = world.tracker.tracks("a")
        assert track.misses == 0 and track.id == 1


def reachable_from(root: object) -> list[object]:
    """Every object reachable from `root`, not going into modules, classes or functions (shared code,
    not state)."""
    seen, stack, found = {id(root)}, [root], []
    while stack:
        obj = stack.pop()
        found.append(obj)
        for ref in gc.get_referents(obj):
            if id(ref) in seen or isinstance(ref, (types.ModuleType, type, types.FunctionType)):
                continue
            seen.add(id(ref))
            stack.append(ref)
    return found


def test_state_stays_bounded_while_faces_come_and_go() -> None:
    """10,000 frames of one session whose faces appear, move and vanish at random."""
    settings = TrackingSettings(detect_every=7, max_faces=3)
    world = World(Tracker(settings))
    rng = random.Random(7)
    places = [Face(150 + 200 * k, 200, seed=k) for k in range(4)]
    present = [False] * 4

    def run(frames: int) -> None:
        for _ in range(frames):
            for k in range(4):
                if rng.random() < 0.05:
                    present[k] = not present[k]
            jiggle = rng.uniform(-2, 2)
            world.step({"a": [Face(f.x + jiggle, f.y, seed=f.seed) for k, f in enumerate(places) if present[k]]})
            assert len(world.tracker.tracks("a")) <= settings.max_faces
            world.detected.clear()

    def census() -> tuple[int, int]:
        """Objects and tensor bytes the tracker holds (reachable from it): not the whole process's,
        which threads left by earlier tests in the same run also allocate into."""
        gc.collect()
        objects = reachable_from(world.tracker)
        tensors = [o for o in objects if type(o) is torch.Tensor]  # isinstance() wakes lazy modules
        return len(objects), sum(t.untyped_storage().nbytes() for t in tensors)

    run(500)
    objects, tensor_bytes = census()
    run(9500)
    grown_objects, grown_bytes = (now - then for now, then in zip(census(), (objects, tensor_bytes), strict=True))
    assert grown_objects < 200, grown_objects
    assert grown_bytes < 200_000, grown_bytes  # a few tracks' worth, whichever are alive
    assert world.tracker.tracks("a") == () or max(ids(world.tracker)) > 10  # faces did come and go


# --- end to end, with the real models ---------------------------------------------------------


@pytest.fixture(scope="module")
def models() -> tuple[FaceDetector, FaceMesher]:
    return FaceDetector(torch.device("cpu")), FaceMesher("cpu")


@pytest.mark.parametrize("name", ["obama.jpg", "obama2.jpg", "obama3.jpg", "biden.jpg"])
def test_a_still_photo_gives_still_landmarks(models: tuple[FaceDetector, FaceMesher], name: str) -> None:
    """The same frame 30 times: the detector on the frames the plan names, meshes cropped from
    the previous landmarks, smoothed: the landmarks settle within a few frames.

    Seen: the crop stops moving from the 2nd or 3rd frame, so the mesh is then the same to the
    bit; the smoothed points' largest change between frames is under 0.1 px from frame 8 to 10
    on (the average point's from frame 5), and under 0.01 px by frame 30."""
    detector, mesher = models
    frame = torch.from_numpy(face_rgb(name))[None]
    tracker = Tracker(TrackingSettings(detect_every=15))
    detected, smoothed, raw = [], [], []
    for i in range(30):
        time = i / FPS
        (plan,) = tracker.plan([("s", time)]).sessions
        detections = None
        if plan.detect is not None:
            detected.append(i)
            (detections,) = detector.detect(frame)
        crops = tracker.crops(plan, detections)
        boxes, eyes, index = stack_crops([crops], frame.device)
        images, transforms = crop_faces(frame, boxes, index, eyes=eyes)
        result = mesher.landmarks(images)
        points = to_frame_coords(result.points, transforms)
        (tracks,) = tracker.update([Observation("s", time, detections is not None, crops, points, result.scores)])
        assert [track.id for track in tracks] == [1] and tracks[0].misses == 0
        smoothed.append(tracks[0].smoothed)
        raw.append(tracks[0].points)
    assert detected == [0, 15]

    def largest_changes(series: list[torch.Tensor]) -> torch.Tensor:
        return torch.stack([(b - a)[:, :2].norm(dim=-1).max() for a, b in itertools.pairwise(series)])

    step, raw_step = largest_changes(smoothed), largest_changes(raw)
    assert raw_step[3:].max() < 1e-3, raw_step
    assert step[10:].max() < 0.1, step
    assert step[-1] < 0.01, step


# --- CUDA ---------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_smoothing_and_tracking_match_the_cpu() -> None:
    faces = torch.stack([Face(300 + i, 200, seed=i).points for i in range(3)])
    states = []
    for device in ("cpu", "cuda"):
        state = OneEuroState.start(faces.to(device))
        for step in range(1, 10):
            moved = (faces + step + noise(faces.shape, 1.0, step)).to(device)
            state = one_euro_step(state, moved, torch.full((3,), 1 / FPS), OneEuroSettings())
        states.append(state)
    assert states[1].value.is_cuda
    torch.testing.assert_close(states[1].value.cpu(), states[0].value, atol=1e-3, rtol=0)

    tracked = []
    for device in ("cpu", "cuda"):
        tracker = Tracker()
        for step in range(5):
            face = Face(300 + step, 200)
            crops = tracker.plan([("a", step / FPS)]).sessions[0].crops or (
                FaceCrop(
                    None, torch.tensor(face.bounds, device=device), face.points[[LEFT_EYE, RIGHT_EYE], :2].to(device)
                ),
            )
            points = face.points.to(device)[None].expand(len(crops), POINTS, 3)
            scores = torch.full((len(crops),), 0.9, device=device)
            (tracks,) = tracker.update([Observation("a", step / FPS, step == 0, crops, points, scores)])
        assert [t.id for t in tracks] == [1] and tracks[0].box.device.type == device
        tracked.append(tracks[0].smoothed.cpu())
    torch.testing.assert_close(tracked[1], tracked[0], atol=1e-3, rtol=0)
