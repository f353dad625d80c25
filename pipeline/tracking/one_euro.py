"""A One-Euro filter for batches of landmark sets: a still face stays still, a moving one is followed.

The One-Euro filter (Casiez, Roussel and Vogel, CHI 2012) is a first-order low-pass filter whose
cutoff rises with the signal's speed: cutoff = min_cutoff + beta * speed, the speed itself read
from a low-passed derivative (cutoff d_cutoff). Slow means heavy smoothing (jitter goes), fast
means little (lag goes).

Two choices suit landmark sets (rows of [F, P, D] points, x and y first, in pixels):
- The speed is measured in face sizes per second (the size is twice the points' RMS distance
  from their centroid in x, y), so one setting serves near and far faces alike.
- The speed of each point is read through the whole face: the derivative field is split into
  its affine part (a least-squares fit over all P points: translation, rotation, zoom, shear)
  and each point's residual, and each part counts only where it stands out of the noise, whose
  size is the residuals' median. Independent jitter of the points averages out of the affine
  fit, so it no longer holds the cutoff up, while a head turn moves the affine part and a mouth
  that opens moves its own points' residuals. Jitter that moves the whole mesh together cannot
  be told from motion that way and is smoothed as the classic filter would.

The state is plain tensors (`OneEuroState`), so a caller can stack the rows of many tracks of
many sessions, step them together and split them again; `OneEuroFilter` holds the state of a
fixed set of rows for callers that do not.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

# A derivative counts as motion where it exceeds this many noise sizes (see `_speed`).
RESIDUAL_SIGMAS = 3.0
AFFINE_SIGMAS = 4.0
# The fewest points an affine fit over a face makes sense for.
MIN_POINTS = 8


# A frame time that stands still or goes back (a sender's broken timestamps, a clock that wrapped)
# counts as one frame at 30 fps after the last: the smoothing keeps following instead of holding
# the points where they were (a dt of 0 keeps a row's value).
STALLED_CLOCK_DT = 1 / 30


def seconds_between(then: float, now: float) -> float:
    """The dt of a filter step from frame time `then` to `now` (see STALLED_CLOCK_DT)."""
    return now - then if now > then else STALLED_CLOCK_DT


@dataclass(frozen=True)
class OneEuroSettings:
    min_cutoff: float = 0.1  # Hz: the cutoff of a still face
    beta: float = 80.0  # Hz of extra cutoff per face size per second of speed
    d_cutoff: float = 1.0  # Hz: the cutoff of the derivative that gives the speed

    def __post_init__(self) -> None:
        if not self.min_cutoff > 0:
            raise ValueError("min_cutoff must be > 0")
        if not self.beta >= 0:
            raise ValueError("beta must be >= 0")
        if not self.d_cutoff > 0:
            raise ValueError("d_cutoff must be > 0")


@dataclass(frozen=True)
class OneEuroState:
    """The filter's memory for F rows: the filtered points [F, P, D] (the output) and their
    low-passed derivative [F, P, D], in units per second."""

    value: torch.Tensor
    slope: torch.Tensor

    @classmethod
    def start(cls, points: torch.Tensor) -> OneEuroState:
        """Rows that begin at `points`, at rest."""
        return cls(points, torch.zeros_like(points))


def one_euro_step(
    state: OneEuroState,
    points: torch.Tensor,
    dt: torch.Tensor,
    settings: OneEuroSettings,
    fresh: torch.Tensor | None = None,
) -> OneEuroState:
    """One update of F rows: `points` [F, P, D] measured `dt` [F] seconds after the state's.

    `fresh` [F] bool marks rows that start over at `points` (a new track, a face that jumped).
    A dt of 0 (or less) keeps a row's value. Runs on the points' device, without host syncs.
    """
    if points.dim() != 3 or points.shape[1] < MIN_POINTS or points.shape[2] < 2:
        raise ValueError(f"points must be [F, P >= {MIN_POINTS}, D >= 2], got {tuple(points.shape)}")
    if state.value.shape != points.shape or state.slope.shape != points.shape:
        raise ValueError(f"the state holds {tuple(state.value.shape)}, the points are {tuple(points.shape)}")
    if dt.shape != points.shape[:1]:
        raise ValueError(f"dt must be [F] = [{points.shape[0]}], got {tuple(dt.shape)}")
    dt = dt.to(points.device, points.dtype).clamp_min(0)[:, None, None]
    previous = state.value
    change = points - previous
    # alpha(dt, fc) = dt / (dt + tau) with tau = 1 / (2 pi fc); alpha * change / dt is written
    # change / (dt + tau) so that dt = 0 needs no special case.
    tau_d = 1.0 / (2 * math.pi * settings.d_cutoff)
    slope = state.slope * (tau_d / (dt + tau_d)) + change / (dt + tau_d)
    speed = _speed(slope, previous) / _face_size(previous)
    tau = 1.0 / (2 * math.pi * (settings.min_cutoff + settings.beta * speed))
    value = previous + change * (dt / (dt + tau))
    if fresh is not None:
        restart = fresh.to(points.device, torch.bool)[:, None, None]
        value = torch.where(restart, points, value)
        slope = torch.where(restart, torch.zeros_like(slope), slope)
    return OneEuroState(value, slope)


def _face_size(points: torch.Tensor) -> torch.Tensor:
    """[F, 1, 1]: twice the RMS distance of the points from their centroid, in x and y."""
    xy = points[..., :2]
    spread = (xy - xy.mean(dim=1, keepdim=True)).square().sum(dim=-1).mean(dim=1).sqrt()
    return (2 * spread).clamp_min(1e-6)[:, None, None]


def _speed(slope: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """[F, P, 1]: each point's speed that stands out of the noise (see the module's docstring).

    The affine part is fitted over the points' x, y (centred and scaled for conditioning); its
    noise at a point is about sqrt(3 / P) of the residuals' median, so it counts above
    AFFINE_SIGMAS of that, and a residual above RESIDUAL_SIGMAS medians.
    """
    count = points.shape[1]
    xy = points[..., :2]
    centred = xy - xy.mean(dim=1, keepdim=True)
    spread = centred.square().sum(dim=-1).mean(dim=1).sqrt().clamp_min(1e-6)[:, None, None]
    design = torch.cat((centred / spread, torch.ones_like(xy[..., :1])), dim=-1)  # [F, P, 3]
    gram = design.transpose(1, 2) @ design
    gram = gram + 1e-6 * torch.eye(3, dtype=gram.dtype, device=gram.device)  # points all in one place
    coefficients = torch.linalg.solve_ex(gram, design.transpose(1, 2) @ slope).result
    affine = design @ coefficients
    residual = (slope - affine).norm(dim=-1, keepdim=True)
    noise = residual.median(dim=1, keepdim=True).values
    affine_floor = AFFINE_SIGMAS * math.sqrt(3 / count) * noise
    return (affine.norm(dim=-1, keepdim=True) - affine_floor).clamp_min(0) + (
        residual - RESIDUAL_SIGMAS * noise
    ).clamp_min(0)


class OneEuroFilter:
    """The filter for a fixed set of F rows (e.g. one per face track), each with its own clock.

    `filter(points, times)` takes [F, P, D] points and [F] times in seconds (floats: keep
    `time.monotonic()`-sized values out of float32) and returns the filtered points. A row's first
    update, and its first after `reset`, passes its points through.
    """

    def __init__(self, rows: int, settings: OneEuroSettings | None = None) -> None:
        if rows < 1:
            raise ValueError("rows must be >= 1")
        self.rows = rows
        self.settings = settings or OneEuroSettings()
        self.state: OneEuroState | None = None
        self._times = [0.0] * rows
        self._fresh = [True] * rows

    def filter(self, points: torch.Tensor, times: Sequence[float]) -> torch.Tensor:
        if points.dim() != 3 or points.shape[0] != self.rows:
            raise ValueError(f"points must be [{self.rows}, P, D], got {tuple(points.shape)}")
        if len(times) != self.rows:
            raise ValueError(f"times must hold {self.rows} values, got {len(times)}")
        times = [float(t) for t in times]
        dt = torch.tensor([now - then for now, then in zip(times, self._times, strict=True)])
        fresh = torch.tensor(self._fresh)
        state = self.state if self.state is not None else OneEuroState.start(points)
        self.state = one_euro_step(state, points, dt, self.settings, fresh)
        self._times = times
        self._fresh = [False] * self.rows
        return self.state.value

    def reset(self, rows: Sequence[int] | None = None) -> None:
        """Rows (all by default) that start over at their next points."""
        for row in range(self.rows) if rows is None else rows:
            self._fresh[row] = True
