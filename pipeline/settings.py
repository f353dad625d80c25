"""The pipeline's settings section. Each field that is a `facefuse serve` flag carries its help
text in its metadata (the CLI shows it with the field's default; "default_text" where the default
is better said in words)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pipeline.device imports torch, which the command line must not wait for
    from pipeline.device import DeviceChoice

DEVICE_CHOICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True)
class PipelineSettings:
    chain: str = field(
        default="mesh",
        metadata={
            "help": (
                "chain to run: mesh (the face swap), inswapper (with --models-dir), passthrough, invert, "
                "fixed-cost:BATCH_MS:FRAME_MS"
            )
        },
    )
    device: DeviceChoice = field(default="auto", metadata={"help": "where the chain runs; auto: CUDA if present"})
    # A batch goes when it holds max_batch frames, or max_wait_ms after its first
    # frame arrived (Triton and DeepStream use the same two knobs; the window stays at
    # or under 5 ms so it costs little latency: docs/architecture.md).
    max_batch: int = field(default=8, metadata={"help": "frames per batch at most"})
    max_wait_ms: float = field(default=4.0, metadata={"help": "how long a batch waits for more frames"})
    # Frames of one session in flight at once; 1 keeps each session's frames in order
    # and lets the newest frame win while the previous one is processed.
    max_in_flight: int = field(default=1, metadata={"help": "frames of one session in flight at once"})
    # Mark swapped output with a small "AI" badge (deep-fake disclosure); an operator may turn it off.
    badge: bool = field(
        default=True, metadata={"help": "the 'AI' disclosure badge on swapped video; off: none (operators only)"}
    )
    # The mesh swap keeps the target's own eyes and mouth interior where they are open.
    keep_eyes_mouth: bool = field(
        default=True, metadata={"help": "the target's own open eyes and mouth show through the swap"}
    )
    # Keep hands in front of the face (pipeline/hands). Hands are followed from frame to frame and
    # looked for only near faces and when something changes there: they cost one 640x480 session
    # on the CPU 4 % of its frame rate (bench/results/2026-11-30-cpu-speed-work.md).
    hands: bool = field(
        default=True, metadata={"help": "keep hands in front of the face in front of the swap; off is a little faster"}
    )
    # Frames of more pixels are scaled down to fit before the chain, their aspect kept (peers choose
    # their frame size: one 7680x4320 frame costs a CPU chain 3.5 s); None: no limit.
    max_frame_pixels: int | None = field(
        default=1920 * 1080,
        metadata={
            "help": "larger frames are scaled down to this many pixels (or WIDTHxHEIGHT) before the chain; 0: no limit"
        },
    )
    # torch's CPU threads; None: all cores but one, which the codecs and the network need
    # (on this 2-core machine one thread gave 20 fps / 67 ms against 15 fps / 82 ms with two).
    cpu_threads: int | None = field(
        default=None, metadata={"help": "torch threads on the CPU", "default_text": "all cores but one"}
    )
    # Where the learned models users bring live (chain `inswapper`): inswapper_128(.fp16).onnx, w600k_r50.onnx.
    models_dir: Path | None = field(
        default=None,
        metadata={"help": "folder with the models you bring, for --chain inswapper", "default_text": "none"},
    )

    def __post_init__(self) -> None:
        if self.device not in DEVICE_CHOICES:
            raise ValueError(f"device must be auto, cpu or cuda, not {self.device!r}")
        if self.max_batch < 1:
            raise ValueError("max_batch must be >= 1")
        if not 0 <= self.max_wait_ms <= 1000:
            raise ValueError("max_wait_ms must be between 0 and 1000")
        if self.max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1")
        if self.max_frame_pixels is not None and self.max_frame_pixels < 64 * 64:
            raise ValueError("max_frame_pixels must be at least 4096 (64x64)")
        if self.cpu_threads is not None and not 1 <= self.cpu_threads <= 256:
            raise ValueError("cpu_threads must be between 1 and 256")
