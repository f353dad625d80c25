"""WHIP/WHEP benchmark: how fast a WHIP publish is answered, what each WHEP viewer costs, and the
A/V offset a viewer sees.

Each part runs against `facefuse serve` in its own process (bench/server_process.py); the
publishers and viewers are aiortc peers in this process, all on 127.0.0.1.

  post     POST /whip/{stream} -> 201 for an OBS-shaped offer (tests/support/whip_publisher.py)
           with a face in the query, then DELETE, repeated: the default chain (mesh) loaded and
           idle, passthrough beside it (one POST each in turn), then the mesh busy swapping a
           watched stream.
  viewers  one publisher per size, then 0/1/4/10 WHEP viewers (bench/whep_viewers.py), through
           passthrough (--viewer-chain) so the viewers' encoders, not the chain, grow with N.
  av       the A/V offset at a WHEP viewer through fixed-cost chains and peer to peer
           (bench/av_offset.py).

    .venv/bin/python bench/whip_whep.py --quick     # one round, short windows, about 2 minutes
    .venv/bin/python bench/whip_whep.py             # two rounds, about 7 minutes on 2 cores

Not a test: it asserts nothing and the numbers depend on the machine's load.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import math
import os
import platform
import sys
import tempfile
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import av_offset
import numpy as np
import whep_viewers
from server_process import ServerProcess, free_port  # bench/, next to this script
from streaming import _cpu_model, _load, _version  # the machine line, as streaming.py prints it
from waits import wait_for

from client.facefuse_client import FacefuseClient
from client.image_track import ImageTrack
from client.still_picture import top_at_aspect

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.photos import face_path, face_rgb  # noqa: E402 (the photos are found where the tests find them)
from support.whep_viewer import whep_viewer  # noqa: E402
from support.whip_publisher import offer_like_obs, post_offer  # noqa: E402

PARTS = ("post", "viewers", "av")
SOURCE_FACE = "biden.jpg"  # swapped onto the streamed face by the mesh chain


@dataclass(frozen=True)
class BenchSettings:
    parts: tuple[str, ...]
    sizes: tuple[tuple[int, int], ...]
    viewers: tuple[int, ...]
    rounds: int
    warmup_s: float
    window_s: float
    posts: int
    viewer_chain: str
    av_costs: tuple[str, ...]
    clicks: int
    face: str
    device: str
    log_dir: Path | None


def parse_args(argv: Sequence[str] | None) -> BenchSettings:
    parser = argparse.ArgumentParser(prog="bench/whip_whep.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS), help="what to measure (default all)")
    parser.add_argument("--sizes", nargs="+", default=["640x480", "1280x720"], metavar="WxH", help="publisher sizes")
    parser.add_argument("--viewers", nargs="+", type=int, default=[0, 1, 4, 10], metavar="N", help="viewer counts")
    parser.add_argument("--rounds", type=int, default=None, help="rounds of the viewers and av parts (default 2; --quick 1)")  # fmt: skip
    parser.add_argument("--warmup", type=float, default=None, help="seconds before each window (default 3; --quick 2)")
    parser.add_argument("--window", type=float, default=None, help="seconds measured per N (default 8; --quick 4)")
    parser.add_argument("--posts", type=int, default=None, help="timed POSTs per row (default 30; --quick 10)")
    parser.add_argument("--viewer-chain", default="passthrough", choices=("passthrough", "invert"))
    parser.add_argument(
        "--av-costs", nargs="+", default=["10:1", "250:0"], metavar="BATCH_MS:FRAME_MS",
        help="fixed-cost chains the A/V offset is measured through (default 10:1 250:0)",
    )  # fmt: skip
    parser.add_argument("--face", default="obama.jpg", help="the photo the publishers stream (default obama.jpg)")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda", "auto"), help="the servers' --device")
    parser.add_argument("--log-dir", type=Path, default=None, help="the servers' logs (default: a temporary folder)")
    parser.add_argument("--quick", action="store_true", help="one round, short windows: a check that all works")
    args = parser.parse_args(argv)
    sizes = []
    for size in args.sizes:
        try:
            width, height = (int(part) for part in size.lower().split("x"))
        except ValueError:
            parser.error(f"--sizes takes WxH, not {size!r}")
        if width < 416 or height < 240 or width % 2 or height % 2:
            parser.error("--sizes: even, at least 416x240 (the stamp's width)")
        sizes.append((width, height))
    for cost in args.av_costs:
        if len(cost.split(":")) != 2:
            parser.error(f"--av-costs takes BATCH_MS:FRAME_MS, not {cost!r}")
    if any(n < 0 or n > 50 for n in args.viewers):
        parser.error("--viewers: 0 to 50 (the server's default --max-viewers-per-stream)")
    if (args.rounds is not None and args.rounds < 1) or (args.posts is not None and args.posts < 1):
        parser.error("--rounds and --posts: at least 1")
    return BenchSettings(
        parts=tuple(dict.fromkeys(args.parts)),
        sizes=tuple(sizes),
        viewers=tuple(args.viewers),
        rounds=args.rounds or (1 if args.quick else 2),
        warmup_s=args.warmup if args.warmup is not None else (2.0 if args.quick else 3.0),
        window_s=args.window if args.window is not None else (4.0 if args.quick else 8.0),
        posts=args.posts or (10 if args.quick else 30),
        viewer_chain=args.viewer_chain,
        av_costs=tuple(args.av_costs),
        clicks=4 if args.quick else 6,
        face=args.face,
        device=args.device,
        log_dir=args.log_dir,
    )


class Servers:
    """A server per chain, started when a part needs it; all kept, to report their logs."""

    def __init__(self, log_dir: Path, device: str) -> None:
        self.log_dir = log_dir
        self.device = device
        self.started: list[ServerProcess] = []

    @contextlib.asynccontextmanager
    async def running(self, part: str, chain: str) -> AsyncIterator[tuple[ServerProcess, FacefuseClient]]:
        port = free_port()
        argv = [sys.executable, "-m", "signaling.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
                "--ice-host", "127.0.0.1", "--chain", chain, "--device", self.device]  # fmt: skip
        server = ServerProcess(chain, argv, port, self.log_dir / f"{part}-{chain.replace(':', '-')}.log")
        self.started.append(server)
        client = FacefuseClient(server.url)
        server.start()
        try:
            await server.wait_ready(client)
            yield server, client
        finally:
            await client.close()
            server.stop()


# -- POST -> 201 ----------------------------------------------------------------------------


@dataclass
class PostTimes:
    row: str
    first_ms: float = math.nan  # the first POST after the server started, not among the timed ones
    timed_ms: list[float] = field(default_factory=list)


async def post_and_delete(http: aiohttp.ClientSession, url: str, face_id: str, photo: np.ndarray) -> float:
    """One OBS-shaped publish: ms from the POST to its 201 read; once connected, DELETE, as OBS's Stop does."""
    pc, sdp = await offer_like_obs(ImageTrack(photo, width=640, height=480))
    publisher = await post_offer(http, f"{url}/whip/bench-post?face_id={face_id}", pc, sdp)
    try:
        if publisher.status != 201:
            raise RuntimeError(f"POST /whip answered {publisher.status}: {publisher.body[:300]}")
        await wait_for(lambda: pc.connectionState == "connected", whep_viewers.FIRST_FRAME_TIMEOUT_S)
        async with http.delete(url + publisher.location) as response:
            await response.read()
    finally:
        await publisher.close()
    return publisher.answered_in_s * 1000


