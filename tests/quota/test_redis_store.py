"""RedisStore only: script reloads, a Redis that stops and returns, several nodes, the key layout."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis.asyncio as aioredis
from redis.crc import key_slot

from quota.errors import LeaseNotFound, StoreUnavailable, TooManyLeases
from quota.redis_store import SCRIPTS, RedisStore
from quota.settings import MICRO, TierRules
from quota.store import Grant
from support.redis_server import RedisServer, free_port

pytestmark = pytest.mark.redis

T = MICRO
PAID = TierRules("paid", hourly_cap=100, max_sessions=4)
KW = {"hour_s": 3600.0, "refill_period_s": 3600.0}


async def test_script_flush_between_operations_is_survived(redis_server: RedisServer) -> None:
    store = RedisStore(redis_server.url)
    admin = aioredis.Redis.from_url(redis_server.url)
    try:
        await store.create_account("alice", "paid", 10 * T, "h")
        await store.open_lease("alice", "l1", "s1", 2 * T, PAID, lease_ttl_s=60.0, **KW)
        await admin.script_flush()
        assert (await store.renew_lease("alice", "l1", 1, T, T, PAID, **KW)).balance == 7 * T
        await admin.script_flush()
        assert (await store.get_account("alice", PAID)).balance == 7 * T
    finally:
        await store.aclose()
        await admin.aclose()


async def test_stopped_redis_fails_fast_then_a_retried_close_refunds_once(redis_server: RedisServer) -> None:
    store = RedisStore(redis_server.url)
    try:
        await store.create_account("alice", "paid", 10 * T, "h")
        await store.open_lease("alice", "l1", "s1", 4 * T, PAID, lease_ttl_s=60.0, **KW)
        await store.renew_lease("alice", "l1", 1, T, 0, PAID, **KW)

        redis_server.stop(kill=True)  # mid-session
        for operation in (
            store.close_lease("alice", "l1", 2, 2 * T, PAID, hour_s=3600.0),
            store.get_account("alice", PAID),
            store.account_for_key("h"),
        ):
            started = time.monotonic()
            with pytest.raises(StoreUnavailable, match="Redis"):
                await operation
            assert time.monotonic() - started < 3.0

        redis_server.start()  # the AOF brings the session back
        closed = await store.close_lease("alice", "l1", 2, 2 * T, PAID, hour_s=3600.0)
        assert closed == Grant("l1", 0, 0, 8 * T, 98 * T, 0)

        redis_server.restart(kill=True)  # the close was acknowledged: it survives a crash
        assert await store.close_lease("alice", "l1", 2, 2 * T, PAID, hour_s=3600.0) == closed  # no second refund
        assert (await store.get_account("alice", PAID)).balance == 8 * T
    finally:
        await store.aclose()


async def test_nothing_listening_fails_fast() -> None:
    store = RedisStore(f"redis://127.0.0.1:{free_port()}/0")
    try:
        started = time.monotonic()
        with pytest.raises(StoreUnavailable):
            await store.get_account("alice", PAID)
        assert time.monotonic() - started < 3.0
    finally:
        await store.aclose()


async def test_two_nodes_see_one_account(redis_server: RedisServer) -> None:
    node_a, node_b = RedisStore(redis_server.url), RedisStore(redis_server.url)
    try:
        await node_a.create_account("alice", "paid", 10 * T, "h")
        found = await node_b.account_for_key("h")
        assert found is not None and found.balance == 10 * T
        await node_a.open_lease("alice", "la", "sa", 3 * T, PAID, lease_ttl_s=60.0, **KW)
        assert (await node_b.open_lease("alice", "lb", "sb", 3 * T, PAID, lease_ttl_s=60.0, **KW)).balance == 4 * T
        # a lease opened on one node is renewed and closed on the other
        assert (await node_b.renew_lease("alice", "la", 1, 3 * T, 2 * T, PAID, **KW)).balance == 2 * T
        await node_a.close_lease("alice", "lb", 1, T, PAID, hour_s=3600.0)
        await node_a.credit("alice", 5 * T, "order-1")
        await node_b.credit("alice", 5 * T, "order-1")
        a, b = await node_a.get_account("alice", PAID), await node_b.get_account("alice", PAID)
        assert a == b and (a.balance, a.hour_used) == (9 * T, 6 * T)
        assert await node_a.history("alice") == await node_b.history("alice")
    finally:
        await node_a.aclose()
        await node_b.aclose()


async def test_keys_of_one_account_share_one_cluster_slot(redis_server: RedisServer) -> None:
    store = RedisStore(redis_server.url, prefix="ff")
    admin = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
    try:
        for account_id in ("alice", "b{o}b"):
            await store.create_account(account_id, "paid", 10 * T, f"h-{account_id}")
            await store.credit(account_id, T, "c1")
            await store.open_lease(account_id, "l1", "s1", T, PAID, lease_ttl_s=60.0, **KW)
        keys = set(await admin.keys("*"))
        assert {"ff:key:h-alice", "ff:key:h-b{o}b"} <= keys
        for tag in ("{alice}", "{b%7Bo%7Db}"):
            mine = {key for key in keys if key.startswith(f"ff:{tag}:")}
            assert {f"ff:{tag}:{name}" for name in ("account", "open", "history", "lease:l1", "credit:c1")} == mine
            assert len({key_slot(key.encode()) for key in mine}) == 1
    finally:
        await store.aclose()
        await admin.aclose()


async def test_a_restarted_node_settles_the_leases_its_crashed_run_left(redis_server: RedisServer) -> None:
    """A node that crashed left its leases open: their accounts' session slots stayed taken for the
    TTL, so a user reconnecting at once to the restarted server got 429. At start the node settles
    what its previous run left, as expiry would; another node's leases are not its to settle."""
    single = TierRules("free", max_sessions=1)
    crashed = RedisStore(redis_server.url, node_id="node-a")
    other = RedisStore(redis_server.url, node_id="node-b")
    restarted = RedisStore(redis_server.url, node_id="node-a")
    try:
        for account_id in ("ann", "bo"):
            await crashed.create_account(account_id, "free", 10 * T, f"h-{account_id}")
            await crashed.open_lease(account_id, "l1", "s1", 4 * T, single, lease_ttl_s=60.0, **KW)
        await crashed.renew_lease("ann", "l1", 1, 3 * T, 0, single, **KW)
        await other.create_account("cy", "free", 10 * T, "h-cy")
        await other.open_lease("cy", "l1", "s1", 4 * T, single, lease_ttl_s=60.0, **KW)
        # node-a's first run ends here without closing anything (its store is never used again)

        assert await other.settle_node_leases() == 1  # only cy's: node-b's own
        with pytest.raises(TooManyLeases, match=r"in (59|60) s"):  # node-a's are not node-b's to settle
            await other.open_lease("ann", "l2", "s2", T, single, lease_ttl_s=60.0, **KW)

        assert await restarted.settle_node_leases() == 2
        assert (await restarted.get_account("ann", single)).balance == 7 * T  # spent 3 as last reported
        assert (await restarted.get_account("bo", single)).balance == 10 * T
        for account_id in ("ann", "bo"):  # the one slot is free at once
            assert (
                await restarted.open_lease(account_id, "l2", "s2", T, single, lease_ttl_s=60.0, **KW)
            ).open_leases == 1
        with pytest.raises(LeaseNotFound):  # the crashed run's lease is gone for good
            await crashed.renew_lease("ann", "l1", 2, 4 * T, T, single, **KW)
        assert await restarted.settle_node_leases() == 2  # this run's, had it crashed too
    finally:
        for store in (crashed, other, restarted):
            await store.aclose()


