"""Fixtures shared by all tests: a private redis-server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from redis_server import RedisServer


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A private redis-server on a free port, AOF on (a restart keeps the data); killed at teardown."""
    binary = RedisServer.find_binary()
    if binary is None:
        pytest.fail("redis-server is not installed (apt-get install redis-server); the quota tests need it")
    server = RedisServer(binary, tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop(kill=True)