async def _timed(
    rows: list[tuple[PostTimes, str, str]], http: aiohttp.ClientSession, posts: int, photo: np.ndarray
) -> None:
    """POSTs to each (row, url, face) in turn, so that a noisy moment hits every row alike."""
    for number in range(posts + 1):
        print(f"[post] {', '.join(row.row for row, _, _ in rows)}: {number}/{posts}", file=sys.stderr, flush=True)
        for row, url, face_id in rows:
            ms = await post_and_delete(http, url, face_id, photo)
            if number == 0:
                row.first_ms = ms
            else:
                row.timed_ms.append(ms)


@contextlib.asynccontextmanager
async def busy_stream(http: aiohttp.ClientSession, url: str, face_id: str, photo: np.ndarray) -> AsyncIterator[None]:
    """A 640x480 publisher swapped to the face and watched by one viewer: the chain at work meanwhile."""
    pc, sdp = await offer_like_obs(ImageTrack(top_at_aspect(photo, 640, 480), width=640, height=480))
    publisher = await post_offer(http, f"{url}/whip/bench-busy?face_id={face_id}", pc, sdp)
    try:
        if publisher.status != 201:
            raise RuntimeError(f"POST /whip answered {publisher.status}: {publisher.body[:300]}")
        async with whep_viewer(http, f"{url}/whep/bench-busy") as viewer:
            if not await wait_for(lambda: viewer.video_frames >= 10, whep_viewers.FIRST_FRAME_TIMEOUT_S * 3):
                raise RuntimeError("the busy stream's viewer got fewer than 10 frames in 60 s")
            yield
    finally:
        await publisher.close()


