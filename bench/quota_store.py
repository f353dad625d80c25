"""Quota store benchmark: meter operations per second, and store round trips per session-minute.

Against a private redis-server this script starts (127.0.0.1, a free port, AOF with
`appendfsync everysec`, in a temporary folder) and against the in-memory store:

  renew, sequential    one lease renewed N times in a row (one round trip each)
  renew, S sessions    S leases renewed at once, S tasks on one store (one node)
  open + close         a lease opened and closed, sequentially (two round trips)

and the store round trips the real session meter (quota/meter.py) makes for one
minute of 30 fps video with 5 s leases, charged frame by frame. Prints markdown tables.

    .venv/bin/python bench/quota_store.py            # about 15 s
    .venv/bin/python bench/quota_store.py --quick

Not a test: it asserts nothing and the numbers depend on the machine's load.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import importlib.metadata
import os
import platform
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from quota.memory_store import MemoryStore
from quota.meter import SessionMeter
from quota.redis_store import RedisStore
from quota.settings import MICRO, QuotaSettings, TierRules
from quota.store import QuotaStore

PAID = TierRules("paid", max_sessions=100_000)
SETTINGS = QuotaSettings()
KW = {"hour_s": SETTINGS.hour_s, "refill_period_s": SETTINGS.refill_period_s}
BALANCE = 10**15  # micro-tokens: never the limit here


@dataclass
class Row:
    store: str
    operation: str
    calls: int
    seconds: float

    @property
    def per_second(self) -> float:
        return self.calls / self.seconds


# -- a private redis-server ------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _pong(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


@contextlib.contextmanager
def redis_server(binary: str):  # type: ignore[no-untyped-def]
    with tempfile.TemporaryDirectory(prefix="bench-quota-redis-") as directory:
        port = _free_port()
        process = subprocess.Popen(
            [
                binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "everysec",
                "--dir",
                directory,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 10
            while not _pong(port):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("redis-server did not start")
                time.sleep(0.01)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            process.terminate()
            process.wait(timeout=10)


# -- throughput ------------------------------------------------------------------------------------
async def renew_sequential(store: QuotaStore, account: str, calls: int, lease: str = "seq") -> float:
    await store.open_lease(account, lease, "s", MICRO, PAID, lease_ttl_s=600.0, **KW)
    started = time.perf_counter()
    for seq in range(1, calls + 1):
        await store.renew_lease(account, lease, seq, 0, 0, PAID, **KW)
    return time.perf_counter() - started


async def renew_concurrent(store: QuotaStore, account: str, sessions: int, calls_each: int) -> float:
    for n in range(sessions):
        await store.open_lease(account, f"c{sessions}-{n}", f"s{n}", MICRO, PAID, lease_ttl_s=600.0, **KW)

    async def session(n: int) -> None:
        for seq in range(1, calls_each + 1):
            await store.renew_lease(account, f"c{sessions}-{n}", seq, 0, 0, PAID, **KW)

    started = time.perf_counter()
    await asyncio.gather(*(session(n) for n in range(sessions)))
    return time.perf_counter() - started


async def open_close(store: QuotaStore, account: str, pairs: int) -> float:
    started = time.perf_counter()
    for n in range(pairs):
        await store.open_lease(account, f"oc{n}", "s", MICRO, PAID, lease_ttl_s=600.0, **KW)
        await store.close_lease(account, f"oc{n}", 1, 0, PAID, hour_s=SETTINGS.hour_s)
    return time.perf_counter() - started


async def throughput(name: str, store: QuotaStore, calls: int, sessions: list[int]) -> list[Row]:
    account = f"bench-{time.time_ns()}"
    await store.create_account(account, "paid", BALANCE, f"hash-{account}")
    await renew_sequential(store, account, 200, lease="warm-up")  # connections, scripts loaded
    rows = [Row(name, "renew, sequential", calls, await renew_sequential(store, account, calls))]
    for count in sessions:
        each = max(1, calls // count)
        rows.append(
            Row(
                name,
                f"renew, {count} sessions at once",
                each * count,
                await renew_concurrent(store, account, count, each),
            )
        )
    pairs = max(1, calls // 2)
    rows.append(Row(name, "open + close, sequential", 2 * pairs, await open_close(store, account, pairs)))
    return rows


# -- round trips per session-minute ----------------------------------------------------------------
@dataclass
class Cadence:
    store: str
    size: tuple[int, int]  # the output's width and height: the price goes by its pixels
    calls: int  # every store operation the meter made: open + renewals + close
    minutes: float

    @property
    def per_minute(self) -> float:
        return self.calls / self.minutes


class CountingStore:
    """Counts the operations quota/meter.py makes on a real store."""

    def __init__(self, store: QuotaStore) -> None:
        self.store = store
        self.calls = 0

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        operation = getattr(self.store, name)

        async def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
            self.calls += 1
            return await operation(*args, **kwargs)

        return counted


async def session_cadence(name: str, store: QuotaStore, size: tuple[int, int], minutes: float = 1.0) -> Cadence:
    """The real SessionMeter charging `minutes` of 30 fps video, frame by frame."""
    account = f"cadence-{name}-{size[1]}-{time.time_ns()}"
    await store.create_account(account, "paid", BALANCE, f"hash-{account}")
    counting = CountingStore(store)
    meter = SessionMeter(counting, account, PAID, f"s-{account}", SETTINGS)  # type: ignore[arg-type]
    await meter.open(*size)
    renewing = asyncio.ensure_future(meter.run())
    for _ in range(round(minutes * 60 * SETTINGS.nominal_fps)):
        meter.charge_frame(*size)
        await asyncio.sleep(0)  # the meter's loop renews in between frames, as on the server
    await meter.close()
    await renewing
    return Cadence(name, size, counting.calls, minutes)


# -- the report ------------------------------------------------------------------------------------
def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def _cpu_model() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "?"


def _redis_version(binary: str) -> str:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False).stdout
    return next((part[2:] for part in out.split() if part.startswith("v=")), "?")


@contextlib.asynccontextmanager
async def stores(url: str) -> AsyncIterator[tuple[RedisStore, MemoryStore]]:
    redis_store = RedisStore(url)
    try:
        yield redis_store, MemoryStore()
    finally:
        await redis_store.aclose()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000, help="operations per throughput row")
    parser.add_argument("--sessions", type=int, nargs="+", default=[10, 100], help="concurrent sessions")
    parser.add_argument("--quick", action="store_true", help="1000 calls per row")
    args = parser.parse_args()
    calls = 1000 if args.quick else args.calls
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server not found (apt-get install redis-server)")
    started = datetime.datetime.now(datetime.UTC)
    with redis_server(binary) as url:
        async with stores(url) as (redis_store, memory_store):
            rows = await throughput("redis", redis_store, calls, args.sessions)
            rows += await throughput("memory", memory_store, calls, args.sessions)
            cadences = [
                await session_cadence(name, store, size)
                for name, store in (("redis", redis_store), ("memory", memory_store))
                for size in ((640, 480), (1920, 1080))
            ]

    print(f"## facefuse quota store bench, {started:%Y-%m-%d %H:%M} UTC")
    print()
    print(
        f"Machine: {platform.node()}, nproc {len(os.sched_getaffinity(0))}, {_cpu_model()}, "
        f"Python {platform.python_version()}, redis-server {_redis_version(binary)} (AOF, appendfsync everysec, "
        f"loopback), redis-py {_version('redis')}, hiredis {_version('hiredis')}; load average "
        f"{' '.join(f'{v:.2f}' for v in os.getloadavg())} at the end."
    )
    print()
    print("| store | operation | calls | seconds | ops/s | us/op |")
    print("|---|---|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| {row.store} | {row.operation} | {row.calls} | {row.seconds:.2f} | {row.per_second:,.0f} | "
            f"{1e6 / row.per_second:.0f} |"
        )
    print()
    print(
        f"Store round trips per session-minute at {SETTINGS.nominal_fps:g} fps, {SETTINGS.lease_s:g} s leases, "
        f"renew below {SETTINGS.renew_below:.0%} of a lease (target <= 15):"
    )
    print()
    print("| store | output size | price tokens/s | round trips per minute (open + renewals + close) |")
    print("|---|---:|---:|---:|")
    for c in cadences:
        print(f"| {c.store} | {c.size[0]}x{c.size[1]} | {SETTINGS.price_per_second(*c.size):g} | {c.per_minute:.0f} |")


if __name__ == "__main__":
    asyncio.run(main())
