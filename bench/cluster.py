"""Three nodes on one Redis (issue #28): what the registry and the directory cost Redis, the time a
307 adds to placing a session, and how long a killed node's sessions stay listed.

Starts a private redis-server and three `facefuse serve` processes (passthrough chain, loopback),
node-0 with room for one session, then:
1. Redis commands a minute (INFO commandstats) with no session, then with one session on each node:
   per node-minute and per session-minute, the meter's script calls (one round trip each) apart
   from the cluster's commands (a pipeline's commands are counted one by one: the cluster's round
   trips are fewer, docs/metering.md).
2. Offer -> answer through the Python client, straight to a node with room and through the full
   node-0 (one 307 followed), alternated.
3. A node holding a session is killed (SIGKILL): seconds until GET /api/admin/nodes no longer lists
   it and until its session is 404 on another node.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import redis.asyncio as aioredis
from quota_store import _cpu_model, _redis_version, _version, redis_server  # bench/, next to this script
from server_process import REPO_ROOT, ServerProcess, free_port

from client.facefuse_client import FacefuseClient, ServerError
from client.image_track import ImageTrack

sys.path.insert(0, str(REPO_ROOT / "tests"))
from support.photos import face_rgb  # noqa: E402 (the photos are found where the tests find them)

ADMIN = "admin-key-for-the-cluster-bench"
NODES = 3


def node_argv(number: int, port: int, redis_url: str) -> list[str]:
    argv = [sys.executable, "-m", "signaling.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
            "--ice-host", "127.0.0.1", "--chain", "passthrough", "--redis-url", redis_url,
            "--node-id", f"node-{number}"]  # fmt: skip
    return argv + (["--max-sessions", "1"] if number == 0 else [])


def camera(tag: int) -> ImageTrack:
    return ImageTrack(face_rgb("obama.jpg"), width=320, height=240, tag=tag)


async def command_counts(client: aioredis.Redis) -> dict[str, int]:
    stats = await client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(value["calls"]) for name, value in stats.items()}


async def commands_per_minute(client: aioredis.Redis, window_s: float) -> dict[str, float]:
    before = await command_counts(client)
    await asyncio.sleep(window_s)
    after = await command_counts(client)
    return {name: (calls - before.get(name, 0)) * 60 / window_s for name, calls in after.items()}


# The cluster's own commands (signaling/cluster/). INFO commandstats also counts the commands the
# meter's Lua scripts run inside (HSET among them), so the directory's HSETs are counted by its
# EXPIREs: it sends one of each per session and heartbeat, and the scripts send no EXPIRE.
CLUSTER_COMMANDS = ("set", "sadd", "smembers", "mget", "srem", "del", "hdel", "get", "hgetall")


def split(per_minute: dict[str, float]) -> tuple[float, float]:
    """(the meter's script calls, the cluster's commands) a minute."""
    meter = per_minute.get("evalsha", 0) + per_minute.get("eval", 0)
    cluster = sum(per_minute.get(name, 0) for name in CLUSTER_COMMANDS) + 2 * per_minute.get("expire", 0)
    return meter, cluster


async def timed_connect(client: FacefuseClient, tag: int) -> tuple[float, str]:
    started = time.perf_counter()
    session = await client.connect(camera(tag))
    took = time.perf_counter() - started
    await client.request("DELETE", f"/api/sessions/{session.session_id}")
    await session.close()
    return took * 1000, session.session_id


async def run(args: argparse.Namespace, redis_url: str, log_dir: Path) -> None:
    os.environ["FACEFUSE_ADMIN_KEY"] = ADMIN
    ports = [free_port() for _ in range(NODES)]
    nodes = [ServerProcess(f"node-{n}", node_argv(n, port, redis_url), port, log_dir / f"node-{n}.log")
             for n, port in enumerate(ports)]  # fmt: skip
    counter = aioredis.from_url(redis_url, decode_responses=True)
    try:
        for node in nodes:
            node.start()
        async with FacefuseClient(nodes[0].url, api_key=ADMIN) as admin:
            for node in nodes:
                async with FacefuseClient(node.url) as probe:
                    await node.wait_ready(probe)
            body = await admin.request(
                "POST", "/api/admin/accounts", json={"id": "bench", "tier": "paid", "balance": 10**6}
            )
            clients = [FacefuseClient(node.url, api_key=body["api_key"]) for node in nodes]

            idle = await commands_per_minute(counter, args.window)
            sessions = [await client.connect(camera(n)) for n, client in enumerate(clients)]  # one on each node
            await asyncio.sleep(3)  # past the offers' own commands
            busy = await commands_per_minute(counter, args.window)

            direct, placed = [], []
            for round_number in range(args.rounds):
                direct.append((await timed_connect(clients[1], 100 + round_number))[0])  # node-1 has room
                placed.append((await timed_connect(clients[0], 200 + round_number))[0])  # node-0 is full: a 307

            doomed = sessions[2].session_id  # on node-2
            killed_at = time.monotonic()
            os.kill(nodes[2].pid, signal.SIGKILL)  # a crash, not a stop
            gone_from_registry = gone_from_directory = None
            while gone_from_registry is None or gone_from_directory is None:
                now = time.monotonic() - killed_at
                listed = await admin.request("GET", "/api/admin/nodes")
                if gone_from_registry is None and "node-2" not in [n["id"] for n in listed["nodes"]]:
                    gone_from_registry = now
                try:
                    await clients[1].request("GET", f"/api/sessions/{doomed}")
                except ServerError as exc:
                    if exc.status == 404 and gone_from_directory is None:
                        gone_from_directory = now
                await asyncio.sleep(0.1)
            for session in sessions:
                await session.close()
            for client in clients:
                await client.close()
    finally:
        await counter.aclose()
        for node in nodes:
            node.stop()

    idle_meter, idle_other = split(idle)
    busy_meter, busy_other = split(busy)
    print(f"## facefuse cluster bench, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC")
    print()
    print(f"Machine: nproc {len(os.sched_getaffinity(0))}, {_cpu_model()}, Python {platform.python_version()}, "
          f"aiohttp {_version('aiohttp')}, redis-py {_version('redis')}, redis-server {_redis_version(shutil.which('redis-server') or 'redis-server')}")  # fmt: skip
    print()
    print(f"Redis commands a minute, {NODES} nodes, {args.window:g} s windows:")
    print()
    print(
        "| sessions | meter (EVALSHA) | registry + directory | per node-minute (cluster) | per session-minute (meter / cluster) |"
    )
    print("|---:|---:|---:|---:|---:|")
    print(f"| 0 | {idle_meter:.0f} | {idle_other:.0f} | {idle_other / NODES:.0f} | |")
    print(
        f"| {NODES} | {busy_meter:.0f} | {busy_other:.0f} | | {busy_meter / NODES:.1f} / {(busy_other - idle_other) / NODES:.1f} |"
    )
    print()
    print(f"Offer -> answer (the Python client's connect), {args.rounds} each, alternated:")
    print()
    print("| path | p50 ms | max ms |")
    print("|---|---:|---:|")
    print(f"| straight to a node with room | {statistics.median(direct):.0f} | {max(direct):.0f} |")
    print(f"| through the full node (one 307) | {statistics.median(placed):.0f} | {max(placed):.0f} |")
    print()
    print("A node killed with SIGKILL while it holds a session:")
    print()
    print(f"- gone from GET /api/admin/nodes after {gone_from_registry:.1f} s (TTL 10 s)")
    print(f"- its session 404 on another node after {gone_from_directory:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=float, default=30.0, help="seconds each command count runs")
    parser.add_argument("--rounds", type=int, default=10, help="offers each way")
    args = parser.parse_args()
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server not found (apt-get install redis-server)")
    with redis_server(binary) as url, tempfile.TemporaryDirectory(prefix="bench-cluster-") as logs:
        asyncio.run(run(args, url, Path(logs)))


if __name__ == "__main__":
    main()