async def time_posts(servers: Servers, settings: BenchSettings, photo: np.ndarray) -> list[PostTimes]:
    idle, plain_row, busy = PostTimes("mesh, idle"), PostTimes("passthrough"), PostTimes("mesh, busy")
    async with (
        servers.running("post", "mesh") as (mesh, mesh_client),
        servers.running("post", "passthrough") as (plain, plain_client),
        aiohttp.ClientSession() as http,
    ):
        face = face_path(SOURCE_FACE).read_bytes()
        mesh_face, plain_face = await mesh_client.upload_face(face), await plain_client.upload_face(face)
        await _timed([(idle, mesh.url, mesh_face), (plain_row, plain.url, plain_face)], http, settings.posts, photo)
        async with busy_stream(http, mesh.url, mesh_face, photo):
            await _timed([(busy, mesh.url, mesh_face)], http, settings.posts, photo)
    return [idle, plain_row, busy]


def post_table(times: list[PostTimes]) -> list[str]:
    rows = ["| chain | POSTs | first after start ms | p50 ms | p99 ms | max ms |", "|---|---:|---:|---:|---:|---:|"]
    for t in times:
        p50, p99 = np.percentile(t.timed_ms, [50, 99])
        rows.append(f"| {t.row} | {len(t.timed_ms)} | {t.first_ms:.0f} | {p50:.0f} | {p99:.0f} | {max(t.timed_ms):.0f} |")  # fmt: skip
    return rows


POST_LEGEND = [
    "- POST -> 201: the offer sent -> the answer read, as OBS waits for it (the offer is made before, untimed; "
    "aiohttp keeps the connection alive between POSTs); each publish connects and is DELETEd before the next; the first "
    "POST after the server started is apart. p99 of 30 is about the largest. mesh, busy: meanwhile one 640x480 stream on "
    f"the same server is swapped to {SOURCE_FACE} and watched by one WHEP viewer.",
]


# -- the other parts ------------------------------------------------------------------------


async def measure_viewers(servers: Servers, settings: BenchSettings, photo: np.ndarray) -> list[str]:
    trials: list[whep_viewers.ViewerTrial] = []
    failures: list[str] = []
    async with servers.running("viewers", settings.viewer_chain) as (server, client), aiohttp.ClientSession() as http:
        for round_number in range(1, settings.rounds + 1):
            # Every other round runs N backwards: a machine drifting within the run hits both ends alike.
            order = settings.viewers if round_number % 2 else tuple(reversed(settings.viewers))
            for size in settings.sizes:
                try:
                    await whep_viewers.one_publisher(
                        server, client, http, photo, size, order, round_number, settings.warmup_s, settings.window_s,
                        trials,
                    )  # fmt: skip
                except (RuntimeError, aiohttp.ClientError, OSError) as exc:
                    # A publisher whose session ended (a full machine starves it) costs only its own trials.
                    print(f"    failed: {exc!r}", file=sys.stderr, flush=True)
                    failures.append(f"- {size[0]}x{size[1]}, round {round_number}: {exc}")
    notes = whep_viewers.notes(trials) + failures
    return [*whep_viewers.trial_table(trials), "", *whep_viewers.cost_table(trials), *([""] + notes if notes else [])]


