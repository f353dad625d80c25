"""A live clip whose flashes and clicks coincide: once a second the video turns white for a few
frames and the audio clicks (a 20 ms 1 kHz burst), both on one clock, as a camera and a
microphone capture one event. Each video frame carries its index (client/frame_stamp.py), so a
receiver knows when any frame was captured, not only a flash's."""

from __future__ import annotations

import asyncio
import fractions
import time

import av
import numpy as np
from aiortc import MediaStreamTrack

from client.frame_stamp import WIDTH_NEEDED, read_stamp, split_value, stamp_value, write_stamp

FPS = 30
WIDTH, HEIGHT = WIDTH_NEEDED, 240  # the narrowest frame that carries a stamp
SAMPLE_RATE = 48_000
AUDIO_FRAME_SAMPLES = 960  # 20 ms: Opus's frame, so a click is one frame on both sides
FLASH_EVERY_S = 1.0
FLASH_FRAMES = 3
TAG = 0xAF


class CaptureClock:
    """When the clip started; both tracks pace themselves (and a receiver dates frames) from it."""

    def __init__(self) -> None:
        self.start = time.monotonic() + 0.2

    async def wait(self, at_s: float) -> None:
        delay = self.start + at_s - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)


class FlashTrack(MediaStreamTrack):
    kind = "video"

    def __init__(self, clock: CaptureClock) -> None:
        super().__init__()
        self._clock = clock
        self._index = 0

    async def recv(self) -> av.VideoFrame:
        index, self._index = self._index, self._index + 1
        await self._clock.wait(index / FPS)
        flash = index % round(FLASH_EVERY_S * FPS) < FLASH_FRAMES
        image = np.full((HEIGHT * 3 // 2, WIDTH), 128, np.uint8)
        image[:HEIGHT] = 235 if flash else 40
        write_stamp(image[:HEIGHT], stamp_value(TAG, index))
        frame = av.VideoFrame.from_ndarray(image, format="yuv420p")
        frame.pts, frame.time_base = index * 3000, fractions.Fraction(1, 90_000)
        return frame


class ClickTrack(MediaStreamTrack):
    kind = "audio"

    def __init__(self, clock: CaptureClock) -> None:
        super().__init__()
        self._clock = clock
        self._index = 0
        t = np.arange(AUDIO_FRAME_SAMPLES) / SAMPLE_RATE
        self._click = (np.sin(2 * np.pi * 1000 * t) * 20000).astype(np.int16)

    async def recv(self) -> av.AudioFrame:
        index, self._index = self._index, self._index + 1
        await self._clock.wait(index * AUDIO_FRAME_SAMPLES / SAMPLE_RATE)
        frames_per_flash = round(FLASH_EVERY_S * SAMPLE_RATE / AUDIO_FRAME_SAMPLES)
        samples = self._click if index % frames_per_flash == 0 else np.zeros(AUDIO_FRAME_SAMPLES, np.int16)
        frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = SAMPLE_RATE
        frame.pts, frame.time_base = index * AUDIO_FRAME_SAMPLES, fractions.Fraction(1, SAMPLE_RATE)
        return frame


class SyncMeter:
    """At a receiver: how late each video frame and each click arrive after they were captured."""

    def __init__(self, clock: CaptureClock) -> None:
        self._clock = clock
        self.video_delays: list[float] = []
        self.click_delays: list[float] = []
        self.flashes_seen = 0
        self._in_click = False

    def on_video(self, frame: av.VideoFrame, arrived: float) -> None:
        stamp = read_stamp(frame)
        if stamp is None or split_value(stamp[0])[0] != TAG:
            return
        index = split_value(stamp[0])[1]  # 16 bits: 36 minutes at 30 fps
        self.video_delays.append(arrived - (self._clock.start + index / FPS))
        if frame.to_ndarray(format="gray")[HEIGHT // 2 :].mean() > 150:
            self.flashes_seen += 1

    def on_audio(self, frame: av.AudioFrame, arrived: float) -> None:
        samples = frame.to_ndarray().astype(np.float64)
        loud = np.sqrt((samples**2).mean()) > 3000
        if loud and not self._in_click:  # a click's first frame (the codec may spread it over two)
            # the click before its arrival, for any delay under one flash period
            flashes = round((arrived - self._clock.start) / FLASH_EVERY_S - 0.5)
            self.click_delays.append(arrived - (self._clock.start + flashes * FLASH_EVERY_S))
        self._in_click = loud

    def offset_s(self) -> float:
        """Audio's lateness minus video's (medians): positive when the sound comes after the picture."""
        return float(np.median(self.click_delays) - np.median(self.video_delays))
