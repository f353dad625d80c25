"""MemoryStore and RedisStore give the same answers to the same random operations (time held out)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from quota.errors import QuotaError, TooManyLeases
from quota.memory_store import MemoryStore
from quota.redis_store import RedisStore
from quota.settings import MICRO, TierRules
from quota.store import QuotaStore
from support.redis_server import RedisServer

pytestmark = pytest.mark.redis

# No refill, no expiry and a window far longer than the test: the answers do not depend on the clock.
HOUR_S = 1e6
TIERS = (
    TierRules("paid", hourly_cap=12, max_sessions=3),
    TierRules("vip", metered=False, max_sessions=2),
    TierRules("uncapped", max_sessions=3),
)


async def _apply(store: QuotaStore, op: tuple[Any, ...]) -> Any:
    name, account, *args = op
    kw = {"hour_s": HOUR_S, "refill_period_s": 3600.0}
    try:
        if name == "open":
            lease, want, rules = args
            return await store.open_lease(account, lease, "s-" + lease, want, rules, lease_ttl_s=3600.0, **kw)
        if name == "renew":
            lease, seq, spent, want, rules = args
            return await store.renew_lease(account, lease, seq, spent, want, rules, **kw)
        if name == "close":
            lease, seq, spent, rules = args
            return await store.close_lease(account, lease, seq, spent, rules, hour_s=HOUR_S)
        if name == "credit":
            amount, key = args
            account_now = await store.credit(account, amount, key)
            return (account_now.balance, account_now.hour_used)
        rules = args[0]
        account_now = await store.get_account(account, rules)
        return (account_now.balance, account_now.hour_used)
    except TooManyLeases as exc:  # its message says when a slot frees up: each store's clock
        return f"TooManyLeases: {exc.open_leases} of {exc.max_sessions}"
    except QuotaError as exc:
        return f"{type(exc).__name__}: {exc}"


def _operations(rng: random.Random, count: int) -> list[tuple[Any, ...]]:
    ops: list[tuple[Any, ...]] = []
    for _ in range(count):
        n = rng.randrange(len(TIERS))
        account, rules = f"acct{n}", TIERS[n]
        lease = f"l{rng.randrange(8)}"
        amount = rng.randrange(0, 4 * MICRO, MICRO // 4)
        kind = rng.choice(["open", "open", "renew", "renew", "renew", "close", "credit", "get"])
        if kind == "open":
            ops.append(("open", account, lease, amount, rules))
        elif kind == "renew":
            ops.append(
                ("renew", account, lease, rng.randrange(1, 6), rng.randrange(0, 6 * MICRO, MICRO // 2), amount, rules)
            )
        elif kind == "close":
            ops.append(("close", account, lease, rng.randrange(1, 7), rng.randrange(0, 6 * MICRO, MICRO // 2), rules))
        elif kind == "credit":
            ops.append(("credit", account, amount, f"k{rng.randrange(5)}"))
        else:
            ops.append(("get", account, rules))
    return ops


def _without_at(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in entry.items() if k != "at"} for entry in history]


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_random_operations_give_the_same_answers(redis_server: RedisServer, seed: int) -> None:
    memory = MemoryStore(hour_s=HOUR_S)
    redis_store = RedisStore(redis_server.url, hour_s=HOUR_S)
    try:
        for n, rules in enumerate(TIERS):
            for store in (memory, redis_store):
                await store.create_account(f"acct{n}", rules.name, (5 + n) * MICRO, f"h{n}")
        for op in _operations(random.Random(seed), 300):
            assert await _apply(memory, op) == await _apply(redis_store, op), op
        for n in range(len(TIERS)):
            in_memory, in_redis = [await store.history(f"acct{n}", 1000) for store in (memory, redis_store)]
            assert _without_at(in_memory) == _without_at(in_redis)
    finally:
        await redis_store.aclose()
