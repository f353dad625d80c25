"""Face tracks per session: when to run the detector, where to crop, smoothed landmarks, held faces.

A pure policy in the manner of the batch policy: it calls no model. For each batch the chain
1. asks `plan` which frames need the detector and where each tracked face is to be cropped
   (from its smoothed landmarks in the session's previous frame),
2. runs the detector on those frames (one call per quarter turn looked at), and asks `crops` for each session's full crop
   list (the planned crops, plus detections of faces that are new or were lost),
3. crops and meshes every face of the batch in one call (a face cropped from a detector's box
   once more, from its first mesh's extent), and hands the mesh points (in frame
   pixels) to `update`, which smooths all seen faces of all sessions in one One-Euro step.

A face whose mesh fails (score under `min_score`, or no crop) is held: it keeps its last smoothed
points, its `visibility` falls linearly over `max_misses` frames, and after that it is dropped.
The chain keeps whatever it needs to draw a held face in the track's `held` slot.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import torch

from pipeline.detect import Detections
from pipeline.landmarks import boxes_from_points
from pipeline.tracking.one_euro import OneEuroSettings, OneEuroState, one_euro_step, seconds_between

DetectReason = Literal["no_faces", "lost", "periodic"]

# Frame coordinates no mesh of a real face comes near (frames are at most a few thousand pixels).
MAX_COORDINATE = 1e5


@dataclass(frozen=True)
class TrackingSettings:
    detect_every: int = 15  # frames between detections while all faces are tracked (new faces)
    max_misses: int = 3  # frames a face is held after its mesh fails, then dropped
    min_score: float = 0.5  # mesh face presence under which a crop found no face (MediaPipe's)
    match_iou: float = 0.3  # a detection this close to a track's box is that track's face
    duplicate_iou: float = 0.5  # two meshes this close are one face: the older track keeps it
    max_faces: int = 4  # tracks per session
    jump: float = 0.5  # smoothing starts over when a face moves this many face sizes in one frame
    crop_slack: float = 0.02  # a crop stays put until its box moves this much of its side
    smoothing: OneEuroSettings = field(default_factory=OneEuroSettings)

    def __post_init__(self) -> None:
        if self.detect_every < 1:
            raise ValueError("detect_every must be >= 1")
        if self.max_misses < 0:
            raise ValueError("max_misses must be >= 0")
        if self.max_faces < 1:
            raise ValueError("max_faces must be >= 1")
        for name in ("min_score", "match_iou", "duplicate_iou", "crop_slack"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be between 0 and 1")
        if not self.jump > 0:
            raise ValueError("jump must be > 0")


@dataclass(eq=False, slots=True)
class Track:
    """One face of one session. Points are [468, 3] in frame pixels (x, y, z)."""

    id: int  # stable within its session, never reused
    points: torch.Tensor  # the last good mesh, as measured
    smoothed: torch.Tensor  # the last good mesh, smoothed: what the chain draws
    slope: torch.Tensor  # the smoothing's derivative (pixels per second)
    seen_at: float  # frame time of the last good mesh
    box: torch.Tensor  # [4] and [2, 2]: where to crop the next frame (from `smoothed`)
    eyes: torch.Tensor
    bounds: tuple[float, float, float, float]  # axis-aligned extent of `points`, for IoU
    age: int = 0  # frames since the track began
    misses: int = 0  # frames since the last good mesh
    visibility: float = 1.0  # 1 when seen, falling linearly to 0 over the miss window
    held: object | None = None  # the chain's own: e.g. its last good output for this face


@dataclass(eq=False, slots=True)
class SessionTracks:
    """The tracking state of one session."""

    tracks: list[Track] = field(default_factory=list)
    next_id: int = 1
    since_detection: int = 0  # frames since the detector last ran on this session


@dataclass(frozen=True, eq=False)
class FaceCrop:
    """Where to crop one face: box [4] and eyes [2, 2] for `crop_faces`. track_id None: a
    detected face no track holds yet. from_detection: the box is the detector's, not the extent
    of the face's last landmarks (FaceMesh reads some faces 5-7 % larger from a detector's box than
    from its own points' extent: the chain meshes such a crop again from the first mesh)."""

    track_id: int | None
    box: torch.Tensor
    eyes: torch.Tensor
    from_detection: bool = False


