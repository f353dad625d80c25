"""A private redis-server for the tests: a free port, an AOF in a temporary folder, stop and restart."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

from support.ports import free_port


class RedisServer:
    """redis-server on 127.0.0.1:<port> with `appendfsync always`, so a restart (even after
    SIGKILL) keeps every write it acknowledged."""

    def __init__(self, binary: str, directory: Path, port: int | None = None) -> None:
        self.binary = binary
        self.directory = directory
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @classmethod
    def find_binary(cls) -> str | None:
        return shutil.which("redis-server")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 10.0) -> None:
        assert self.process is None, "already running"
        with open(self.directory / "redis.log", "ab") as log:  # the child keeps its own descriptor
            self.process = subprocess.Popen(
                [
                    self.binary,
                    "--port",
                    str(self.port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "yes",
                    "--appendfsync",
                    "always",
                    "--dir",
                    str(self.directory),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout_s
        while not self._pong():
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.process.returncode}: {self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop(kill=True)
                raise RuntimeError(f"redis-server did not answer PING within {timeout_s} s: {self.log_tail()}")
            time.sleep(0.01)

    def stop(self, *, kill: bool = False) -> None:
        """SIGTERM (a clean shutdown) or SIGKILL (a crash); waits until the process is gone."""
        if self.process is None:
            return
        if self.process.poll() is None:
            if kill:
                self.process.kill()
            else:
                self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def restart(self, *, kill: bool = False) -> None:
        self.stop(kill=kill)
        self.start()

    def log_tail(self, lines: int = 20) -> str:
        path = self.directory / "redis.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def _pong(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(64).startswith(b"+PONG")  # "-LOADING" while it reads the AOF
        except OSError:
            return False
