"""The QuotaStore contract, run against MemoryStore and RedisStore alike (fixture `under_test`)."""

from __future__ import annotations

import math

import pytest
from store_harness import StoreUnderTest

from quota.errors import (
    AccountExists,
    AccountNotFound,
    BalanceLimit,
    IdempotencyKeyReused,
    LeaseNotFound,
    NothingToSpend,
    TooManyLeases,
)
from quota.settings import MAX_BALANCE_TOKENS, MICRO, TierRules
from quota.store import Grant, QuotaStore

T = MICRO  # one token in micro-tokens
HOUR_S = 3600.0
REFILL_PERIOD_S = 3600.0

PAID = TierRules("paid", hourly_cap=100, max_sessions=4)
CAPPED = TierRules("capped", hourly_cap=3, max_sessions=8)
VIP = TierRules("vip", metered=False, max_sessions=16)
SINGLE = TierRules("single", max_sessions=1)
PAIR = TierRules("pair", max_sessions=2)


async def open_lease(
    store: QuotaStore,
    account: str,
    lease: str,
    want: int,
    rules: TierRules = PAID,
    *,
    ttl: float = 60.0,
    hour_s: float = HOUR_S,
    refill_period_s: float = REFILL_PERIOD_S,
) -> Grant:
    return await store.open_lease(
        account,
        lease,
        f"session-{lease}",
        want,
        rules,
        hour_s=hour_s,
        refill_period_s=refill_period_s,
        lease_ttl_s=ttl,
    )


async def renew(
    store: QuotaStore,
    account: str,
    lease: str,
    seq: int,
    spent: int,
    want: int,
    rules: TierRules = PAID,
    *,
    hour_s: float = HOUR_S,
) -> Grant:
    return await store.renew_lease(
        account, lease, seq, spent, want, rules, hour_s=hour_s, refill_period_s=REFILL_PERIOD_S
    )


async def close(
    store: QuotaStore,
    account: str,
    lease: str,
    seq: int,
    spent: int,
    rules: TierRules = PAID,
    *,
    hour_s: float = HOUR_S,
) -> Grant:
    return await store.close_lease(account, lease, seq, spent, rules, hour_s=hour_s)


# -- accounts ------------------------------------------------------------------------------------
async def test_create_get_duplicate_and_unknown_accounts(under_test: StoreUnderTest, store: QuotaStore) -> None:
    before = await under_test.now()
    created = await store.create_account("alice", "paid", 7 * T, "hash-a")
    after = await under_test.now()
    assert (created.id, created.tier, created.balance, created.key_hash, created.hour_used) == (
        "alice",
        "paid",
        7 * T,
        "hash-a",
        0,
    )
    assert before - 0.001 <= created.created_at <= after + 0.001
    assert await store.get_account("alice", PAID) == created

    with pytest.raises(AccountExists):
        await store.create_account("alice", "vip", 0, "hash-other")
    assert await store.get_account("alice", PAID) == created

    with pytest.raises(AccountNotFound):
        await store.get_account("nobody", PAID)
    with pytest.raises(AccountNotFound):
        await store.credit("nobody", T, "k")
    with pytest.raises(AccountNotFound):
        await store.history("nobody")
    with pytest.raises(AccountNotFound):
        await open_lease(store, "nobody", "l1", T)
    with pytest.raises(LeaseNotFound):
        await renew(store, "nobody", "l1", 1, 0, T)
    with pytest.raises(LeaseNotFound):
        await close(store, "nobody", "l1", 1, 0)


async def test_account_ids_with_braces_and_colons_stay_apart(store: QuotaStore) -> None:
    for account_id in ("a", "{a}", "a}", "%7Ba%7D", "a:b"):
        await store.create_account(account_id, "paid", len(account_id) * T, f"h-{account_id}")
    for account_id in ("a", "{a}", "a}", "%7Ba%7D", "a:b"):
        assert (await store.get_account(account_id, PAID)).balance == len(account_id) * T


