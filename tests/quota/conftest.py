"""Fixtures of the quota tests: both stores behind one harness (redis_server is in ../conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from store_harness import StoreUnderTest

from quota.store import QuotaStore


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def under_test(request: pytest.FixtureRequest) -> AsyncIterator[StoreUnderTest]:
    server = request.getfixturevalue("redis_server") if request.param == "redis" else None
    harness = StoreUnderTest(request.param, server)
    try:
        yield harness
    finally:
        await harness.aclose()


@pytest.fixture
def store(under_test: StoreUnderTest) -> QuotaStore:
    return under_test.store
