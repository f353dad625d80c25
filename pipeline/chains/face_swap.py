"""The face chains: detect -> align (face mesh) -> swap -> blend, batched across sessions on the device.

`mesh` warps the source face onto the target's mesh (no learned weights); `inswapper` runs the
learned swapper users bring (pipeline/swap/learned_swapper.py) in the same batched path.

Faces are tracked per session (pipeline/tracking): the detector runs only when a face
is new or lost, or periodically (at the quarter turns tracking/look_schedule.py picks); landmarks
are smoothed; a face lost for a few frames is held and faded out. Frames arrive as I420 arrays;
each group of same-sized frames goes to the device in one copy (`stage`, on the runner's staging
thread while the previous batch computes: pinned staging buffers reused, on an upload stream, see
device_transfer.py), is converted to RGB there (on the CPU only where the models read it:
rgb_frames.py), and comes back as I420 in one copy. Only pixels the swap touched (the dilated face
masks and the disclosure badge) are written back (compositing.py): everything else stays bit-exact.

The uploaded photos are analysed by pipeline/identity/face_analysis.py, whose models this chain
shares; this class keeps the per-frame orchestration.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Sequence

import numpy as np
import torch

from pipeline.chain import ChainItem, ChainResult
from pipeline.compositing import bounding_window, even_window, write_badge, write_window
from pipeline.detect.turned import detect_turned, half_turn_checked
from pipeline.device_transfer import DeviceTransfer, Upload
from pipeline.faces import FaceLibrary, FaceNotFound
from pipeline.hands import HandLandmarker, HandTracker, PalmDetector, hand_masks
from pipeline.hands.hand_landmarks import Rois
from pipeline.identity.face_analysis import FaceAnalysis
from pipeline.landmarks import boxes_from_points, crop_extents, crop_faces, to_frame_coords
from pipeline.memory_batch_cap import free_device_memory, measure_batch_peaks, memory_batch_cap
from pipeline.model_input import to_uint8_hwc
from pipeline.rgb_frames import RgbFrames
from pipeline.stage_timer import StageTimer
from pipeline.swap import MeshSwapper, SourceFace
from pipeline.swap.five_points import five_points
from pipeline.swap.pose_gate import pose_weight
from pipeline.tracking import LookSchedule, Observation, Track, Tracker, periodic_look_size, stack_crops
from pipeline.tracking.tracker import MAX_COORDINATE

logger = logging.getLogger(__name__)

# SFace cosine from which a face counts as the reference person, unless a session's
# `reference_threshold` says otherwise (models.md: the same person scored 0.72-0.80 on these
# photos, different people <= 0.30).
REFERENCE_THRESHOLD = 0.5
# the frame size the warm-up runs at (a webcam's)
WARM_UP_WIDTH, WARM_UP_HEIGHT = 640, 480


@dataclasses.dataclass
class _StagedBatch:
    batch: list[ChainItem]
    results: list[ChainResult]  # filled in ahead for frames with no face chosen or a face gone
    sources: dict[int, SourceFace] = dataclasses.field(default_factory=dict)
    groups: list[tuple[list[int], Upload]] = dataclasses.field(default_factory=list)  # same-sized frames


class FaceSwapChain:
    # the largest batch the device's free memory holds, measured at warm-up; None: no cap (the CPU)
    memory_batch_cap: int | None = None

    def __init__(
        self,
        device: torch.device,
        faces: FaceLibrary,
        analysis: FaceAnalysis,
        *,
        badge: bool = True,
        keep_eyes_mouth: bool = True,
        hands: bool = True,
    ) -> None:
        """`analysis` analyses the uploaded photos; its models (and the learned swapper, if any) are
        the chain's too."""
        self.analysis = analysis
        self.learned = analysis.learned
        self.name = "inswapper" if self.learned is not None else "mesh"
        self.device = device
        self.faces = faces
        self.badge = badge
        self.detector = analysis.detector
        self.mesher = analysis.mesher
        # The face region's resolution: 192 px on the CPU cuts the swap stage by a third (34 -> 23 ms
        # per face on a 2-core machine); the GPU has room for 256. On the CPU the masks are drawn
        # at half that side (masks.py): 8.0 -> 4.1 ms per face on one thread; the eyes' and mouth's
        # holes are drawn at full size since (the masks 1.3-1.4 -> 1.8-2.5 ms in another measurement).
        on_cuda = device.type == "cuda"
        region_size = 256 if on_cuda else 192
        self.swapper = MeshSwapper(
            device,
            keep_eyes_mouth=keep_eyes_mouth,
            region_size=region_size,
            mask_resolution=None if on_cuda else region_size // 2,
        )
        self.tracker = Tracker()
        # hands in front of the face (pipeline/hands), followed per session: on the CPU a followed
        # hand's landmarks run every 3rd frame, and the palm detector, which finds new hands, when
        # the faces' surroundings change or every 15th frame
        self.hands = None
        if hands:
            every, palm_every = (1, 4) if device.type == "cuda" else (3, 15)
            self.hands = HandTracker(PalmDetector(device), HandLandmarker(device), every=every, palm_every=palm_every)
        # On the CPU frames are converted from I420 only where the models read them (rgb_frames.py);
        # on CUDA whole, at once.
        self.convert_where_read = device.type == "cpu"
        self.timer = StageTimer()
        self.transfer = DeviceTransfer(device)
        # Batches run one at a time (the tracker follows each session frame by frame); an upload's
        # analysis runs beside them, on the same models (identity/face_analysis.py).
        self._batch_lock = threading.Lock()
        # each session's frame size: the tracks and hands hold frame pixels, so a peer that changes
        # its resolution (a browser adapting to the network does) starts afresh (first look)
        self._frame_sizes: dict[str, tuple[int, ...]] = {}
        self.looks = LookSchedule()

    def warm_up(self, max_batch: int = 1, sizes: Sequence[int] | None = None) -> None:
        """Loads every model and runs each stage once; on CUDA at every batch size up to max_batch
        (or at `sizes`): each new size's kernels load and get picked on first use, which put the
        first batches of a new size at 0.8-1.9 s (the server p99 of bench/results/2026-11-30-h200-gpu.md).
        The detector reads every frame size and quarter turn at one square there (FaceDetector.square),
        so these sizes cover them too. No face is needed: the face mesh of a blank crop is an
        average face, swapped onto itself. On CUDA each size's peak memory is measured, and
        `memory_batch_cap` set to the largest batch the free memory then holds
        (pipeline/memory_batch_cap.py)."""
        grey = np.full((WARM_UP_HEIGHT * 3 // 2, WARM_UP_WIDTH), 128, np.uint8)  # I420
        if sizes is None:
            sizes = range(1, max_batch + 1) if self.device.type == "cuda" else (1,)
        with self._batch_lock, torch.inference_mode():
            blank = torch.full((1, 3, 192, 192), 0.5, device=self.device)
            average = self.mesher.landmarks(blank).points[0]  # [468, 3] in the crop's pixels
            source = SourceFace(blank[0], average)
            latent = None
            if self.learned is not None:
                latent = self.learned.source_latent(to_uint8_hwc(blank)[0], five_points(average[None])[0])
            peaks = measure_batch_peaks(
                self.device, lambda size: self._warm_up_batch([grey] * size, source, latent), sizes
            )
            self.analysis.identities(
                to_uint8_hwc(blank), average[None], torch.zeros(1, dtype=torch.long, device=self.device)
            )
        self.timer = StageTimer()  # the warm-up's first-use times are no session's
        self.memory_batch_cap = None
        if peaks:
            free, total = free_device_memory(self.device)
            self.memory_batch_cap = memory_batch_cap(peaks, free, total, max_batch)
            if self.memory_batch_cap < max_batch:
                logger.info(
                    "batches capped at %d of max_batch %d by free device memory: %d MiB free, the largest"
                    " batch measured (%d) took %d MiB",
                    self.memory_batch_cap,
                    max_batch,
                    free >> 20,
                    max(peaks),
                    peaks[max(peaks)] >> 20,
                )

    def _warm_up_batch(self, i420: list[np.ndarray], source: SourceFace, latent: torch.Tensor | None) -> None:
        """A batch's path, on blank I420 frames: upload, conversion, each model, the swap of the
        average face in the middle of each frame, download."""
        size = len(i420)
        uploaded = self.transfer.upload(i420).ready()
        rgb = RgbFrames.from_i420(uploaded, lazy=self.convert_where_read)
        rgb.whole(list(range(size)))
        frames = rgb.tensor
        self.detector.detect(to_uint8_hwc(frames))
        self.mesher.landmarks(torch.zeros(size, 3, 192, 192, device=self.device))
        offset = torch.tensor([(WARM_UP_WIDTH - 192) / 2, (WARM_UP_HEIGHT - 192) / 2, 0.0], device=self.device)
        points = (source.points + offset).expand(size, -1, -1)
        index = torch.arange(size, device=self.device)
        if self.learned is not None:
            swapped, support = self.learned.swap(
                frames, to_uint8_hwc(frames), five_points(points), index, latent.expand(size, -1)
            )
        else:
            rendered = self.swapper.render(frames, points, index, [source] * size)
            swapped, support = rendered.frames, rendered.support > 0
        if self.hands is not None:  # the palm detector on the frames, the landmarks on one hand each
            self.hands.palms.detect(frames)
            hand = Rois(
                offset[None, :2], torch.full((1,), 96.0, device=self.device), torch.zeros(1, device=self.device)
            )
            self.hands.landmarker.landmarks_in(frames, [hand] * size)
        merged = uploaded.clone()
        changed = bounding_window(support)
        if changed is not None:
            write_window(merged, swapped, support, changed)
        self.transfer.download(merged)

    def _reference_identity(self, face_id: str) -> torch.Tensor | None:
        """The identity of an uploaded reference face (computed when it was uploaded)."""
        try:
            source = self.faces.get(face_id).analysis
        except FaceNotFound:
            return None
        return source.identity if isinstance(source, SourceFace) else None

    def _chosen(
        self, item: ChainItem, frame_tracks: tuple[Track, ...], frames_rgb: RgbFrames, frame: int
    ) -> list[Track]:
        """Which of a frame's faces to swap, by the session's `swap` option: all, the largest, or
        those matching a reference photo (SFace cosine >= the session's `reference_threshold`)."""
        mode = item.options.get("swap", "all")
        if mode == "largest" and frame_tracks:
            return [max(frame_tracks, key=lambda t: (t.bounds[2] - t.bounds[0]) * (t.bounds[3] - t.bounds[1]))]
        if mode == "reference":
            reference = self._reference_identity(str(item.options.get("reference_face_id", "")))
            if reference is None:
                return []
            threshold = float(item.options.get("reference_threshold", REFERENCE_THRESHOLD))
            chosen = []
            for track in frame_tracks:
                if not isinstance(track.held, torch.Tensor):  # a face's identity is read once per track
                    first = torch.zeros(1, dtype=torch.long, device=self.device)
                    frames_rgb.whole([frame])
                    frame_rgb = to_uint8_hwc(frames_rgb.tensor[frame : frame + 1])
                    with self.timer.stage("identity"):
                        track.held = self.analysis.identities(frame_rgb, track.smoothed[None], first)[0]
                if float(track.held @ reference) >= threshold:
                    chosen.append(track)
            return chosen
        return list(frame_tracks)

    def forget_session(self, session_id: str) -> None:
        with self._batch_lock:
            self._forget(session_id)
            self._frame_sizes.pop(session_id, None)

    def _forget(self, session_id: str) -> None:
        self.looks.forget(session_id)
        self.tracker.forget(session_id)
        if self.hands is not None:
            self.hands.forget(session_id)

    def _forget_resized(self, items: Sequence[ChainItem]) -> None:
        """Forgets the faces and hands of sessions whose frames changed size since their last batch:
        their points are in the old frame's pixels (smoothing would drag the swap there)."""
        for item in items:
            size = self._frame_sizes.get(item.session_id)
            if size is not None and size != item.image.shape:
                self._forget(item.session_id)
            self._frame_sizes[item.session_id] = item.image.shape

    def stage(self, batch: Sequence[ChainItem]) -> _StagedBatch:
        """Looks each frame's source face up once (a face deleted meanwhile cannot half-apply) and
        starts uploading each group of same-sized frames that has one. Uses no model."""
        self.timer.start_batch()
        staged = _StagedBatch(list(batch), [None] * len(batch))
        by_shape: dict[tuple[int, ...], list[int]] = defaultdict(list)
        for index, item in enumerate(batch):
            source = self._source(item)
            if isinstance(source, BaseException):
                staged.results[index] = source
            elif source is not None:
                staged.sources[index] = source
                by_shape[item.image.shape].append(index)
        with self.timer.stage("upload"):
            for indices in by_shape.values():
                staged.groups.append((indices, self.transfer.upload([batch[i].image for i in indices])))
        return staged

    def run_staged(self, staged: _StagedBatch) -> list[ChainResult]:
        results = list(staged.results)
        with self._batch_lock, torch.inference_mode():
            for index, item in enumerate(staged.batch):
                if index not in staged.sources:  # not swapped: its faces are not followed meanwhile,
                    self._forget(item.session_id)  # and a swap that resumes must not start from stale ones
            for indices, frames in staged.groups:
                items = [staged.batch[i] for i in indices]
                self._forget_resized(items)
                swapped = self._swap_group(items, [staged.sources[i] for i in indices], frames)
                for index, output in zip(indices, swapped):
                    results[index] = output
        return results

    def run(self, batch: Sequence[ChainItem]) -> list[ChainResult]:
        return self.run_staged(self.stage(batch))

    def _source(self, item: ChainItem) -> SourceFace | BaseException | None:
        face_id = item.options.get("face_id")
        if not face_id:
            return None  # no face chosen: the video passes through
        try:
            analysis = self.faces.get(str(face_id)).analysis
        except FaceNotFound as exc:
            return exc
        return analysis if isinstance(analysis, SourceFace) else None

    def _swap_group(self, items: list[ChainItem], sources: list[SourceFace], frames: Upload) -> list[np.ndarray | None]:
        timer = self.timer
        i420 = frames.ready()
        with timer.stage("convert"):
            # what every model reads (model_input.py)
            frames_rgb = RgbFrames.from_i420(i420, lazy=self.convert_where_read)
        now = time.monotonic()
        times = [now if item.time is None else item.time for item in items]  # what smoothing measures
        tracks = self._track(items, times, frames_rgb)
        rgb = frames_rgb.tensor
        targets, frame_index, face_sources, visibility = [], [], [], []
        for frame, frame_tracks in enumerate(tracks):
            for track in self._chosen(items[frame], frame_tracks, frames_rgb, frame):
                targets.append(track.smoothed)  # x, y and FaceMesh's depth (the swap reads what a turn hides)
                frame_index.append(frame)
                face_sources.append(sources[frame].to(self.device))
                visibility.append(track.visibility)  # a face the mesh lost is held, fading out
        if not targets:
            return [None] * len(items)  # no face in any frame: passed through, not charged
        points = torch.stack(targets)
        # each face's weight: its visibility, and its pose (turned beyond ~45 degrees: fading out);
        # faces of one frame share the frame's smallest weight
        # (on the device, each list uploaded once and nothing read back: a read is a sync, issue #37)
        index = torch.tensor(frame_index, device=self.device)
        weights = pose_weight(points).float() * torch.tensor(visibility, device=points.device)
        fades = torch.ones(len(items), device=self.device).scatter_reduce(
            0, index, weights.to(self.device), reduce="amin"
        )
        height, width = rgb.shape[2:]
        # Everything from here on works on the window of the frames that the swap can change (the
        # faces' regions: a fifth of a 640x480 frame for one face), not on whole frames.
        if self.learned is not None:
            work = (0, height, 0, width)
        else:
            work = self.swapper.reach(points, height, width)
        top, bottom, left, right = even_window(*work, height, width)
        with timer.stage("convert"):
            frames_rgb.window(None, left, top, right, bottom)
        base = rgb[:, :, top:bottom, left:right]
        with timer.stage("swap"):
            if self.learned is not None:  # inswapper on aligned crops, pasted back
                latents = torch.stack([source.latent for source in face_sources])
                swapped, support = self.learned.swap(rgb, to_uint8_hwc(rgb), five_points(points), index, latents)
            else:  # warp, masks, colour match and multiband blend
                rendered = self.swapper.render(base, points, index, face_sources, origin=(top, left))
                swapped, support = rendered.frames, rendered.support > 0
        weight = fades[:, None, None, None]
        if self.hands is not None:
            with timer.stage("hands"):
                faces = [points[index == frame, :, :2] for frame in range(len(items))]
                boxes = [torch.cat((face.amin(dim=1), face.amax(dim=1)), dim=1) for face in faces]
                found = self.hands.hands([item.session_id for item in items], frames_rgb, boxes, times)
                hands = hand_masks(found, bottom - top, right - left, rgb.device, origin=(top, left))
            if hands is not None:
                weight = weight * (1.0 - hands)
                support = support & (hands < 0.999)  # a hand's pixels keep their bytes
        with timer.stage("blend"):
            out = base + weight * (swapped - base)
        with timer.stage("convert"):
            merged = i420.clone()
            changed = bounding_window(support)
            if changed is not None:
                write_window(merged, out, support, changed, (top, left))
        if self.badge:
            rgb[:, :, top:bottom, left:right] = out  # the badge goes over the swapped face
            write_badge(merged, frames_rgb, self.timer)
        with timer.stage("download"):
            merged = self.transfer.download(merged)
        shown = (fades > 0).tolist()  # a frame whose faces are all faded out is as if it had none
        return [merged[frame] if shown[frame] and frame in frame_index else None for frame in range(len(items))]

    def _mesh(
        self, frames_rgb: RgbFrames, boxes: torch.Tensor, eyes: torch.Tensor, index: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Mesh points [N, 468, 3] in frame pixels and face-presence scores [N] of the crops."""
        crops, transforms = crop_faces(frames_rgb.tensor, boxes, index, eyes=eyes)
        mesh = self.mesher.landmarks(crops)
        return to_frame_coords(mesh.points, transforms), mesh.scores

    def _remesh(
        self, frames_rgb: RgbFrames, points: torch.Tensor, scores: torch.Tensor, index: torch.Tensor, rows: list[int]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The meshes of `rows` (cropped from detector boxes) redone from crops around their own
        points, MediaPipe's tracking crop, where both meshes found a face (where only the first
        did, the face counts as not found). FaceMesh read
        obama.jpg 6.6 % larger from the detector's box than from that crop (1.3-5.2 % the other
        test portraits), so a face's first frame was swapped larger than its next ones."""
        at = torch.tensor(rows).to(points.device, non_blocking=True)
        first = points[at]
        # a broken first mesh (NaN, or far off the frame) must not steer a crop: cropped at 0 instead,
        # and the first mesh kept, for the tracker to judge
        sound = (first.abs() < MAX_COORDINATE).flatten(1).all(dim=1)
        boxes, eyes = boxes_from_points(torch.where(sound[:, None, None], first, torch.zeros_like(first)))
        # (their frames are converted whole already: the detector read them)
        again, again_scores = self._mesh(frames_rgb, boxes, eyes, index[at])
        good = self.tracker.settings.min_score
        found = (
            sound & (scores[at] >= good) & (again_scores >= good) & (again.abs() < MAX_COORDINATE).flatten(1).all(dim=1)
        )
        points, scores = points.clone(), scores.clone()
        points[at] = torch.where(found[:, None, None], again, points[at])
        # a first mesh whose own crop finds no face is no face to follow: the next frame crops
        # there too (a head rolled past 90 degrees, its key points half a turn off, meshed once)
        scores[at] = torch.where(sound, torch.minimum(again_scores, scores[at]), scores[at])
        return points, scores

    def _track(self, items: list[ChainItem], times: list[float], frames_rgb: RgbFrames) -> list[tuple[Track, ...]]:
        """Each frame's face tracks: the detector runs only where the tracker asks (no face yet, a
        face lost, or periodically for new faces); every face is meshed from its last landmarks."""
        plan = self.tracker.plan([(item.session_id, frame_time) for item, frame_time in zip(items, times)])
        rgb = frames_rgb.tensor
        detected = {}
        if plan.to_detect:
            with self.timer.stage("convert"):
                frames_rgb.whole(plan.to_detect)
            by_turn = defaultdict(list)  # quarter turns -> frames: a session with no face looks at some turned
            for frame in plan.to_detect:
                session = plan.sessions[frame]
                by_turn[
                    self.looks.turns(session.session_id, session.detect, self.tracker.tracks(session.session_id))
                ].append(frame)
            # on the CPU a batch whose looks are all periodic reads the frames at half size (batched with
            # a first look or a look for a lost face, at full size); a GPU has the time for full size
            periodic = {plan.sessions[i].detect for i in plan.to_detect} == {"periodic"}
            size = (
                periodic_look_size(*rgb.shape[2:], self.detector.input_size)
                if periodic and self.device.type == "cpu"
                else None
            )
            with self.timer.stage("detect"):
                for turns, frames in by_turn.items():
                    detected.update(zip(frames, detect_turned(self.detector, to_uint8_hwc(rgb[frames]), turns, size)))
                    if len(turns) == 1:  # a new face, seen upright or upside down: checked half a turn on
                        new = [
                            frame
                            for frame in frames
                            if len(detected[frame]) and plan.sessions[frame].detect == "no_faces"
                        ]
                        checked = (
                            half_turn_checked(
                                self.detector, to_uint8_hwc(rgb[new]), [detected[f] for f in new], turns[0]
                            )
                            if new
                            else []
                        )
                        detected.update(zip(new, checked))
        per_frame = [self.tracker.crops(session, detected.get(i)) for i, session in enumerate(plan.sessions)]
        boxes, eyes, index = stack_crops(per_frame, self.device)
        if len(index):
            if frames_rgb.lazy:
                with self.timer.stage("convert"):
                    for frame, extent in zip(index.tolist(), crop_extents(boxes, eyes).tolist()):
                        frames_rgb.window([frame], *extent)
            with self.timer.stage("landmarks"):
                points, scores = self._mesh(frames_rgb, boxes, eyes, index)
                detected_rows = [
                    row for row, crop in enumerate(c for frame in per_frame for c in frame) if crop.from_detection
                ]
                if detected_rows:  # meshed again from their own extent, as every later frame is
                    points, scores = self._remesh(frames_rgb, points, scores, index, detected_rows)
        else:
            points, scores = torch.zeros(0, 468, 3, device=self.device), torch.zeros(0, device=self.device)
        observations, start = [], 0
        for i, session in enumerate(plan.sessions):
            rows = slice(start, start + len(per_frame[i]))
            start = rows.stop
            observations.append(
                Observation(
                    session.session_id,
                    session.frame_time,
                    session.detect is not None,
                    per_frame[i],
                    points[rows],
                    scores[rows],
                )
            )
        with self.timer.stage("track"):
            return self.tracker.update(observations)