async def test_account_for_key(store: QuotaStore) -> None:
    await store.create_account("alice", "paid", 5 * T, "hash-a")
    await store.create_account("bob", "vip", 0, "hash-b")
    found = await store.account_for_key("hash-a")
    assert found is not None and (found.id, found.tier, found.balance) == ("alice", "paid", 5 * T)
    found = await store.account_for_key("hash-b")
    assert found is not None and found.id == "bob"
    assert await store.account_for_key("hash-unknown") is None

    with pytest.raises(AccountExists):  # a failed create does not hand its key to the existing account
        await store.create_account("alice", "paid", 0, "hash-new")
    assert await store.account_for_key("hash-new") is None
    found = await store.account_for_key("hash-a")
    assert found is not None and found.id == "alice"


async def test_credit_once_per_idempotency_key(under_test: StoreUnderTest, store: QuotaStore) -> None:
    await store.create_account("alice", "paid", 1 * T, "h")
    before = await under_test.now()
    assert (await store.credit("alice", 5 * T, "order-1")).balance == 6 * T
    after = await under_test.now()
    assert (await store.credit("alice", 5 * T, "order-1")).balance == 6 * T  # retried: once
    assert (await store.credit("alice", 2 * T, "order-2")).balance == 8 * T
    assert (await store.get_account("alice", PAID)).balance == 8 * T
    history = await store.history("alice")
    assert [(e["kind"], e["amount"], e["idempotency_key"]) for e in history] == [
        ("credit", 2 * T, "order-2"),
        ("credit", 5 * T, "order-1"),
    ]
    assert before - 0.001 <= history[1]["at"] <= after + 0.001 and history[0]["at"] >= history[1]["at"]
    await store.create_account("bob", "paid", 0, "hb")  # keys are per account
    assert (await store.credit("bob", 3 * T, "order-1")).balance == 3 * T


async def test_a_credit_key_repeated_with_another_amount_is_refused(store: QuotaStore) -> None:
    """A repeat with another amount was answered as done while crediting nothing: the caller
    believed 7 tokens were added. It is refused and names the amount the key was used for."""
    await store.create_account("alice", "paid", 1 * T, "h")
    await store.credit("alice", 5 * T + 250_000, "order-1")
    with pytest.raises(IdempotencyKeyReused, match=r"'order-1' was used for a credit of 5\.25 tokens") as refused:
        await store.credit("alice", 7 * T, "order-1")
    assert refused.value.original_amount == 5 * T + 250_000
    assert (await store.credit("alice", 5 * T + 250_000, "order-1")).balance == 6 * T + 250_000  # a true retry
    assert (await store.get_account("alice", PAID)).balance == 6 * T + 250_000
    assert [e["amount"] for e in await store.history("alice")] == [5 * T + 250_000]


async def test_credits_stop_where_a_balance_would_lose_micro_tokens(store: QuotaStore) -> None:
    """Past 2**53 micro-tokens Redis's sums round (ten credits of 1e9 tokens, then five of one
    micro-token: Redis kept 1e10 exactly, all five lost); no credit takes a balance past the limit."""
    limit = MAX_BALANCE_TOKENS * T
    await store.create_account("rich", "paid", limit - 2 * T, "h")
    with pytest.raises(BalanceLimit):
        await store.credit("rich", 3 * T, "big")
    assert (await store.credit("rich", 2 * T, "big")).balance == limit, "the refused credit did not use its key up"
    assert (await store.credit("rich", 2 * T, "big")).balance == limit, "a retry of a done credit is no error"
    with pytest.raises(BalanceLimit):
        await store.credit("rich", 1, "tiny")
    assert [e["idempotency_key"] for e in await store.history("rich")] == ["big"]