async def test_the_node_index_forgets_closed_and_refused_leases(redis_server: RedisServer) -> None:
    store = RedisStore(redis_server.url, prefix="ff", node_id="node-a")
    admin = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
    single = TierRules("free", max_sessions=1)
    try:
        await store.create_account("ann", "free", 10 * T, "h")
        await store.open_lease("ann", "l1", "s1", T, single, lease_ttl_s=60.0, **KW)
        with pytest.raises(TooManyLeases):
            await store.open_lease("ann", "l2", "s2", T, single, lease_ttl_s=60.0, **KW)
        assert await admin.smembers("ff:node:node-a:leases") == {'["ann", "l1"]'}
        await store.close_lease("ann", "l1", 1, 0, single, hour_s=3600.0)
        assert await admin.smembers("ff:node:node-a:leases") == set()
        assert await admin.hget("ff:{ann}:lease:l1", "node") == "node-a"
    finally:
        await store.aclose()
        await admin.aclose()


async def _client_count(admin: aioredis.Redis) -> int:
    return len(await admin.client_list()) - 1  # all but the admin's own


async def test_slow_operations_share_a_bounded_pool(redis_server: RedisServer) -> None:
    """40 operations waiting on a slow Redis each opened a connection of their own (31 were left
    open by 40 slow clients); they now share at most the pool's size."""
    store = RedisStore(redis_server.url, max_connections=4)
    admin = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
    try:
        await store.create_account("ann", "paid", 10 * T, "h")
        await admin.execute_command("CLIENT", "PAUSE", 700, "ALL")  # every command waits 0.7 s
        accounts = await asyncio.gather(*(store.get_account("ann", PAID) for _ in range(40)))
        assert {account.balance for account in accounts} == {10 * T}
        assert 1 <= await _client_count(admin) <= 4
    finally:
        await store.aclose()
        await admin.aclose()


async def test_a_pool_busy_past_its_timeout_fails_closed(redis_server: RedisServer) -> None:
    store = RedisStore(redis_server.url, max_connections=1, pool_timeout_s=0.2)
    admin = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
    try:
        await store.create_account("ann", "paid", 10 * T, "h")
        await admin.execute_command("CLIENT", "PAUSE", 1000, "ALL")
        finished: list[str] = []

        async def read(name: str) -> None:
            try:
                await store.get_account("ann", PAID)
                finished.append(f"{name} read")
            except StoreUnavailable as exc:
                finished.append(f"{name} unavailable: {exc}")

        await asyncio.gather(read("first"), read("second"))
        # the second found the one connection busy and gave up before the first's answer came
        assert finished[0].startswith("second unavailable: quota store (Redis) unavailable during get_account")
        assert finished[1] == "first read"
        assert await _client_count(admin) == 1
    finally:
        await store.aclose()
        await admin.aclose()


def test_every_script_starts_with_its_header() -> None:
    for name, source in SCRIPTS.items():
        header = source.split("\nlocal ", 1)[0]
        assert header.startswith(f"-- {name}.lua: ")
        assert "KEYS[1]" in header and "returns" in header
        assert "redis.call('TIME')" in source  # the store's clock, never the node's


def test_prefix_with_braces_is_refused() -> None:
    with pytest.raises(ValueError):
        RedisStore("redis://127.0.0.1:1/0", prefix="{ff}")
