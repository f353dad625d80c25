"""A benchmark's server: a separate process, its CPU time, its log; stopped on every exit path.

Used by bench/streaming.py. Each server runs in its own session (a Ctrl-C in the
terminal reaches only the bench, which stops its servers in order) and is asked
by Linux to end when the bench process dies, even by SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import aiohttp

from client.facefuse_client import FacefuseClient, ServerError

REPO_ROOT = Path(__file__).resolve().parents[1]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
SERVER_START_TIMEOUT_S = 90.0


def _die_with_parent() -> Callable[[], None]:
    """A preexec_fn asking Linux to SIGTERM the child if this process dies (even by SIGKILL)."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return lambda: None
    pr_set_pdeathsig = 1
    return lambda: prctl(pr_set_pdeathsig, signal.SIGTERM)


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads) from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()  # the name in () may hold spaces
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # fields 14 and 15 of proc(5)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class ServerProcess:
    """One server in its own process group, its output in a log file; `stop()` is idempotent."""

    def __init__(self, mode: str, argv: list[str], port: int, log_path: Path) -> None:
        self.mode = mode
        self.argv = argv
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    def start(self) -> None:
        with open(self.log_path, "wb") as log:
            # Own session: a Ctrl-C in the terminal reaches only the bench, which then stops us in order.
            self._process = subprocess.Popen(
                self.argv, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=_die_with_parent(),
            )  # fmt: skip

    async def wait_ready(self, client: FacefuseClient) -> None:
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while True:
            assert self._process is not None
            if self._process.poll() is not None:
                raise RuntimeError(f"{self.mode} server exited with {self._process.returncode}:\n{self.log_tail()}")
            with contextlib.suppress(aiohttp.ClientError, ServerError, asyncio.TimeoutError):
                await client.request("GET", "/healthz", timeout=aiohttp.ClientTimeout(total=2))
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{self.mode} server not ready after {SERVER_START_TIMEOUT_S:.0f} s:\n{self.log_tail()}"
                )
            await asyncio.sleep(0.2)

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGINT)  # stop now: closes the sessions and the worker (SIGTERM would drain)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def log_problems(self) -> list[str]:
        """The log's WARNING / ERROR / CRITICAL lines and traceback lines, without their timestamps."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return []
        problems = []
        for line in text.splitlines():
            if any(f" {level} " in line for level in ("WARNING", "ERROR", "CRITICAL")) or line.startswith(
                ("Traceback", "Exception", "Task exception")
            ):
                problems.append(line.split(" ", 2)[-1] if line[:2].isdigit() else line)
        return problems