# -- leases --------------------------------------------------------------------------------------
async def test_open_renew_close_arithmetic_and_history(store: QuotaStore) -> None:
    await store.create_account("alice", "paid", 20 * T, "h")
    assert await open_lease(store, "alice", "l1", 5 * T) == Grant("l1", 5 * T, 5 * T, 15 * T, 95 * T, 1)
    account = await store.get_account("alice", PAID)
    assert (account.balance, account.hour_used) == (15 * T, 5 * T)

    assert await renew(store, "alice", "l1", 1, 3 * T, 5 * T) == Grant("l1", 5 * T, 7 * T, 10 * T, 90 * T, 1)
    [entry] = await store.history("alice")
    assert {k: entry[k] for k in ("kind", "lease_id", "session_id", "spent", "open")} == {
        "kind": "session",
        "lease_id": "l1",
        "session_id": "session-l1",
        "spent": 3 * T,
        "open": True,
    }

    # closing returns the unspent 4 tokens to the balance and to the hour window
    assert await close(store, "alice", "l1", 2, 6 * T) == Grant("l1", 0, 0, 14 * T, 94 * T, 0)
    account = await store.get_account("alice", PAID)
    assert (account.balance, account.hour_used) == (14 * T, 6 * T)

    await store.credit("alice", T, "c1")
    await open_lease(store, "alice", "l2", T)
    history = await store.history("alice")
    assert [(e["kind"], e.get("lease_id"), e.get("spent"), e.get("open")) for e in history] == [
        ("session", "l2", 0, True),
        ("credit", None, None, None),
        ("session", "l1", 6 * T, False),
    ]
    assert [e["kind"] for e in await store.history("alice", limit=2)] == ["session", "credit"]


async def test_unmetered_vip_is_recorded_but_never_charged(store: QuotaStore) -> None:
    await store.create_account("vip", "vip", 0, "h")
    assert await open_lease(store, "vip", "l1", 5 * T, VIP) == Grant("l1", 5 * T, 5 * T, 0, None, 1)
    assert await renew(store, "vip", "l1", 1, 4 * T, 5 * T, VIP) == Grant("l1", 5 * T, 6 * T, 0, None, 1)
    assert await close(store, "vip", "l1", 2, 9 * T, VIP) == Grant("l1", 0, 0, 0, None, 0)
    account = await store.get_account("vip", VIP)
    assert (account.balance, account.hour_used) == (0, 0)
    [entry] = await store.history("vip")
    assert (entry["spent"], entry["open"]) == (9 * T, False)


async def test_too_many_leases_at_max_sessions_and_freed_on_close(store: QuotaStore) -> None:
    await store.create_account("alice", "pair", 10 * T, "h")
    await open_lease(store, "alice", "a", T, PAIR)
    assert (await open_lease(store, "alice", "b", T, PAIR)).open_leases == 2
    with pytest.raises(TooManyLeases):
        await open_lease(store, "alice", "c", T, PAIR)
    assert (await store.get_account("alice", PAIR)).balance == 8 * T  # the refused one took nothing
    await close(store, "alice", "a", 1, 0, PAIR)
    assert (await open_lease(store, "alice", "c", T, PAIR)).open_leases == 2
    with pytest.raises(LeaseNotFound):
        await renew(store, "alice", "a", 2, 0, T, PAIR)


async def test_too_many_leases_says_when_the_soonest_lease_expires(
    under_test: StoreUnderTest, store: QuotaStore
) -> None:
    await store.create_account("alice", "pair", 10 * T, "h")
    await open_lease(store, "alice", "a", T, PAIR, ttl=90.0)
    await open_lease(store, "alice", "b", T, PAIR, ttl=60.0)
    await under_test.advance(1.0)
    with pytest.raises(TooManyLeases) as refused:
        await open_lease(store, "alice", "c", T, PAIR)
    # b's 60 s TTL, 1 s (and a little more on Redis's own clock) after it opened
    assert (refused.value.open_leases, refused.value.max_sessions, refused.value.frees_in_s) == (2, 2, 59)
    assert "2 of 2 sessions open" in str(refused.value) and "in 59 s" in str(refused.value)


