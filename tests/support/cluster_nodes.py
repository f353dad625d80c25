"""Several `facefuse serve` processes on one redis-server: a cluster for the tests."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from client.image_track import ImageTrack
from support.browser import ServerProcess
from support.metering import ADMIN
from support.server import face_rgb, free_port


@contextlib.contextmanager
def cluster(
    redis_url: str, log_dir: Path, *per_node: tuple[str, ...], pages_of_each_other: bool = False
) -> Iterator[list[ServerProcess]]:
    """One node per argument tuple (its extra flags), started together, each on its own port;
    stopped with SIGTERM at the end (a node the test killed is left as it is). With
    `pages_of_each_other` each node lets the others' pages in (--allow-origin): a camera page
    placed on another node by 307."""
    ports = [free_port() for _ in per_node]
    origins = [f"http://127.0.0.1:{port}" for port in ports]
    nodes = []
    try:
        for number, extra in enumerate(per_node):
            args = ("--admin-key", ADMIN, "--redis-url", redis_url, "--node-id", f"node-{number}", *extra)
            if pages_of_each_other:
                args += tuple(f"--allow-origin={origin}" for origin in origins if origin != origins[number])
            # the last --port wins over the one ServerProcess chose: each node's origin is known up front
            node = ServerProcess(
                log_dir / f"node-{number}.log", chain="passthrough", extra_args=(*args, "--port", str(ports[number]))
            )
            node.port, node.base_url = ports[number], origins[number]
            nodes.append(node)
        for node in nodes:
            node.wait_ready(timeout=120)  # three imports of torch at once on a busy machine
        yield nodes
    finally:
        for node in nodes:
            node.terminate()


def camera(tag: int) -> ImageTrack:
    return ImageTrack(face_rgb("obama.jpg"), width=320, height=240, tag=tag)