async def measure_av(servers: Servers, settings: BenchSettings) -> list[str]:
    runs: list[av_offset.AvRun] = []
    async with contextlib.AsyncExitStack() as stack:
        chains = [f"fixed-cost:{cost}" for cost in settings.av_costs]
        started = [await stack.enter_async_context(servers.running("av", chain)) for chain in chains]
        http = await stack.enter_async_context(aiohttp.ClientSession())
        for round_number in range(1, settings.rounds + 1):
            print(f"[av] round {round_number}", file=sys.stderr, flush=True)
            runs.append(await av_offset.peer_to_peer(settings.clicks, round_number))
            for server, _ in started:
                runs.append(await av_offset.through_server(http, server, settings.clicks, round_number))
    return av_offset.table(runs)


# -- the report -----------------------------------------------------------------------------


def report(
    settings: BenchSettings, started: datetime.datetime, load_start: str, sections: dict[str, list[str]],
    servers: Servers, log_dir: Path, argv: Sequence[str],
) -> None:  # fmt: skip
    lines = [
        f"## facefuse WHIP/WHEP bench, {started:%Y-%m-%d %H:%M} UTC",
        "",
        f"Machine: nproc {len(os.sched_getaffinity(0))}, {_cpu_model()}, Python {platform.python_version()}, "
        f"aiortc {_version('aiortc')}, av {_version('av')}, aiohttp {_version('aiohttp')}; "
        f"load average {load_start} at the start, {_load()} at the end.",
        f"Command: `{' '.join(['.venv/bin/python', 'bench/whip_whep.py', *argv])}`; rounds "
        f"{settings.rounds}, warm-up {settings.warmup_s:g} s, window {settings.window_s:g} s, publishers stream "
        f"{settings.face}, servers --device {settings.device}.",
    ]  # fmt: skip
    parts = {
        "post": ("### WHIP POST -> 201 (an OBS-shaped offer with face_id; mesh is the default chain)", POST_LEGEND),
        "viewers": (
            f"### WHEP viewers of one publisher ({settings.viewer_chain} chain: the encoders show, not the chain)",
            whep_viewers.LEGEND,
        ),
        "av": ("### A/V offset at a WHEP viewer, through fixed-cost chains and peer to peer", av_offset.LEGEND),
    }
    for part, table in sections.items():
        title, legend = parts[part]
        lines += ["", title, "", *table, "", *legend]
    notes = []
    for server in servers.started:
        problems = list(dict.fromkeys(server.log_problems()))
        if problems:
            examples = "; ".join(f"`{problem}`" for problem in problems[:3])
            notes.append(f"- {server.log_path.name}: {len(problems)} distinct warning/error line(s), e.g. {examples}")
    if notes:
        lines += ["", "Notes:", *notes]
    print("\n".join(lines) + f"\n\nServer logs: {log_dir}")


async def bench(settings: BenchSettings, argv: Sequence[str]) -> None:
    started, load_start = datetime.datetime.now(datetime.UTC), _load()
    photo = face_rgb(settings.face)
    log_dir = settings.log_dir or Path(tempfile.mkdtemp(prefix="facefuse-whip-whep-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    servers = Servers(log_dir, settings.device)
    sections: dict[str, list[str]] = {}
    try:
        if "post" in settings.parts:
            sections["post"] = post_table(await time_posts(servers, settings, photo))
        if "viewers" in settings.parts:
            sections["viewers"] = await measure_viewers(servers, settings, photo)
        if "av" in settings.parts:
            sections["av"] = await measure_av(servers, settings)
    finally:
        if sections:  # what was measured before a failure or a Ctrl-C is still worth seeing
            report(settings, started, load_start, sections, servers, log_dir, argv)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    settings = parse_args(argv)
    try:
        asyncio.run(bench(settings, argv))
    except KeyboardInterrupt:
        print("interrupted; servers and peers closed", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
