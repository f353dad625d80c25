"""200 concurrent lease requests on one account, from several nodes (separate Redis clients), never overspend."""

from __future__ import annotations

import asyncio

from store_harness import StoreUnderTest

from quota.errors import NothingToSpend, TooManyLeases
from quota.settings import MICRO, TierRules
from quota.store import Grant, QuotaStore

T = MICRO
REQUESTS = 200
NODES = 4
KW = {"hour_s": 3600.0, "refill_period_s": 3600.0}


async def _open(store: QuotaStore, lease: str, want: int, rules: TierRules) -> Grant | Exception:
    try:
        return await store.open_lease("crowd", lease, f"s-{lease}", want, rules, lease_ttl_s=60.0, **KW)
    except (NothingToSpend, TooManyLeases) as exc:
        return exc


async def _open_many(under_test: StoreUnderTest, want: int, rules: TierRules) -> list[Grant | Exception]:
    nodes = under_test.nodes(NODES)
    return await asyncio.gather(*(_open(nodes[n % NODES], f"l{n}", want, rules) for n in range(REQUESTS)))


def _grants(results: list[Grant | Exception]) -> list[Grant]:
    grants = [r for r in results if isinstance(r, Grant)]
    assert all(g.balance >= 0 and (g.hour_left is None or g.hour_left >= 0) for g in grants)
    return grants


async def test_hourly_cap_holds_under_concurrent_opens(under_test: StoreUnderTest) -> None:
    rules = TierRules("crowd", hourly_cap=60, max_sessions=1000)
    await under_test.store.create_account("crowd", "crowd", 100 * T, "h")
    results = await _open_many(under_test, T, rules)
    grants = _grants(results)
    assert sum(g.granted for g in grants) == 60 * T
    assert len(grants) == 60 and all(g.granted == T for g in grants)
    assert sum(isinstance(r, NothingToSpend) for r in results) == REQUESTS - 60
    account = await under_test.store.get_account("crowd", rules)
    assert (account.balance, account.hour_used) == (40 * T, 60 * T)


async def test_balance_holds_under_concurrent_opens(under_test: StoreUnderTest) -> None:
    rules = TierRules("crowd", max_sessions=1000)
    await under_test.store.create_account("crowd", "crowd", 50 * T, "h")
    grants = _grants(await _open_many(under_test, 7 * T // 10, rules))
    assert sum(g.granted for g in grants) == 50 * T  # 71 whole grants of 0.7 and one of 0.3
    assert sorted(g.granted for g in grants)[0] == 3 * T // 10 and len(grants) == 72
    assert (await under_test.store.get_account("crowd", rules)).balance == 0


async def test_max_sessions_holds_under_concurrent_opens(under_test: StoreUnderTest) -> None:
    rules = TierRules("crowd", max_sessions=5)
    await under_test.store.create_account("crowd", "crowd", 100 * T, "h")
    results = await _open_many(under_test, T, rules)
    assert len(_grants(results)) == 5
    assert sum(isinstance(r, TooManyLeases) for r in results) == REQUESTS - 5


async def test_concurrent_sessions_spend_exactly_what_was_recorded(under_test: StoreUnderTest) -> None:
    """Open, renew and close from 200 sessions at once: tokens are neither lost nor made."""
    rules = TierRules("crowd", hourly_cap=25, max_sessions=1000)
    initial = 30 * T
    await under_test.store.create_account("crowd", "crowd", initial, "h")
    nodes = under_test.nodes(NODES)
    seen: list[Grant] = []

    async def session(n: int) -> None:
        store, lease = nodes[n % NODES], f"l{n}"
        opened = await _open(store, lease, T // 2, rules)
        if not isinstance(opened, Grant):
            return
        seen.append(opened)
        seen.append(await store.renew_lease("crowd", lease, 1, T // 4, T // 2, rules, **KW))
        seen.append(await store.close_lease("crowd", lease, 2, T, rules, hour_s=KW["hour_s"]))  # clamped

    await asyncio.gather(*(session(n) for n in range(REQUESTS)))
    _grants(seen)  # no answer showed a negative balance or hour allowance
    history = await under_test.store.history("crowd", limit=1000)
    spent = sum(entry["spent"] for entry in history)
    account = await under_test.store.get_account("crowd", rules)
    assert not any(entry["open"] for entry in history)
    assert spent == sum(g.granted for g in seen)  # every lease spent all it was granted
    assert account.balance + spent == initial
    assert account.hour_used == spent <= 25 * T
