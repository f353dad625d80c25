"""One session's processed video to every encoder that sends it: the publisher's own return
video (when its offer receives) and each WHEP viewer.

Each encoder reads its own ProcessedTrack, one latest-wins slot: an encoder that falls behind
(a slow viewer) loses its own frames and never holds back the publisher or another viewer.
"""

from __future__ import annotations

from pipeline.runner import FrameResult
from stream.processed_track import ProcessedTrack


class VideoFanout:
    def __init__(self) -> None:
        self._tracks: set[ProcessedTrack] = set()

    def add(self, track: ProcessedTrack) -> None:
        self._tracks.add(track)

    def remove(self, track: ProcessedTrack) -> None:
        self._tracks.discard(track)

    def __len__(self) -> int:
        return len(self._tracks)

    def __contains__(self, track: ProcessedTrack) -> bool:
        return track in self._tracks

    @property
    def watched(self) -> bool:
        """Someone's encoder would send what the chain makes: without one, processing is wasted."""
        return any(track.readyState == "live" for track in self._tracks)

    def encode_s(self) -> float | None:
        """How long the encoders take to encode and send a frame (the median of their medians)."""
        medians = sorted(m for track in self._tracks if (m := track.encode_ms.percentile(50)) is not None)
        return medians[len(medians) // 2] / 1000 if medians else None

    def put(self, result: FrameResult) -> None:
        for track in list(self._tracks):
            track.put(result)

    def stop(self) -> None:
        for track in list(self._tracks):
            track.stop()
        self._tracks.clear()
