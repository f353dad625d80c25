"""Several `facefuse serve` processes on one redis-server: a cluster for the tests."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from client.image_track import ImageTrack
from support.browser import ServerProcess
from support.metering import ADMIN
from support.server import face_rgb


@contextlib.contextmanager
def cluster(redis_url: str, log_dir: Path, *per_node: tuple[str, ...]) -> Iterator[list[ServerProcess]]:
    """One node per argument tuple (its extra flags), started together, each on its own port;
    stopped with SIGTERM at the end (a node the test killed is left as it is)."""
    nodes = []
    try:
        for number, extra in enumerate(per_node):
            args = ("--admin-key", ADMIN, "--redis-url", redis_url, "--node-id", f"node-{number}", *extra)
            nodes.append(ServerProcess(log_dir / f"node-{number}.log", chain="passthrough", extra_args=args))
        for node in nodes:
            node.wait_ready(timeout=120)  # three imports of torch at once on a busy machine
        yield nodes
    finally:
        for node in nodes:
            node.terminate()


def camera(tag: int) -> ImageTrack:
    return ImageTrack(face_rgb("obama.jpg"), width=320, height=240, tag=tag)