async def test_settling_this_nodes_leases_frees_their_slots_as_expiry_would(store: QuotaStore) -> None:
    """What a node does at start for the leases its previous run left (a crash): each is settled as
    the store settles a lease it stopped hearing from, spent up to its last renewal, at once."""
    await store.create_account("alice", "pair", 20 * T, "h")
    await store.create_account("vip", "vip", 0, "hv")
    await open_lease(store, "alice", "done", T, PAIR)  # not counted: closed before
    await close(store, "alice", "done", 1, T, PAIR)
    await open_lease(store, "alice", "a", 5 * T, PAIR)
    await renew(store, "alice", "a", 1, 2 * T, 0, PAIR)  # 2 spent as last reported
    await open_lease(store, "alice", "b", 4 * T, PAIR)
    await open_lease(store, "vip", "v", 5 * T, VIP)
    with pytest.raises(TooManyLeases):
        await open_lease(store, "alice", "c", T, PAIR)

    assert await store.settle_node_leases() == 3
    assert await store.settle_node_leases() == 0  # each once
    account = await store.get_account("alice", PAIR)
    assert (account.balance, account.hour_used) == (17 * T, 3 * T)
    assert (await open_lease(store, "alice", "c", T, PAIR)).open_leases == 1  # a slot at once, not after the TTL
    history = {e["lease_id"]: (e["spent"], e["open"]) for e in await store.history("alice")}
    assert history == {"c": (0, True), "done": (T, False), "b": (0, False), "a": (2 * T, False)}
    with pytest.raises(LeaseNotFound):
        await renew(store, "alice", "a", 2, 3 * T, T, PAIR)
    assert (await close(store, "alice", "a", 2, 3 * T, PAIR)).balance == 16 * T  # a late close changes nothing
    assert [e["open"] for e in await store.history("vip")] == [False]


async def test_nothing_to_spend_with_zero_balance(store: QuotaStore) -> None:
    await store.create_account("alice", "paid", 0, "h")
    with pytest.raises(NothingToSpend, match="no tokens"):
        await open_lease(store, "alice", "l1", 5 * T)
    assert await store.history("alice") == []  # no lease was created
    with pytest.raises(LeaseNotFound):
        await renew(store, "alice", "l1", 1, 0, T)

    await store.credit("alice", T, "top-up")
    assert await open_lease(store, "alice", "l1", 5 * T) == Grant("l1", T, T, 0, 99 * T, 1)
    assert await renew(store, "alice", "l1", 1, T, 5 * T) == Grant("l1", 0, 0, 0, 99 * T, 1)  # nothing left


async def test_nothing_to_spend_when_the_hourly_cap_is_used_up(store: QuotaStore) -> None:
    await store.create_account("alice", "capped", 10 * T, "h")
    assert await open_lease(store, "alice", "a", 2 * T, CAPPED) == Grant("a", 2 * T, 2 * T, 8 * T, T, 1)
    assert await open_lease(store, "alice", "b", 2 * T, CAPPED) == Grant("b", T, T, 7 * T, 0, 2)
    with pytest.raises(NothingToSpend, match="hourly"):
        await open_lease(store, "alice", "c", 2 * T, CAPPED)
    assert (await renew(store, "alice", "b", 1, 0, T, CAPPED)).granted == 0
    # a close gives the unspent tokens back to the hour window too
    assert await close(store, "alice", "a", 1, 0, CAPPED) == Grant("a", 0, 0, 9 * T, 2 * T, 1)
    assert await open_lease(store, "alice", "c", 5 * T, CAPPED) == Grant("c", 2 * T, 2 * T, 7 * T, 0, 2)
    assert (await store.get_account("alice", CAPPED)).hour_used == 3 * T


