"""Each session's schedule of detector looks: at which quarter turns a look reads the frame, and at
what size a periodic look reads it on the CPU.

The tracker says when a session needs a look (no face yet, a face lost, or periodically for new
faces: `SessionPlan.detect`); this says how to look, from what the session's earlier looks tried.
A pure policy like the tracker: it calls no model.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.detect.turned import upright_turns
from pipeline.tracking.tracker import DetectReason, Track

# While a session finds no face, the quarter turns its looks read the frame at, in turn: upright
# every second look (a face that comes back upright is found at once), a head on its side or
# upside down within four frames (0.13 s at 30 fps). Both sides in one look: one of them shows a
# head on its side upright, the other upside down (detect/turned.py keeps the better). A session
# with no face costs 1.25 upright looks a frame.
LOOK_TURNS: tuple[tuple[int, ...], ...] = ((0,), (1, 3), (0,), (2,))
# While its faces are tracked, the turns of a session's periodic looks for new ones (every 15th
# frame): mostly upright (a person walking in is found within half a second, at most a second),
# every fourth both sides (a second person lying down, within two seconds), every eighth upside
# down (within four), for a quarter more detector work.
PERIODIC_LOOK_TURNS: tuple[tuple[int, ...], ...] = ((0,), (0,), (1, 3), (0,), (2,), (0,), (1, 3), (0,))


class LookSchedule:
    """Per session: how many looks in a row found no face, and how many periodic looks it had."""

    def __init__(self) -> None:
        self._no_face_looks: dict[str, int] = {}
        self._periodic_looks: dict[str, int] = {}

    def turns(self, session_id: str, reason: DetectReason, tracks: Sequence[Track]) -> tuple[int, ...]:
        """Quarter turns of the frame this look reads it at: while a session finds no face, every
        second look is turned (LOOK_TURNS); a session with faces looks for new ones mostly
        upright (PERIODIC_LOOK_TURNS), and for a face it lost at the turn that shows that face
        upright (held where it was last seen, it may have moved out of its crop). The count of
        looks for no face goes on through a face found and lost again, so that the next looks try
        the other turns rather than the one whose face did not hold. `tracks`: the session's."""
        if reason == "lost":  # looked for at the turn that shows the lost face upright
            lost = [track for track in tracks if track.misses]
            return (upright_turns(lost[0].smoothed),) if lost else (0,)
        if reason == "periodic":  # faces followed
            self._no_face_looks.pop(session_id, None)
            periodic = self._periodic_looks.get(session_id, 0)
            self._periodic_looks[session_id] = periodic + 1
            return PERIODIC_LOOK_TURNS[periodic % len(PERIODIC_LOOK_TURNS)]
        looks = self._no_face_looks.get(session_id, 0)
        self._no_face_looks[session_id] = looks + 1
        return LOOK_TURNS[looks % len(LOOK_TURNS)]

    def forget(self, session_id: str) -> None:
        self._no_face_looks.pop(session_id, None)
        self._periodic_looks.pop(session_id, None)


def periodic_look_size(height: int, width: int, full: int) -> int:
    """The detector's input side for a periodic look on the CPU, which only looks for faces
    that came in while the session's faces were tracked: frames scaled to half their size (at
    most `full`). A 640x480 frame is then read at 320 instead of 640, a quarter of the pixels (one
    CPU thread: 29 instead of 72-78 ms a look, bench/detect.py), and the detector's smallest anchor
    (16 network pixels) spans 32 frame pixels instead of 16 (frames over 1280 pixels wide: as at
    full size), still far below a face the swap can use; 1280x720 frames were read at half size
    anyway. A session's first look and the looks for lost faces keep the full size."""
    half = -(-max(height, width) // 64) * 32  # half the longer side, up to a multiple of 32
    return min(full, half)
