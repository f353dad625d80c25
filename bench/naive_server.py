"""The baseline for bench/streaming.py: a face-swap server without a scheduler.

The common way to put a model behind aiortc: the answering peer wraps the
remote track in a track whose `recv()` awaits the next remote frame and runs
the model on it right there, on the event loop. Here the model is a fixed
cost, `time.sleep((batch_ms + frame_ms) / 1000)` per frame (a batch of one),
which blocks the loop exactly as an inline model call would.

Deliberately stock aiortc: no jitter-buffer tuning, the remote track's
unbounded queue, no frame skipping. Only ICE is restricted (stream/ice.py) so
the media stays on 127.0.0.1. Same `POST /api/offer` contract as facefuse:
`{"sdp", "type": "offer"}` -> `{"sdp", "type": "answer", "session_id"}`;
`GET /healthz` -> `{"status": "ok", "sessions": N}`.

A benchmark helper, not part of the product:
    python bench/naive_server.py --port 8090 --batch-ms 10 --frame-ms 1
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import secrets
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import av
from aiohttp import web
from aiortc import MediaStreamTrack, RTCPeerConnection, RTCSessionDescription

from stream.ice import IceSettings, restrict_gathering, rtc_configuration

logger = logging.getLogger("naive_server")


@dataclass(frozen=True)
class NaiveSettings:
    ice: IceSettings
    cost_s: float  # blocking work per frame, on the event loop


class InlineCostTrack(MediaStreamTrack):
    """Each remote frame, after `cost_s` of blocking work on the event loop, unchanged."""

    kind = "video"

    def __init__(self, source: MediaStreamTrack, cost_s: float) -> None:
        super().__init__()
        self._source = source
        self._cost_s = cost_s

    async def recv(self) -> av.VideoFrame:
        frame = await self._source.recv()  # raises MediaStreamError when the peer stops
        time.sleep(self._cost_s)  # the inline "model": blocks the loop, on purpose
        return frame


class Peers:
    """The open peer connections by session id; each closes itself when its peer goes away."""

    def __init__(self, settings: NaiveSettings) -> None:
        self._settings = settings
        self._peers: dict[str, RTCPeerConnection] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._peers)

    async def answer(self, offer_sdp: str) -> tuple[str, str]:
        """(session_id, answer SDP) for an offer."""
        session_id = secrets.token_urlsafe(9)
        pc = RTCPeerConnection(rtc_configuration(self._settings.ice))
        self._peers[session_id] = pc

        def on_track(track: MediaStreamTrack) -> None:
            if track.kind == "video":
                pc.addTrack(InlineCostTrack(track, self._settings.cost_s))  # sendrecv on the offer's transceiver
                track.on("ended", lambda: self._spawn(self.close(session_id)))

        def on_state() -> None:
            if pc.connectionState in ("failed", "closed"):
                self._spawn(self.close(session_id))

        pc.on("track", on_track)
        pc.on("connectionstatechange", on_state)
        try:
            await pc.setRemoteDescription(RTCSessionDescription(sdp=offer_sdp, type="offer"))
            answer = await pc.createAnswer()
            await restrict_gathering(pc, self._settings.ice)
            await pc.setLocalDescription(answer)
        except BaseException:
            await self.close(session_id)
            raise
        return session_id, pc.localDescription.sdp

    async def close(self, session_id: str) -> None:
        pc = self._peers.pop(session_id, None)
        if pc is not None:
            logger.info("session %s closing", session_id)
            await pc.close()

    async def close_all(self) -> None:
        await asyncio.gather(*(self.close(session_id) for session_id in list(self._peers)))
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _spawn(self, coro: object) -> None:
        task = asyncio.ensure_future(coro)  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


PEERS = web.AppKey("peers", Peers)

routes = web.RouteTableDef()


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message}}, status=status)


@routes.post("/api/offer")
async def offer(request: web.Request) -> web.Response:
    try:
        body = await request.json()
    except ValueError:
        return _error(400, "invalid_json", "the body is not valid JSON")
    if not isinstance(body, dict) or body.get("type") != "offer" or not isinstance(body.get("sdp"), str):
        return _error(400, "invalid_body", 'expected {"sdp": str, "type": "offer"}')
    try:
        session_id, answer = await request.app[PEERS].answer(body["sdp"])
    except (ValueError, KeyError, IndexError) as exc:  # aiortc's parser and negotiation errors
        return _error(400, "invalid_sdp", f"the offer could not be applied: {exc}")
    return web.json_response({"sdp": answer, "type": "answer", "session_id": session_id})


@routes.get("/healthz")
async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok", "sessions": len(request.app[PEERS])})


def create_app(settings: NaiveSettings) -> web.Application:
    app = web.Application()

    async def peers(app: web.Application):  # type: ignore[no-untyped-def]
        app[PEERS] = Peers(settings)
        yield
        await app[PEERS].close_all()

    app.cleanup_ctx.append(peers)
    app.add_routes(routes)
    return app


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Naive aiortc server: a fixed cost inline in recv(), on the event loop."
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8090)
    parser.add_argument(
        "--ice-host", action="append", help="ICE host candidate address (repeatable; default 127.0.0.1)"
    )
    parser.add_argument("--batch-ms", type=float, default=10.0, help="fixed cost per call (a batch of one frame)")
    parser.add_argument("--frame-ms", type=float, default=1.0, help="fixed cost per frame")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    if args.batch_ms < 0 or args.frame_ms < 0:
        parser.error("costs must be >= 0 ms")
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = NaiveSettings(
        ice=IceSettings(hosts=tuple(args.ice_host or ("127.0.0.1",))),
        cost_s=(args.batch_ms + args.frame_ms) / 1000,
    )
    with contextlib.suppress(KeyboardInterrupt):
        web.run_app(create_app(settings), host=args.host, port=args.port, print=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