async def test_hourly_window_resets(under_test: StoreUnderTest) -> None:
    hour_s = 1.0  # a short window: real sleeps on Redis
    store = under_test.make_store(hour_s=hour_s)
    await under_test.to_window_start(hour_s)
    await store.create_account("alice", "capped", 10 * T, "h")
    assert (await open_lease(store, "alice", "a", 5 * T, CAPPED, hour_s=hour_s)).granted == 3 * T
    with pytest.raises(NothingToSpend):
        await open_lease(store, "alice", "b", T, CAPPED, hour_s=hour_s)
    assert (await store.get_account("alice", CAPPED)).hour_used == 3 * T

    await under_test.to_window_start(hour_s)
    assert (await store.get_account("alice", CAPPED)).hour_used == 0
    assert await open_lease(store, "alice", "b", 5 * T, CAPPED, hour_s=hour_s) == Grant("b", 3 * T, 3 * T, 4 * T, 0, 2)
    # a refund goes to the current window, never below 0
    assert await close(store, "alice", "a", 1, 0, CAPPED, hour_s=hour_s) == Grant("a", 0, 0, 7 * T, 3 * T, 1)


async def test_refill_follows_the_store_clock(under_test: StoreUnderTest) -> None:
    period_s = 2.0
    refill = TierRules("free", refill_tokens=2, refill_max=10, max_sessions=1)  # 1 token a second
    small = TierRules("free", refill_tokens=2, refill_max=1, max_sessions=1)
    store = under_test.make_store(refill_period_s=period_s)
    t0 = await under_test.now()
    await store.create_account("empty", "free", 0, "h1")
    t1 = await under_test.now()
    await store.create_account("half", "free", T // 2, "h2")
    await store.create_account("rich", "free", 50 * T, "h3")
    await under_test.advance(1.0)

    t2 = await under_test.now()
    balance = (await store.get_account("empty", refill)).balance
    t3 = await under_test.now()
    # the refill matches the time elapsed on the store's clock (Redis: TIME), to a millisecond
    assert math.floor((t2 - t1) * T) - 1000 <= balance <= math.ceil((t3 - t0) * T) + 1000
    assert (await store.get_account("half", small)).balance == T  # stops at refill_max
    assert (await store.get_account("rich", refill)).balance == 50 * T  # a credit above it is kept

    # open_lease refills first, with the periods it is given
    t4 = await under_test.now()
    grant = await open_lease(store, "empty", "l1", 20 * T, refill, refill_period_s=period_s)
    t5 = await under_test.now()
    assert grant.balance == 0
    assert math.floor((t4 - t1) * T) - 1000 <= grant.granted <= math.ceil((t5 - t0) * T) + 1000


async def test_renew_and_close_are_idempotent_by_seq(store: QuotaStore) -> None:
    await store.create_account("alice", "paid", 20 * T, "h")
    first = await open_lease(store, "alice", "l1", 5 * T)
    renewed = await renew(store, "alice", "l1", 1, T, 5 * T)
    assert renewed == Grant("l1", 5 * T, 9 * T, 10 * T, 90 * T, 1)
    assert await renew(store, "alice", "l1", 1, 2 * T, 7 * T) == renewed  # a retry: charged once
    assert (await store.get_account("alice", PAID)).balance == 10 * T
    assert await renew(store, "alice", "l1", 2, 2 * T, 0) == Grant("l1", 0, 8 * T, 10 * T, 90 * T, 1)
    # an older seq: the lease as it stands, nothing changes
    assert await renew(store, "alice", "l1", 1, 5 * T, 5 * T) == Grant("l1", 0, 8 * T, 10 * T, 90 * T, 1)
    assert await open_lease(store, "alice", "l1", 9 * T) == first  # the same lease id: the first grant

    closed = await close(store, "alice", "l1", 3, 4 * T)
    assert closed == Grant("l1", 0, 0, 16 * T, 96 * T, 0)
    await store.credit("alice", T, "c1")
    assert await close(store, "alice", "l1", 3, 4 * T) == closed  # retried: the first answer, refunded once
    assert await close(store, "alice", "l1", 4, 0) == Grant("l1", 0, 0, 17 * T, 96 * T, 0)  # a no-op
    assert (await store.get_account("alice", PAID)).balance == 17 * T
    with pytest.raises(LeaseNotFound):
        await renew(store, "alice", "l1", 4, 4 * T, T)
    with pytest.raises(LeaseNotFound):
        await close(store, "alice", "unknown", 1, 0)


async def test_spent_is_clamped_to_the_grant_and_never_decreases(store: QuotaStore) -> None:
    await store.create_account("alice", "paid", 10 * T, "h")
    await open_lease(store, "alice", "l1", 2 * T)
    assert await renew(store, "alice", "l1", 1, 5 * T, 0) == Grant("l1", 0, 0, 8 * T, 98 * T, 1)  # spent 2, not 5
    assert await renew(store, "alice", "l1", 2, T, T) == Grant("l1", T, T, 7 * T, 97 * T, 1)  # spent stays 2
    assert await close(store, "alice", "l1", 3, 0) == Grant("l1", 0, 0, 8 * T, 98 * T, 0)
    [entry] = await store.history("alice")
    assert entry["spent"] == 2 * T


async def test_expired_lease_frees_its_slot_and_is_refunded(under_test: StoreUnderTest, store: QuotaStore) -> None:
    await store.create_account("alice", "single", 10 * T, "h")
    # a TTL of 2 s, renewed after 1.2 s: on Redis these are real sleeps, so a loaded machine has
    # 0.8 s of slack before a lease that should live expires
    await open_lease(store, "alice", "a", 4 * T, SINGLE, ttl=2.0)
    await under_test.advance(1.2)
    assert (await renew(store, "alice", "a", 1, T, 0, SINGLE)).held == 3 * T  # a renew keeps it alive
    await under_test.advance(1.2)  # 2.4 s after the open, 1.2 s after the renew
    assert (await renew(store, "alice", "a", 2, T, 0, SINGLE)).held == 3 * T
    with pytest.raises(TooManyLeases):
        await open_lease(store, "alice", "b", T, SINGLE)

    await under_test.advance(2.05)
    # settled before counting: the slot is free and the 3 unspent tokens are back
    assert await open_lease(store, "alice", "b", T, SINGLE) == Grant("b", T, T, 8 * T, None, 1)
    with pytest.raises(LeaseNotFound):
        await renew(store, "alice", "a", 3, 2 * T, T, SINGLE)
    assert await close(store, "alice", "a", 3, 2 * T, SINGLE) == Grant("a", 0, 0, 8 * T, None, 1)
    history = await store.history("alice")
    assert [(e["lease_id"], e["spent"], e["open"]) for e in history] == [("b", 0, True), ("a", T, False)]


async def test_expired_lease_is_settled_by_get_account(under_test: StoreUnderTest, store: QuotaStore) -> None:
    await store.create_account("alice", "paid", 10 * T, "h")
    await open_lease(store, "alice", "a", 4 * T, ttl=0.3)
    await under_test.advance(0.4)
    account = await store.get_account("alice", PAID)
    assert (account.balance, account.hour_used) == (10 * T, 0)
    with pytest.raises(LeaseNotFound):
        await renew(store, "alice", "a", 1, 0, T)


async def test_history_keeps_the_newest_entries(under_test: StoreUnderTest) -> None:
    store = under_test.make_store(history_limit=5)
    await store.create_account("alice", "paid", 100 * T, "h")
    for n in range(4):
        await open_lease(store, "alice", f"l{n}", T)
        await close(store, "alice", f"l{n}", 1, 0)
    for n in range(3):
        await store.credit("alice", T, f"c{n}")
    history = await store.history("alice", limit=100)
    assert [e.get("lease_id") or e["idempotency_key"] for e in history] == ["c2", "c1", "c0", "l3", "l2"]
    # a trimmed lease is forgotten: its id opens a new lease
    assert (await open_lease(store, "alice", "l0", 2 * T)).granted == 2 * T
