"""`facefuse cam`'s flags. Only argparse here: `facefuse --help` builds this parser, and must not
wait for aiortc or PyAV; the command imports them once it runs."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

DESCRIPTION = (
    "Publish a camera (or a video file, looped) to a facefuse server over WHIP, play the swapped video back "
    "over WHEP, and write it to a virtual camera that OBS, Zoom or a browser can pick, and/or to a file. "
    "Ctrl-C ends both sessions on the server."
)


def add_cam_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--server", required=True, metavar="URL", help="the server, e.g. http://127.0.0.1:8080")
    parser.add_argument("--token", metavar="KEY", help="the account's API key (none for a server in local mode)")
    parser.add_argument(
        "--face", required=True, metavar="PHOTO_OR_ID", help="a photo of the face to swap to, or an uploaded face's id"
    )
    parser.add_argument(
        "--input",
        metavar="DEVICE_OR_FILE",
        help="a camera (/dev/videoN on Linux, a number on macOS, video=NAME on Windows) or a video file, looped "
        "[default: the first camera]",
    )
    parser.add_argument("--stream", default="cam", help="the stream name to publish under [default: cam]")
    parser.add_argument(
        "--virtual-camera", action="store_true", help="write to a virtual camera (needs: pip install 'facefuse[cam]')"
    )
    parser.add_argument("--camera-backend", help="pyvirtualcam backend: v4l2loopback, obs, unitycapture [default: any]")
    parser.add_argument("--camera-device", help="the virtual camera device, e.g. /dev/video10 [default: the first]")
    parser.add_argument("--output", type=Path, metavar="FILE", help="write to a video file (.mp4, .mkv, .webm)")
    parser.add_argument(
        "--preview", action="store_true", help="show the swapped video in a window; closing it ends the run"
    )
    parser.add_argument("--size", default="640x480", help="the size asked of a camera device [default: 640x480]")
    parser.add_argument("--fps", type=float, default=30.0, help="the frame rate asked of a camera device [default: 30]")
    parser.add_argument(
        "--ice-server",
        action="append",
        default=[],
        metavar="URL",
        help="STUN/TURN URL for a server that is not on this machine (repeatable)",
    )
    parser.add_argument("--log-level", default="WARNING", type=str.upper, help="what the log shows [default: WARNING]")


def run_cam_command(args: argparse.Namespace) -> int:
    """Runs the parsed command; a failure is one line on stderr and exit status 1."""
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from client.cam.errors import CamError  # aiortc and PyAV: only now
    from client.cam.run import CamOptions, run_cam

    options = CamOptions(
        server=args.server,
        face=args.face,
        token=args.token,
        input=args.input,
        stream=args.stream,
        virtual_camera=args.virtual_camera,
        camera_backend=args.camera_backend,
        camera_device=args.camera_device,
        output=args.output,
        preview=args.preview,
        size=args.size,
        fps=args.fps,
        ice_servers=tuple(args.ice_server),
    )
    try:
        return asyncio.run(run_cam(options))
    except CamError as exc:
        print(f"facefuse cam: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # where the loop took no signal handler: the way out has run
        return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m client.cam`: the same command without the server's command line."""
    parser = argparse.ArgumentParser(prog="facefuse cam", description=DESCRIPTION)
    add_cam_arguments(parser)
    return run_cam_command(parser.parse_args(argv))
