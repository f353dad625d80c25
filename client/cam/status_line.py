"""The one-line live status of `facefuse cam`: the session's fps in and out and its latency (from
GET /api/sessions/{id}), the frames written to the outputs, the tokens left and the throttle level.

On a terminal the line is rewritten in place; into a file or a pipe a line is written now and then,
so a log keeps a trace without one line a second.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, TextIO

PLAIN_EVERY_S = 10.0  # not a terminal: one line this often


def status_text(session: Mapping[str, Any] | None, written_fps: float) -> str:
    if session is None:
        return f"waiting for the session | written {written_fps:.1f} fps"
    latency = (session.get("latency_ms") or {}).get("p50")
    parts = [
        f"in {session.get('fps_in', 0):.1f} fps",
        f"out {session.get('fps_out', 0):.1f} fps",
        f"written {written_fps:.1f} fps",
        f"latency {latency:.0f} ms" if latency is not None else "latency -",
        _meter_text(session.get("meter")),
    ]
    return " | ".join(parts)


def _meter_text(meter: Mapping[str, Any] | None) -> str:
    if not meter or meter.get("seconds_left") is None:
        return "unmetered"  # the server says so with no time left to count (a local-mode server)
    level = meter.get("level", "?")
    if level == "stopped":
        grace = meter.get("grace_s")
        ends = f", the session ends in {grace:.0f} s unless topped up" if grace is not None else ""
        return f"STOPPED ({meter.get('reason') or 'no tokens'}){ends}"
    return f"tokens {meter.get('balance', 0):.1f} (~{meter['seconds_left'] / 60:.0f} min) | throttle {level}"


class StatusLine:
    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._in_place = out.isatty()
        self._shown = False
        self._last_plain = -PLAIN_EVERY_S

    def show(self, text: str) -> None:
        if self._in_place:
            self.out.write("\r" + text + "\x1b[K")
        elif time.monotonic() - self._last_plain >= PLAIN_EVERY_S:
            self._last_plain = time.monotonic()
            self.out.write(text + "\n")
        else:
            return
        self.out.flush()
        self._shown = True

    def say(self, text: str) -> None:
        """A message of its own line, leaving the status line intact below it."""
        self.end()
        self.out.write(text + "\n")
        self.out.flush()

    def end(self) -> None:
        if self._in_place and self._shown:
            self.out.write("\n")
            self.out.flush()
        self._shown = False