@dataclass(frozen=True)
class SessionPlan:
    session_id: str
    frame_time: float
    detect: DetectReason | None  # why the detector runs on this frame; None: it does not
    crops: tuple[FaceCrop, ...]  # every track, from its last landmarks


@dataclass(frozen=True)
class Plan:
    sessions: tuple[SessionPlan, ...]

    @property
    def to_detect(self) -> tuple[int, ...]:
        """Indices (into `sessions`, i.e. the batch) of the frames the detector runs on."""
        return tuple(i for i, session in enumerate(self.sessions) if session.detect is not None)


@dataclass(frozen=True, eq=False)
class Observation:
    """What the chain saw in one session's frame: the crops it meshed (from `crops`) and, per
    crop, the mesh points [N, 468, 3] in frame pixels and the face-presence scores [N]."""

    session_id: str
    frame_time: float
    detected: bool  # the detector ran on this frame
    crops: Sequence[FaceCrop]
    points: torch.Tensor
    scores: torch.Tensor


class Tracker:
    """The face tracks of all sessions. Not thread-safe: the runner's thread alone calls it."""

    def __init__(self, settings: TrackingSettings | None = None) -> None:
        self.settings = settings or TrackingSettings()
        self._sessions: dict[str, SessionTracks] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def tracks(self, session_id: str) -> tuple[Track, ...]:
        session = self._sessions.get(session_id)
        return () if session is None else tuple(session.tracks)

    def forget(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    # -- planning (reads the state, changes nothing) ----------------------------------------

    def plan(self, sessions: Sequence[tuple[str, float]]) -> Plan:
        """For each (session_id, frame_time) of a batch, in order: whether the detector runs on
        the frame, and the crops of the session's tracks (each from its last good landmarks;
        a held face is retried where it was last seen)."""
        _refuse_repeats(session_id for session_id, _ in sessions)
        settings = self.settings
        plans = []
        for session_id, frame_time in sessions:
            state = self._sessions.get(session_id)
            tracks = state.tracks if state is not None else []
            reason: DetectReason | None = None
            if not tracks:
                reason = "no_faces"
            elif any(track.misses for track in tracks):
                reason = "lost"
            elif (
                state is not None
                and state.since_detection + 1 >= settings.detect_every
                and len(tracks) < settings.max_faces
            ):
                reason = "periodic"
            crops = tuple(FaceCrop(track.id, track.box, track.eyes) for track in tracks)
            plans.append(SessionPlan(session_id, frame_time, reason, crops))
        return Plan(tuple(plans))

    def crops(self, plan: SessionPlan, detections: Detections | None) -> tuple[FaceCrop, ...]:
        """The session's crops once its detections are known: the planned ones, where a held face
        that a detection found again is cropped from the detection instead, plus new faces
        (best score first, while the session has room)."""
        if detections is None or len(detections) == 0:
            return plan.crops
        state = self._sessions.get(plan.session_id)
        tracks = state.tracks if state is not None else []
        found = [tuple(box) for box in detections.boxes.tolist()]
        pairs = sorted(
            ((iou(box, track.bounds), d, t) for d, box in enumerate(found) for t, track in enumerate(tracks)),
            reverse=True,
        )
        matched: dict[int, int] = {}  # detection -> track
        for overlap, d, t in pairs:
            if overlap < self.settings.match_iou:
                break
            if d not in matched and t not in matched.values():
                matched[d] = t
        eyes = detections.keypoints[:, :2]
        recovered = {tracks[t].id: d for d, t in matched.items() if tracks[t].misses}
        crops = [
            FaceCrop(
                crop.track_id,
                detections.boxes[recovered[crop.track_id]],
                eyes[recovered[crop.track_id]],
                from_detection=True,
            )
            if crop.track_id in recovered
            else crop
            for crop in plan.crops
        ]
        room = self.settings.max_faces - len(tracks)
        new = [d for d in range(len(found)) if d not in matched][: max(room, 0)]
        return tuple(crops) + tuple(FaceCrop(None, detections.boxes[d], eyes[d], from_detection=True) for d in new)

    # -- updating ---------------------------------------------------------------------------

    def update(self, observations: Sequence[Observation]) -> list[tuple[Track, ...]]:
        """Takes in a batch's meshes; returns each observation's session's tracks (held ones too).

        All seen faces of all sessions are smoothed in one step; the host reads only the scores
        and the meshes' extents (one small copy for the whole batch)."""
        _refuse_repeats(observation.session_id for observation in observations)
        for observation in observations:
            count = len(observation.crops)
            if observation.points.shape[:1] != (count,) or observation.scores.shape != (count,):
                raise ValueError(
                    f"{count} crops need points [{count}, 468, 3] and scores [{count}], got "
                    f"{tuple(observation.points.shape)} and {tuple(observation.scores.shape)}"
                )
        everything = [o.points for o in observations if len(o.crops)]
        if everything:
            points = torch.cat(everything)
            xy = points[..., :2]
            presence = torch.cat([o.scores for o in observations if len(o.crops)]).to(points)
            # a mesh with a NaN, infinite or absurd point (a model fault) found no face: taken in, it
            # would stay in the track's smoothing for good and fail every batch its session is in
            sound = (points.abs() < MAX_COORDINATE).flatten(1).all(dim=1)  # False for NaN too
            presence = torch.where(sound, presence, torch.zeros_like(presence))
            summary = torch.cat((xy.amin(dim=1), xy.amax(dim=1), presence[:, None]), dim=1).tolist()
            extents, scores = [row[:4] for row in summary], [row[4] for row in summary]
        else:
            points, scores, extents = None, [], []

        seen: list[_Seen] = []
        offset = 0
        for observation in observations:
            state = self._sessions.setdefault(observation.session_id, SessionTracks())
            rows = range(offset, offset + len(observation.crops))
            offset += len(observation.crops)
            assert points is not None or not rows
            seen += self._update_session(state, observation, rows, points, scores, extents)
        if seen:
            self._smooth(seen, points)
        return [self.tracks(observation.session_id) for observation in observations]

    def _update_session(
        self,
        state: SessionTracks,
        observation: Observation,
        rows: range,
        points: torch.Tensor | None,
        scores: list[float],
        extents: list[list[float]],
    ) -> list[_Seen]:
        settings = self.settings
        state.since_detection = 0 if observation.detected else state.since_detection + 1
        by_id = {track.id: track for track in state.tracks}
        # good meshes, best first: tracked faces before new ones, then by score
        good = sorted(
            (row for row in rows if scores[row] >= settings.min_score),
            key=lambda row: (observation.crops[row - rows.start].track_id not in by_id, -scores[row]),
        )
        kept: list[int] = []
        for row in good:
            if all(iou(extents[row], extents[other]) <= settings.duplicate_iou for other in kept):
                kept.append(row)
        seen: list[_Seen] = []
        found: set[int] = set()
        for row in kept:
            track = by_id.get(observation.crops[row - rows.start].track_id)  # type: ignore[arg-type]
            if track is None or track.id in found:
                if len(state.tracks) >= settings.max_faces:
                    continue
                assert points is not None
                track = self._new_track(state, points[row], observation.frame_time)
            found.add(track.id)
            seen.append(_Seen(track, row, seconds_between(track.seen_at, observation.frame_time)))
            track.seen_at = observation.frame_time
            track.bounds = tuple(extents[row])  # type: ignore[assignment]
            track.misses = 0
            track.visibility = 1.0
        window = settings.max_misses + 1
        for track in state.tracks:
            track.age += 1
            if track.id not in found:
                track.misses += 1
                track.visibility = max(0.0, 1.0 - track.misses / window)
        state.tracks = [track for track in state.tracks if track.misses <= settings.max_misses]
        return seen

    def _new_track(self, state: SessionTracks, points: torch.Tensor, frame_time: float) -> Track:
        box, eyes = boxes_from_points(points[None])
        track = Track(
            id=state.next_id,
            points=points,
            smoothed=points,
            slope=torch.zeros_like(points),
            seen_at=frame_time,
            box=box[0],
            eyes=eyes[0],
            bounds=(0.0, 0.0, 0.0, 0.0),
            age=-1,  # the update that creates it brings it to 0
        )
        state.next_id += 1
        state.tracks.append(track)
        return track

    def _smooth(self, seen: list[_Seen], points: torch.Tensor) -> None:
        """One One-Euro step over every seen face of the batch; also the next frame's crop boxes.

        A new track (its smoothed points are its raw ones) starts at rest; a face that moved more
        than `jump` face sizes since its smoothed points starts over there."""
        tracks = [s.track for s in seen]
        raw = points[torch.tensor([s.row for s in seen], device=points.device)]
        previous = OneEuroState(torch.stack([t.smoothed for t in tracks]), torch.stack([t.slope for t in tracks]))
        dt = torch.tensor([s.dt for s in seen])
        xy, before = raw[..., :2], previous.value[..., :2]
        size = 2 * (before - before.mean(dim=1, keepdim=True)).square().sum(dim=-1).mean(dim=1).sqrt()
        moved = (xy - before).norm(dim=-1).mean(dim=1)
        state = one_euro_step(previous, raw, dt, self.settings.smoothing, fresh=moved > self.settings.jump * size)
        boxes, eyes = self._next_crops(tracks, state.value)
        for i, track in enumerate(tracks):
            track.points = raw[i]
            track.smoothed = state.value[i]
            track.slope = state.slope[i]
            track.box = boxes[i]
            track.eyes = eyes[i]

    def _next_crops(self, tracks: list[Track], smoothed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The next frame's crops, from the smoothed points, each kept where it was while the new
        one is within `crop_slack` of it: a still face gets the very same crop, so the same mesh
        (the mesh shifts by up to a pixel with sub-pixel shifts of its crop, and cropping from
        each mesh would keep it wandering)."""
        boxes, eyes = boxes_from_points(smoothed)
        old_boxes, old_eyes = torch.stack([t.box for t in tracks]), torch.stack([t.eyes for t in tracks])
        side = (old_boxes[:, 2:] - old_boxes[:, :2]).amax(dim=1)
        shift = torch.maximum((boxes - old_boxes).abs().amax(dim=1), (eyes - old_eyes).abs().flatten(1).amax(dim=1))
        keep = shift <= self.settings.crop_slack * side
        return torch.where(keep[:, None], old_boxes, boxes), torch.where(keep[:, None, None], old_eyes, eyes)


@dataclass(frozen=True)
class _Seen:
    """A track found in this batch: its row of the batch's points, the time since it was last seen."""

    track: Track
    row: int
    dt: float


def stack_crops(
    per_frame: Sequence[Sequence[FaceCrop]], device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The batch's crops as `crop_faces` takes them: boxes [N, 4], eyes [N, 2, 2], frame_index [N]
    (the position of each crop's frame in `per_frame`), in order, on `device`."""
    crops = [crop for frame in per_frame for crop in frame]
    index = torch.tensor([i for i, frame in enumerate(per_frame) for _ in frame], dtype=torch.long, device=device)
    if not crops:
        return torch.zeros(0, 4, device=device), torch.zeros(0, 2, 2, device=device), index
    boxes = torch.stack([crop.box.to(device, torch.float32) for crop in crops])
    eyes = torch.stack([crop.eyes.to(device, torch.float32) for crop in crops])
    return boxes, eyes, index


def iou(a: Sequence[float], b: Sequence[float]) -> float:
    """Intersection over union of two (x1, y1, x2, y2) boxes; 0 for empty ones."""
    width = min(a[2], b[2]) - max(a[0], b[0])
    height = min(a[3], b[3]) - max(a[1], b[1])
    if width <= 0 or height <= 0:
        return 0.0
    inter = width * height
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _refuse_repeats(session_ids: Iterable[str]) -> None:
    listed = list(session_ids)
    if len(set(listed)) != len(listed):
        raise ValueError("a batch holds one frame per session")
