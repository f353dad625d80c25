"""Fixtures shared by all tests: a private redis-server, and the quota store to run against."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.redis_server import RedisServer


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


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def store_url(request: pytest.FixtureRequest) -> str | None:
    """Each test that takes it runs twice: on the in-memory store (None) and on a real redis-server (its URL)."""
    if request.param == "memory":
        return None
    return request.getfixturevalue("redis_server").url
